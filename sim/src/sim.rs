//! The public face of a simulation: build hosts, run time forward, inject faults, read the
//! trace hash. A `Sim` is a cheap handle; clones (and [`Sim::handle`] moved into a task) drive the
//! same simulation, so a nemesis can run as a task beside the workload.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::io::{Env, TaskHandle};

use crate::disk::DiskFaults;
use crate::executor::NodeIx;
use crate::net::{AcceptFault, Latency};
use crate::node::{Boot, NodeStatus, boot};
use crate::trace::Event;
use crate::world::{RunOutcome, World, lock};

/// A host in the simulation (a machine: its own address, disk, clock and tasks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Host(pub(crate) NodeIx);

impl Host {
    /// The host's index, in creation order from 0.
    pub fn index(self) -> usize {
        self.0
    }
}

/// One deterministic simulation.
#[derive(Clone)]
pub struct Sim {
    pub(crate) world: Arc<World>,
    /// Dropping the last owner tears the world down (tasks hold handles to it).
    _owner: Arc<Owner>,
}

struct Owner(Arc<World>);

impl Drop for Owner {
    fn drop(&mut self) {
        // Tasks hold `Env`s that point back at the world; dropping them breaks the cycle.
        for node in 0..self.0.nodes.count() {
            self.0.kill_node(node);
        }
        self.0.timers.clear();
    }
}

impl Sim {
    /// A new, empty simulation whose every choice derives from `seed`.
    pub fn new(seed: u64) -> Sim {
        let world = World::new(seed);
        Sim { _owner: Arc::new(Owner(Arc::clone(&world))), world }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.world.seed
    }

    /// Adds a host that runs `boot` now and after every restart.
    pub fn add_host(&self, name: &str, boot: Boot) -> Host {
        let ix = self.world.nodes.add(name, boot);
        self.world.start_node(ix);
        Host(ix)
    }

    /// Adds a host with nothing to run at boot: a place for client tasks.
    pub fn add_client(&self, name: &str) -> Host {
        self.add_host(name, boot(|_env| async {}))
    }

    /// The host's name.
    pub fn name(&self, host: Host) -> String {
        self.world.nodes.with(host.0, |n| n.name.clone())
    }

    /// The host's IP address.
    pub fn ip(&self, host: Host) -> std::net::IpAddr {
        self.world.nodes.with(host.0, |n| n.ip)
    }

    /// Whether the host is up, paused or down.
    pub fn status(&self, host: Host) -> NodeStatus {
        self.world.nodes.with(host.0, |n| n.status)
    }

    /// A fresh `Env` for the host's current life (it stops working when the host goes down).
    pub fn env(&self, host: Host) -> Env {
        self.world.current_env(host.0)
    }

