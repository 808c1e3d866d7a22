//! The records inside a batch, for the few parts of the broker that must look inside one:
//! compaction needs keys, producer state and transactions need control records. Everything else
//! moves batches as opaque bytes.
//!
//! One parser serves two callers: [`super::batch::validate`] walks the records without building
//! anything, and [`RecordIter`] hands out [`Record`]s whose keys and values are zero-copy slices
//! of the batch (or of its decompressed payload). Neither allocates from a count read off the
//! wire: a header count only bounds a loop that must consume bytes on every turn.
//!
//! Record layout (inside its own length): attributes i8, timestampDelta varlong, offsetDelta
//! varint, keyLength varint (-1 = null), key, valueLength varint (-1 = null), value, headerCount
//! varint, then per header keyLength varint, key, valueLength varint (-1 = null), value.

use std::iter::FusedIterator;

use bytes::Bytes;

use super::batch::{
    BATCH_HEADER_BYTES, BatchError, BatchHeader, Compression, DECOMPRESSED_BATCH_BYTES_MAX,
    RECORD_MIN_BYTES, TimestampType, check_frame,
};
use super::inflate::decompress;
use super::wire::Reader;

/// A record header. Kafka calls the key a string but never checks it is UTF-8; neither do we.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Header key.
    pub key: Bytes,
    /// Header value; `None` is null, distinct from empty.
    pub value: Option<Bytes>,
}

/// One record, with its offset and timestamp resolved against its batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Base offset + offset delta.
    pub offset: i64,
    /// Base timestamp + timestamp delta, or the batch's maxTimestamp under LogAppendTime.
    pub timestamp: i64,
    /// Key; `None` is null (compaction keeps no keyless records), distinct from empty.
    pub key: Option<Bytes>,
    /// Value; `None` is null — on a compacted topic, a tombstone.
    pub value: Option<Bytes>,
    /// Headers in wire order; keys may repeat.
    pub headers: Vec<Header>,
}

/// The records of a whole, valid batch: checks the header, length and CRC, decompresses if need
/// be (bounded by [`DECOMPRESSED_BATCH_BYTES_MAX`]), and parses every record.
pub fn records(batch: &Bytes) -> Result<Vec<Record>, BatchError> {
    record_iter(batch)?.collect()
}

/// Like [`records`], one record at a time; records are checked as they are read, so an error
/// can follow records already yielded.
pub fn record_iter(batch: &Bytes) -> Result<RecordIter, BatchError> {
    let header = check_frame(batch, usize::MAX)?;
    let payload = batch.slice(BATCH_HEADER_BYTES.min(batch.len())..);
    let data = match header.compression() {
        Compression::None => payload,
        // No payload means no records (check_frame saw to that); nothing to decompress.
        _ if payload.is_empty() => payload,
        codec => decompress(codec, &payload, DECOMPRESSED_BATCH_BYTES_MAX)?,
    };
    RecordIter::new(data, header)
}

/// The earliest and latest timestamps of a batch's records as readers see them (see
/// [`Record::timestamp`]), leaving out records without one ([`NO_TIMESTAMP`]), as Kafka's
/// timestamp bounds do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampSpan {
    /// The earliest.
    pub earliest: i64,
    /// The latest.
    pub latest: i64,
}

impl TimestampSpan {
    fn widen(span: Option<TimestampSpan>, timestamp: i64) -> Option<TimestampSpan> {
        if timestamp == NO_TIMESTAMP {
            return span;
        }
        Some(match span {
            None => TimestampSpan { earliest: timestamp, latest: timestamp },
            Some(s) => TimestampSpan {
                earliest: s.earliest.min(timestamp),
                latest: s.latest.max(timestamp),
            },
        })
    }
}

/// A record's timestamp when it carries none (Kafka's `RecordBatch.NO_TIMESTAMP`).
pub const NO_TIMESTAMP: i64 = -1;

/// Checks that `data` holds exactly the records `header` declares; see
/// [`super::batch::validate`] for the rules. Gives the span of their timestamps, `None` if no
/// record carries one.
pub(crate) fn scan_records(
    data: &[u8],
    header: &BatchHeader,
) -> Result<Option<TimestampSpan>, BatchError> {
    let count = fitting_count(data, header)?;
    let mut reader = Reader::new(data);
    let mut deltas = OffsetDeltas::new(header);
    let mut span = None;
    for index in 0..count {
        if reader.is_empty() {
            return Err(missing(header, index));
        }
        let record = read_record(&mut reader, |_, _| {})
            .map_err(|reason| BatchError::BadRecord { index, reason })?;
        deltas.check(index, record.offset_delta)?;
        span = TimestampSpan::widen(span, record_timestamp(header, record.timestamp_delta));
    }
    match reader.remaining() {
        0 => Ok(span),
        extra => Err(BatchError::TrailingBytes { extra }),
    }
}

/// A record's timestamp from its batch's header and its own delta, as readers see it.
fn record_timestamp(header: &BatchHeader, delta: i64) -> i64 {
    match header.timestamp_type() {
        TimestampType::LogAppend => header.max_timestamp(),
        // Java adds longs without overflow checks; wrap as it does.
        TimestampType::Creation => header.base_timestamp().wrapping_add(delta),
    }
}

/// The record count, once it is known to fit `data` at [`RECORD_MIN_BYTES`] a record.
fn fitting_count(data: &[u8], header: &BatchHeader) -> Result<u32, BatchError> {
    let count = header.record_count();
    let max = data.len() / RECORD_MIN_BYTES;
    match u32::try_from(count) {
        Ok(fits) if usize::try_from(fits).is_ok_and(|fits| fits <= max) => Ok(fits),
        _ => Err(BatchError::BadRecordCount { count, max }),
    }
}

