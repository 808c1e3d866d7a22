//! Building RecordBatch v2 bytes, for the two places the broker writes batches it did not
//! receive: the compaction cleaner (retained records, original offsets, a preserved last offset)
//! and tests. The produce path never comes here; it stores what the client sent.
//!
//! Records are written by hand rather than with kafka-protocol's `RecordBatchEncoder`, which keeps
//! headers in a map (Kafka allows repeated header keys), chooses the batch's offsets and
//! timestamps itself, and may split one input into several batches. Compression uses
//! kafka-protocol's codecs, so what we write is what its decoders (and Kafka's) read.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};

use super::batch::{
    BATCH_HEADER_BYTES, BATCH_LENGTH_MIN_BYTES, CONTROL_BIT, CRC_AT, CRC_START, Compression,
    DELETE_HORIZON_BIT, MAGIC_V2, NO_SEQUENCE, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
};
use super::records::Header;
use super::wire::{put_varint, put_varlong};

/// One record to encode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSpec {
    /// Offset relative to the batch's base offset; strictly increasing within a batch (dense,
    /// 0, 1, 2…, unless the cleaner has dropped records between).
    pub offset_delta: i32,
    /// Creation timestamp, ms.
    pub timestamp: i64,
    /// Key; `None` is null.
    pub key: Option<Bytes>,
    /// Value; `None` is null (a tombstone).
    pub value: Option<Bytes>,
    /// Headers, in order; keys may repeat.
    pub headers: Vec<Header>,
}

/// The batch-level fields of an encoded batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchOptions {
    /// Offset of the batch (record offsets are base + delta).
    pub base_offset: i64,
    /// Partition leader epoch (-1 as a client writes it).
    pub leader_epoch: i32,
    /// Codec for the records. An empty batch is always written uncompressed, as Kafka does.
    pub compression: Compression,
    /// `Some(t)`: LogAppendTime, with `t` as maxTimestamp (every record's timestamp on read).
    /// `None`: CreateTime.
    pub log_append_time: Option<i64>,
    /// Producer id, -1 for none.
    pub producer_id: i64,
    /// Producer epoch, -1 for none.
    pub producer_epoch: i16,
    /// Sequence of the first record, -1 for none.
    pub base_sequence: i32,
    /// Part of a transaction.
    pub transactional: bool,
    /// Holds transaction markers.
    pub control: bool,
    /// Overrides lastOffsetDelta (default: the last record's delta, or 0 when empty); the cleaner
    /// keeps a compacted batch's original last offset so producer sequences stay continuous.
    pub last_offset_delta: Option<i32>,
    /// Marks the batch with a delete horizon, written as its base timestamp (record timestamp
    /// deltas are taken from it).
    pub delete_horizon_ms: Option<i64>,
    /// For a batch of no records: its base and max timestamp, where a batch with records takes
    /// them from its records. The cleaner gives an emptied batch the one it had, as Kafka's
    /// empty header does: producer state rebuilt from the log dates the producer by it.
    pub empty_timestamp_ms: Option<i64>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            base_offset: 0,
            leader_epoch: -1,
            compression: Compression::None,
            log_append_time: None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            last_offset_delta: None,
            delete_horizon_ms: None,
            empty_timestamp_ms: None,
        }
    }
}

/// Why records could not be encoded as one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// An offset delta is negative or not above the previous one.
    #[error("record {index}: offset delta {delta} is negative or not above the previous one")]
    OffsetDelta {
        /// Position of the record.
        index: usize,
        /// Its delta.
        delta: i32,
    },
    /// The lastOffsetDelta override is below the last record's delta.
    #[error("last offset delta {last_offset_delta} is below the last record's {highest}")]
    LastOffsetDelta {
        /// The override.
        last_offset_delta: i32,
        /// The last record's delta.
        highest: i32,
    },
    /// A timestamp is too far from the base timestamp for a delta.
    #[error("record {index}: timestamp too far from the batch's base timestamp")]
    TimestampDelta {
        /// Position of the record.
        index: usize,
    },
    /// The batch would not fit the i32 length fields.
    #[error("the batch would exceed the format's 2 GiB limits")]
    TooLarge,
    /// The codec failed.
    #[error("{0:?} compression failed")]
    Compress(Compression),
}

