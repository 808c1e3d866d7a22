//! The shared state of one simulation and its run loop.
//!
//! Everything lives on one OS thread. The locks here are never contended; they exist because
//! the I/O traits require `Send + Sync`. No lock is held while a task is polled, while a waker is
//! called or while a future is dropped, so no path can re-enter a held lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::executor::{Executor, NodeIx};
use crate::net::NetState;
use crate::node::Nodes;
use crate::timer::Timers;
use crate::trace::{Event, TraceHash};

/// Polls at one instant beyond which the run is declared livelocked (tasks waking each other
/// forever without letting time advance).
pub const POLLS_PER_INSTANT_MAX: u64 = 50_000_000;

/// Locks a mutex, ignoring poisoning: a panic in a simulation aborts the whole run anyway, and
/// the state behind the lock stays consistent for the report.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// The stop condition became true.
    Stopped,
    /// The time limit was reached.
    TimeLimit,
    /// Nothing is ready and no timer is pending: nothing can ever happen again.
    Idle,
}

/// One simulation's state.
pub(crate) struct World {
    pub(crate) seed: u64,
    now: AtomicU64,
    pub(crate) trace: TraceHash,
    rng: Mutex<ChaCha8Rng>,
    pub(crate) executor: Executor,
    pub(crate) timers: Timers,
    pub(crate) nodes: Nodes,
    pub(crate) net: NetState,
    running: AtomicBool,
    polls: AtomicU64,
    advances: AtomicU64,
}

impl World {
    pub(crate) fn new(seed: u64) -> Arc<World> {
        Arc::new(World {
            seed,
            now: AtomicU64::new(0),
            trace: TraceHash::default(),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            executor: Executor::default(),
            timers: Timers::default(),
            nodes: Nodes::default(),
            net: NetState::default(),
            running: AtomicBool::new(false),
            polls: AtomicU64::new(0),
            advances: AtomicU64::new(0),
        })
    }

    /// Simulated nanoseconds since the start of the run.
    pub(crate) fn now_nanos(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// The next number of the run's own random stream (scheduling, latencies, faults).
    pub(crate) fn random_u64(&self) -> u64 {
        lock(&self.rng).next_u64()
    }

    /// A uniform number in `0..bound`.
    pub(crate) fn random_below(&self, bound: u64) -> u64 {
        if bound <= 1 {
            return 0;
        }
        ((u128::from(self.random_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// True with probability `p` (0.0–1.0). Draws nothing when `p` is 0, so that disabled
    /// faults do not shift the random stream.
    pub(crate) fn chance(&self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        (self.random_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// Polls tasks and advances time until `stop` holds, `limit` (simulated nanoseconds) is
    /// reached, or nothing can happen any more. `stop` is checked between steps.
    pub(crate) fn run(&self, limit: u64, stop: &dyn Fn() -> bool) -> RunOutcome {
        assert!(
            !self.running.swap(true, Ordering::SeqCst),
            "Sim::run called re-entrantly from a task"
        );
        let outcome = self.run_inner(limit, stop);
        self.running.store(false, Ordering::SeqCst);
        outcome
    }

    fn run_inner(&self, limit: u64, stop: &dyn Fn() -> bool) -> RunOutcome {
        let mut wakers: Vec<Waker> = Vec::new();
        let mut polls_here = 0u64;
        loop {
            if stop() {
                return RunOutcome::Stopped;
            }
            if self.poll_one() {
                polls_here += 1;
                assert!(
                    polls_here < POLLS_PER_INSTANT_MAX,
                    "livelock: {polls_here} polls at t={}ns without time advancing",
                    self.now_nanos()
                );
                continue;
            }
            let Some(at) = self.timers.next_deadline() else {
                return RunOutcome::Idle;
            };
            if at > limit {
                self.advance_to(limit);
                return RunOutcome::TimeLimit;
            }
            self.advance_to(at);
            polls_here = 0;
            self.timers.take_due(self.now_nanos(), &mut wakers);
            for waker in wakers.drain(..) {
                waker.wake();
            }
        }
    }

    /// Moves the clock to `at` while nothing can run (no task ready, no timer pending).
    pub(crate) fn advance_idle(&self, at: u64) {
        self.advance_to(at);
    }

    fn advance_to(&self, at: u64) {
        if at > self.now_nanos() {
            self.now.store(at, Ordering::Relaxed);
            crate::LOG_CLOCK_NANOS.store(at, Ordering::Relaxed);
            self.advances.fetch_add(1, Ordering::Relaxed);
            self.trace.fold(Event::Advance, at);
        }
    }

    /// Polls one ready task; false when none is ready.
    fn poll_one(&self) -> bool {
        let Some(mut picked) = self.executor.pick(|n| self.random_below(n as u64) as usize) else {
            return false;
        };
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.trace.fold(Event::Poll, picked.serial);
        let mut cx = Context::from_waker(&picked.waker);
        let finished = picked.future.as_mut().poll(&mut cx).is_ready();
        let (to_drop, ended) = self.executor.put_back(picked.id, picked.future, finished);
        if ended {
            self.trace.fold(Event::TaskEnd, picked.serial);
        }
        drop(to_drop);
        true
    }

    /// Counters for reports: (task polls, time advances).
    pub(crate) fn counters(&self) -> (u64, u64) {
        (self.polls.load(Ordering::Relaxed), self.advances.load(Ordering::Relaxed))
    }

    /// Spawns a task on `node` and folds it into the trace.
    pub(crate) fn spawn_task(
        &self,
        node: NodeIx,
        future: weir::io::BoxFuture<'static, ()>,
    ) -> crate::executor::TaskId {
        let (id, serial) = self.executor.spawn(node, future);
        self.trace.fold(Event::Spawn, serial ^ ((node as u64) << 40));
        id
    }
}
