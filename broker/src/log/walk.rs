//! Walking the batches of a segment file: the one place stored bytes are turned back into
//! trusted batches, for reads and for recovery alike.
//!
//! Every batch is checked in full before it is believed — framing, CRC-32C, and its base offset
//! against the offset the walk expects (the base offset lies outside the CRC, so only continuity
//! can vouch for it). A batch that fails is read again before it is called corrupt: a read can be
//! transiently wrong, and neither a consumer nor recovery should act on a one-off bad read.

use bytes::Bytes;

use super::batch::{self, BATCH_LOG_OVERHEAD_BYTES, BatchError, BatchHeader};
use super::epochs::EpochCache;
use super::segment::frame_len;
use crate::io::File;
use crate::model::{LeaderEpoch, Offset};

/// How a walk vouches for each batch's leader epoch (outside the CRC).
pub(crate) enum Epochs {
    /// Every epoch must be the one the cache records for the batch's offset.
    Verify(EpochCache),
    /// Recovery: epochs may only grow from this one on, and a growth is believed only if a
    /// second read agrees.
    Learn(LeaderEpoch),
}

impl Epochs {
    /// How a walk checks epochs: against `cache` where it vouches for every stored batch's
    /// epoch (a new epoch is recorded durably before any batch carries it, so a batch that
    /// disagrees is damaged: its epoch lies outside its CRC), else learning from `from` on (the
    /// history was lost, and the walk rebuilds what it can).
    pub(crate) fn vouched_by(cache: Option<&EpochCache>, from: LeaderEpoch) -> Epochs {
        match cache.filter(|c| !c.entries().is_empty()) {
            Some(cache) => Epochs::Verify(cache.clone()),
            None => Epochs::Learn(from),
        }
    }
}

/// Bytes of a batch's base offset, its first field.
const BASE_OFFSET_BYTES: usize = 8;

/// Reads of one batch before it is declared corrupt.
pub const READ_ATTEMPTS: usize = 5;
/// Bytes read at a time when walking a segment.
pub const WALK_CHUNK_BYTES: usize = 256 << 10;

/// What stopped a walk before the end of the segment.
#[derive(Debug)]
pub(crate) enum WalkStop {
    /// The bytes at `position` are not a valid batch, however often they are read.
    Invalid {
        /// Where the bad bytes start.
        position: u64,
        /// What is wrong with them.
        error: BatchError,
    },
    /// The disk failed.
    Io(std::io::Error),
}

/// A cursor over the batches of one segment file.
pub(crate) struct Walker<'a> {
    file: &'a dyn File,
    end: u64,
    buf: Bytes,
    buf_at: u64,
    /// Where offsets may have gaps: a second read of the bytes `buf` holds, against which each
    /// batch's base offset is confirmed (see [`Walker::confirm_base`]).
    second: Bytes,
    cursor: u64,
    expected: Offset,
    /// Whether base offsets must continue exactly (no compaction gaps).
    dense: bool,
    epochs: Epochs,
    chunk: usize,
    /// Whether each record of an uncompressed batch is scanned too, or only the frame, header
    /// and CRC are checked (see [`Walker::frames_only`]).
    scan_records: bool,
    /// Whether the next batch's base offset must be exactly the one expected even where offsets
    /// may have gaps (see [`Walker::starting_at_entry`]).
    exact_next: bool,
}

/// One verified batch.
pub(crate) struct Walked {
    pub(crate) position: u64,
    pub(crate) header: BatchHeader,
    pub(crate) bytes: Bytes,
}

