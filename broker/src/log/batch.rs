//! RecordBatch v2 exactly as a client sends it: parse its 61-byte header, validate it against its
//! own lengths, magic, CRC and record count, and write the few fields the broker owns — all on
//! the client's bytes, never re-encoded.
//!
//! Why in place: DESIGN §5 stores a batch as sent once the leader has written its base offset and
//! partition leader epoch, both outside the CRC. Re-encoding would cost a copy (and, compressed, a
//! recompression) on every produce, and would make the bytes a client sent and the bytes a
//! consumer reads differ.
//!
//! Everything here parses hostile bytes from the network or a torn disk: no indexing, checked
//! arithmetic, and no allocation sized by a number read off the wire until that number has been
//! checked against the bytes actually present.
//!
//! Layout (big-endian; the CRC-32C covers byte 21 to the end):
//!
//! | at | field | | at | field |
//! |---:|---|---|---:|---|
//! | 0 | baseOffset i64 | | 27 | baseTimestamp i64 |
//! | 8 | batchLength i32 (bytes after it) | | 35 | maxTimestamp i64 |
//! | 12 | partitionLeaderEpoch i32 | | 43 | producerId i64 |
//! | 16 | magic i8 = 2 | | 51 | producerEpoch i16 |
//! | 17 | crc u32 | | 53 | baseSequence i32 |
//! | 21 | attributes i16 | | 57 | recordCount i32 |
//! | 23 | lastOffsetDelta i32 | | 61 | records (maybe compressed) |

use kafka_protocol::ResponseError;
pub use kafka_protocol::records::{Compression, TimestampType};

use super::crc;
use super::inflate::decompress;
use super::records::{TimestampSpan, scan_records};
use super::wire::Reader;

/// Size of a batch header, up to the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes before and including the batch length field, which that length does not count.
pub const BATCH_LOG_OVERHEAD_BYTES: usize = 12;
/// Smallest legal batch length field: a header with no records.
pub const BATCH_LENGTH_MIN_BYTES: usize = BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES;
/// Smallest encoded record: a 1-byte length, then attributes, timestamp delta, offset delta, null
/// key, null value and header count of one byte each.
pub const RECORD_MIN_BYTES: usize = 7;
/// Most bytes a compressed batch's records may decompress to. Kafka streams records out of a
/// compressed batch and has no such cap; we hold them in memory, so a small compressed batch must
/// not be able to demand gigabytes.
pub const DECOMPRESSED_BATCH_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Kafka's default `max.message.bytes`: the largest batch a topic accepts unless configured.
pub const MESSAGE_MAX_BYTES_DEFAULT: usize = 1_048_588;
/// The only batch format Kafka 4 clients send, and the only one Weir stores.
pub const MAGIC_V2: i8 = 2;
/// Base sequence of a batch from a producer without idempotence.
pub const NO_SEQUENCE: i32 = -1;

const BASE_OFFSET_AT: usize = 0;
pub(crate) const LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
pub(crate) const MAGIC_AT: usize = 16;
pub(crate) const CRC_AT: usize = 17;
/// First byte the CRC covers: the attributes.
pub(crate) const CRC_START: usize = 21;
const ATTRIBUTES_AT: usize = CRC_START;
/// Where the last offset delta lies (inside the CRC).
pub(crate) const LAST_OFFSET_DELTA_AT: usize = 23;
const MAX_TIMESTAMP_AT: usize = 35;

pub(crate) const COMPRESSION_MASK: i16 = 0x07;
pub(crate) const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub(crate) const TRANSACTIONAL_BIT: i16 = 0x10;
pub(crate) const CONTROL_BIT: i16 = 0x20;
pub(crate) const DELETE_HORIZON_BIT: i16 = 0x40;

