//! One segment of a partition log: a `.log` file of whole batches starting at a base offset, and
//! its sparse indexes (see [`super::index`]).
//!
//! The segment itself does no locking; the [`super::Log`] owns every segment and changes its
//! metadata only under its state lock, with file I/O done outside it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::batch::{BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD_BYTES, BatchHeader};
use super::index::{self, OFFSET_ENTRY_BYTES, OffsetEntry, TIME_ENTRY_BYTES, TimeEntry};
use super::sealed::IndexFile;
use crate::io::{Disk, File};
use crate::model::Offset;

/// Extension of a segment's data file.
pub const LOG_EXT: &str = "log";
/// Extension of a segment's offset index.
pub const INDEX_EXT: &str = "index";
/// Extension of a segment's time index.
pub const TIME_INDEX_EXT: &str = "timeindex";

/// `00000000000000000042.log` for base offset 42, as Kafka names it.
pub fn file_name(base: Offset, ext: &str) -> String {
    format!("{:020}.{ext}", base.0)
}

/// The base offset and extension of a segment file name, if it is one.
pub fn parse_file_name(name: &str) -> Option<(Offset, &str)> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((Offset(stem.parse().ok()?), ext))
}

/// Where a segment's offsets are indexed.
pub(crate) enum SegmentIndex {
    /// The active segment: entries in memory, written out when sealed or checkpointed.
    Active(ActiveIndex),
    /// A sealed segment: entries searched in the index files.
    Sealed(SealedIndex),
}

/// The in-memory index of the active segment.
#[derive(Default, Clone)]
pub(crate) struct ActiveIndex {
    pub(crate) offsets: Vec<OffsetEntry>,
    pub(crate) times: Vec<TimeEntry>,
    /// Log bytes appended since the last offset entry.
    pub(crate) bytes_since_entry: u64,
    /// Where the last batch recorded starts (none after bytes not walked): an entry for it is
    /// added if the next batch leaves a gap (see [`Segment::record_batch`]).
    pub(crate) last_batch: Option<OffsetEntry>,
}

/// The on-disk index of a sealed segment, opened only for lookups (see [`super::sealed`]; files
/// may be absent: lookups then scan from 0).
pub(crate) struct SealedIndex {
    pub(crate) offsets: Arc<IndexFile>,
    pub(crate) times: Arc<IndexFile>,
}

impl SealedIndex {
    /// The index files of the segment at `base` in `dir`, of the given lengths.
    pub(crate) fn named(dir: &Path, base: Offset, (offsets, times): (u64, u64)) -> SealedIndex {
        SealedIndex {
            offsets: IndexFile::new(path(dir, base, INDEX_EXT), offsets),
            times: IndexFile::new(path(dir, base, TIME_INDEX_EXT), times),
        }
    }
}

/// One segment.
pub(crate) struct Segment {
    pub(crate) base: Offset,
    pub(crate) log: Arc<dyn File>,
    /// Bytes of whole, published batches.
    pub(crate) size: u64,
    /// One past the last offset of the last batch (the base offset when empty).
    pub(crate) next_offset: Offset,
    /// Largest batch max-timestamp, and the base offset of the batch holding it (−1: none).
    pub(crate) max_timestamp: i64,
    pub(crate) max_timestamp_batch: Offset,
    /// Wall time of the first append, for `segment.ms` (None: empty or recovered).
    pub(crate) first_append_wall_ms: Option<i64>,
    pub(crate) index: SegmentIndex,
}

impl Segment {
    /// A new, empty active segment.
    pub(crate) fn new_active(base: Offset, log: Arc<dyn File>) -> Segment {
        Segment {
            base,
            log,
            size: 0,
            next_offset: base,
            max_timestamp: -1,
            max_timestamp_batch: base,
            first_append_wall_ms: None,
            index: SegmentIndex::Active(ActiveIndex::default()),
        }
    }

    /// Offset relative to the base, if it fits the index format.
    pub(crate) fn relative(&self, offset: Offset) -> Option<u32> {
        u32::try_from(offset.0.checked_sub(self.base.0)?).ok()
    }

