//! [`Log`]: one partition's log — its segments, offsets and durability state — and the small
//! accessors every other part of the log module shares. Opening and recovery, appends, reads,
//! flushing and retention live in their own files as further `impl Log` blocks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::config::LogConfig;
use super::error::Offline;
use super::open::PartitionCheckpoint;
use super::sealed::{IndexFile, OpenIndexes};
use super::segment::Segment;
use crate::io::{Env, File, Instant};
use crate::model::{LeaderEpoch, Offset};

/// One partition's durable log.
///
/// Appends are serialised by an async lock held across their file write; the state lock is a
/// plain mutex held only between awaits, so reads never wait for a write or a sync to finish.
pub struct Log {
    pub(super) env: Env,
    pub(super) dir: PathBuf,
    pub(super) config: Mutex<LogConfig>,
    pub(super) state: Mutex<State>,
    pub(super) append_lock: tokio::sync::Mutex<()>,
    /// Held by whoever writes the log's index or checkpoint files or changes its set of
    /// segments on disk: a roll, truncation, retention, the cleaner's swap (each taking it after
    /// the append lock) and the periodic checkpoint (which takes this one only, so appends go on
    /// while it writes and syncs its files).
    pub(super) files_lock: tokio::sync::Mutex<()>,
    /// Woken whenever a sync finishes (or fails).
    pub(super) synced: tokio::sync::Notify,
    /// The compaction cleaner's per-log state.
    pub(super) cleaner: super::cleaner::CleanerState,
    /// The sealed segments' index files held open for lookups.
    pub(super) open_indexes: OpenIndexes,
}

/// A byte position known to hold a batch boundary: where recovery may start scanning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecoveryPoint {
    /// Every offset below this one is durable.
    pub offset: Offset,
    /// The segment holding `offset` (or ending just before it).
    pub segment: Offset,
    /// The byte position of `offset` in that segment.
    pub position: u64,
}

pub(super) struct State {
    pub(super) segments: BTreeMap<Offset, Segment>,
    pub(super) log_start: Offset,
    /// The log start the last checkpoint written recorded: where the log starts again after a
    /// crash or power failure. Below `log_start` while a new start is being checkpointed, or
    /// after that checkpoint failed.
    pub(super) durable_log_start: Offset,
    /// One past the last published offset.
    pub(super) log_end: Offset,
    /// Everything below this point is synced.
    pub(super) durable: RecoveryPoint,
    /// What the last checkpoint recorded.
    pub(super) checkpointed: RecoveryPoint,
    /// The partition checkpoint last written, with the count of rewrites when its body was
    /// taken: a periodic checkpoint that would write the same again is skipped.
    pub(super) last_checkpoint: Option<(PartitionCheckpoint, u64)>,
    /// The high watermark to record in the next checkpoint (kept by the partition above).
    pub(super) high_watermark: Offset,
    pub(super) syncing: bool,
    /// Cuts of the log's end or start (truncation, a restart at a new start) so far. A sync
    /// that began before a cut must not mark its old end durable: offsets below it may since
    /// hold new, unsynced batches.
    pub(super) cuts: u64,
    /// Changes that may alter the bytes at offsets the log held before: counted when a cut
    /// (truncation, a restart at a new start) begins and when it ends, and at each swap of
    /// compacted segments. Bytes read while this count stays the same are still the log's.
    pub(super) rewrites: u64,
    /// Files of sealed segments written since the last sync.
    pub(super) unsynced: Vec<Arc<dyn File>>,
    /// A segment file was created or removed since the last folder sync.
    pub(super) dir_dirty: bool,
    pub(super) offline: Option<Offline>,
    /// When an append was last refused for lack of room (disk space, or the process's
    /// descriptors).
    pub(super) refused_for_room: Option<Instant>,
    /// The log may have offset gaps: it has been compacted (now or before a config change), so
    /// base offsets only increase rather than continue exactly.
    pub(super) gapped: bool,
    /// Which leader epoch wrote which offsets.
    pub(super) epochs: super::epochs::EpochCache,
    /// `epochs` holds an epoch a new leader began that the disk had no room to record (see
    /// [`Log::begin_epoch`]): the next write of the epoch checkpoint records it (or drops it,
    /// a truncation), and nothing is written in it before.
    pub(super) epochs_unsaved: bool,
    /// Records appended since the last sync, and when it happened (interval policy).
    pub(super) unflushed_records: i64,
    pub(super) last_sync: Instant,
}