/// Why bytes are not an acceptable RecordBatch v2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than a header, or than the batch length field promises.
    #[error("a batch needs {needed} bytes but only {actual} are present")]
    TooShort {
        /// Bytes the header or length field calls for.
        needed: usize,
        /// Bytes present.
        actual: usize,
    },
    /// The batch length field disagrees with the bytes given as one batch.
    #[error("the batch declares {declared} bytes but {actual} were given")]
    LengthMismatch {
        /// Total size the length field declares (length + 12).
        declared: usize,
        /// Size of the slice given.
        actual: usize,
    },
    /// The batch length field is negative or too small for a header.
    #[error("batch length {0} is below the {min} bytes of a header", min = BATCH_LENGTH_MIN_BYTES)]
    BadBatchLength(i32),
    /// Not a v2 batch (v0/v1 message sets are not accepted).
    #[error("magic {0} is not 2")]
    BadMagic(i8),
    /// The CRC-32C does not match the bytes it covers: corrupt in transit or on disk.
    #[error("crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// The batch is larger than the caller's limit (the topic's `max.message.bytes`).
    #[error("a batch of {bytes} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Declared size of the batch.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The record count is negative or more than the bytes could hold.
    #[error("record count {count} is impossible here (at most {max})")]
    BadRecordCount {
        /// Declared count.
        count: i32,
        /// Most records the bytes could hold.
        max: usize,
    },
    /// lastOffsetDelta is negative or leaves no room for the records.
    #[error("last offset delta {last_offset_delta} does not fit {count} records")]
    BadLastOffsetDelta {
        /// Declared last offset delta.
        last_offset_delta: i32,
        /// Declared record count.
        count: i32,
    },
    /// Attribute bits 0–2 name no codec Kafka knows.
    #[error("compression codec {0} is not one of Kafka's (0-4)")]
    UnsupportedCompression(u8),
    /// A record's fields do not parse inside its own length.
    #[error("record {index}: {reason}")]
    BadRecord {
        /// Position of the record in the batch, from 0.
        index: u32,
        /// What was wrong.
        reason: &'static str,
    },
    /// A record's offset delta is negative, not above the previous record's, or past
    /// lastOffsetDelta.
    #[error("record {index} has offset delta {delta}, out of order or out of the batch's range")]
    BadOffsetDelta {
        /// Position of the record in the batch, from 0.
        index: u32,
        /// Its offset delta.
        delta: i32,
    },
    /// The records ended before the declared count.
    #[error("the batch declares {declared} records but holds {found}")]
    RecordCountMismatch {
        /// Declared count.
        declared: i32,
        /// Records found.
        found: u32,
    },
    /// Bytes remain after the declared number of records.
    #[error("{extra} bytes follow the last declared record")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// The compressed payload's framing is malformed.
    #[error("corrupt compressed payload: {0}")]
    Corrupt(&'static str),
    /// The codec refused the compressed payload.
    #[error("{0:?} payload failed to decompress")]
    Decompress(Compression),
    /// The records would decompress to more than the limit.
    #[error("records could decompress to {bytes} bytes, above the limit of {max}")]
    DecompressedTooLarge {
        /// Upper bound (before decompressing) or actual size (after).
        bytes: u64,
        /// The limit.
        max: usize,
    },
    /// A produce request's records hold no batch.
    #[error("a produce request must carry one record batch per partition, not none")]
    NoBatch,
    /// A produce request's records hold more than one batch.
    #[error("a produce request must carry exactly one record batch per partition")]
    NotOneBatch,
    /// Clients may not write transaction markers.
    #[error("clients may not write control batches")]
    ControlBatchFromClient,
    /// Transactions are not supported: no producer is ever given a transactional id, so a
    /// transactional batch would be served as committed with nothing to commit or abort it.
    #[error("transactional batches are not supported")]
    TransactionalFromClient,
    /// Clients may not write batches without records.
    #[error("clients may not write empty batches")]
    EmptyBatch,
    /// An idempotent batch (producer id >= 0) with a negative base sequence.
    #[error("idempotent batch has invalid base sequence {0}")]
    BadSequence(i32),
}

impl BatchError {
    /// The Kafka error a produce response carries for this refusal (Kafka's `LogValidator`
    /// choices: CRC and framing → CORRUPT_MESSAGE, size → MESSAGE_TOO_LARGE, which makes the
    /// Java producer split the batch and retry, anything about the records → INVALID_RECORD).
    pub fn response_error(&self) -> ResponseError {
        use BatchError::*;
        match self {
            TooLarge { .. } | DecompressedTooLarge { .. } => ResponseError::MessageTooLarge,
            TooShort { .. }
            | LengthMismatch { .. }
            | BadBatchLength(_)
            | CrcMismatch { .. }
            | UnsupportedCompression(_)
            | Corrupt(_)
            | Decompress(_) => ResponseError::CorruptMessage,
            BadMagic(_)
            | BadRecordCount { .. }
            | BadLastOffsetDelta { .. }
            | BadRecord { .. }
            | BadOffsetDelta { .. }
            | RecordCountMismatch { .. }
            | TrailingBytes { .. }
            | NoBatch
            | NotOneBatch
            | ControlBatchFromClient
            | EmptyBatch
            | BadSequence(_) => ResponseError::InvalidRecord,
            // Kafka's answer to transactional records without an authorised transactional id.
            TransactionalFromClient => ResponseError::TransactionalIdAuthorizationFailed,
        }
    }
}

