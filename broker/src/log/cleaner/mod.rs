//! Log compaction (`cleanup.policy=compact` and `compact,delete`): Kafka's LogCleaner, one pass
//! at a time, driven by whoever schedules maintenance ([`Log::clean`]).
//!
//! A pass, in Kafka's terms:
//! 1. **Plan.** The cleanable segments are the sealed ones below the caller's bound (the high
//!    watermark) and before the recovery checkpoint's segment ([`plan`]). The *dirty section*
//!    starts at the first dirty offset from the cleaner checkpoint ([`dirty`]); below it every
//!    earlier pass has cleaned. If dirty bytes / cleanable bytes is below
//!    `min.cleanable.dirty.ratio`, the pass does nothing.
//! 2. **Map.** Key → latest offset over the dirty section, in a bounded map ([`offset_map`]); if
//!    it fills, the pass cleans only up to the record whose key did not fit.
//! 3. **Rewrite.** Segments from the log start up to the end of the mapped section are grouped
//!    (consecutive segments whose total size fits `segment.bytes` become one, as Kafka groups
//!    them) and each group is written as one cleaned segment under the retention rule of
//!    [`filter`]: superseded records and expired tombstones go, offsets stay (gaps are fine).
//! 4. **Swap.** Each cleaned segment replaces its group crash-safely ([`swap`]); then the new
//!    first dirty offset is checkpointed.
//!
//! **Damage.** A batch that fails its checks however often it is read (a latent sector error)
//! does not stop compaction, as it would for good if a pass gave up there (Kafka marks such a
//! partition uncleanable and never cleans it again; on `__consumer_offsets` that is unbounded
//! growth). The map passes over the damaged batch, unmapped, so nothing is taken for superseded
//! by records no one can read; a group holding damage is left exactly as it was, so reads still
//! report the damage at its own offsets and walk past it, and nothing unreadable is dropped or
//! given a fresh CRC. The other groups are cleaned, but past the damage no tombstone goes: an
//! older record of its key may lie in the damaged group or batch, and would come back if that
//! ever read again (a read error can be transient). For the same reason the first dirty offset
//! stays at or below the damage, so every later pass maps from there again.
//!
//! Steps 1–3 run without the append lock, so producers are never blocked for a pass; the swap
//! takes it only to check and replace. Passes of one log are serialised by their own lock.
//!
//! Why groups are swapped oldest first, and a pass stops at the first group it cannot swap: a
//! tombstone may only go once every older record of its key is gone, and those lie in the same or
//! an earlier group. Why the checkpoint moves only after the whole pass: below the first dirty
//! offset, no record may have a later record of its key (the next pass's map starts there).

mod clean;
mod dirty;
mod filter;
pub mod offset_map;
mod plan;
mod swap;

pub use clean::{CLEANED_SUFFIX, CLEANER_WRITE_CHUNK_BYTES};
pub use dirty::{CLEANER_CHECKPOINT, CLEANER_CHECKPOINT_KIND};
pub use offset_map::OFFSET_MAP_ENTRY_OVERHEAD_BYTES;
pub use plan::Dirtiness;
pub use swap::SWAP_EXT;
pub(crate) use swap::complete_interrupted_swaps;

use std::collections::BTreeSet;

use super::batch::{BATCH_HEADER_BYTES, BatchError};
use super::epochs::EpochCache;
use super::error::MaintenanceError;
use super::partition_log::Log;
use crate::model::Offset;
use filter::Rules;
use offset_map::OffsetMap;
use plan::Source;

/// Most bytes the offset map of one pass may take (Kafka's `log.cleaner.dedupe.buffer.size`
/// is 128 MiB shared by its cleaner threads); see [`offset_map`] for how entries are charged.
pub const CLEANER_MAP_BYTES_MAX: usize = 64 << 20;

/// What one pass did.
#[derive(Clone, Debug, PartialEq)]
pub enum CleanOutcome {
    /// The log's cleanup policy does not compact.
    NotCompacted,
    /// No cleanable segment holds dirty data.
    NothingToClean {
        /// The first dirty offset.
        first_dirty: Offset,
    },
    /// Too little of the log is dirty (`min.cleanable.dirty.ratio`); nothing was done.
    BelowDirtyRatio(Dirtiness),
    /// The pass ran.
    Cleaned(CleanStats),
}

/// What a pass that ran did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// The first dirty offset the pass started from.
    pub first_dirty_before: Offset,
    /// The first dirty offset now: below it the log is clean. Unchanged if the pass stopped
    /// early ([`CleanStats::abandoned`]).
    pub first_dirty_after: Offset,
    /// Whether the offset map filled before the end of the dirty section.
    pub map_full: bool,
    /// Distinct keys mapped.
    pub keys: usize,
    /// Segments replaced, and cleaned segments that replaced them.
    pub segments_replaced: usize,
    /// Cleaned segments written.
    pub segments_written: usize,
    /// Bytes of the replaced segments, and of the cleaned ones.
    pub bytes_before: u64,
    /// Bytes of the cleaned segments.
    pub bytes_after: u64,
    /// Records removed because a later record has their key.
    pub records_superseded: u64,
    /// Tombstones removed because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// Whether a group changed under the pass (retention deleted a segment), so the pass
    /// stopped there and left the first dirty offset where it was.
    pub abandoned: bool,
    /// The first offset where the pass met damage (a batch that fails its checks however
    /// often it is read): a batch the map passed over, or the base of a group left as it
    /// was. Past it no tombstone goes, and the first dirty offset stays at or below it, so
    /// later passes look at the damage again.
    pub damaged_at: Option<Offset>,
    /// Groups left as they were because they hold damage.
    pub groups_left_damaged: usize,
    /// Where each damaged batch the pass met begins, as far as its walk could tell: the first
    /// the map passed over, and the first of each group left as it was.
    pub damage_met: Vec<Offset>,
}

