//! Read-ahead for consumers that read a partition in order.
//!
//! A consumer's next fetch nearly always starts where its last response ended, and Kafka's
//! clients keep one fetch in flight per broker: while a client takes one response apart, the
//! broker has nothing to do for it, and the page-cache read for the next fetch then lies on the
//! path of every round trip. So after a consumer's read that left more readable data behind it,
//! the partition starts the next read at once, on a task of its own; a fetch for exactly that
//! range takes the result (waiting for it if the read is still under way).
//!
//! A result read ahead is served only if it is what a fresh read could have returned: no
//! rewrite of the log (`Log::rewrites`: truncation or a restart at a new start, from when it
//! begins, or a swap of compacted segments) happened since the read began, the log is online, the range still starts at or after the log start and ends
//! at or below the fetch's upper bound (the high watermark), and it fits the fetch's byte
//! budget. Otherwise the fetch reads afresh. Reads ahead are bounded: a few per partition
//! ([`READ_AHEAD_SLOTS`]), a broker-wide byte budget ([`ReadAheadBudget`]), and a result that
//! no fetch takes within [`READ_AHEAD_HOLD`] is dropped.
//!
//! A consumer far behind the end ([`CATCH_UP_BEHIND_BYTES`]) has its reads ahead run at low
//! priority while the broker is being written to (a produce or a replica's append within
//! [`WRITES_RECENT`]): it catches up on the CPU the producers, the replicas and the consumers at
//! the tail leave idle, and so cannot slow them down, however fast it could read. On a broker
//! nobody writes to there is no one to make way for, and it reads like any other consumer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::io::Instant;
use crate::log::ReadResult;
use crate::model::Offset;

/// Reads ahead kept per partition: one per consumer reading it in order, up to this many.
pub const READ_AHEAD_SLOTS: usize = 4;
/// How long a result read ahead waits for its fetch before it is dropped.
pub const READ_AHEAD_HOLD: Duration = Duration::from_millis(500);
/// Bytes all reads ahead of a broker may hold together (the default budget).
pub const READ_AHEAD_BYTES_MAX: usize = 32 << 20;
/// A read ahead starting more than this many bytes of the log behind its end (see
/// [`crate::log::Log::bytes_from`]) is for a consumer catching up, and runs at low priority
/// ([`crate::io::Spawner::spawn_background`]) while the broker is being written to: far more
/// than a consumer keeping up with the tail is ever behind.
pub const CATCH_UP_BEHIND_BYTES: u64 = 64 << 20;
/// The broker counts as being written to for this long after a produce or a replica's append.
pub const WRITES_RECENT: Duration = Duration::from_secs(1);

/// The broker-wide budget of reads ahead: the bytes they may hold together, and when reads
/// for consumers catching up yield the CPU to writers.
#[derive(Debug)]
pub struct ReadAheadBudget {
    reserved: AtomicUsize,
    max: usize,
    /// Bytes behind the log end beyond which a consumer is catching up.
    catch_up_behind: u64,
    /// The monotonic time of the last write noted, in nanoseconds plus one (0: none yet).
    last_write: AtomicU64,
}

/// Bytes taken from a [`ReadAheadBudget`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<ReadAheadBudget>,
    bytes: usize,
}

impl ReadAheadBudget {
    /// A budget of `max` bytes (0 turns reading ahead off), a consumer counting as catching up
    /// beyond [`CATCH_UP_BEHIND_BYTES`].
    pub fn new(max: usize) -> Arc<ReadAheadBudget> {
        ReadAheadBudget::catching_up_beyond(max, CATCH_UP_BEHIND_BYTES)
    }

    /// A budget of `max` bytes, a consumer counting as catching up more than `behind` bytes
    /// behind the log end.
    pub fn catching_up_beyond(max: usize, behind: u64) -> Arc<ReadAheadBudget> {
        Arc::new(ReadAheadBudget {
            reserved: AtomicUsize::new(0),
            max,
            catch_up_behind: behind,
            last_write: AtomicU64::new(0),
        })
    }

