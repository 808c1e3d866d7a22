//! The catch-up budget: how fast this broker's followers that are out of the ISR may copy
//! from their leaders (`replica_catch_up_bytes_per_sec`), sans-IO.
//!
//! A follower restarted far behind copies at full speed unless something holds it back, and
//! the copy's reads, network traffic and writes then take the leader's and the follower's
//! capacity from their clients. Followers in the ISR are never held back (they must keep up
//! with producers); followers catching up share one budget per broker. The budget is charged
//! after each fetch's bytes are appended: it lets a burst of [`BURST`] through, then asks the
//! fetcher to wait until the bytes copied fit the rate.

use std::time::Duration;

use crate::io::Instant;

/// Copying this far ahead of the rate is let through without waiting, so one large fetch
/// does not stop the copy that follows it.
pub const BURST: Duration = Duration::from_millis(100);

/// A byte rate shared by the followers catching up on one broker.
#[derive(Debug)]
pub struct CatchUpBudget {
    /// Bytes per second; `None` for no limit.
    rate: Option<u64>,
    /// When the bytes charged so far will have been paid for at the rate.
    paid_until: Option<Instant>,
}

impl CatchUpBudget {
    /// A budget of `bytes_per_sec` (0: no limit).
    pub fn new(bytes_per_sec: u64) -> CatchUpBudget {
        CatchUpBudget { rate: (bytes_per_sec > 0).then_some(bytes_per_sec), paid_until: None }
    }

    /// Charges `bytes` just copied at `now`; returns how long the copier should wait before
    /// its next fetch (zero while within the burst).
    pub fn charge(&mut self, now: Instant, bytes: u64) -> Duration {
        let Some(rate) = self.rate else { return Duration::ZERO };
        if bytes == 0 {
            return Duration::ZERO;
        }
        let nanos = u128::from(bytes) * 1_000_000_000 / u128::from(rate);
        let cost = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        // Time unused in the past does not accumulate beyond now: an idle budget starts over.
        let from = self.paid_until.filter(|&t| t > now).unwrap_or(now);
        let paid_until = from + cost;
        self.paid_until = Some(paid_until);
        (paid_until - now).saturating_sub(BURST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn no_limit_never_waits() {
        let mut budget = CatchUpBudget::new(0);
        for i in 0..100 {
            assert_eq!(budget.charge(at(i), 1 << 30), Duration::ZERO);
        }
    }

    #[test]
    fn copying_faster_than_the_rate_waits_so_the_average_fits_it() {
        // 100 MiB/s; fetches of 8 MiB arriving as fast as they can, each waiting as told.
        let mut budget = CatchUpBudget::new(100 * MIB);
        let mut now = at(1_000);
        let start = now;
        let mut copied = 0;
        for _ in 0..100 {
            copied += 8 * MIB;
            let wait = budget.charge(now, 8 * MIB);
            now = now + wait;
        }
        let secs = (now - start).as_secs_f64();
        let rate = copied as f64 / secs;
        // 800 MiB at 100 MiB/s: 8 s, less the burst let through.
        assert!(secs >= 8.0 - BURST.as_secs_f64() - 1e-6, "{secs} s");
        assert!(rate <= 100.0 * MIB as f64 * 1.02, "{} MiB/s", rate / MIB as f64);
    }

    #[test]
    fn a_small_copy_within_the_burst_does_not_wait() {
        let mut budget = CatchUpBudget::new(100 * MIB);
        // 5 MiB at 100 MiB/s is 50 ms, within the 100 ms burst.
        assert_eq!(budget.charge(at(0), 5 * MIB), Duration::ZERO);
        // Another 10 MiB right away: paid until 150 ms, so wait 50 ms.
        assert_eq!(budget.charge(at(0), 10 * MIB), Duration::from_millis(50));
    }

    #[test]
    fn idle_time_is_not_saved_up() {
        let mut budget = CatchUpBudget::new(100 * MIB);
        assert_eq!(budget.charge(at(0), 10 * MIB), Duration::ZERO);
        // An hour later, a large copy waits as if the budget were fresh: 20 MiB is 200 ms.
        let later = at(3_600_000);
        assert_eq!(budget.charge(later, 20 * MIB), Duration::from_millis(100));
    }

    #[test]
    fn followers_catching_up_share_the_budget() {
        // Two fetchers each copying 8 MiB at the same instant pay for 16 MiB together.
        let mut budget = CatchUpBudget::new(100 * MIB);
        let first = budget.charge(at(0), 8 * MIB);
        let second = budget.charge(at(0), 8 * MIB);
        assert_eq!(first, Duration::ZERO);
        assert_eq!(second, Duration::from_millis(60));
    }
}
