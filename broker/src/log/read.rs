//! Reading: whole batches from the one holding the requested offset, bounded by a byte budget
//! and an upper offset (the high watermark), served as stored — never decoded — but every batch
//! checked against its CRC before it leaves, so a corrupt disk is reported, not forwarded.
//!
//! A read walks from an index entry to the batch it wants, checking each batch it passes. A
//! damaged batch on the way (a latent sector error) fails only the reads of its own offsets: a
//! read of a later one walks past it, from the batch after it (where the damaged batch's length
//! leads, checked against its header, or else the first intact batch found), if the batches
//! from there chain to the next index entry or the segment's end (`walk::walk_past`).

use std::ops::Bound;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::batch::BatchError;
use super::epochs::EpochCache;
use super::error::ReadError;
use super::index::OffsetEntry;
use super::partition_log::{Log, State};
use super::records;
use super::sealed::IndexFile;
use super::segment::{self, SegmentIndex};
use super::split;
use super::walk::{Epochs, WalkStop, Walker, states_base_at, walk_past};
use crate::io::File;
use crate::model::Offset;

/// Bytes read beyond a reader's budget, to cover the distance from the index entry found to
/// the batch wanted (`index.interval.bytes` plus a header).
pub const INDEX_SLACK_BYTES: usize = 8 << 10;

/// What one read may return.
#[derive(Clone, Copy)]
struct Window<'a> {
    start: Offset,
    max_bytes: usize,
    upper: Offset,
    dense: bool,
    epochs: &'a EpochCache,
}

/// What a read returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole batches, as stored (possibly empty).
    pub records: Bytes,
    /// The offset after the last batch returned (the requested offset if none).
    pub next_offset: Offset,
    /// The log start offset at the time of the read.
    pub log_start: Offset,
    /// The log end offset at the time of the read.
    pub log_end: Offset,
}

/// Where a read starts within one segment.
pub(super) struct Plan {
    pub(super) base: Offset,
    pub(super) log: Arc<dyn File>,
    pub(super) end: u64,
    /// The offset after the segment's last batch, as `end` was taken.
    pub(super) end_offset: Offset,
    index: Lookup,
}

/// Why the read of one segment stopped short.
enum SegmentStop {
    /// A bad batch at `position`, starting at `offset`, before any batch the read wants.
    Damaged { position: u64, offset: Offset, error: BatchError },
    /// Anything else.
    Failed(ReadError),
}

impl SegmentStop {
    fn into_error(self, start: Offset, resume: Option<Offset>) -> ReadError {
        match self {
            SegmentStop::Damaged { error, .. } => {
                ReadError::Corrupt { offset: start, cause: error, resume }
            }
            SegmentStop::Failed(e) => e,
        }
    }
}

/// Where a segment's time index says a timestamp lookup may start.
enum TimeHint {
    /// A sealed segment's time index file (if it cannot be opened: from the segment's start).
    File(Arc<IndexFile>),
    /// The entry the active segment's index in memory gives.
    Entry(Option<super::index::TimeEntry>),
}

enum Lookup {
    /// From the in-memory index: a position and the base offset of the batch there.
    Position(u64, Offset),
    /// A sealed segment's offset index file.
    File(Arc<IndexFile>),
}

