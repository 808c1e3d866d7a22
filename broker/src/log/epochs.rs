//! The leader-epoch cache: for each leader epoch, the first offset written under it (Kafka's
//! `leader-epoch-checkpoint`). Replication uses it to find where a follower's log diverges; the
//! log uses it to vouch for the epoch field of every stored batch, which, like the base offset,
//! lies outside the batch CRC and so cannot vouch for itself.

use bytes::Bytes;

use super::checkpoint;
use crate::model::{LeaderEpoch, Offset};

/// File name of the checkpoint.
pub const EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
/// Checkpoint kind of [`EPOCH_CHECKPOINT`].
pub const EPOCH_CHECKPOINT_KIND: u8 = 2;
const EPOCH_CHECKPOINT_VERSION: u8 = 1;
/// Entries a checkpoint may hold (one per leader change that wrote data).
pub const EPOCH_ENTRIES_MAX: usize = 1 << 20;

/// (epoch, start offset) pairs, both strictly increasing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<(LeaderEpoch, Offset)>,
}

impl EpochCache {
    /// The entries, oldest first.
    pub fn entries(&self) -> &[(LeaderEpoch, Offset)] {
        &self.entries
    }

    /// The newest epoch, if any batch was written.
    pub fn latest(&self) -> Option<(LeaderEpoch, Offset)> {
        self.entries.last().copied()
    }

    /// The epoch that wrote `offset`: the entry with the largest start at or before it.
    pub fn epoch_for(&self, offset: Offset) -> Option<LeaderEpoch> {
        let after = self.entries.partition_point(|(_, start)| *start <= offset);
        after.checked_sub(1).and_then(|i| self.entries.get(i)).map(|(epoch, _)| *epoch)
    }

    /// Records that `epoch` wrote from `start` on. Returns whether the cache changed. An epoch
    /// older than the newest is refused (false).
    pub fn assign(&mut self, epoch: LeaderEpoch, start: Offset) -> bool {
        match self.entries.last() {
            Some((latest, _)) if *latest >= epoch => false,
            Some((_, latest_start)) if *latest_start > start => false,
            _ => {
                self.entries.push((epoch, start));
                true
            }
        }
    }

    /// Kafka's `LeaderEpochFileCache.endOffsetFor`: the largest epoch at or below `requested`
    /// and the offset where it ends (the start of the next epoch, or `log_end` for the newest);
    /// `requested` itself with the first epoch's start when it is older than every epoch; and
    /// (−1, −1) when `requested` is undefined or newer than every epoch.
    pub fn end_offset_for(&self, requested: LeaderEpoch, log_end: Offset) -> (LeaderEpoch, Offset) {
        let undefined = (LeaderEpoch(-1), Offset(-1));
        if requested.0 < 0 {
            return undefined;
        }
        if let Some((latest, _)) = self.latest()
            && latest == requested
        {
            return (latest, log_end);
        }
        let Some(&(_, higher_start)) = self.entries.iter().find(|(epoch, _)| *epoch > requested)
        else {
            return undefined;
        };
        match self.entries.iter().rev().find(|(epoch, _)| *epoch <= requested) {
            Some(&(floor, _)) => (floor, higher_start),
            None => (requested, higher_start),
        }
    }

    /// [`EpochCache::end_offset_for`] from a leader in epoch `leading`, which may not be in the
    /// history yet: in the moment after the leader took the role, before it recorded the epoch
    /// (nothing is written in an epoch before it is recorded). The answer is as if `leading`
    /// were the newest entry, starting at the log end, as Kafka's leader, which records the
    /// epoch before it serves, answers.
    pub fn end_offset_as_leader(
        &self,
        requested: LeaderEpoch,
        log_end: Offset,
        leading: LeaderEpoch,
    ) -> (LeaderEpoch, Offset) {
        let newest = self.latest().map(|(epoch, _)| epoch);
        if requested.0 < 0 || newest.is_some_and(|newest| newest >= leading) {
            return self.end_offset_for(requested, log_end);
        }
        match requested {
            r if r == leading => (leading, log_end),
            r if r > leading => (LeaderEpoch(-1), Offset(-1)),
            // An epoch the history ends in or after: it ends where `leading` starts.
            r if newest.is_none_or(|newest| r >= newest) => {
                (newest.filter(|&newest| newest <= r).unwrap_or(r), log_end)
            }
            r => self.end_offset_for(r, log_end),
        }
    }