    /// Records a batch written at `position` (the segment's current end). Where its base offset
    /// does not continue the batch before it (a gap compaction left), both get an offset entry,
    /// whatever the interval. A batch's base offset lies outside its CRC; in a run of batches
    /// that continue each other's offsets, each vouches for the next, and a read that walks
    /// past a damaged batch believes the batches after it only if they chain exactly to the
    /// next entry (see [`super::walk::walk_past`]). A gap breaks the chain, so the entries on
    /// either side of it anchor the runs instead: without them a damaged batch in a compacted
    /// segment cost the reads of every intact batch after it to the segment's end. Entries
    /// grow to at most two per gap.
    pub(crate) fn record_batch(
        &mut self,
        header: &BatchHeader,
        position: u64,
        index_interval_bytes: u64,
    ) {
        let len = header.total_bytes() as u64;
        debug_assert_eq!(position, self.size, "batches are appended at the end");
        let relative = self.relative(Offset(header.base_offset()));
        let gap = position > 0 && header.base_offset() != self.next_offset.0;
        // The largest timestamp up to the batch before this one, for the entry before a gap.
        let max_before = if gap { self.max_time_entry() } else { None };
        if let SegmentIndex::Active(active) = &mut self.index {
            if gap {
                if let Some(before) = active.last_batch
                    && active.offsets.last().is_none_or(|e| e.relative < before.relative)
                {
                    // With a time entry if the largest timestamp grew, as every offset entry
                    // has (see `ActiveIndex::add`): a cut or a recovery that resumes at an
                    // entry takes the largest timestamp below it from the time entries.
                    active.offsets.push(before);
                    if let Some(max) = max_before {
                        active.push_time(max);
                    }
                }
                active.bytes_since_entry = u64::MAX;
            }
            active.last_batch = match (relative, u32::try_from(position)) {
                (Some(relative), Ok(position)) => Some(OffsetEntry { relative, position }),
                _ => None,
            };
        }
        if header.max_timestamp() > self.max_timestamp {
            self.max_timestamp = header.max_timestamp();
            self.max_timestamp_batch = Offset(header.base_offset());
        }
        let max = self.max_time_entry();
        if let (SegmentIndex::Active(active), Some(relative), Ok(position)) =
            (&mut self.index, relative, u32::try_from(position))
        {
            active.add(relative, position, len, max, index_interval_bytes);
        }
        self.size = position + len;
        self.next_offset = Offset(header.last_offset() + 1);
    }

    /// The segment's largest timestamp so far, as a time entry for the batch that holds it.
    fn max_time_entry(&self) -> Option<TimeEntry> {
        let relative = self.relative(self.max_timestamp_batch)?;
        Some(TimeEntry { timestamp: self.max_timestamp, relative })
    }

    /// Goes on at byte `position`, where a batch at `offset` starts, past bytes not walked (a
    /// damaged batch, or a prefix taken from the index): the next batch recorded gets an index
    /// entry of its own.
    pub(crate) fn skip_to(&mut self, position: u64, offset: Offset) {
        self.size = position;
        self.next_offset = offset;
        if let SegmentIndex::Active(active) = &mut self.index {
            active.bytes_since_entry = u64::MAX;
            active.last_batch = None;
        }
    }

    /// The index to write out when this segment is sealed: the active one with a last time
    /// entry for the segment's largest timestamp, which a reopen reads back as that timestamp
    /// (batches after the last due entry may have raised it). `None` if already sealed.
    pub(crate) fn index_to_seal(&self) -> Option<ActiveIndex> {
        let SegmentIndex::Active(active) = &self.index else { return None };
        let mut index = active.clone();
        if let Some(max) = self.max_time_entry() {
            index.push_time(max);
        }
        Some(index)
    }

    /// Bytes the offset index of this segment takes (for `segment.index.bytes`).
    pub(crate) fn index_bytes(&self) -> u64 {
        match &self.index {
            SegmentIndex::Active(a) => (a.offsets.len() * OFFSET_ENTRY_BYTES) as u64,
            SegmentIndex::Sealed(s) => s.offsets.len(),
        }
    }

    /// The segment is leaving the log (removed, cut or replaced): its index files are not to be
    /// opened by name any more (see [`super::sealed`]). Call before its files change on disk.
    pub(crate) fn retire(&self) {
        if let SegmentIndex::Sealed(sealed) = &self.index {
            sealed.offsets.retire();
            sealed.times.retire();
        }
    }