/// What became of one group of a pass.
enum GroupFate {
    /// Its cleaned segment replaced it.
    Swapped,
    /// It changed under the pass (retention deleted a segment) and was left alone.
    Changed,
    /// A batch in it fails its checks however often it is read (a latent sector error): the
    /// group is left as it was, so the damage stays where reads report it, and nothing
    /// unreadable is dropped or rewritten under a fresh CRC.
    Damaged(Offset, BatchError),
}

/// Per-log state of the cleaner: the lock that serialises passes.
#[derive(Debug, Default)]
pub(crate) struct CleanerState {
    pass: tokio::sync::Mutex<()>,
}

/// Whether some dirty segment's first batch is older than `max_lag_ms` (by its largest
/// timestamp, as Kafka's `LogCleanerManager.maxCompactionDelay` reads the earliest over the
/// dirty segments), so the log must be cleaned whatever its dirty ratio. A batch without a
/// timestamp, or one that cannot be read, makes nothing overdue.
async fn overdue(sources: &[Source], first_dirty: Offset, now_ms: i64, max_lag_ms: i64) -> bool {
    if max_lag_ms == i64::MAX {
        return false;
    }
    let due = now_ms.saturating_sub(max_lag_ms);
    for source in sources.iter().filter(|s| s.end > first_dirty) {
        let Ok(head) = source.log.read_at(0, BATCH_HEADER_BYTES).await else { continue };
        let Ok(header) = super::batch::parse_header(&head) else { continue };
        let first = header.max_timestamp();
        if first > 0 && first < due {
            return true;
        }
    }
    false
}

impl Log {
    /// Runs one compaction pass with the default map budget ([`CLEANER_MAP_BYTES_MAX`]).
    /// `now_wall_ms` decides which tombstones have outlived `delete.retention.ms`;
    /// `upper_bound` (the high watermark) bounds what may be rewritten.
    pub async fn clean(
        &self,
        now_wall_ms: i64,
        upper_bound: Offset,
    ) -> Result<CleanOutcome, MaintenanceError> {
        self.clean_with_map_limit(now_wall_ms, upper_bound, CLEANER_MAP_BYTES_MAX).await
    }

    /// [`Log::clean`] with an offset map of at most `map_bytes_max` bytes.
    pub async fn clean_with_map_limit(
        &self,
        now_wall_ms: i64,
        upper_bound: Offset,
        map_bytes_max: usize,
    ) -> Result<CleanOutcome, MaintenanceError> {
        let none = BTreeSet::new();
        self.clean_keeping(now_wall_ms, upper_bound, map_bytes_max, &none).await
    }