impl<'a> Walker<'a> {
    /// Walks `file` from `position`, where a batch with base offset `expected` starts (at least
    /// `expected` when the log may have compaction gaps: `dense` false), up to byte `end`.
    pub(crate) fn new(
        file: &'a dyn File,
        position: u64,
        end: u64,
        expected: Offset,
        dense: bool,
        epochs: Epochs,
    ) -> Walker<'a> {
        Walker {
            file,
            end,
            buf: Bytes::new(),
            buf_at: position,
            second: Bytes::new(),
            cursor: position,
            expected,
            dense,
            epochs,
            chunk: WALK_CHUNK_BYTES,
            scan_records: true,
            exact_next: false,
        }
    }

    /// Checks framing, header and CRC-32C only, without walking the records inside: for
    /// serving reads. Every stored batch had its records checked when it was appended (or
    /// recovered), and the CRC covers them, so a matching CRC vouches for the same bytes;
    /// fetches then cost a CRC pass, not a decode.
    pub(crate) fn frames_only(mut self) -> Walker<'a> {
        self.scan_records = false;
        self
    }

    /// The walk starts where an index entry points (`exact`): that entry names the exact base
    /// offset of the batch there, so the first batch must have it even where offsets may have
    /// gaps — an entry misread into another batch boundary is then caught, not followed.
    pub(crate) fn starting_at_entry(mut self, exact: bool) -> Walker<'a> {
        self.exact_next = exact;
        self
    }

    /// Reads ahead this many bytes at a time (a reader's budget plus the distance from an
    /// index entry), instead of [`WALK_CHUNK_BYTES`].
    pub(crate) fn with_chunk(mut self, bytes: usize) -> Walker<'a> {
        self.chunk = bytes.max(batch::BATCH_HEADER_BYTES);
        self
    }

    /// The base offset the next batch must have (at least, where offsets may have gaps): where
    /// a bad batch at the cursor starts.
    pub(crate) fn expected(&self) -> Offset {
        self.expected
    }

    /// The bytes from `from` to `to` if the current buffer holds them all (no copy).
    pub(crate) fn span(&self, from: u64, to: u64) -> Option<Bytes> {
        let start = usize::try_from(from.checked_sub(self.buf_at)?).ok()?;
        let end = usize::try_from(to.checked_sub(self.buf_at)?).ok()?;
        (end <= self.buf.len() && start <= end).then(|| self.buf.slice(start..end))
    }

    /// The next verified batch, `None` at the end, or why the walk cannot go on.
    pub(crate) async fn next(&mut self) -> Result<Option<Walked>, WalkStop> {
        if self.cursor >= self.end {
            return Ok(None);
        }
        let mut error = BatchError::NoBatch;
        for attempt in 0..READ_ATTEMPTS {
            if attempt > 0 {
                // Drop the buffer: the next attempt reads the disk again.
                self.buf = Bytes::new();
                self.second = Bytes::new();
            }
            let bytes = match self.frame().await {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(e)) => {
                    error = e;
                    continue;
                }
                Err(io) => return Err(WalkStop::Io(io)),
            };
            let checked = self.check(&bytes);
            if let Ok(header) = &checked {
                match self.confirm_epoch(header).await {
                    Ok(true) => {}
                    Ok(false) => {
                        error = BatchError::Corrupt("leader epoch changed between reads");
                        continue;
                    }
                    Err(io) => return Err(WalkStop::Io(io)),
                }
                match self.confirm_base(header).await {
                    Ok(true) => {}
                    Ok(false) => {
                        error = BatchError::Corrupt("base offset changed between reads");
                        continue;
                    }
                    Err(io) => return Err(WalkStop::Io(io)),
                }
            }
            match checked {
                Ok(header) => {
                    self.exact_next = false;
                    let walked = Walked { position: self.cursor, header, bytes };
                    self.cursor += walked.bytes.len() as u64;
                    self.expected = Offset(header.last_offset() + 1);
                    return Ok(Some(walked));
                }
                Err(e) => error = e,
            }
        }
        Err(WalkStop::Invalid { position: self.cursor, error })
    }

    fn check(&self, bytes: &[u8]) -> Result<BatchHeader, BatchError> {
        let header = if self.scan_records {
            batch::validate(bytes, usize::MAX)?
        } else {
            batch::check_frame(bytes, usize::MAX)?
        };
        let base = header.base_offset();
        let exact = self.dense || self.exact_next;
        let fits = if exact { base == self.expected.0 } else { base >= self.expected.0 };
        if !fits {
            return Err(BatchError::Corrupt("base offset breaks the sequence"));
        }
        let epoch = LeaderEpoch(header.partition_leader_epoch());
        let epoch_ok = match &self.epochs {
            Epochs::Verify(cache) => cache.epoch_for(Offset(base)).is_none_or(|e| e == epoch),
            Epochs::Learn(latest) => epoch >= *latest,
        };
        if !epoch_ok {
            return Err(BatchError::Corrupt("leader epoch disagrees with the epoch history"));
        }
        Ok(header)
    }

    /// In learning mode, a batch that raises the epoch is believed only if a fresh read of its
    /// header shows the same epoch (a flipped bit would otherwise found a bogus epoch).
    async fn confirm_epoch(&mut self, header: &BatchHeader) -> std::io::Result<bool> {
        let Epochs::Learn(latest) = self.epochs else { return Ok(true) };
        let epoch = LeaderEpoch(header.partition_leader_epoch());
        if epoch == latest {
            return Ok(true);
        }
        let again = self.file.read_at(self.cursor, batch::BATCH_HEADER_BYTES).await?;
        let confirmed = batch::parse_header(&again).is_ok_and(|h| {
            h.partition_leader_epoch() == epoch.0 && h.base_offset() == header.base_offset()
        });
        if confirmed {
            self.epochs = Epochs::Learn(epoch);
        }
        Ok(confirmed)
    }

    /// Where offsets may have gaps, a batch's base offset (outside its CRC) is believed only if
    /// a second read shows the same: nothing else vouches for it, and a flipped bit would serve
    /// the batch's records under other offsets. The second read is of the whole chunk, made as
    /// the chunk is read (one more read per chunk, not per batch); a batch read outside the
    /// chunk gets a read of its own. Where offsets are dense, the sequence vouches.
    async fn confirm_base(&self, header: &BatchHeader) -> std::io::Result<bool> {
        if self.dense {
            return Ok(true);
        }
        let want = header.base_offset().to_be_bytes();
        let chunked = self.cursor.checked_sub(self.buf_at).and_then(|at| {
            let at = usize::try_from(at).ok()?;
            self.second.get(at..at.checked_add(BASE_OFFSET_BYTES)?)
        });
        if let Some(second) = chunked {
            return Ok(second == want);
        }
        let second = self.file.read_at(self.cursor, BASE_OFFSET_BYTES).await?;
        Ok(second.get(..BASE_OFFSET_BYTES) == Some(&want[..]))
    }

    /// The header of the batch at the cursor, unverified, read without disturbing the buffer:
    /// enough for a reader to decide whether it wants that batch (its size, its offsets)
    /// before the whole of it is read and checked. `None` at the end, or where no header can
    /// be parsed (then [`Walker::next`] says why).
    pub(crate) async fn peek(&self) -> std::io::Result<Option<BatchHeader>> {
        if self.end.saturating_sub(self.cursor) < batch::BATCH_HEADER_BYTES as u64 {
            return Ok(None);
        }
        let head = match self.buffered(batch::BATCH_HEADER_BYTES) {
            Some(head) => head,
            None => self.file.read_at(self.cursor, batch::BATCH_HEADER_BYTES).await?,
        };
        Ok(batch::parse_header(&head).ok())
    }

    /// The bytes of the batch framed at the cursor, reading as needed.
    async fn frame(&mut self) -> std::io::Result<Result<Bytes, BatchError>> {
        let remaining = self.end - self.cursor;
        if remaining < BATCH_LOG_OVERHEAD_BYTES as u64 {
            return Ok(Err(BatchError::TooShort {
                needed: BATCH_LOG_OVERHEAD_BYTES,
                actual: remaining as usize,
            }));
        }
        let len = match self.buffered(BATCH_LOG_OVERHEAD_BYTES) {
            Some(head) => frame_len(&head),
            None => {
                self.fill(BATCH_LOG_OVERHEAD_BYTES).await?;
                self.buffered(BATCH_LOG_OVERHEAD_BYTES).and_then(|head| frame_len(&head))
            }
        };
        let Some(len) = len else {
            return Ok(Err(BatchError::Corrupt("implausible batch length")));
        };
        if len as u64 > remaining {
            return Ok(Err(BatchError::TooShort { needed: len, actual: remaining as usize }));
        }
        if let Some(bytes) = self.buffered(len) {
            return Ok(Ok(bytes));
        }
        self.fill(len).await?;
        Ok(self.buffered(len).ok_or(BatchError::TooShort { needed: len, actual: self.buf.len() }))
    }

    /// `len` bytes at the cursor, if the buffer holds them.
    fn buffered(&self, len: usize) -> Option<Bytes> {
        let from = usize::try_from(self.cursor.checked_sub(self.buf_at)?).ok()?;
        (self.buf.len() >= from + len).then(|| self.buf.slice(from..from + len))
    }

    /// Reads at least `len` bytes from the cursor (a chunk, bounded by the end).
    async fn fill(&mut self, len: usize) -> std::io::Result<()> {
        let want = (len.max(self.chunk) as u64).min(self.end - self.cursor) as usize;
        self.buf = self.file.read_at(self.cursor, want).await?;
        self.buf_at = self.cursor;
        if !self.dense {
            self.second = self.file.read_at(self.cursor, want).await?;
        }
        Ok(())
    }
}