    /// Retires the index files and closes the log's handles to them (see [`IndexFile::release`]).
    pub(crate) fn release(&self) {
        if let SegmentIndex::Sealed(sealed) = &self.index {
            sealed.offsets.release();
            sealed.times.release();
        }
    }
}

impl ActiveIndex {
    /// Indexes a batch at `position` (`relative` to the base, `len` bytes), after which the
    /// segment's largest timestamp is `max`: an offset entry when one is due, and with it a
    /// time entry for `max` if it is newer than the last one (so the time index lags the
    /// largest timestamp by at most one interval; sealing closes the gap, see
    /// [`Segment::index_to_seal`]).
    fn add(
        &mut self,
        relative: u32,
        position: u32,
        len: u64,
        max: Option<TimeEntry>,
        interval: u64,
    ) {
        let due = self.offsets.is_empty() || self.bytes_since_entry >= interval;
        if due {
            self.offsets.push(OffsetEntry { relative, position });
            self.bytes_since_entry = 0;
        }
        if let Some(max) = max
            && (due || self.times.is_empty())
        {
            self.push_time(max);
        }
        self.bytes_since_entry += len;
    }

    /// Adds a time entry for `max` if it is newer than the last one.
    fn push_time(&mut self, max: TimeEntry) {
        if max.timestamp > self.times.last().map_or(-1, |t| t.timestamp) {
            self.times.push(max);
        }
    }

    /// Where to start walking the batches wholly below `relative` (a cut there): at the entry
    /// before the last one at or below it. The batch at the last one may hold `relative`, while
    /// the one before starts a batch that ends before the last one's begins. Up to that entry
    /// the index vouches for the largest timestamp too: an offset entry comes with a time entry
    /// whenever the largest timestamp grew since the last one, so the last time entry up to it
    /// holds the largest timestamp of every batch up to it. `None` without two such entries.
    pub(crate) fn kept_below(&self, relative: u32) -> Option<KeptPrefix> {
        let at_or_below = self.offsets.partition_point(|e| e.relative <= relative);
        let start_ix = at_or_below.checked_sub(2)?;
        let start = *self.offsets.get(start_ix)?;
        let times: Vec<TimeEntry> =
            self.times.iter().copied().take_while(|t| t.relative <= start.relative).collect();
        let max = times.last().copied();
        let offsets = self.offsets.get(..start_ix)?.to_vec();
        // The batch at `start` is walked again and gets its entry back (see `Segment::skip_to`).
        let index = ActiveIndex { offsets, times, bytes_since_entry: 0, last_batch: None };
        Some(KeptPrefix { index, start, max })
    }

    /// The entries up to (not including) byte `position`, for resuming after a checkpoint.
    pub(crate) fn truncated_to(&self, position: u64) -> ActiveIndex {
        let offsets: Vec<OffsetEntry> =
            self.offsets.iter().copied().filter(|e| u64::from(e.position) < position).collect();
        let last_relative = offsets.last().map(|e| e.relative);
        let times = self
            .times
            .iter()
            .copied()
            .filter(|t| last_relative.is_some_and(|r| t.relative <= r))
            .collect();
        ActiveIndex { offsets, times, bytes_since_entry: 0, last_batch: None }
    }
}

/// Where a walk that keeps every batch of a segment wholly below an offset may start, from the
/// segment's index: see [`ActiveIndex::kept_below`].
pub(crate) struct KeptPrefix {
    /// The entries before the walk's start; its first batch gets an entry of its own.
    pub(crate) index: ActiveIndex,
    /// Where the walk starts: a batch, and every one before it, wholly below the offset.
    pub(crate) start: OffsetEntry,
    /// The largest timestamp up to and including the batch at `start`, and the batch that
    /// first reached it.
    pub(crate) max: Option<TimeEntry>,
}

