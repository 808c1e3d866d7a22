//! What one pass may touch, how dirty the log is, and how segments are grouped into cleaned
//! segments — pure functions over a snapshot of the segment list, so the rules are testable
//! without a disk.
//!
//! A segment is cleanable when it is sealed (never the active one), lies wholly below the
//! caller's bound (the high watermark: nothing a consumer may not read yet is rewritten) and
//! wholly before the segment of the last recovery checkpoint. That last rule is what makes a
//! rewrite safe against recovery: the checkpoint names a segment and a *byte position* in it,
//! and recovery resumes scanning there; a rewritten segment has other byte positions, so it must
//! never be the one a checkpoint points into.

use std::ops::Range;
use std::sync::Arc;

use crate::io::File;
use crate::log::partition_log::State;
use crate::log::segment::SegmentIndex;
use crate::model::Offset;

/// One sealed segment as the pass found it.
#[derive(Clone)]
pub(super) struct Source {
    pub(super) base: Offset,
    /// The next segment's base offset: one past this segment's last offset.
    pub(super) end: Offset,
    /// The file the pass reads (and, at the swap, checks is still the segment's file).
    pub(super) log: Arc<dyn File>,
    pub(super) size: u64,
    /// Bytes of its offset index.
    pub(super) index_bytes: u64,
    /// Its largest record timestamp (-1 if none has one).
    pub(super) max_timestamp: i64,
}

/// The cleanable segments, oldest first: sealed, wholly below `upper_bound` and below the
/// checkpointed recovery segment, and not wholly below the log start (retention's business).
pub(super) fn cleanable(state: &State, upper_bound: Offset) -> Vec<Source> {
    let limit = upper_bound.min(state.checkpointed.segment);
    let mut sources = Vec::new();
    let mut segments = state.segments.values().peekable();
    while let Some(seg) = segments.next() {
        let Some(next) = segments.peek() else { break };
        if next.base > limit || !matches!(seg.index, SegmentIndex::Sealed(_)) {
            break;
        }
        if next.base <= state.log_start {
            continue;
        }
        sources.push(Source {
            base: seg.base,
            end: next.base,
            log: Arc::clone(&seg.log),
            size: seg.size,
            index_bytes: seg.index_bytes(),
            max_timestamp: seg.max_timestamp,
        });
    }
    sources
}

/// How many of `sources` a pass may clean under `min.compaction.lag.ms`: those before the first
/// dirty segment (one ending past `first_dirty`) holding a record newer than `newest_allowed`,
/// as Kafka's `LogCleanerManager.cleanableOffsets` cuts them. Clean segments before it are
/// rewritten as before.
pub(super) fn within_lag(sources: &[Source], first_dirty: Offset, newest_allowed: i64) -> usize {
    sources
        .iter()
        .position(|s| s.end > first_dirty && s.max_timestamp > newest_allowed)
        .unwrap_or(sources.len())
}

/// Bytes of the cleanable segments already clean (wholly below the first dirty offset) and
/// dirty (the rest), as Kafka counts them for `min.cleanable.dirty.ratio`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dirtiness {
    /// Bytes of segments wholly below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the other cleanable segments.
    pub dirty_bytes: u64,
}

impl Dirtiness {
    /// Dirty bytes over all cleanable bytes (0 when there are none).
    pub fn ratio(&self) -> f64 {
        let total = self.clean_bytes.saturating_add(self.dirty_bytes);
        if total == 0 { 0.0 } else { self.dirty_bytes as f64 / total as f64 }
    }
}

pub(super) fn dirtiness(sources: &[Source], first_dirty: Offset) -> Dirtiness {
    sources.iter().fold(Dirtiness::default(), |mut d, s| {
        if s.end <= first_dirty {
            d.clean_bytes += s.size;
        } else {
            d.dirty_bytes += s.size;
        }
        d
    })
}

/// Splits consecutive segments into groups that each become one cleaned segment, as Kafka's
/// `groupSegmentsBySize` does: a group grows while its (pre-cleaning) bytes fit `segment_bytes`,
/// its index bytes fit `index_bytes_max`, and its offsets fit a relative offset. Every group
/// holds at least one segment. Sizes before cleaning bound sizes after, so a cleaned segment
/// never outgrows a segment the log would have rolled.
pub(super) fn groups(
    sources: &[(u64, u64, Offset, Offset)],
    segment_bytes: u64,
    index_bytes_max: u64,
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < sources.len() {
        let (mut bytes, mut index, group_base, _) = sources[start];
        let mut end = start + 1;
        while let Some(&(size, index_size, _, seg_end)) = sources.get(end) {
            let fits = bytes.saturating_add(size) <= segment_bytes
                && index.saturating_add(index_size) <= index_bytes_max
                && seg_end.0.saturating_sub(group_base.0) <= i64::from(i32::MAX);
            if !fits {
                break;
            }
            bytes += size;
            index += index_size;
            end += 1;
        }
        out.push(start..end);
        start = end;
    }
    out
}

/// The (size, index bytes, base, end) of each source, as [`groups`] takes them.
pub(super) fn shapes(sources: &[Source]) -> Vec<(u64, u64, Offset, Offset)> {
    sources.iter().map(|s| (s.size, s.index_bytes, s.base, s.end)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(size: u64, base: i64, end: i64) -> (u64, u64, Offset, Offset) {
        (size, 8, Offset(base), Offset(end))
    }

    #[test]
    fn small_neighbours_share_a_cleaned_segment() {
        let sources = [seg(40, 0, 10), seg(50, 10, 20), seg(30, 20, 30), seg(100, 30, 40)];
        assert_eq!(groups(&sources, 100, 1 << 20), vec![0..2, 2..3, 3..4]);
        assert_eq!(groups(&sources, 1_000, 1 << 20), vec![0..4]);
        assert_eq!(groups(&sources, 1, 1 << 20), vec![0..1, 1..2, 2..3, 3..4], "one each");
        assert_eq!(groups(&sources, 1_000, 16), vec![0..2, 2..4], "index bytes bound too");
        assert!(groups(&[], 100, 100).is_empty());
    }

    #[test]
    fn a_group_never_spans_more_offsets_than_a_relative_offset_holds() {
        let far = i64::from(i32::MAX);
        let sources = [seg(1, 0, 10), seg(1, 10, far), seg(1, far, far + 5)];
        assert_eq!(groups(&sources, 1_000, 1_000), vec![0..2, 2..3]);
    }

    #[test]
    fn dirtiness_counts_whole_segments() {
        let d = Dirtiness { clean_bytes: 300, dirty_bytes: 100 };
        assert!((d.ratio() - 0.25).abs() < 1e-9);
        assert_eq!(Dirtiness::default().ratio(), 0.0);
    }
}