impl Log {
    /// Reads batches from the one holding `start`, at most `max_bytes` of them (but always the
    /// first whole batch, however large, so a consumer can make progress), stopping before any
    /// batch that reaches `upper` (exclusive; the high watermark).
    pub async fn read(
        &self,
        start: Offset,
        max_bytes: usize,
        upper: Offset,
    ) -> Result<ReadResult, ReadError> {
        let (log_start, log_end, epochs) = {
            let state = self.state();
            state.check_online()?;
            (state.log_start, state.log_end, state.epochs.clone())
        };
        if start < log_start || start > log_end {
            return Err(ReadError::OutOfRange { offset: start, log_start, log_end });
        }
        let upper = upper.min(log_end);
        let dense = self.dense();
        let mut from = start;
        while from < upper {
            let Some(plan) = self.plan(from) else { break };
            let (position, expected) = plan.start_position(self, from).await?;
            let (log, end) = (&*plan.log, plan.end);
            let window = Window { start: from, max_bytes, upper, dense, epochs: &epochs };
            let from_entry = (position, expected) != (0, plan.base);
            let mut found = read_segment(log, (position, expected, from_entry), end, &window).await;
            if found.is_err() && from_entry {
                // The index is only a hint and may itself have been misread (or point to the
                // segment's first byte with another base offset): before reporting corruption,
                // walk the segment from its start.
                found = read_segment(log, (0, plan.base, false), end, &window).await;
            }
            // A damaged batch below the one wanted: walk past it where the batches after it
            // chain to the next index entry (or the segment's end). Each pass starts further
            // on, so this ends. If `from` is in the damaged batch, the error says where reads
            // go on.
            let mut resume = None;
            while let Err(SegmentStop::Damaged { position, offset, .. }) = &found {
                let damaged = (*position, *offset);
                let (until, until_offset) = self.chain_end(&plan, damaged.0).await?;
                match walk_past(log, damaged, (until, until_offset), Some(&epochs)).await? {
                    Some((at, next)) if next <= from => {
                        found = read_segment(log, (at, next, true), end, &window).await;
                    }
                    Some((_, next)) => {
                        resume = Some(next);
                        break;
                    }
                    None => break,
                }
            }
            let found = found.map_err(|stop| stop.into_error(from, resume))?;
            if let Some((records, next)) = found {
                return Ok(ReadResult { records, next_offset: next, log_start, log_end });
            }
            // Nothing at or after `from` in this segment (compaction gaps): try the next one.
            match self.state().segments.range((Bound::Excluded(plan.base), Bound::Unbounded)).next()
            {
                Some((&next_base, _)) => from = from.max(next_base),
                None => break,
            }
        }
        Ok(ReadResult { records: Bytes::new(), next_offset: start, log_start, log_end })
    }

    /// Where the batches after the damaged one at byte `damaged` of the planned segment must
    /// chain to for a read to walk past it: the first index entry after it, else the segment's
    /// end as planned.
    pub(super) async fn chain_end(
        &self,
        plan: &Plan,
        damaged: u64,
    ) -> Result<(u64, Offset), ReadError> {
        let at =
            |e: OffsetEntry| (u64::from(e.position), Offset(plan.base.0 + i64::from(e.relative)));
        let within = |e: &OffsetEntry| u64::from(e.position) < plan.end;
        let file = {
            let state = self.state();
            let seg = state.segments.get(&plan.base).filter(|s| Arc::ptr_eq(&s.log, &plan.log));
            match seg.map(|s| &s.index) {
                Some(SegmentIndex::Active(active)) => {
                    let after =
                        active.offsets.partition_point(|e| u64::from(e.position) <= damaged);
                    let entry = active.offsets.get(after).copied().filter(within);
                    return Ok(entry.map_or((plan.end, plan.end_offset), at));
                }
                Some(SegmentIndex::Sealed(sealed)) => Some(Arc::clone(&sealed.offsets)),
                None => None,
            }
        };
        let file = match file {
            Some(index) => self.open_index(&index).await,
            None => None,
        };
        let entry = match file {
            Some(file) => segment::sealed_entry_after(&*file, damaged).await?.filter(within),
            None => None,
        };
        // Read from a file, the entry may have been misread (a bit flipped in transit): a walk
        // that took a wrong offset from it for where the damage ends would go on there,
        // passing over intact batches or beyond the log's end. It is believed only where the
        // batch at its position states its offset; else the segment's end, kept in memory,
        // will do.
        let entry = match entry.map(at) {
            Some(end) if states_base_at(&*plan.log, end).await? => Some(end),
            _ => None,
        };
        Ok(entry.unwrap_or((plan.end, plan.end_offset)))
    }

    pub(super) fn plan(&self, offset: Offset) -> Option<Plan> {
        let state: std::sync::MutexGuard<'_, State> = self.state();
        let seg = state.segment_for(offset).or_else(|| state.segments.values().next())?;
        let relative = seg.relative(offset.max(seg.base)).unwrap_or(u32::MAX);
        let index = match &seg.index {
            SegmentIndex::Active(active) => {
                match super::index::floor_offset(&active.offsets, relative) {
                    Some(e) => Lookup::Position(
                        u64::from(e.position),
                        Offset(seg.base.0 + i64::from(e.relative)),
                    ),
                    None => Lookup::Position(0, seg.base),
                }
            }
            SegmentIndex::Sealed(sealed) => Lookup::File(Arc::clone(&sealed.offsets)),
        };
        let (base, end, end_offset) = (seg.base, seg.size, seg.next_offset);
        Some(Plan { base, log: Arc::clone(&seg.log), end, end_offset, index })
    }