/// Whether the batch at byte `at` of `log` states `offset` as its base offset: how an index
/// entry read from its file, which a misread may have changed, is checked against the log
/// before a walk past damage relies on it. Two reads of different files agree only where
/// neither was changed (the batch there may itself be damaged elsewhere: it still marks where
/// the damage before it ends).
pub(crate) async fn states_base_at(
    log: &dyn File,
    (at, offset): (u64, Offset),
) -> std::io::Result<bool> {
    let head = log.read_at(at, BASE_OFFSET_BYTES).await?;
    let stated = head.get(..BASE_OFFSET_BYTES).and_then(|b| b.try_into().ok());
    Ok(stated.map(i64::from_be_bytes) == Some(offset.0))
}

/// Bytes past a damaged batch's start searched for the batch after it, when the damaged batch's
/// length field does not lead to one, or leads past the offset its header states follows it
/// (the largest batch a topic accepts by default).
pub const RESYNC_SCAN_BYTES_MAX: usize = 1 << 20;
/// Damaged batches a walk past damage crosses at most before it reaches the end it must chain to.
pub const DAMAGED_IN_A_ROW_MAX: usize = 8;

/// Where a walk may go on past the damaged batch at byte `damaged` (a latent sector error),
/// which starts at offset `damaged_offset`, in data that ends at byte `end` and offset
/// `end_offset`: the byte the next intact batch starts at, and its base offset. The next batch
/// is where the damaged one's length field (outside the CRC, most often intact) leads (or a
/// batch before it starting at the offset the damaged header states follows it, where the
/// length skipped one), or else the first place within [`RESYNC_SCAN_BYTES_MAX`] where a
/// whole batch with a base offset between `damaged_offset` and `end_offset` passes its CRC.
/// What is found is believed only if the batches from there continue each other's offsets
/// without a gap to exactly `end` and `end_offset` (a wrong length or a flipped base offset
/// breaks that chain). Further damaged
/// batches on the way are crossed the same way, at most [`DAMAGED_IN_A_ROW_MAX`] of them, each
/// requiring the offsets after it to lie past the ones before it (it held at least one). A lone
/// batch between two damaged ones (no second batch vouches for its base offset) is believed
/// only if the damaged batches around it agree with where it starts or ends (see [`vouched`]);
/// else it counts as damaged too. Where no intact batch follows one before the end, it reaches
/// the end. `None` if no such chain is found. The damaged batch held the offsets from
/// `damaged_offset` to just below the base offset returned (`end_offset` if it reaches the
/// end).
///
/// The chain's epochs are checked against `epochs` where it vouches for them (see
/// [`Epochs::vouched_by`]): a flipped epoch is damage, not a new epoch that would make every
/// batch after it look older than the history.
pub(crate) async fn walk_past(
    log: &dyn File,
    (damaged, damaged_offset): (u64, Offset),
    (end, end_offset): (u64, Offset),
    epochs: Option<&EpochCache>,
) -> std::io::Result<Option<(u64, Offset)>> {
    let mut first = None;
    let (mut at, mut below) = (damaged, damaged_offset);
    for _ in 0..DAMAGED_IN_A_ROW_MAX {
        let Some((next, base)) = next_batch_after(log, at, end, below..end_offset).await? else {
            // No intact batch from here to the end, all of it searched: the damage reaches the
            // end, and it held the offsets left.
            let searched = end.saturating_sub(at) <= RESYNC_SCAN_BYTES_MAX as u64;
            let reaches_end = searched && end_offset > below;
            return Ok(reaches_end.then(|| first.unwrap_or((end, end_offset))));
        };
        first = first.or(Some((next, base)));
        let checks = Epochs::vouched_by(epochs, LeaderEpoch(i32::MIN));
        let mut walker = Walker::new(log, next, end, base, true, checks).frames_only();
        let mut reached = (next, base);
        let mut chained = 0usize;
        let stop = loop {
            match walker.next().await {
                Ok(Some(walked)) => {
                    let after = walked.position + walked.bytes.len() as u64;
                    reached = (after, Offset(walked.header.last_offset() + 1));
                    chained += 1;
                }
                Ok(None) => break None,
                Err(WalkStop::Io(e)) => return Err(e),
                Err(WalkStop::Invalid { position, .. }) => break Some(position),
            }
        };
        match stop {
            None => return Ok((reached == (end, end_offset)).then_some(first).flatten()),
            // Another damaged batch: it starts at the offset the chain reached. A chain of two
            // batches or more vouches for its offsets (each base offset, outside the CRC, agrees
            // with the one before it). A lone batch found after damage does not: its base
            // offset may be flipped, and the batch would be served under other offsets. It is
            // believed only if the damaged batches around it agree (see [`vouched`]). A
            // candidate that failed its checks is not believed.
            Some(position) => {
                let candidate = first == Some((next, base));
                let unvouched = match chained {
                    0 => true,
                    1 => {
                        let lone = (base, reached.1);
                        !vouched(
                            log,
                            (at, below),
                            (next, position),
                            lone,
                            (end, end_offset),
                            epochs,
                        )
                        .await?
                    }
                    _ => false,
                };
                if unvouched {
                    // The lone batch counts as damaged too: the search goes on from it, for a
                    // batch past where the damage began (the batch that broke the chain may be
                    // intact).
                    if candidate {
                        first = None;
                    }
                    at = next;
                } else {
                    (at, below) = (position, reached.1);
                }
            }
        }
    }
    Ok(None)
}