/// The parsed header of a v2 batch. Only [`parse_header`] makes one, so its invariants hold:
/// magic is 2, the codec is known, the batch length covers a header, the record count is not
/// negative and fits the declared bytes, and lastOffsetDelta leaves room for the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    base_offset: i64,
    batch_length: i32,
    partition_leader_epoch: i32,
    crc: u32,
    attributes: i16,
    compression: Compression,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: i32,
}

impl BatchHeader {
    /// Offset of the first record (as stamped by the leader; clients send 0).
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Offset of the last record the batch was written with. After compaction records may be
    /// missing, but this stays, so the next batch's offset and the producer's last sequence do.
    pub fn last_offset(&self) -> i64 {
        self.base_offset.saturating_add(i64::from(self.last_offset_delta))
    }

    /// The offset after this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// `last_offset - base_offset`.
    pub fn last_offset_delta(&self) -> i32 {
        self.last_offset_delta
    }

    /// Size of the whole batch in bytes, header included.
    pub fn total_bytes(&self) -> usize {
        // batch_length >= BATCH_LENGTH_MIN_BYTES, checked in parse_header.
        usize::try_from(self.batch_length)
            .unwrap_or(BATCH_LENGTH_MIN_BYTES)
            .saturating_add(BATCH_LOG_OVERHEAD_BYTES)
    }

    /// Epoch of the leader that appended the batch (-1 as clients send it).
    pub fn partition_leader_epoch(&self) -> i32 {
        self.partition_leader_epoch
    }

    /// The CRC-32C stored in the header.
    pub fn crc(&self) -> u32 {
        self.crc
    }

    /// The raw attributes.
    pub fn attributes(&self) -> i16 {
        self.attributes
    }

    /// Codec of the records payload.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppend
        } else {
            TimestampType::Creation
        }
    }

    /// Part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Holds transaction markers, not data.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// When the cleaner may drop this batch's tombstones and markers, if it has set one; the
    /// base timestamp field then holds it.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }

    /// Timestamp the record timestamp deltas are relative to.
    pub fn base_timestamp(&self) -> i64 {
        self.base_timestamp
    }

    /// Largest record timestamp, or the append time under LogAppendTime.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Producer id, or -1 for a non-idempotent producer.
    pub fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// Whether the batch comes from an idempotent producer (DESIGN notes: key on id >= 0;
    /// kafkajs sends epoch 0 with id -1).
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Producer epoch.
    pub fn producer_epoch(&self) -> i16 {
        self.producer_epoch
    }

    /// Sequence number of the first record.
    pub fn base_sequence(&self) -> i32 {
        self.base_sequence
    }

    /// Sequence number of the last record, or -1 without sequences. Sequences wrap from
    /// `i32::MAX` to 0, as Kafka's `DefaultRecordBatch.incrementSequence` does.
    pub fn last_sequence(&self) -> i32 {
        let (base, delta) = (self.base_sequence, self.last_offset_delta);
        if base == NO_SEQUENCE {
            NO_SEQUENCE
        } else if base > i32::MAX - delta {
            // delta >= 0 (parse_header), so neither subtraction can overflow.
            delta - (i32::MAX - base) - 1
        } else {
            base + delta
        }
    }

    /// Number of records (never negative).
    pub fn record_count(&self) -> i32 {
        self.record_count
    }

    /// Kafka's rules for batches a client produces (`LogValidator.validateBatch`), on top of
    /// [`validate`]: at least one record, offsets dense (lastOffsetDelta = count - 1), no control
    /// batches, no transactional ones, and a sequence number when there is a producer id.
    pub fn check_produce(&self) -> Result<(), BatchError> {
        if self.record_count == 0 {
            return Err(BatchError::EmptyBatch);
        }
        if i64::from(self.last_offset_delta) != i64::from(self.record_count) - 1 {
            return Err(BatchError::BadLastOffsetDelta {
                last_offset_delta: self.last_offset_delta,
                count: self.record_count,
            });
        }
        if self.is_control() {
            return Err(BatchError::ControlBatchFromClient);
        }
        if self.is_transactional() {
            return Err(BatchError::TransactionalFromClient);
        }
        if self.has_producer_id() && self.base_sequence < 0 {
            return Err(BatchError::BadSequence(self.base_sequence));
        }
        Ok(())
    }
}

