//! Simulated time for one node: the run's monotonic time, and a wall clock that can be offset,
//! drift and jump independently on every node.
//!
//! Monotonic time is the simulation's own time, identical on every node and never decreasing.
//! Wall time is `epoch + monotonic + offset + drift`, where the offset can be set or jumped
//! (forwards or backwards) and the drift accrues linearly at a rate in parts per million.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::io::{BoxFuture, Clock, Instant};

use crate::timer::SimSleep;
use crate::world::{World, lock};

/// Wall-clock time at the start of every simulation: 2026-01-01T00:00:00Z, in milliseconds.
pub const SIM_EPOCH_MS: i64 = 1_767_225_600_000;

/// A node's hardware wall clock. It outlives restarts of the node, as a real clock does.
#[derive(Debug, Default)]
pub struct ClockState {
    /// Fixed offset from true time, in milliseconds (jumps add to it).
    offset_ms: i64,
    /// Rate error in parts per million (positive runs fast).
    drift_ppm: i64,
    /// When the current drift rate started, in simulated nanoseconds.
    drift_since_nanos: u64,
}

impl ClockState {
    /// The skew (wall minus true time) at simulated time `now_nanos`, in milliseconds.
    pub fn skew_ms(&self, now_nanos: u64) -> i64 {
        let elapsed_ms = (now_nanos.saturating_sub(self.drift_since_nanos) / 1_000_000) as i64;
        self.offset_ms + elapsed_ms.saturating_mul(self.drift_ppm) / 1_000_000
    }

    /// Moves the wall clock by `delta_ms` at once (negative jumps go back in time).
    pub fn jump(&mut self, delta_ms: i64) {
        self.offset_ms = self.offset_ms.saturating_add(delta_ms);
    }

    /// Sets the drift rate from `now_nanos` on, keeping the skew accrued so far.
    pub fn set_drift(&mut self, now_nanos: u64, drift_ppm: i64) {
        self.offset_ms = self.skew_ms(now_nanos);
        self.drift_since_nanos = now_nanos;
        self.drift_ppm = drift_ppm;
    }
}

/// One node's [`Clock`].
pub struct SimClock {
    world: Arc<World>,
    state: Arc<Mutex<ClockState>>,
}

impl SimClock {
    pub(crate) fn new(world: Arc<World>, state: Arc<Mutex<ClockState>>) -> SimClock {
        SimClock { world, state }
    }
}

impl Clock for SimClock {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.world.now_nanos())
    }

    fn wall_ms(&self) -> i64 {
        let now = self.world.now_nanos();
        SIM_EPOCH_MS + (now / 1_000_000) as i64 + lock(&self.state).skew_ms(now)
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        Box::pin(SimSleep::new(Arc::clone(&self.world), deadline.as_nanos()))
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.sleep_until(self.now() + duration)
    }
}