fn missing(header: &BatchHeader, found: u32) -> BatchError {
    BatchError::RecordCountMismatch { declared: header.record_count(), found }
}

/// Iterator over a batch's records; see [`record_iter`]. Ends after the first error.
#[derive(Clone, Debug)]
pub struct RecordIter {
    header: BatchHeader,
    data: Bytes,
    position: usize,
    index: u32,
    count: u32,
    deltas: OffsetDeltas,
    done: bool,
}

impl RecordIter {
    fn new(data: Bytes, header: BatchHeader) -> Result<RecordIter, BatchError> {
        let count = fitting_count(&data, &header)?;
        Ok(RecordIter {
            header,
            data,
            position: 0,
            index: 0,
            count,
            deltas: OffsetDeltas::new(&header),
            done: false,
        })
    }

    /// The header of the batch the records come from.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    fn next_record(&mut self) -> Result<Record, BatchError> {
        let index = self.index;
        let rest = self.data.get(self.position..).unwrap_or_default();
        if rest.is_empty() {
            return Err(missing(&self.header, index));
        }
        let mut reader = Reader::new(rest);
        let mut headers = Vec::new();
        let raw = read_record(&mut reader, |key, value| {
            headers.push(Header {
                key: self.data.slice_ref(key),
                value: value.map(|value| self.data.slice_ref(value)),
            });
        })
        .map_err(|reason| BatchError::BadRecord { index, reason })?;
        self.deltas.check(index, raw.offset_delta)?;
        let record = Record {
            offset: self.header.base_offset().wrapping_add(raw.offset_delta.into()),
            timestamp: record_timestamp(&self.header, raw.timestamp_delta),
            key: raw.key.map(|key| self.data.slice_ref(key)),
            value: raw.value.map(|value| self.data.slice_ref(value)),
            headers,
        };
        self.position = self.data.len().saturating_sub(reader.remaining());
        self.index = index.saturating_add(1);
        Ok(record)
    }
}

impl Iterator for RecordIter {
    type Item = Result<Record, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.index == self.count {
            self.done = true;
            let extra = self.data.len().saturating_sub(self.position);
            return (extra > 0).then_some(Err(BatchError::TrailingBytes { extra }));
        }
        let record = self.next_record();
        self.done = record.is_err();
        Some(record)
    }
}

impl FusedIterator for RecordIter {}

/// Offset deltas must rise strictly within `0..=lastOffsetDelta`, else the batch would claim
/// offsets outside its range or twice — and we serve the bytes as they are, never renumbered.
#[derive(Clone, Copy, Debug)]
struct OffsetDeltas {
    next_min: i64,
    last: i32,
}

impl OffsetDeltas {
    fn new(header: &BatchHeader) -> Self {
        OffsetDeltas { next_min: 0, last: header.last_offset_delta() }
    }

    fn check(&mut self, index: u32, delta: i32) -> Result<(), BatchError> {
        if i64::from(delta) < self.next_min || delta > self.last {
            return Err(BatchError::BadOffsetDelta { index, delta });
        }
        self.next_min = i64::from(delta) + 1;
        Ok(())
    }
}

/// A record's fields, borrowed from the bytes it was read from.
struct RawRecord<'a> {
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

const TRUNCATED: &str = "a field runs past the record's length";

/// Reads one record, passing each header to `on_header`; every field must lie inside the
/// record's length and fill it exactly (Kafka's `DefaultRecord.readFrom`).
fn read_record<'a>(
    reader: &mut Reader<'a>,
    mut on_header: impl FnMut(&'a [u8], Option<&'a [u8]>),
) -> Result<RawRecord<'a>, &'static str> {
    let length = reader.varint().ok_or("the record length is truncated")?;
    let length = usize::try_from(length).map_err(|_| "the record length is negative")?;
    let body = reader.take(length).ok_or("the record runs past the batch")?;
    let mut body = Reader::new(body);
    let _attributes = body.i8().ok_or(TRUNCATED)?;
    let timestamp_delta = body.varlong().ok_or(TRUNCATED)?;
    let offset_delta = body.varint().ok_or(TRUNCATED)?;
    let key = nullable(&mut body)?;
    let value = nullable(&mut body)?;
    let header_count = body.varint().ok_or(TRUNCATED)?;
    let header_count = u32::try_from(header_count).map_err(|_| "the header count is negative")?;
    // Each turn consumes at least two bytes or fails, so a huge count cannot spin.
    for _ in 0..header_count {
        let key_length = body.varint().ok_or(TRUNCATED)?;
        let key_length =
            usize::try_from(key_length).map_err(|_| "a header key length is negative")?;
        let key = body.take(key_length).ok_or(TRUNCATED)?;
        on_header(key, nullable(&mut body)?);
    }
    if !body.is_empty() {
        return Err("the record length exceeds its fields");
    }
    Ok(RawRecord { timestamp_delta, offset_delta, key, value })
}

/// A varint length then that many bytes; -1 is null, anything lower is corrupt.
fn nullable<'a>(reader: &mut Reader<'a>) -> Result<Option<&'a [u8]>, &'static str> {
    match reader.varint().ok_or(TRUNCATED)? {
        -1 => Ok(None),
        length => {
            let length = usize::try_from(length).map_err(|_| "a length is below -1")?;
            reader.take(length).map(Some).ok_or(TRUNCATED)
        }
    }
}