/// A sealed segment's whole index, read from its files to be kept in memory (the segment is
/// becoming the active one again), or `None` if the files are implausible for a log of
/// `log_bytes` bytes or their reads never agree (the caller then walks the log instead). What is
/// kept is believed, so only bytes several reads agree on will do (see [`read_agreed`]).
pub(crate) async fn read_index_files(
    offsets: &dyn File,
    times: &dyn File,
    log_bytes: u64,
) -> io::Result<Option<ActiveIndex>> {
    let (Some(offset_bytes), Some(time_bytes)) = (
        read_agreed(offsets, 0, offsets.len() as usize).await?,
        read_agreed(times, 0, times.len() as usize).await?,
    ) else {
        return Ok(None);
    };
    let (Some(offsets), Some(times)) = (
        index::decode_offsets_checked(&offset_bytes, log_bytes),
        index::decode_times_checked(&time_bytes),
    ) else {
        return Ok(None);
    };
    Ok(Some(ActiveIndex { offsets, times, bytes_since_entry: 0, last_batch: None }))
}

/// The largest index entry at or before `relative` in an index file, found by binary search
/// with small reads (sealed segments are not held in memory).
pub(crate) async fn sealed_floor(
    file: &dyn File,
    relative: u32,
) -> io::Result<Option<OffsetEntry>> {
    Ok(sealed_split(file, |e| e.relative <= relative).await?.0)
}

/// The first index entry past byte `position` in an index file, found the same way (an entry a
/// misread spoils is caught by whoever checks it against the log).
pub(crate) async fn sealed_entry_after(
    file: &dyn File,
    position: u64,
) -> io::Result<Option<OffsetEntry>> {
    Ok(sealed_split(file, |e| u64::from(e.position) <= position).await?.1)
}

/// Binary search of an index file for where `before` stops holding (it holds for a prefix of
/// the entries, which increase): the last entry it holds for and the first it does not.
async fn sealed_split(
    file: &dyn File,
    before: impl Fn(OffsetEntry) -> bool,
) -> io::Result<(Option<OffsetEntry>, Option<OffsetEntry>)> {
    let count = file.len() / OFFSET_ENTRY_BYTES as u64;
    let (mut lo, mut hi) = (0u64, count);
    let (mut last, mut first) = (None, None);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let bytes = file.read_at(mid * OFFSET_ENTRY_BYTES as u64, OFFSET_ENTRY_BYTES).await?;
        let Some(entry) = index::decode_offset(&bytes) else {
            break;
        };
        if before(entry) {
            last = Some(entry);
            lo = mid + 1;
        } else {
            first = Some(entry);
            hi = mid;
        }
    }
    Ok((last, first))
}