/// Parses and sanity-checks the first 61 bytes of `bytes` as a v2 header. It checks only what the
/// header alone can show (see [`BatchHeader`]); lengths against the bytes present and the CRC are
/// [`validate`]'s job.
pub fn parse_header(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
    check_header(parse_unchecked(bytes)?)
}

/// The header's fields, with only the magic checked (the other fields mean nothing without it).
/// The result breaks [`BatchHeader`]'s invariants until [`check_header`] has passed it.
fn parse_unchecked(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
    let short = BatchError::TooShort { needed: BATCH_HEADER_BYTES, actual: bytes.len() };
    let head = bytes.first_chunk::<BATCH_HEADER_BYTES>().ok_or(short)?;
    let (header, magic) = read_header(head).ok_or(short)?;
    if magic != MAGIC_V2 {
        return Err(BatchError::BadMagic(magic));
    }
    Ok(header)
}

/// Reads the fields; checks nothing.
fn read_header(head: &[u8; BATCH_HEADER_BYTES]) -> Option<(BatchHeader, i8)> {
    let mut r = Reader::new(head);
    let base_offset = r.i64()?;
    let batch_length = r.i32()?;
    let partition_leader_epoch = r.i32()?;
    let magic = r.i8()?;
    let header = BatchHeader {
        base_offset,
        batch_length,
        partition_leader_epoch,
        crc: r.u32()?,
        attributes: r.i16()?,
        compression: Compression::None,
        last_offset_delta: r.i32()?,
        base_timestamp: r.i64()?,
        max_timestamp: r.i64()?,
        producer_id: r.i64()?,
        producer_epoch: r.i16()?,
        base_sequence: r.i32()?,
        record_count: r.i32()?,
    };
    Some((header, magic))
}

/// Total size the batch length field declares, if it is long enough for a header.
pub(crate) fn declared_bytes(batch_length: i32) -> Result<usize, BatchError> {
    usize::try_from(batch_length)
        .ok()
        .filter(|&length| length >= BATCH_LENGTH_MIN_BYTES)
        .map(|length| length.saturating_add(BATCH_LOG_OVERHEAD_BYTES))
        .ok_or(BatchError::BadBatchLength(batch_length))
}

fn check_header(mut header: BatchHeader) -> Result<BatchHeader, BatchError> {
    let payload_bytes = declared_bytes(header.batch_length)?.saturating_sub(BATCH_HEADER_BYTES);
    header.compression = compression_of(header.attributes)?;
    let max = match header.compression {
        Compression::None => payload_bytes / RECORD_MIN_BYTES,
        _ => DECOMPRESSED_BATCH_BYTES_MAX / RECORD_MIN_BYTES,
    };
    let count = header.record_count;
    match usize::try_from(count) {
        Ok(fits) if fits <= max => {}
        _ => return Err(BatchError::BadRecordCount { count, max }),
    }
    if header.last_offset_delta < 0 || header.last_offset_delta < count.saturating_sub(1) {
        return Err(BatchError::BadLastOffsetDelta {
            last_offset_delta: header.last_offset_delta,
            count,
        });
    }
    Ok(header)
}

fn compression_of(attributes: i16) -> Result<Compression, BatchError> {
    let code = (attributes & COMPRESSION_MASK) as u8;
    match code {
        0 => Ok(Compression::None),
        1 => Ok(Compression::Gzip),
        2 => Ok(Compression::Snappy),
        3 => Ok(Compression::Lz4),
        4 => Ok(Compression::Zstd),
        _ => Err(BatchError::UnsupportedCompression(code)),
    }
}