/// Whether a lone intact batch (`lone`: its unvouched base offset and the offset after its
/// last), at byte `next` between damaged batches, starts where its base offset says. The walk
/// reached the damaged batches before it at byte `at` and offset `below`; the damaged ones after
/// it start at byte `after`. One of these must agree, each read from headers the damage may have
/// spared (a flipped bit there breaks the agreement, it does not make one):
/// - the damaged batch at `at` states as many offsets as lie between `below` and its base
///   offset, or the damaged batches before it, followed by their length fields from `at` to
///   `next`, state that many in all;
/// - the first damaged batch after it states the base offset its end reaches;
/// - the damaged batches after it, followed by their length fields to the next batches that
///   vouch for themselves (see [`believed_after`]), state as many offsets as lie between its end
///   and their base offset.
async fn vouched(
    log: &dyn File,
    (at, below): (u64, Offset),
    (next, after): (u64, u64),
    (base, reached): (Offset, Offset),
    (end, end_offset): (u64, Offset),
    epochs: Option<&EpochCache>,
) -> std::io::Result<bool> {
    let leads = |n: i64| below.0.checked_add(n) == Some(base.0);
    if stated(log, at).await?.is_some_and(|s| leads(s.count))
        || stated_count_to(log, at, next).await?.is_some_and(leads)
        || stated(log, after).await?.is_some_and(|s| s.base == reached)
    {
        return Ok(true);
    }
    let beyond = believed_after(log, after, (end, end_offset), epochs).await?;
    Ok(beyond.is_some_and(|(next_base, n)| reached.0.checked_add(n) == Some(next_base.0)))
}