    /// Notes that the broker took a write (a produce, or a replica's append) at `now`.
    pub fn note_write(&self, now: Instant) {
        self.last_write.fetch_max(now.as_nanos().saturating_add(1), Ordering::AcqRel);
    }

    /// Whether a read ahead starting `behind` bytes before the log end, at `now`, should run at
    /// low priority: it is for a consumer catching up, and the broker is being written to.
    pub fn yields(&self, behind: u64, now: Instant) -> bool {
        let last = self.last_write.load(Ordering::Acquire);
        let written_recently = last != 0
            && now.saturating_duration_since(Instant::from_nanos(last - 1)) < WRITES_RECENT;
        behind > self.catch_up_behind && written_recently
    }

    /// Takes `bytes` from the budget, if that many are left.
    pub fn try_reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        self.take(bytes).then(|| Reservation { budget: Arc::clone(self), bytes })
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Acquire)
    }

    fn take(&self, bytes: usize) -> bool {
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                now.checked_add(bytes).filter(|&sum| sum <= self.max)
            })
            .is_ok()
    }
}

impl Reservation {
    /// Grows the reservation to `bytes` (a first batch larger than the budget asked for is
    /// returned whole); false, and unchanged, if the budget has not that much left.
    fn grow_to(&mut self, bytes: usize) -> bool {
        if bytes <= self.bytes {
            return true;
        }
        let grown = self.budget.take(bytes - self.bytes);
        if grown {
            self.bytes = bytes;
        }
        grown
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.reserved.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Where one read ahead is.
enum Stage {
    Reading,
    Ready(ReadResult, Reservation),
    /// Taken, failed, evicted or expired.
    Gone,
}

/// One read ahead: the range it reads and what came of it.
pub(super) struct Pending {
    start: Offset,
    max_bytes: usize,
    /// The log's rewrite count when the read began.
    rewrites: u64,
    stage: Mutex<Stage>,
    /// Woken when the read is done (or the read ahead is gone).
    ready: tokio::sync::Notify,
    /// Woken when a fetch takes the result, which ends the hold early.
    taken: tokio::sync::Notify,
}

impl Pending {
    pub(super) fn new(start: Offset, max_bytes: usize, rewrites: u64) -> Arc<Pending> {
        Arc::new(Pending {
            start,
            max_bytes,
            rewrites,
            stage: Mutex::new(Stage::Reading),
            ready: tokio::sync::Notify::new(),
            taken: tokio::sync::Notify::new(),
        })
    }

    fn stage(&self) -> MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Where the read starts.
    pub(super) fn start(&self) -> Offset {
        self.start
    }

    /// The log's rewrite count when the read began.
    pub(super) fn rewrites(&self) -> u64 {
        self.rewrites
    }

    /// The byte budget the read was made with.
    pub(super) fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Stores what the read returned (nothing if it failed or the result outgrew the budget).
    pub(super) fn fill(&self, read: Option<ReadResult>, mut reservation: Reservation) {
        {
            let mut stage = self.stage();
            if matches!(*stage, Stage::Reading) {
                *stage = match read {
                    Some(result) if reservation.grow_to(result.records.len()) => {
                        Stage::Ready(result, reservation)
                    }
                    _ => Stage::Gone,
                };
            }
        }
        self.ready.notify_waiters();
    }

    /// Waits until the result is taken or [`READ_AHEAD_HOLD`] passed, then drops it.
    pub(super) async fn hold(&self, clock: &dyn crate::io::Clock) {
        let _ = crate::io::timeout(clock, READ_AHEAD_HOLD, self.taken.notified()).await;
        self.expire();
    }

    fn expire(&self) {
        *self.stage() = Stage::Gone;
        self.ready.notify_waiters();
    }

    /// The result, once the read is done: `None` if it failed or is gone.
    pub(super) async fn wait(&self) -> Option<ReadResult> {
        loop {
            let notified = self.ready.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let mut stage = self.stage();
                match std::mem::replace(&mut *stage, Stage::Gone) {
                    Stage::Reading => *stage = Stage::Reading,
                    Stage::Ready(result, _reservation) => {
                        self.taken.notify_one();
                        return Some(result);
                    }
                    Stage::Gone => return None,
                }
            }
            notified.await;
        }
    }
}

/// A partition's reads ahead, one per consumer reading it in order (up to
/// [`READ_AHEAD_SLOTS`]), and how many fetches they served.
#[derive(Default)]
pub struct ReadAhead {
    slots: Mutex<VecDeque<Arc<Pending>>>,
    served: AtomicU64,
}

impl ReadAhead {
    fn slots(&self) -> MutexGuard<'_, VecDeque<Arc<Pending>>> {
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Removes and returns the read ahead starting at `start`, if there is one.
    pub(super) fn take(&self, start: Offset) -> Option<Arc<Pending>> {
        let mut slots = self.slots();
        let at = slots.iter().position(|p| p.start == start)?;
        slots.remove(at)
    }