    /// [`Log::clean_with_map_limit`], keeping the batches that end at `producers_last` (the
    /// idempotent producers' newest), emptied if all their records go.
    pub async fn clean_keeping(
        &self,
        now_wall_ms: i64,
        upper_bound: Offset,
        map_bytes_max: usize,
        producers_last: &BTreeSet<Offset>,
    ) -> Result<CleanOutcome, MaintenanceError> {
        let config = self.config();
        if !config.cleanup_policy.compacts() {
            return Ok(CleanOutcome::NotCompacted);
        }
        let _pass = self.cleaner.pass.lock().await;
        self.checkpoint_if_behind().await?;
        let stored = dirty::load(&*self.env.disk, &self.dir).await;
        let (sources, first_dirty, epochs) = {
            let state = self.state();
            state.check_online()?;
            // A checkpoint past the log's end belongs to data that is gone: start again.
            let stored = stored.filter(|&o| o <= state.log_end).unwrap_or(state.log_start);
            let sources = plan::cleanable(&state, upper_bound);
            (sources, stored.max(state.log_start), state.epochs.clone())
        };
        let mut sources = sources;
        if config.min_compaction_lag_ms > 0 {
            let newest_allowed = now_wall_ms.saturating_sub(config.min_compaction_lag_ms);
            sources.truncate(plan::within_lag(&sources, first_dirty, newest_allowed));
        }
        let Some(cleanable_end) = sources.last().map(|s| s.end).filter(|&e| e > first_dirty) else {
            return Ok(CleanOutcome::NothingToClean { first_dirty });
        };
        let dirt = plan::dirtiness(&sources, first_dirty);
        // Kafka cleans only when the ratio is above the setting, not at it — or when the
        // oldest dirty records have waited past `max.compaction.lag.ms`.
        if dirt.ratio() <= config.min_cleanable_dirty_ratio
            && !overdue(&sources, first_dirty, now_wall_ms, config.max_compaction_lag_ms).await
        {
            return Ok(CleanOutcome::BelowDirtyRatio(dirt));
        }
        let mut map = OffsetMap::new(map_bytes_max);
        let mapped = clean::build_map(&sources, first_dirty, &mut map, &epochs).await?;
        if let Some((offset, key_bytes)) = mapped.full_at.filter(|_| map.is_empty()) {
            return Err(MaintenanceError::CleanerMapTooSmall { offset, key_bytes, map_bytes_max });
        }
        let rules = Rules {
            map: &map,
            map_end: mapped.end.min(cleanable_end),
            now_ms: now_wall_ms,
            delete_retention_ms: config.delete_retention_ms,
            tombstones_may_go: true,
            producers_last,
        };
        let mut stats = CleanStats {
            first_dirty_before: first_dirty,
            first_dirty_after: first_dirty,
            map_full: mapped.full_at.is_some(),
            keys: map.len(),
            damaged_at: mapped.damaged_at,
            damage_met: mapped.damaged_at.into_iter().collect(),
            ..CleanStats::default()
        };
        let rewrite: Vec<Source> = sources.into_iter().filter(|s| s.base < rules.map_end).collect();
        let shapes = plan::shapes(&rewrite);
        for range in plan::groups(&shapes, config.segment_bytes, config.segment_index_bytes) {
            let group = &rewrite[range];
            let group_end = group.last().map_or(first_dirty, |s| s.end);
            let tombstones_may_go = stats.damaged_at.is_none_or(|d| group_end <= d);
            let rules = Rules { tombstones_may_go, ..rules };
            match self.clean_group(group, &rules, &epochs, &mut stats).await? {
                GroupFate::Swapped => {}
                GroupFate::Changed => {
                    stats.abandoned = true;
                    break;
                }
                GroupFate::Damaged(at, error) => {
                    let base = group.first().map_or(first_dirty, |s| s.base);
                    tracing::error!(log = %self.dir.display(), segment = %base, %at, %error, "cleaner: leaving a damaged segment as it is");
                    stats.groups_left_damaged += 1;
                    stats.damage_met.push(at);
                    clean::note_damage(&mut stats.damaged_at, base);
                }
            }
        }
        if let Some(at) = mapped.damaged_at {
            tracing::error!(log = %self.dir.display(), offset = %at, "cleaner: passed over a damaged batch, unmapped");
        }
        if !stats.abandoned {
            // Below the first dirty offset every record has been mapped and every group up to it
            // rewritten: not past damage, which the next pass must look at again.
            let after = stats.damaged_at.map_or(rules.map_end, |d| d.min(rules.map_end));
            let after = after.max(first_dirty);
            dirty::store(&*self.env.disk, &self.dir, after).await?;
            stats.first_dirty_after = after;
        }
        tracing::debug!(log = %self.dir.display(), ?stats, "cleaned");
        Ok(CleanOutcome::Cleaned(stats))
    }

    /// Writes one group's cleaned segment and swaps it in, adding to `stats`.
    async fn clean_group(
        &self,
        group: &[Source],
        rules: &Rules<'_>,
        epochs: &EpochCache,
        stats: &mut CleanStats,
    ) -> Result<GroupFate, MaintenanceError> {
        let (disk, dir) = (&*self.env.disk, &*self.dir);
        let interval = self.config().index_interval_bytes;
        let written = clean::write_cleaned(disk, dir, group, rules, epochs, interval).await;
        let cleaned = match written {
            Ok(cleaned) => cleaned,
            Err(e) => {
                let base = group.first().map_or(Offset(0), |s| s.base);
                if let Err(gone) = disk.remove(&clean::cleaned_path(dir, base)).await {
                    tracing::warn!(log = %dir.display(), "removing a failed cleaned segment: {gone}");
                }
                return match e {
                    MaintenanceError::Damaged { offset, cause } => {
                        Ok(GroupFate::Damaged(offset, cause))
                    }
                    MaintenanceError::Corrupt(error) => Ok(GroupFate::Damaged(base, error)),
                    e => Err(e),
                };
            }
        };
        let (bytes_after, removed) = (cleaned.segment.size, cleaned.removed);
        if !self.install_cleaned(group, cleaned).await? {
            return Ok(GroupFate::Changed);
        }
        stats.segments_replaced += group.len();
        stats.segments_written += 1;
        stats.bytes_before += group.iter().map(|s| s.size).sum::<u64>();
        stats.bytes_after += bytes_after;
        stats.records_superseded += removed.superseded;
        stats.tombstones_removed += removed.tombstones;
        Ok(GroupFate::Swapped)
    }

    /// Writes a recovery checkpoint if the durable point has moved to a later segment since the
    /// last one, so the segments before it become cleanable (see [`plan`]).
    async fn checkpoint_if_behind(&self) -> Result<(), MaintenanceError> {
        let behind = {
            let state = self.state();
            state.durable.segment > state.checkpointed.segment
        };
        if behind { self.checkpoint().await } else { Ok(()) }
    }
}
