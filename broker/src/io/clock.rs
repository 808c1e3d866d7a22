//! Time: a monotonic clock for every timeout, lease and lag check, and a wall clock for record
//! timestamps, retention and segment rolling.
//!
//! The two are deliberately separate. Monotonic time never goes backwards on a node; wall time
//! may be skewed between nodes, drift, or jump (forwards or backwards), and the simulator makes it
//! do all of these. Code that measures an interval must use [`Clock::now`], never wall time.

use std::future::Future;
use std::ops::{Add, Sub};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::BoxFuture;

/// A point on a node's monotonic clock: nanoseconds since an arbitrary, per-process origin.
///
/// Only meaningful on the node that produced it; never sent over the wire or stored on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The clock's origin.
    pub const ZERO: Instant = Instant(0);

    /// Builds an instant from nanoseconds since the clock's origin.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// Nanoseconds since the clock's origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self - d`, saturating at the clock's origin.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_sub(nanos))
    }

    /// `self + d`, saturating at the end of time rather than overflowing.
    pub fn saturating_add(self, d: Duration) -> Instant {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// A node's view of time.
pub trait Clock: Send + Sync {
    /// The current monotonic time. Never decreases between calls on the same node.
    fn now(&self) -> Instant;

    /// Wall-clock time in milliseconds since the Unix epoch.
    ///
    /// Use it only for values that are meant to be wall time (record timestamps, retention by
    /// age, segment age). It may differ between nodes and may jump backwards.
    fn wall_ms(&self) -> i64;

    /// Completes once [`Clock::now`] is at or past `deadline`. A deadline in the past completes
    /// at the next poll. Dropping the future cancels the timer.
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()>;

    /// Completes once `duration` of monotonic time has passed.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.sleep_until(self.now() + duration)
    }
}

/// The error returned by [`timeout`] when the deadline passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline passed before the operation completed")]
pub struct TimedOut;

/// Races `future` against a timer; the future wins ties, so a result that is ready is never
/// thrown away because the deadline also passed.
pub fn timeout<F: Future>(clock: &dyn Clock, duration: Duration, future: F) -> Timeout<F> {
    Timeout { future: Box::pin(future), timer: clock.sleep(duration) }
}

/// The future returned by [`timeout`].
pub struct Timeout<F: Future> {
    future: Pin<Box<F>>,
    timer: BoxFuture<'static, ()>,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, TimedOut>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(value) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(value));
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(TimedOut)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instant_arithmetic_saturates() {
        let a = Instant::from_nanos(5);
        let b = a + Duration::from_nanos(10);
        assert_eq!(b.as_nanos(), 15);
        assert_eq!(b - a, Duration::from_nanos(10));
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(
            (Instant::from_nanos(u64::MAX - 1) + Duration::from_secs(1)).as_nanos(),
            u64::MAX
        );
    }
}