/// What a (damaged) batch's header states, unvouched and read field by field (damage elsewhere
/// in the header leaves them be).
#[derive(Clone, Copy, Debug)]
struct Stated {
    /// Its base offset.
    base: Offset,
    /// How many offsets it holds (its last offset delta, plus one).
    count: i64,
    /// Its length in the file, from its length field (if plausible).
    len: Option<u64>,
}

/// What the batch at byte `at` states in its header (see [`Stated`]). `None` if the bytes are
/// not there, or its offsets are implausible.
async fn stated(log: &dyn File, at: u64) -> std::io::Result<Option<Stated>> {
    Ok(stated_in(&log.read_at(at, batch::BATCH_HEADER_BYTES).await?))
}

/// What the header at the start of `bytes` states (see [`stated`]).
fn stated_in(bytes: &[u8]) -> Option<Stated> {
    let base =
        bytes.get(..BASE_OFFSET_BYTES).and_then(|b| b.try_into().ok()).map(i64::from_be_bytes);
    let delta_at = batch::LAST_OFFSET_DELTA_AT;
    let delta =
        bytes.get(delta_at..delta_at + 4).and_then(|b| b.try_into().ok()).map(i32::from_be_bytes);
    let len = frame_len(bytes).map(|len| len as u64);
    base.zip(delta).and_then(|(base, delta)| {
        let count = i64::from(delta).checked_add(1).filter(|n| *n > 0)?;
        Some(Stated { base: Offset(base), count, len })
    })
}