    /// The offset of the first record whose timestamp is at or after `timestamp`, with that
    /// record's timestamp (ListOffsets by time). `None` if every record is older.
    pub async fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(Offset, i64)>, ReadError> {
        /// A segment that may hold the timestamp: base, log, size, where its time index says
        /// a scan may start.
        type Candidate = (Offset, Arc<dyn File>, u64, TimeHint);
        let candidates: Vec<Candidate> = {
            let state = self.state();
            state.check_online()?;
            state
                .segments
                .values()
                .filter(|s| s.max_timestamp >= timestamp)
                .map(|s| {
                    let hint = match &s.index {
                        SegmentIndex::Sealed(sealed) => TimeHint::File(Arc::clone(&sealed.times)),
                        SegmentIndex::Active(active) => {
                            TimeHint::Entry(super::index::floor_time(&active.times, timestamp))
                        }
                    };
                    (s.base, Arc::clone(&s.log), s.size, hint)
                })
                .collect()
        };
        let log_start = self.log_start_offset();
        let (dense, epochs) = (self.dense(), self.epochs());
        for (base, log, end, hint) in candidates {
            let entry = match hint {
                TimeHint::File(index) => match self.open_index(&index).await {
                    Some(times) => segment::sealed_time_floor(&*times, timestamp).await?,
                    None => None,
                },
                TimeHint::Entry(entry) => entry,
            };
            let from = entry.map_or(base, |e| Offset(base.0 + i64::from(e.relative)));
            let plan = self.plan(from.max(log_start));
            let start = match plan {
                // The same segment file (a clean may have swapped in another with its base).
                Some(plan) if plan.base == base && Arc::ptr_eq(&plan.log, &log) => {
                    plan.start_position(self, from).await?
                }
                _ => (0, base),
            };
            let scan = Scan { end, timestamp, log_start, dense, epochs: &epochs };
            let from_entry = start != (0, base);
            let mut found =
                first_record_at_or_after(&*log, (start.0, start.1, from_entry), &scan).await;
            if found.is_err() && from_entry {
                // The offset index is only a hint: walk the segment from its start.
                found = first_record_at_or_after(&*log, (0, base, false), &scan).await;
            }
            if let Some(found) = found? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The offset and timestamp of the record with the largest timestamp (the earliest such
    /// record if several share it, as in Kafka), for ListOffsets' MAX_TIMESTAMP. A segment's
    /// batch holding it may lie below the log start (DeleteRecords inside the segment): the
    /// next segment holding it answers then.
    pub async fn offset_of_max_timestamp(&self) -> Result<Option<(Offset, i64)>, ReadError> {
        let Some((max, batches)) = self.max_timestamp() else {
            return Ok(None);
        };
        for batch_base in batches {
            let start = batch_base.max(self.log_start_offset());
            let result = self.read(start, 1, Offset(i64::MAX)).await?;
            let Some(first) = split::split_batches(&result.records).next() else {
                continue;
            };
            let first = first.map_err(|cause| ReadError::corrupt(batch_base, cause))?;
            let records = records::record_iter(&first)
                .map_err(|cause| ReadError::corrupt(batch_base, cause))?;
            for record in records {
                let record = record.map_err(|cause| ReadError::corrupt(batch_base, cause))?;
                if record.timestamp >= max && record.offset >= start.0 {
                    return Ok(Some((Offset(record.offset), record.timestamp)));
                }
            }
        }
        Ok(None)
    }
}

impl Plan {
    /// A batch boundary at or before `offset`, and the base offset of the batch there.
    pub(super) async fn start_position(
        &self,
        log: &Log,
        offset: Offset,
    ) -> Result<(u64, Offset), ReadError> {
        let relative = u32::try_from(offset.0.saturating_sub(self.base.0)).unwrap_or(u32::MAX);
        let entry = match &self.index {
            Lookup::Position(position, expected) => return Ok((*position, *expected)),
            Lookup::File(index) => match log.open_index(index).await {
                Some(file) => segment::sealed_floor(&*file, relative).await?,
                None => None,
            },
        };
        // An entry that cannot be right (a misread) is ignored: start from the segment's start.
        let plausible =
            entry.filter(|e| u64::from(e.position) < self.end && e.relative <= relative);
        Ok(plausible.map_or((0, self.base), |e| {
            (u64::from(e.position), Offset(self.base.0 + i64::from(e.relative)))
        }))
    }
}

/// Reads batches of one segment from `position` (a batch boundary, where a batch with base
/// offset `expected` starts — exactly that one if `from_entry`, an index entry's — at or before
/// the one holding `start`). Returns the batches and the offset after them, or `None` if the
/// segment holds no batch reaching `start` below `upper`.
async fn read_segment(
    log: &dyn File,
    (position, expected, from_entry): (u64, Offset, bool),
    end: u64,
    window: &Window<'_>,
) -> Result<Option<(Bytes, Offset)>, SegmentStop> {
    let Window { start, max_bytes, upper, dense, epochs } = *window;
    let chunk = max_bytes.saturating_add(INDEX_SLACK_BYTES);
    let epochs = Epochs::Verify(epochs.clone());
    let walker = Walker::new(log, position, end, expected, dense, epochs);
    let mut walker = walker.starting_at_entry(from_entry).with_chunk(chunk).frames_only();
    let mut pieces: Vec<Bytes> = Vec::new();
    let (mut first, mut taken, mut next) = (0u64, 0usize, start);
    loop {
        if !pieces.is_empty() {
            // Whether the next batch is wanted shows in its header: decide before reading the
            // whole of it (a batch as large as the budget would otherwise be read, checked and
            // dropped on every read, and the batches kept copied out of two buffers).
            match walker.peek().await {
                Ok(Some(next)) if taken + next.total_bytes() > max_bytes => break,
                Ok(Some(next)) if next.last_offset() >= upper.0 => break,
                Ok(_) => {}
                // Return what came before; the next read starts there and reports it.
                Err(_) => break,
            }
        }
        let walked = match walker.next().await {
            Ok(Some(walked)) => walked,
            Ok(None) => break,
            // Return what came before a bad batch; the next read starts there and reports it.
            Err(_) if !pieces.is_empty() => break,
            Err(WalkStop::Io(e)) => return Err(SegmentStop::Failed(e.into())),
            Err(WalkStop::Invalid { position, error }) => {
                return Err(SegmentStop::Damaged { position, offset: walker.expected(), error });
            }
        };
        let header = walked.header;
        if header.last_offset() < start.0 {
            continue;
        }
        let over_budget = !pieces.is_empty() && taken + walked.bytes.len() > max_bytes;
        if header.last_offset() >= upper.0 || over_budget {
            break;
        }
        if pieces.is_empty() {
            first = walked.position;
        }
        taken += walked.bytes.len();
        next = Offset(header.last_offset() + 1);
        pieces.push(walked.bytes);
        if taken >= max_bytes {
            break;
        }
    }
    if pieces.is_empty() {
        return Ok(None);
    }
    let records = match walker.span(first, first + taken as u64) {
        Some(contiguous) => contiguous,
        None => concat(&pieces, taken),
    };
    Ok(Some((records, next)))
}

fn concat(pieces: &[Bytes], len: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(len);
    for piece in pieces {
        out.extend_from_slice(piece);
    }
    out.freeze()
}

/// What [`first_record_at_or_after`] looks for, and how it vouches for what it reads.
struct Scan<'a> {
    /// The segment's size.
    end: u64,
    timestamp: i64,
    log_start: Offset,
    /// Base offsets continue exactly: a batch whose base offset (outside its CRC) breaks the
    /// sequence is a bad read, not an answer.
    dense: bool,
    epochs: &'a EpochCache,
}

/// Scans one segment from `position` (where a batch at `expected` starts — exactly that one if
/// `from_entry`, an index entry's) for the first record with a timestamp at or after the one
/// wanted.
async fn first_record_at_or_after(
    log: &dyn File,
    (position, expected, from_entry): (u64, Offset, bool),
    scan: &Scan<'_>,
) -> Result<Option<(Offset, i64)>, ReadError> {
    let Scan { end, timestamp, log_start, dense, epochs } = *scan;
    let epochs = Epochs::Verify(epochs.clone());
    let walker = Walker::new(log, position, end, expected, dense, epochs);
    let mut walker = walker.starting_at_entry(from_entry);
    loop {
        let walked = match walker.next().await {
            Ok(Some(walked)) => walked,
            Ok(None) => return Ok(None),
            Err(WalkStop::Io(e)) => return Err(e.into()),
            Err(WalkStop::Invalid { error, .. }) => {
                return Err(ReadError::corrupt(expected, error));
            }
        };
        let header = walked.header;
        if header.max_timestamp() < timestamp || header.last_offset() < log_start.0 {
            continue;
        }
        let corrupt = |cause| ReadError::corrupt(Offset(header.base_offset()), cause);
        for record in records::record_iter(&walked.bytes).map_err(corrupt)? {
            let record = record.map_err(corrupt)?;
            if record.timestamp >= timestamp && record.offset >= log_start.0 {
                return Ok(Some((Offset(record.offset), record.timestamp)));
            }
        }
    }
}