/// Checks that `batch` is exactly one well-formed v2 batch of at most `max_bytes`:
///
/// - the header parses ([`parse_header`]) and the length field matches `batch.len()`;
/// - the CRC-32C matches;
/// - the record count is not negative, lastOffsetDelta ≥ count − 1 (equality is a produce rule,
///   [`BatchHeader::check_produce`]: compaction leaves gaps), and, uncompressed, the count fits the
///   bytes at [`RECORD_MIN_BYTES`] a record;
/// - uncompressed, the records parse into exactly `count` records, each field inside its own
///   record length, offset deltas strictly increasing within 0..=lastOffsetDelta, nothing after.
///
/// Compressed, the payload is **not** decompressed: only that it is non-empty when records are
/// declared, and the count is at most [`DECOMPRESSED_BATCH_BYTES_MAX`] / [`RECORD_MIN_BYTES`]. The
/// CRC still proves the bytes are the ones the client sent, which is what recovery and
/// replication need; whether the client compressed valid records is [`validate_deep`]'s question.
pub fn validate(batch: &[u8], max_bytes: usize) -> Result<BatchHeader, BatchError> {
    let header = check_frame(batch, max_bytes)?;
    if header.compression() == Compression::None {
        scan_records(records_payload(batch), &header)?;
    }
    Ok(header)
}

/// [`validate`], then for a compressed batch decompress the records — refusing any payload that
/// could exceed [`DECOMPRESSED_BATCH_BYTES_MAX`] before decompressing it, where the codec's
/// framing allows (see [`super::inflate`]) — and check them as [`validate`] checks uncompressed
/// ones. Kafka's broker decompresses every compressed batch it is produced; so does this.
pub fn validate_deep(batch: &[u8], max_bytes: usize) -> Result<BatchHeader, BatchError> {
    let header = check_frame(batch, max_bytes)?;
    check_records_deep(batch, &header)?;
    Ok(header)
}

/// The records of a batch whose frame passed [`check_frame`], decompressed where they are
/// compressed, checked as [`validate`] checks uncompressed ones; the span of their timestamps.
fn check_records_deep(
    batch: &[u8],
    header: &BatchHeader,
) -> Result<Option<TimestampSpan>, BatchError> {
    let payload = records_payload(batch);
    if header.compression() == Compression::None {
        return scan_records(payload, header);
    }
    // No payload means no records (check_frame saw to that); there is nothing to decompress.
    if payload.is_empty() {
        return Ok(None);
    }
    let records = decompress(header.compression(), payload, DECOMPRESSED_BATCH_BYTES_MAX)?;
    scan_records(&records, header)
}

/// Everything a produced batch must pass before the leader stamps and appends it, or takes it
/// for a retry of a batch it holds: the frame and CRC first ([`check_frame`]: a bit flipped in
/// transit is corruption, which a producer retries), then [`BatchHeader::check_produce`] (cheap,
/// before any record is read), then the records as [`validate_deep`] checks them. Bytes past a
/// first batch whose frame and CRC pass are a second batch, refused as [`BatchError::NotOneBatch`]
/// (INVALID_RECORD, as Kafka answers), not as corruption a producer would retry for ever.
pub fn validate_produce(batch: &[u8], max_bytes: usize) -> Result<BatchHeader, BatchError> {
    validate_produce_spanned(batch, max_bytes).map(|(header, _)| header)
}

/// [`validate_produce`], with the span of the records' timestamps its walk over them found
/// (`None` if no record carries one), for the topic's timestamp bounds.
pub fn validate_produce_spanned(
    batch: &[u8],
    max_bytes: usize,
) -> Result<(BatchHeader, Option<TimestampSpan>), BatchError> {
    let header = match check_frame(batch, max_bytes) {
        Err(BatchError::LengthMismatch { declared, actual }) if actual > declared => {
            check_frame(batch.get(..declared).unwrap_or_default(), max_bytes)?;
            return Err(BatchError::NotOneBatch);
        }
        checked => checked?,
    };
    header.check_produce()?;
    let span = check_records_deep(batch, &header)?;
    Ok((header, span))
}

/// Header, length and CRC: the checks every batch gets, whatever it holds. The CRC comes before
/// the header's other fields so that a bit flipped in transit reads as corruption (which a
/// producer retries), not as an invalid batch (which it does not).
pub(crate) fn check_frame(batch: &[u8], max_bytes: usize) -> Result<BatchHeader, BatchError> {
    let unchecked = parse_unchecked(batch)?;
    let declared = declared_bytes(unchecked.batch_length)?;
    if declared > max_bytes {
        return Err(BatchError::TooLarge { bytes: declared, max: max_bytes });
    }
    if batch.len() != declared {
        return Err(BatchError::LengthMismatch { declared, actual: batch.len() });
    }
    let computed = crc::crc32c(batch.get(CRC_START..).unwrap_or_default());
    if computed != unchecked.crc {
        return Err(BatchError::CrcMismatch { stored: unchecked.crc, computed });
    }
    let header = check_header(unchecked)?;
    let compressed = header.compression() != Compression::None;
    if compressed && header.record_count() > 0 && records_payload(batch).is_empty() {
        return Err(BatchError::Corrupt("records declared but no payload"));
    }
    Ok(header)
}