/// One step over the (damaged) batch at byte `at` by its length field, with `held` the offsets
/// stated so far: the byte after it and the offsets stated with its own. `None` where its
/// header states no plausible length or count.
async fn step_over(log: &dyn File, (at, held): (u64, i64)) -> std::io::Result<Option<(u64, i64)>> {
    let Some(Stated { count, len: Some(len), .. }) = stated(log, at).await? else {
        return Ok(None);
    };
    Ok(held.checked_add(count).map(|held| (at.saturating_add(len), held)))
}

/// Following the length fields of damaged batches from byte `from`: how many offsets they state
/// they hold in all, if their lengths lead exactly to byte `to` within [`DAMAGED_IN_A_ROW_MAX`]
/// batches.
async fn stated_count_to(log: &dyn File, from: u64, to: u64) -> std::io::Result<Option<i64>> {
    let (mut at, mut held) = (from, 0i64);
    for _ in 0..DAMAGED_IN_A_ROW_MAX {
        let Some(next) = step_over(log, (at, held)).await? else { return Ok(None) };
        (at, held) = next;
        if at >= to {
            return Ok((at == to).then_some(held));
        }
    }
    Ok(None)
}

/// Following the length fields of damaged batches from byte `damaged`, within
/// [`DAMAGED_IN_A_ROW_MAX`] of them: the base offset of the first batches that vouch for
/// themselves (a chain of two or more passing their checks, or one reaching exactly `end` and
/// `end_offset`; `end_offset` if the damaged batches reach `end`), and how many offsets the
/// damaged batches on the way state they hold. `None` where the lengths lead nowhere such.
async fn believed_after(
    log: &dyn File,
    damaged: u64,
    (end, end_offset): (u64, Offset),
    epochs: Option<&EpochCache>,
) -> std::io::Result<Option<(Offset, i64)>> {
    let (mut at, mut held) = (damaged, 0i64);
    for _ in 0..DAMAGED_IN_A_ROW_MAX {
        let Some(next) = step_over(log, (at, held)).await? else { return Ok(None) };
        (at, held) = next;
        if at >= end {
            return Ok((at == end).then_some((end_offset, held)));
        }
        let head = log.read_at(at, batch::BATCH_HEADER_BYTES).await?;
        let Ok(header) = batch::parse_header(&head) else { continue };
        let base = Offset(header.base_offset());
        let checks = Epochs::vouched_by(epochs, LeaderEpoch(i32::MIN));
        let mut walker = Walker::new(log, at, end, base, true, checks).frames_only();
        let mut chained = 0usize;
        let mut reached = (at, base);
        let whole = loop {
            match walker.next().await {
                Ok(Some(walked)) => {
                    chained += 1;
                    let after = walked.position + walked.bytes.len() as u64;
                    reached = (after, Offset(walked.header.last_offset() + 1));
                    if chained >= 2 {
                        break true;
                    }
                }
                Ok(None) => break reached == (end, end_offset),
                Err(WalkStop::Io(e)) => return Err(e),
                Err(WalkStop::Invalid { .. }) => break false,
            }
        };
        match (chained, whole) {
            (_, true) => return Ok(Some((base, held))),
            // The batch there is damaged too: follow its length.
            (0, false) => continue,
            // Another lone batch: nothing vouches here.
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// The first intact batch after the damaged one at byte `damaged`, below `end`, with a base
/// offset in `offsets` (past the damaged batch's first, below the end's): its position and
/// (unvouched) base offset.
async fn next_batch_after(
    log: &dyn File,
    damaged: u64,
    end: u64,
    offsets: std::ops::Range<Offset>,
) -> std::io::Result<Option<(u64, Offset)>> {
    let window = (end.saturating_sub(damaged)).min(RESYNC_SCAN_BYTES_MAX as u64) as usize;
    let bytes = log.read_at(damaged, window).await?;
    // A batch's header, cheap checks first: its magic, its base offset within the range (a
    // random 8 bytes almost never are), its length within the window; then its CRC.
    let intact = |at: usize| -> Option<Offset> {
        let head = bytes.get(at..)?;
        if head.get(batch::MAGIC_AT) != Some(&(batch::MAGIC_V2 as u8)) {
            return None;
        }
        let base = Offset(i64::from_be_bytes(head.get(..BASE_OFFSET_BYTES)?.try_into().ok()?));
        let len = frame_len(head)?;
        if !(offsets.start < base && base < offsets.end) || damaged + (at + len) as u64 > end {
            return None;
        }
        let frame = head.get(..len)?;
        batch::check_frame(frame, usize::MAX).ok().map(|h| Offset(h.base_offset()))
    };
    // Where the damaged batch's own length leads, if a whole batch is there. Unless that batch
    // starts at the offset the damaged header states follows it, a batch that does, before it,
    // comes first: a flipped length can lead exactly to a later batch (a flip adds a power of
    // two, and batches of like size line up), past intact ones it would lose. Where none does
    // (a compaction gap, or a flipped count or base offset), the length stands.
    let follows = stated_in(&bytes).and_then(|s| s.base.0.checked_add(s.count)).map(Offset);
    if let Some(len) = bytes.get(..BATCH_LOG_OVERHEAD_BYTES).and_then(frame_len)
        && let Some(base) = intact(len)
    {
        let skipped = follows.filter(|&f| f != base).and_then(|f| {
            (1..len).find(|&at| intact(at) == Some(f)).map(|at| (damaged + at as u64, f))
        });
        return Ok(Some(skipped.unwrap_or((damaged + len as u64, base))));
    }
    // Else the first place a whole batch is.
    Ok((1..bytes.len()).find_map(|at| intact(at).map(|base| (damaged + at as u64, base))))
}
