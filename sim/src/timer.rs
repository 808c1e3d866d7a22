//! Timers: a heap of deadlines in simulated nanoseconds. When no task is ready the executor
//! jumps time straight to the earliest deadline — idle time costs nothing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::world::{World, lock};

/// State shared between a [`SimSleep`] and its heap entry.
#[derive(Default)]
struct SleepShared {
    cancelled: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

enum Target {
    Sleep(Arc<SleepShared>),
    Wake(Waker),
}

struct Entry {
    at: u64,
    seq: u64,
    target: Target,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// All pending deadlines of a simulation.
#[derive(Default)]
pub(crate) struct Timers {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
}

impl Timers {
    fn push(&self, at: u64, target: Target) {
        let mut guard = lock(&self.heap);
        let (heap, seq) = &mut *guard;
        *seq += 1;
        heap.push(Reverse(Entry { at, seq: *seq, target }));
    }

    /// Wakes `waker` once simulated time reaches `at`.
    pub(crate) fn wake_at(&self, at: u64, waker: Waker) {
        self.push(at, Target::Wake(waker));
    }

    /// The earliest live deadline, discarding cancelled sleeps on the way.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        let mut guard = lock(&self.heap);
        let heap = &mut guard.0;
        while let Some(Reverse(entry)) = heap.peek() {
            match &entry.target {
                Target::Sleep(shared) if shared.cancelled.load(Ordering::Relaxed) => {
                    heap.pop();
                }
                _ => return Some(entry.at),
            }
        }
        None
    }

    /// Removes every entry due at or before `now` and returns the wakers to call. The caller
    /// wakes them after this lock is released.
    pub(crate) fn take_due(&self, now: u64, out: &mut Vec<Waker>) {
        let mut guard = lock(&self.heap);
        let heap = &mut guard.0;
        while heap.peek().is_some_and(|Reverse(entry)| entry.at <= now) {
            let Some(Reverse(entry)) = heap.pop() else {
                break;
            };
            match entry.target {
                Target::Wake(waker) => out.push(waker),
                Target::Sleep(shared) => {
                    if !shared.cancelled.load(Ordering::Relaxed)
                        && let Some(waker) = lock(&shared.waker).take()
                    {
                        out.push(waker);
                    }
                }
            }
        }
    }
}

/// A future that completes when simulated time reaches a deadline.
pub(crate) struct SimSleep {
    world: Arc<World>,
    at: u64,
    shared: Option<Arc<SleepShared>>,
}

impl SimSleep {
    pub(crate) fn new(world: Arc<World>, at: u64) -> SimSleep {
        SimSleep { world, at, shared: None }
    }
}

impl Future for SimSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.world.now_nanos() >= self.at {
            return Poll::Ready(());
        }
        match &self.shared {
            Some(shared) => {
                *lock(&shared.waker) = Some(cx.waker().clone());
            }
            None => {
                let shared = Arc::new(SleepShared::default());
                *lock(&shared.waker) = Some(cx.waker().clone());
                self.world.timers.push(self.at, Target::Sleep(Arc::clone(&shared)));
                self.shared = Some(shared);
            }
        }
        Poll::Pending
    }
}

impl Drop for SimSleep {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.cancelled.store(true, Ordering::Relaxed);
        }
    }
}

impl Timers {
    /// Drops every pending entry (used when a simulation is torn down).
    pub(crate) fn clear(&self) {
        let entries = std::mem::take(&mut lock(&self.heap).0);
        drop(entries);
    }
}