/// The last time entry older than `timestamp` in a time index file, by binary search: where a
/// scan for the first record at or after `timestamp` may start. An entry records the segment's
/// largest timestamp up to a batch and that batch, the first to reach it; every batch before it
/// is older still, so nothing before it can be the record wanted. (The first entry at or after
/// `timestamp` would not do: the batches between it and the entry before may hold the record.)
/// Unlike an offset entry, which a read checks against the batch it names, a time entry is
/// believed as read (a wrong one would skip records), so each one is read as [`read_agreed`]
/// does.
pub(crate) async fn sealed_time_floor(
    file: &dyn File,
    timestamp: i64,
) -> io::Result<Option<TimeEntry>> {
    let count = file.len() / TIME_ENTRY_BYTES as u64;
    let (mut lo, mut hi) = (0u64, count);
    let mut best = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let at = mid * TIME_ENTRY_BYTES as u64;
        let read = read_agreed(file, at, TIME_ENTRY_BYTES).await?;
        let Some(entry) = read.and_then(|bytes| index::decode_time(&bytes)) else {
            // Reads that never agree: no hint, the caller scans the segment from its start.
            return Ok(None);
        };
        if entry.timestamp < timestamp {
            best = Some(entry);
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(best)
}

/// Reads that must agree, in a row, before [`read_agreed`] believes them.
pub const AGREEING_READS: usize = 3;
/// Reads [`read_agreed`] makes at most.
pub const AGREEMENT_ATTEMPTS: usize = 2 * AGREEING_READS;

/// Reads `len` bytes at `position` until [`AGREEING_READS`] reads in a row return the same
/// bytes, at most [`AGREEMENT_ATTEMPTS`] times; `None` if they never did. For index bytes that
/// are believed without being checked against the log: an index has no checksum, and a read
/// can return a flipped bit — a wrong belief then needs the same flip in every one of them.
pub(crate) async fn read_agreed(
    file: &dyn File,
    position: u64,
    len: usize,
) -> io::Result<Option<Bytes>> {
    let mut last = file.read_at(position, len).await?;
    let mut agreeing = 1;
    for _ in 1..AGREEMENT_ATTEMPTS {
        if agreeing == AGREEING_READS {
            break;
        }
        let again = file.read_at(position, len).await?;
        if again == last {
            agreeing += 1;
        } else {
            (last, agreeing) = (again, 1);
        }
    }
    Ok((agreeing == AGREEING_READS).then_some(last))
}

/// Writes an index's files beside the segment (temp file, sync, rename). The caller syncs the
/// folder. Returns the sealed index they make (the files are closed).
pub(crate) async fn write_index_files(
    disk: &dyn Disk,
    dir: &Path,
    base: Offset,
    active: &ActiveIndex,
) -> io::Result<SealedIndex> {
    let offsets_len = write_replacing(
        disk,
        dir,
        &file_name(base, INDEX_EXT),
        index::encode_offsets(&active.offsets),
    )
    .await?;
    let times_len = write_replacing(
        disk,
        dir,
        &file_name(base, TIME_INDEX_EXT),
        index::encode_times(&active.times),
    )
    .await?;
    Ok(SealedIndex::named(dir, base, (offsets_len, times_len)))
}

/// Writes `contents` as `dir/name` (temp file, sync, rename); returns its length.
async fn write_replacing(
    disk: &dyn Disk,
    dir: &Path,
    name: &str,
    contents: Bytes,
) -> io::Result<u64> {
    let temp = dir.join(format!("{name}.tmp"));
    let len = contents.len() as u64;
    let file = disk.create(&temp).await?;
    file.write_at(0, contents).await?;
    file.sync_data().await?;
    disk.rename(&temp, &dir.join(name)).await?;
    Ok(len)
}

/// Path of a segment file.
pub(crate) fn path(dir: &Path, base: Offset, ext: &str) -> PathBuf {
    dir.join(file_name(base, ext))
}

/// Total length of the batch framed at the start of `bytes`, from its length field, if the
/// field is present and plausible.
pub(crate) fn frame_len(bytes: &[u8]) -> Option<usize> {
    let field: [u8; 4] = bytes.get(8..12)?.try_into().ok()?;
    let len = usize::try_from(i32::from_be_bytes(field)).ok()?;
    (len + BATCH_LOG_OVERHEAD_BYTES >= BATCH_HEADER_BYTES).then_some(len + BATCH_LOG_OVERHEAD_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(offsets: &[(u32, u32)], times: &[(i64, u32)]) -> ActiveIndex {
        ActiveIndex {
            offsets: offsets
                .iter()
                .map(|&(relative, position)| OffsetEntry { relative, position })
                .collect(),
            times: times
                .iter()
                .map(|&(timestamp, relative)| TimeEntry { timestamp, relative })
                .collect(),
            bytes_since_entry: 0,
            last_batch: None,
        }
    }

    #[test]
    fn a_cut_keeps_the_index_up_to_the_entry_before_the_last_one_below_it() {
        let full = index(&[(0, 0), (10, 100), (20, 200), (30, 300)], &[(5, 0), (9, 12), (11, 25)]);
        // Offset 25 may lie in the batch at entry 20: the walk starts at entry 10.
        let kept = full.kept_below(25).expect("two entries at or below 25");
        assert_eq!(kept.start, OffsetEntry { relative: 10, position: 100 });
        assert_eq!(kept.index.offsets, vec![OffsetEntry { relative: 0, position: 0 }]);
        // Time entries up to the start's batch only: batch 12 reached 9 after it.
        assert_eq!(kept.index.times, vec![TimeEntry { timestamp: 5, relative: 0 }]);
        assert_eq!(kept.max, Some(TimeEntry { timestamp: 5, relative: 0 }));
        let kept = full.kept_below(30).expect("entries at or below 30");
        assert_eq!(kept.start, OffsetEntry { relative: 20, position: 200 });
        assert_eq!(kept.max, Some(TimeEntry { timestamp: 9, relative: 12 }));
        // Fewer than two entries at or below: walk from the start.
        assert!(full.kept_below(9).is_none());
        assert!(full.kept_below(0).is_none());
    }
}