    /// Keeps `pending`, in place of one for the same start, dropping the oldest beyond
    /// [`READ_AHEAD_SLOTS`].
    pub(super) fn offer(&self, pending: Arc<Pending>) {
        let evicted: Vec<Arc<Pending>> = {
            let mut slots = self.slots();
            let mut evicted: Vec<Arc<Pending>> = Vec::new();
            if let Some(at) = slots.iter().position(|p| p.start == pending.start) {
                evicted.extend(slots.remove(at));
            }
            slots.push_back(pending);
            while slots.len() > READ_AHEAD_SLOTS {
                evicted.extend(slots.pop_front());
            }
            evicted
        };
        for old in evicted {
            old.expire();
        }
    }

    /// Counts a fetch served from a read ahead.
    pub(super) fn count_served(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
    }

    /// Fetches served from a read ahead so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_what_it_has_not_and_takes_back_what_is_dropped() {
        let budget = ReadAheadBudget::new(100);
        let a = budget.try_reserve(60).expect("60 of 100");
        assert!(budget.try_reserve(41).is_none(), "only 40 left");
        let mut b = budget.try_reserve(40).expect("the last 40");
        assert_eq!(budget.reserved(), 100);
        drop(a);
        assert_eq!(budget.reserved(), 40);
        assert!(b.grow_to(100), "60 more fit again");
        assert!(!b.grow_to(101), "the budget is 100");
        assert_eq!(budget.reserved(), 100);
        drop(b);
        assert_eq!(budget.reserved(), 0);
        assert!(ReadAheadBudget::new(0).try_reserve(1).is_none(), "a zero budget is off");
    }

    #[test]
    fn only_a_consumer_far_behind_on_a_broker_being_written_to_yields() {
        let budget = ReadAheadBudget::catching_up_beyond(100, 1_000);
        let at = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        assert!(!budget.yields(5_000, at(0)), "nothing written yet");
        budget.note_write(at(0));
        assert!(budget.yields(5_000, at(0)), "written at the origin of the clock");
        assert!(!budget.yields(1_000, at(0)), "not beyond the threshold");
        assert!(budget.yields(1_001, at(999)));
        assert!(!budget.yields(5_000, at(1_000)), "the last write is a second old");
        budget.note_write(at(1_500));
        budget.note_write(at(1_200));
        assert!(budget.yields(5_000, at(2_499)), "an older write does not hide a newer one");
        assert!(!budget.yields(5_000, at(2_500)));
    }

    #[test]
    fn slots_keep_one_per_start_and_the_newest_few() {
        let slots = ReadAhead::default();
        for start in 0..(READ_AHEAD_SLOTS as i64 + 2) {
            slots.offer(Pending::new(Offset(start), 10, 0));
        }
        assert!(slots.take(Offset(0)).is_none(), "the oldest were dropped");
        assert!(slots.take(Offset(1)).is_none(), "the oldest were dropped");
        let replaced = Pending::new(Offset(5), 10, 0);
        slots.offer(Pending::new(Offset(5), 20, 0));
        slots.offer(Arc::clone(&replaced));
        let taken = slots.take(Offset(5)).expect("the newest for start 5");
        assert!(Arc::ptr_eq(&taken, &replaced));
        assert!(slots.take(Offset(5)).is_none(), "one per start");
        assert!(slots.take(Offset(2)).is_some());
    }
}