    /// Forgets epochs that start at or after `offset` (the log was truncated there).
    pub fn truncate_from(&mut self, offset: Offset) -> bool {
        let keep = self.entries.partition_point(|(_, start)| *start < offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Encodes as a checkpoint.
    pub fn encode(&self) -> Bytes {
        let mut body = Vec::with_capacity(4 + self.entries.len() * 12);
        body.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for (epoch, start) in &self.entries {
            body.extend_from_slice(&epoch.0.to_be_bytes());
            body.extend_from_slice(&start.0.to_be_bytes());
        }
        checkpoint::encode(EPOCH_CHECKPOINT_KIND, EPOCH_CHECKPOINT_VERSION, &body)
    }

    /// Decodes a checkpoint body; `None` if malformed or not increasing.
    pub fn decode(body: &[u8]) -> Option<EpochCache> {
        let (count, rest) = body.split_first_chunk::<4>()?;
        let count = u32::from_be_bytes(*count) as usize;
        if count > EPOCH_ENTRIES_MAX || rest.len() != count * 12 {
            return None;
        }
        let mut cache = EpochCache::default();
        for entry in rest.chunks_exact(12) {
            let (epoch, start) = entry.split_at(4);
            let epoch = LeaderEpoch(i32::from_be_bytes(epoch.try_into().ok()?));
            let start = Offset(i64::from_be_bytes(start.try_into().ok()?));
            if !cache.assign(epoch, start) {
                return None;
            }
        }
        Some(cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_lookup_truncate_round_trip() {
        let mut cache = EpochCache::default();
        assert!(cache.assign(LeaderEpoch(0), Offset(0)));
        assert!(!cache.assign(LeaderEpoch(0), Offset(5)), "same epoch again");
        assert!(cache.assign(LeaderEpoch(3), Offset(10)));
        assert!(!cache.assign(LeaderEpoch(2), Offset(20)), "older epoch");
        assert_eq!(cache.epoch_for(Offset(9)), Some(LeaderEpoch(0)));
        assert_eq!(cache.epoch_for(Offset(10)), Some(LeaderEpoch(3)));
        assert_eq!(cache.epoch_for(Offset(-1)), None);
        let framed = cache.encode();
        let (_, body) = checkpoint::decode(EPOCH_CHECKPOINT_KIND, &framed).unwrap_or_default();
        assert_eq!(EpochCache::decode(&body), Some(cache.clone()));
        assert!(cache.truncate_from(Offset(10)));
        assert_eq!(cache.latest(), Some((LeaderEpoch(0), Offset(0))));
    }

    #[test]
    fn end_offset_for_matches_kafkas_rules() {
        let mut cache = EpochCache::default();
        cache.assign(LeaderEpoch(1), Offset(0));
        cache.assign(LeaderEpoch(3), Offset(10));
        let end = Offset(25);
        assert_eq!(cache.end_offset_for(LeaderEpoch(3), end), (LeaderEpoch(3), end));
        assert_eq!(cache.end_offset_for(LeaderEpoch(2), end), (LeaderEpoch(1), Offset(10)));
        assert_eq!(cache.end_offset_for(LeaderEpoch(1), end), (LeaderEpoch(1), Offset(10)));
        assert_eq!(cache.end_offset_for(LeaderEpoch(0), end), (LeaderEpoch(0), Offset(0)));
        assert_eq!(cache.end_offset_for(LeaderEpoch(9), end), (LeaderEpoch(-1), Offset(-1)));
        assert_eq!(cache.end_offset_for(LeaderEpoch(-1), end), (LeaderEpoch(-1), Offset(-1)));
    }

    #[test]
    fn a_leader_answers_as_if_its_epoch_were_recorded() {
        let mut cache = EpochCache::default();
        cache.assign(LeaderEpoch(1), Offset(0));
        cache.assign(LeaderEpoch(3), Offset(10));
        let end = Offset(25);
        let ask =
            |requested| cache.end_offset_as_leader(LeaderEpoch(requested), end, LeaderEpoch(6));
        // As the history with (6, 25) appended.
        let mut recorded = cache.clone();
        recorded.assign(LeaderEpoch(6), end);
        for requested in -1..9 {
            let want = recorded.end_offset_for(LeaderEpoch(requested), end);
            assert_eq!(ask(requested), want, "epoch {requested}");
        }
        assert_eq!(ask(5), (LeaderEpoch(3), end));
        assert_eq!(ask(6), (LeaderEpoch(6), end));
        // Recorded already: the history answers.
        let leading_3 = cache.end_offset_as_leader(LeaderEpoch(3), end, LeaderEpoch(3));
        assert_eq!(leading_3, (LeaderEpoch(3), end));
        // An empty history.
        let empty = EpochCache::default();
        assert_eq!(
            empty.end_offset_as_leader(LeaderEpoch(2), end, LeaderEpoch(4)),
            (LeaderEpoch(2), end)
        );
        assert_eq!(
            empty.end_offset_as_leader(LeaderEpoch(4), end, LeaderEpoch(4)),
            (LeaderEpoch(4), end)
        );
    }
}
