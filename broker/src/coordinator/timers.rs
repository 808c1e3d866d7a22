//! The coordinator's timers, as data: every deadline is a keyed entry, so the state machine
//! stays free of clocks and callbacks, and the caller learns the next wake-up from
//! [`Timers::next`].
//!
//! Like Kafka's coordinator timer, scheduling a key replaces its previous deadline, so "reset
//! the session timeout" is one call. Ties fire in key order, which keeps runs deterministic.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::types::{GroupId, MemberId};
use crate::io::Instant;

/// What a timer is for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimerKey {
    /// A member's (or pending member's) session: it expires unless the member heartbeats.
    Heartbeat(GroupId, MemberId),
    /// The group's join phase: the initial-rebalance delay or the rebalance timeout.
    Join(GroupId),
    /// The group's sync phase: members that have not sent SyncGroup by then are removed.
    Sync(GroupId),
    /// The periodic search for expired offsets.
    OffsetExpiry,
}

/// Keyed deadlines.
#[derive(Clone, Debug, Default)]
pub struct Timers {
    by_deadline: BTreeSet<(Instant, TimerKey)>,
    by_key: BTreeMap<TimerKey, Instant>,
}

impl Timers {
    /// Arms `key` to fire at `at`, replacing any earlier deadline for it.
    pub fn schedule(&mut self, key: TimerKey, at: Instant) {
        self.cancel(&key);
        self.by_deadline.insert((at, key.clone()));
        self.by_key.insert(key, at);
    }

    /// Arms `key` to fire `ms` milliseconds after `now` (negative counts as zero).
    pub fn schedule_in(&mut self, key: TimerKey, now: Instant, ms: i64) {
        let ms = u64::try_from(ms).unwrap_or(0);
        self.schedule(key, now + Duration::from_millis(ms));
    }

    /// Disarms `key`, if armed.
    pub fn cancel(&mut self, key: &TimerKey) {
        if let Some(at) = self.by_key.remove(key) {
            self.by_deadline.remove(&(at, key.clone()));
        }
    }

    /// Whether `key` is armed.
    pub fn is_armed(&self, key: &TimerKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// Disarms every timer of `group`.
    pub fn cancel_group(&mut self, group: &GroupId) {
        let keys: Vec<TimerKey> = self
            .by_key
            .keys()
            .filter(|k| match k {
                TimerKey::Heartbeat(g, _) | TimerKey::Join(g) | TimerKey::Sync(g) => g == group,
                TimerKey::OffsetExpiry => false,
            })
            .cloned()
            .collect();
        for key in keys {
            self.cancel(&key);
        }
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Instant> {
        self.by_deadline.first().map(|(at, _)| *at)
    }

    /// Disarms and returns the earliest timer due at `now`, if any.
    pub fn pop_due(&mut self, now: Instant) -> Option<TimerKey> {
        let (at, _) = self.by_deadline.first()?;
        if *at > now {
            return None;
        }
        let (_, key) = self.by_deadline.pop_first()?;
        self.by_key.remove(&key);
        Some(key)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn rescheduling_replaces_and_pop_respects_order() {
        let mut t = Timers::default();
        let g = GroupId::from("g");
        t.schedule(TimerKey::Join(g.clone()), at(10));
        t.schedule(TimerKey::Sync(g.clone()), at(5));
        t.schedule(TimerKey::Join(g.clone()), at(20));
        assert_eq!(t.next(), Some(at(5)));
        assert_eq!(t.pop_due(at(4)), None);
        assert_eq!(t.pop_due(at(30)), Some(TimerKey::Sync(g.clone())));
        assert_eq!(t.pop_due(at(19)), None);
        assert_eq!(t.pop_due(at(20)), Some(TimerKey::Join(g.clone())));
        assert_eq!(t.next(), None);
    }

    #[test]
    fn cancel_group_leaves_others() {
        let mut t = Timers::default();
        let (a, b) = (GroupId::from("a"), GroupId::from("b"));
        t.schedule(TimerKey::Heartbeat(a.clone(), MemberId::from("m")), at(1));
        t.schedule(TimerKey::Join(a.clone()), at(2));
        t.schedule(TimerKey::Join(b.clone()), at(3));
        t.schedule(TimerKey::OffsetExpiry, at(4));
        t.cancel_group(&a);
        assert!(!t.is_armed(&TimerKey::Join(a)));
        assert!(t.is_armed(&TimerKey::Join(b)));
        assert_eq!(t.next(), Some(at(3)));
    }
}
