//! The operating system's clocks: `std::time::Instant` for monotonic time, `SystemTime` for wall
//! time, tokio timers for sleeping.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::io::{BoxFuture, Clock, Instant};

/// Real time.
pub struct SystemClock {
    origin: std::time::Instant,
    tokio_origin: tokio::time::Instant,
}

impl SystemClock {
    /// A clock whose monotonic origin is now.
    pub fn new() -> SystemClock {
        SystemClock { origin: std::time::Instant::now(), tokio_origin: tokio::time::Instant::now() }
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
        let at = self.tokio_origin + std::time::Duration::from_nanos(deadline.as_nanos());
        Box::pin(tokio::time::sleep_until(at))
    }
}