/// Encodes `records` as one v2 batch with a valid CRC. baseTimestamp is the first record's
/// timestamp (or the delete horizon), maxTimestamp the largest (or the log append time), as
/// Kafka's `MemoryRecordsBuilder` writes them; an empty batch has both
/// [`BatchOptions::empty_timestamp_ms`], or -1.
pub fn encode_batch(records: &[RecordSpec], options: &BatchOptions) -> Result<Bytes, EncodeError> {
    let last_offset_delta = last_offset_delta(records, options)?;
    let base_timestamp = options
        .delete_horizon_ms
        .or(records.first().map(|record| record.timestamp))
        .or(options.empty_timestamp_ms)
        .unwrap_or(-1);
    let max_timestamp = options
        .log_append_time
        .or(records.iter().map(|record| record.timestamp).max())
        .or(options.empty_timestamp_ms)
        .unwrap_or(-1);
    let raw = encode_records(records, base_timestamp)?;
    let compression = match records.is_empty() {
        true => Compression::None,
        false => options.compression,
    };
    let payload = compress(compression, raw)?;
    let batch_length = payload
        .len()
        .checked_add(BATCH_LENGTH_MIN_BYTES)
        .and_then(|length| i32::try_from(length).ok())
        .ok_or(EncodeError::TooLarge)?;
    let record_count = i32::try_from(records.len()).map_err(|_| EncodeError::TooLarge)?;

    let mut out = BytesMut::with_capacity(BATCH_HEADER_BYTES + payload.len());
    out.put_i64(options.base_offset);
    out.put_i32(batch_length);
    out.put_i32(options.leader_epoch);
    out.put_i8(MAGIC_V2);
    out.put_u32(0); // CRC, filled in below.
    out.put_i16(attributes(compression, options));
    out.put_i32(last_offset_delta);
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(options.producer_id);
    out.put_i16(options.producer_epoch);
    out.put_i32(options.base_sequence);
    out.put_i32(record_count);
    out.extend_from_slice(&payload);
    let crc = crate::log::crc::crc32c(out.get(CRC_START..).unwrap_or_default());
    if let Some(slot) = out.get_mut(CRC_AT..CRC_START) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(out.freeze())
}

fn last_offset_delta(records: &[RecordSpec], options: &BatchOptions) -> Result<i32, EncodeError> {
    let mut next_min = 0i64;
    for (index, record) in records.iter().enumerate() {
        let delta = record.offset_delta;
        if i64::from(delta) < next_min {
            return Err(EncodeError::OffsetDelta { index, delta });
        }
        next_min = i64::from(delta) + 1;
    }
    let highest = records.last().map_or(0, |record| record.offset_delta);
    match options.last_offset_delta {
        None => Ok(highest),
        Some(last_offset_delta) if last_offset_delta >= highest => Ok(last_offset_delta),
        Some(last_offset_delta) => Err(EncodeError::LastOffsetDelta { last_offset_delta, highest }),
    }
}

fn attributes(compression: Compression, options: &BatchOptions) -> i16 {
    let flags = [
        (options.log_append_time.is_some(), TIMESTAMP_TYPE_BIT),
        (options.transactional, TRANSACTIONAL_BIT),
        (options.control, CONTROL_BIT),
        (options.delete_horizon_ms.is_some(), DELETE_HORIZON_BIT),
    ];
    flags
        .into_iter()
        .filter(|&(set, _)| set)
        .fold(compression as i16, |attributes, (_, bit)| attributes | bit)
}

/// The uncompressed records region.
fn encode_records(records: &[RecordSpec], base_timestamp: i64) -> Result<BytesMut, EncodeError> {
    let mut out = BytesMut::new();
    let mut body = BytesMut::new();
    for (index, record) in records.iter().enumerate() {
        let timestamp_delta = record
            .timestamp
            .checked_sub(base_timestamp)
            .ok_or(EncodeError::TimestampDelta { index })?;
        body.clear();
        encode_body(&mut body, record, timestamp_delta)?;
        put_varint(&mut out, length(body.len())?);
        out.extend_from_slice(&body);
    }
    Ok(out)
}

fn encode_body(
    body: &mut BytesMut,
    record: &RecordSpec,
    timestamp_delta: i64,
) -> Result<(), EncodeError> {
    body.put_i8(0); // Record attributes: unused in v2.
    put_varlong(body, timestamp_delta);
    put_varint(body, record.offset_delta);
    put_nullable(body, record.key.as_deref())?;
    put_nullable(body, record.value.as_deref())?;
    put_varint(body, length(record.headers.len())?);
    for header in &record.headers {
        put_varint(body, length(header.key.len())?);
        body.extend_from_slice(&header.key);
        put_nullable(body, header.value.as_deref())?;
    }
    Ok(())
}

fn put_nullable(body: &mut BytesMut, bytes: Option<&[u8]>) -> Result<(), EncodeError> {
    match bytes {
        None => put_varint(body, -1),
        Some(bytes) => {
            put_varint(body, length(bytes.len())?);
            body.extend_from_slice(bytes);
        }
    }
    Ok(())
}

fn length(len: usize) -> Result<i32, EncodeError> {
    i32::try_from(len).map_err(|_| EncodeError::TooLarge)
}

fn compress(compression: Compression, raw: BytesMut) -> Result<BytesMut, EncodeError> {
    let compressed = match compression {
        Compression::None => return Ok(raw),
        Compression::Gzip => compress_with::<Gzip>(&raw),
        Compression::Snappy => compress_with::<Snappy>(&raw),
        Compression::Lz4 => compress_with::<Lz4>(&raw),
        Compression::Zstd => compress_with::<Zstd>(&raw),
    };
    compressed.ok_or(EncodeError::Compress(compression))
}

fn compress_with<C>(raw: &[u8]) -> Option<BytesMut>
where
    C: Compressor<BytesMut, BufMut = BytesMut>,
{
    let mut out = BytesMut::new();
    C::compress(&mut out, |tmp| {
        tmp.extend_from_slice(raw);
        Ok(())
    })
    .ok()?;
    Some(out)
}
