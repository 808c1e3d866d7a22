//! The operating system's clocks: tokio's `Instant` for monotonic time, `SystemTime` for wall
//! time, tokio timers for sleeping.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::io::{BoxFuture, Clock, Instant};

/// Real time. Monotonic time is read from tokio's clock (the OS monotonic clock, unless a test
/// pauses tokio's time), so `now` and timers always agree.
pub struct SystemClock {
    origin: tokio::time::Instant,
}

impl SystemClock {
    /// A clock whose monotonic origin is now.
    pub fn new() -> SystemClock {
        SystemClock { origin: tokio::time::Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        let nanos = self.origin.elapsed().as_nanos();
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    fn wall_ms(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            // A wall clock set before 1970 is reported as negative milliseconds.
            Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        let at = self.origin + std::time::Duration::from_nanos(deadline.as_nanos());
        Box::pin(tokio::time::sleep_until(at))
    }
}