impl State {
    pub(super) fn check_online(&self) -> Result<(), Offline> {
        self.offline.clone().map_or(Ok(()), Err)
    }

    pub(super) fn active(&self) -> Option<&Segment> {
        self.segments.values().next_back()
    }

    pub(super) fn active_mut(&mut self) -> Option<&mut Segment> {
        self.segments.values_mut().next_back()
    }

    /// The segment holding `offset`: the last one whose base is at or before it.
    pub(super) fn segment_for(&self, offset: Offset) -> Option<&Segment> {
        self.segments.range(..=offset).next_back().map(|(_, s)| s)
    }

    /// Where the log ends, as a recovery point.
    pub(super) fn end_point(&self) -> RecoveryPoint {
        match self.active() {
            Some(active) => {
                RecoveryPoint { offset: self.log_end, segment: active.base, position: active.size }
            }
            None => RecoveryPoint { offset: self.log_end, segment: self.log_end, position: 0 },
        }
    }

    /// Bytes held by all segments.
    pub(super) fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size).sum()
    }
}

impl Log {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A sealed segment's index file, open for a lookup; `None` if the lookup must do without
    /// it (see [`super::sealed`]).
    pub(super) async fn open_index(&self, index: &Arc<IndexFile>) -> Option<Arc<dyn File>> {
        self.open_indexes.open(&*self.env.disk, index).await
    }

    /// The log's settings.
    pub fn config(&self) -> LogConfig {
        self.config.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Replaces the log's settings (takes effect for the next append, roll or cleaning).
    pub fn set_config(&self, config: LogConfig) {
        *self.config.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = config;
    }

    /// Whether base offsets continue exactly from batch to batch (no compaction gaps), which
    /// lets reads and recovery vouch for each batch's base offset more strictly.
    pub(super) fn dense(&self) -> bool {
        !self.config().cleanup_policy.compacts() && !self.state().gapped
    }

    /// The log's folder on its disk.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first offset kept (earlier ones were deleted by retention or DeleteRecords).
    pub fn log_start_offset(&self) -> Offset {
        self.state().log_start
    }

    /// The log start offset a crash or power failure would reopen the log at: the last one
    /// checkpointed. What the log reports to others as deleted must be deleted durably.
    pub fn durable_log_start_offset(&self) -> Offset {
        self.state().durable_log_start
    }

    /// The offset the next append will get.
    pub fn log_end_offset(&self) -> Offset {
        self.state().log_end
    }

    /// How many rewrites (see `State::rewrites`: cuts of the log's end or start, each counted
    /// as it begins and as it ends, and swaps of compacted segments) the log has had. Bytes
    /// read while this count stays the same are still the log's.
    pub fn rewrites(&self) -> u64 {
        self.state().rewrites
    }

    /// Every offset below this one has been synced to disk.
    pub fn durable_offset(&self) -> Offset {
        self.state().durable.offset
    }

    /// Whether the log is offline (a write or sync failed), and why.
    pub fn offline(&self) -> Option<Offline> {
        self.state().offline.clone()
    }

    /// Bytes held by the log's segments.
    pub fn size_bytes(&self) -> u64 {
        self.state().size_bytes()
    }

    /// About how many bytes of batches lie from `offset` to the log end, without any I/O: the
    /// segments after the one holding `offset` whole, and that one's bytes in proportion to
    /// the share of its offsets at and after `offset`. Exact at segment boundaries.
    pub fn bytes_from(&self, offset: Offset) -> u64 {
        let state = self.state();
        let mut bytes = 0u64;
        for segment in state.segments.values().rev() {
            if segment.base >= offset {
                bytes = bytes.saturating_add(segment.size);
                continue;
            }
            let span = segment.next_offset.distance_from(segment.base);
            let after = segment.next_offset.distance_from(offset);
            if span > 0 {
                let share =
                    u128::from(segment.size) * u128::from(after.min(span)) / u128::from(span);
                bytes = bytes.saturating_add(u64::try_from(share).unwrap_or(u64::MAX));
            }
            break;
        }
        bytes
    }

    /// How many segments the log has.
    pub fn segment_count(&self) -> usize {
        self.state().segments.len()
    }

    /// The base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> Vec<Offset> {
        self.state().segments.keys().copied().collect()
    }