    /// Runs a task on `host`, built from the host's `Env`.
    pub fn spawn<F, Fut>(&self, host: Host, name: &str, f: F) -> TaskHandle
    where
        F: FnOnce(Env) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let env = self.env(host);
        env.spawn(name, f(env.clone()))
    }

    /// Simulated time since the start.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.world.now_nanos())
    }

    /// Runs for `duration` of simulated time. The clock moves on by all of it even when nothing
    /// can happen any more (every node down, say: a dark cluster still ages), which the outcome
    /// reports as `Idle`.
    pub fn run_for(&self, duration: Duration) -> RunOutcome {
        let limit = self.world.now_nanos().saturating_add(nanos(duration));
        let outcome = self.world.run(limit, &|| false);
        if outcome == RunOutcome::Idle {
            self.world.advance_idle(limit);
        }
        outcome
    }

    /// Runs until `stop` holds or `duration` of simulated time has passed.
    pub fn run_until(&self, duration: Duration, stop: impl Fn() -> bool) -> RunOutcome {
        let limit = self.world.now_nanos().saturating_add(nanos(duration));
        self.world.run(limit, &stop)
    }

    /// Runs `f(env)` as a task on `host` and runs the simulation until it completes. `None` if
    /// it did not complete within `limit` of simulated time (or could never complete).
    pub fn block_on<T, F, Fut>(&self, host: Host, limit: Duration, f: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(Env) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let slot: Arc<Mutex<Option<T>>> = Arc::new(Mutex::new(None));
        let out = Arc::clone(&slot);
        let _task = self.spawn(host, "block_on", move |env| {
            let fut = f(env);
            async move {
                let value = fut.await;
                *lock(&out) = Some(value);
            }
        });
        self.run_until(limit, || lock(&slot).is_some());
        lock(&slot).take()
    }

    /// Kills the host's process (its page cache survives; peers see resets).
    pub fn kill(&self, host: Host) {
        self.world.kill_node(host.0);
    }

    /// Cuts the host's power (unsynced writes are lost or torn; peers see silence).
    pub fn power_fail(&self, host: Host) {
        self.world.power_fail_node(host.0);
    }

    /// Cuts the host's power (if it runs) and gives it an empty disk: every file it had, synced
    /// or not, is gone. It stays down until started.
    pub fn wipe(&self, host: Host) {
        self.world.wipe_node(host.0);
    }

    /// Starts a host that is down, over the disk it had.
    pub fn start(&self, host: Host) {
        self.world.start_node(host.0);
    }

    /// Kills the host if it runs, then starts it again.
    pub fn restart(&self, host: Host) {
        self.kill(host);
        self.start(host);
    }

    /// Freezes the host: no task runs, its clock and sockets carry on.
    pub fn pause(&self, host: Host) {
        self.world.set_node_paused(host.0, true);
    }

    /// Unfreezes a paused host.
    pub fn resume(&self, host: Host) {
        self.world.set_node_paused(host.0, false);
    }

    /// Moves the host's wall clock by `delta_ms` (negative goes back). Monotonic time is
    /// untouched.
    pub fn clock_jump(&self, host: Host, delta_ms: i64) {
        self.world.trace.fold(Event::Clock, delta_ms as u64);
        self.world.nodes.with(host.0, |n| lock(&n.clock).jump(delta_ms));
    }

    /// Sets the host's wall-clock drift, in parts per million (positive runs fast).
    pub fn clock_drift(&self, host: Host, drift_ppm: i64) {
        let now = self.world.now_nanos();
        self.world.trace.fold(Event::Clock, drift_ppm as u64 ^ 1 << 63);
        self.world.nodes.with(host.0, |n| lock(&n.clock).set_drift(now, drift_ppm));
    }

    /// Cuts both directions between every host of `a` and every host of `b`.
    pub fn partition(&self, a: &[Host], b: &[Host]) {
        for x in a {
            for y in b {
                self.world.set_partitioned(x.0, y.0, true);
                self.world.set_partitioned(y.0, x.0, true);
            }
        }
    }

    /// Cuts `from → to` only: `to` still reaches `from`.
    pub fn partition_one_way(&self, from: Host, to: Host) {
        self.world.set_partitioned(from.0, to.0, true);
    }

    /// Cuts `host` off from every other host, both ways.
    pub fn isolate(&self, host: Host) {
        let others: Vec<Host> =
            (0..self.world.nodes.count()).filter(|&n| n != host.0).map(Host).collect();
        self.partition(&[host], &others);
    }

    /// Holds everything sent `from → to` until [`Sim::unclog`] or [`Sim::heal_all`].
    pub fn clog(&self, from: Host, to: Host) {
        self.world.set_clogged(from.0, to.0, true);
    }

    /// Releases a clog.
    pub fn unclog(&self, from: Host, to: Host) {
        self.world.set_clogged(from.0, to.0, false);
    }

    /// Ends every partition and clog (held bytes are delivered) and every run of failing
    /// accepts.
    pub fn heal_all(&self) {
        self.world.heal_all();
    }

    /// Sets the latency of every link that has none of its own.
    pub fn set_latency(&self, latency: Latency) {
        self.world.set_default_latency(latency);
    }

    /// Sets the latency of `from → to` only.
    pub fn set_link_latency(&self, from: Host, to: Host, latency: Latency) {
        self.world.set_link_latency(from.0, to.0, Some(latency));
    }

    /// Resets every open connection between `a` and `b`.
    pub fn reset_connections(&self, a: Host, b: Host) {
        self.world.net.reset_between(&self.world, a.0, b.0);
    }

    /// Makes the next `count` accepts on the host's listeners fail with `fault` (see
    /// [`AcceptFault`]).
    pub fn fail_accepts(&self, host: Host, fault: AcceptFault, count: u32) {
        self.world.trace.fold(Event::NetFault, u64::from(count) << 32 | host.0 as u64);
        self.world.net.fail_accepts(host.0, fault, count);
    }

    /// Accepts still to fail on the host's listeners (see [`Sim::fail_accepts`]).
    pub fn accept_failures_left(&self, host: Host) -> u32 {
        self.world.net.accept_failures_left(host.0)
    }

    /// Accepts failed so far on the listener at `addr` (see [`Sim::fail_accepts`]).
    pub fn accept_failures_met(&self, addr: std::net::SocketAddr) -> u32 {
        self.world.net.accept_failures_met(addr)
    }

    /// How long connecting across a partition takes to fail with `TimedOut`.
    pub fn set_connect_timeout(&self, timeout: Duration) {
        self.world.set_connect_timeout(timeout);
    }

    /// Sets the faults the host's disk injects from now on.
    pub fn set_disk_faults(&self, host: Host, faults: DiskFaults) {
        self.world.nodes.with(host.0, |n| Arc::clone(&n.disk)).set_faults(faults);
    }

    /// The running trace hash.
    pub fn trace_hash(&self) -> u64 {
        self.world.trace.get()
    }

    /// Folds an application observation into the trace hash.
    pub fn trace_user(&self, value: u64) {
        self.world.trace.fold(Event::User, value);
    }

    /// Counters for reports.
    pub fn stats(&self) -> SimStats {
        let (polls, advances) = self.world.counters();
        SimStats { polls, advances, live_tasks: self.world.executor.live_tasks() }
    }

    /// The command that replays this seed.
    pub fn replay_command(&self) -> String {
        format!("cargo run -p weir-sim --release -- --seed {:#x}", self.world.seed)
    }
}

/// How much work a simulation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimStats {
    /// Task polls.
    pub polls: u64,
    /// Jumps of simulated time.
    pub advances: u64,
    /// Tasks alive now.
    pub live_tasks: usize,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