/// The bytes after the header: the records, compressed or not.
pub(crate) fn records_payload(batch: &[u8]) -> &[u8] {
    batch.get(BATCH_HEADER_BYTES..).unwrap_or_default()
}

/// Writes the base offset and partition leader epoch the leader assigns. Both lie outside the
/// CRC, so the batch stays valid and nothing else changes. `batch` must start with a v2 header.
pub fn stamp(batch: &mut [u8], base_offset: i64, leader_epoch: i32) -> Result<(), BatchError> {
    parse_header(batch)?;
    write_at(batch, BASE_OFFSET_AT, base_offset.to_be_bytes())?;
    write_at(batch, LEADER_EPOCH_AT, leader_epoch.to_be_bytes())
}

/// Marks a batch as LogAppendTime with `append_time_ms`, for topics with
/// `message.timestamp.type=LogAppendTime`, as Kafka's `DefaultRecordBatch.setMaxTimestamp` does:
/// set attribute bit 3, write maxTimestamp, recompute the CRC. baseTimestamp and the records'
/// timestamp deltas stay as the client wrote them (rewriting them would mean recompressing);
/// readers take every record's timestamp from maxTimestamp under LogAppendTime.
///
/// Unlike [`stamp`] this changes bytes under the CRC, so the batch must be whole and its CRC is
/// verified first: recomputing the CRC of corrupt bytes would launder the corruption. Like Kafka,
/// it leaves the bytes alone when the type and timestamp are already these.
pub fn set_log_append_time(
    batch: &mut [u8],
    append_time_ms: i64,
) -> Result<BatchHeader, BatchError> {
    let head = log_append_time_header(batch, append_time_ms)?;
    write_at(batch, 0, head)?;
    parse_header(batch)
}

/// [`set_log_append_time`] without touching the batch: the header the batch would then start
/// with, to be written in front of the batch's unchanged records (see [`head`]).
pub fn log_append_time_header(
    batch: &[u8],
    append_time_ms: i64,
) -> Result<[u8; BATCH_HEADER_BYTES], BatchError> {
    let header = check_frame(batch, usize::MAX)?;
    let mut head = self::head(batch)?;
    let is_log_append = header.timestamp_type() == TimestampType::LogAppend;
    if is_log_append && header.max_timestamp() == append_time_ms {
        return Ok(head);
    }
    let attributes = header.attributes() | TIMESTAMP_TYPE_BIT;
    write_at(&mut head, ATTRIBUTES_AT, attributes.to_be_bytes())?;
    write_at(&mut head, MAX_TIMESTAMP_AT, append_time_ms.to_be_bytes())?;
    let crc =
        crc::crc32c_parts(&[head.get(CRC_START..).unwrap_or_default(), records_payload(batch)]);
    write_at(&mut head, CRC_AT, crc.to_be_bytes())?;
    Ok(head)
}

/// A copy of the batch's 61-byte header. A log stamps the copy ([`stamp`] works on it as on a
/// whole batch) and writes it in front of the records it leaves where the client's request put
/// them, so that a batch is never copied to change the 12 bytes the leader assigns.
pub fn head(batch: &[u8]) -> Result<[u8; BATCH_HEADER_BYTES], BatchError> {
    let actual = batch.len();
    let short = BatchError::TooShort { needed: BATCH_HEADER_BYTES, actual };
    batch.first_chunk::<BATCH_HEADER_BYTES>().copied().ok_or(short)
}

fn write_at<const N: usize>(batch: &mut [u8], at: usize, value: [u8; N]) -> Result<(), BatchError> {
    let actual = batch.len();
    let end = at.saturating_add(N);
    let target = batch.get_mut(at..end).ok_or(BatchError::TooShort { needed: end, actual })?;
    target.copy_from_slice(&value);
    Ok(())
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