    /// Where reads from `from` go on past a damaged batch they met ([`ReadError::Corrupt`],
    /// with its `resume`): there if the read said, else at the next segment; `None` if neither
    /// lies past `from` (nothing after the damage can be read).
    pub fn past_damage(&self, from: Offset, resume: Option<Offset>) -> Option<Offset> {
        resume
            .or_else(|| self.segment_bases().into_iter().find(|&b| b > from))
            .filter(|&next| next > from)
    }

    /// (base, size, next offset, sealed) of every segment, for diagnostics.
    pub fn describe_segments(&self) -> Vec<(Offset, u64, Offset, bool)> {
        let state = self.state();
        state
            .segments
            .values()
            .map(|s| {
                (
                    s.base,
                    s.size,
                    s.next_offset,
                    matches!(s.index, super::segment::SegmentIndex::Sealed(_)),
                )
            })
            .collect()
    }

    /// The leader-epoch history: (epoch, first offset) pairs.
    pub fn epochs(&self) -> super::epochs::EpochCache {
        self.state().epochs.clone()
    }

    /// OffsetForLeaderEpoch's answer for `requested` from this log's history, given by its
    /// leader in epoch `leading` (see [`super::epochs::EpochCache::end_offset_as_leader`]),
    /// without copying the history.
    pub fn end_offset_for(
        &self,
        requested: LeaderEpoch,
        leading: LeaderEpoch,
    ) -> (LeaderEpoch, Offset) {
        let state = self.state();
        state.epochs.end_offset_as_leader(requested, state.log_end, leading)
    }

    /// The leader epoch that wrote `offset`, by the history (which every stored batch's
    /// epoch agrees with); `None` below its first entry.
    pub fn epoch_for(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.state().epochs.epoch_for(offset)
    }

    /// The high watermark last recorded (from the checkpoint, after a restart).
    pub fn recorded_high_watermark(&self) -> Offset {
        self.state().high_watermark
    }

    /// Records the high watermark the next checkpoint should carry.
    pub fn set_high_watermark(&self, offset: Offset) {
        let mut state = self.state();
        state.high_watermark = state.high_watermark.max(offset);
    }

    /// The largest timestamp in the log, and the base offset of the batch holding it in each
    /// segment that holds it, in offset order.
    pub fn max_timestamp(&self) -> Option<(i64, Vec<Offset>)> {
        let state = self.state();
        let max = state.segments.values().map(|s| s.max_timestamp).max().filter(|&m| m >= 0)?;
        let batches = state
            .segments
            .values()
            .filter(|s| s.max_timestamp == max)
            .map(|s| s.max_timestamp_batch)
            .collect();
        Some((max, batches))
    }

    /// Marks the log offline; every later operation fails with `reason`.
    pub(super) fn go_offline(&self, reason: Offline) -> Offline {
        let mut state = self.state();
        if state.offline.is_none() {
            if reason == Offline::Closed {
                tracing::debug!(log = %self.dir.display(), "log closed");
            } else {
                tracing::error!(log = %self.dir.display(), %reason, "log offline");
            }
            state.offline = Some(reason);
            // Whoever opens the folder next may rewrite the index files: reads still under way
            // here do without them, and the log holds none of them open.
            for seg in state.segments.values() {
                seg.release();
            }
        }
        let reason = state.offline.clone().unwrap_or(Offline::Closed);
        drop(state);
        self.synced.notify_waiters();
        reason
    }
}
