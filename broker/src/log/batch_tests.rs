//! Unit tests for [`super`]: one per way a batch can be wrong, and the in-place writes.
//!
//! Most corruptions are applied and then the CRC is recomputed, because a hostile client can
//! compute a CRC too: the structural checks must hold on their own.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::*;
use crate::log::encode::{BatchOptions, RecordSpec, encode_batch};
use crate::log::records::{Header, records};

const MAX: usize = MESSAGE_MAX_BYTES_DEFAULT;
const RECORD_COUNT_AT: usize = 57;
const LAST_OFFSET_DELTA_AT: usize = 23;
const PRODUCER_ID_AT: usize = 43;
const BASE_SEQUENCE_AT: usize = 53;

fn spec(offset_delta: i32, key: &'static [u8], value: &'static [u8]) -> RecordSpec {
    RecordSpec {
        offset_delta,
        timestamp: 1_700_000_000_000 + i64::from(offset_delta),
        key: Some(Bytes::from_static(key)),
        value: Some(Bytes::from_static(value)),
        headers: vec![Header { key: Bytes::from_static(b"h"), value: None }],
    }
}

fn three() -> Vec<RecordSpec> {
    vec![spec(0, b"a", b"one"), spec(1, b"b", b"two"), spec(2, b"c", b"three")]
}

fn batch_with(records: &[RecordSpec], options: BatchOptions) -> Vec<u8> {
    encode_batch(records, &options).unwrap().to_vec()
}

fn batch() -> Vec<u8> {
    batch_with(&three(), BatchOptions::default())
}

fn put(batch: &mut [u8], at: usize, value: &[u8]) {
    batch[at..at + value.len()].copy_from_slice(value);
}

fn recrc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    put(batch, CRC_AT, &crc.to_be_bytes());
}

/// Replaces the records payload and fixes the length field and CRC around it.
fn with_payload(mut batch: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    batch.truncate(BATCH_HEADER_BYTES);
    batch.extend_from_slice(payload);
    let length = (batch.len() - BATCH_LOG_OVERHEAD_BYTES) as i32;
    put(&mut batch, LENGTH_AT, &length.to_be_bytes());
    recrc(&mut batch);
    batch
}

fn payload(batch: &[u8]) -> Vec<u8> {
    batch[BATCH_HEADER_BYTES..].to_vec()
}

#[test]
fn a_well_formed_batch_validates_and_reports_its_header() {
    let options = BatchOptions {
        base_offset: 100,
        producer_id: 7,
        producer_epoch: 2,
        base_sequence: 40,
        ..BatchOptions::default()
    };
    let bytes = batch_with(&three(), options);
    let header = validate(&bytes, MAX).unwrap();
    assert_eq!(validate_deep(&bytes, MAX), Ok(header));
    assert_eq!(validate_produce(&bytes, MAX), Ok(header));
    assert_eq!(header.base_offset(), 100);
    assert_eq!(header.last_offset(), 102);
    assert_eq!(header.next_offset(), 103);
    assert_eq!(header.record_count(), 3);
    assert_eq!(header.total_bytes(), bytes.len());
    assert_eq!(header.compression(), Compression::None);
    assert_eq!(header.timestamp_type(), TimestampType::Creation);
    assert_eq!(header.max_timestamp(), 1_700_000_000_002);
    assert_eq!(header.base_timestamp(), 1_700_000_000_000);
    assert_eq!((header.producer_id(), header.producer_epoch()), (7, 2));
    assert_eq!((header.base_sequence(), header.last_sequence()), (40, 42));
    assert!(header.has_producer_id());
    assert!(!header.is_control() && !header.is_transactional());
    assert_eq!(header.delete_horizon_ms(), None);
}

#[test]
fn a_truncated_header_is_too_short() {
    let bytes = batch();
    for len in [0, 1, 12, 60] {
        assert_eq!(
            parse_header(&bytes[..len]),
            Err(BatchError::TooShort { needed: BATCH_HEADER_BYTES, actual: len })
        );
    }
}

#[test]
fn a_truncated_body_disagrees_with_its_length() {
    let bytes = batch();
    let cut = &bytes[..bytes.len() - 1];
    assert_eq!(
        validate(cut, MAX),
        Err(BatchError::LengthMismatch { declared: bytes.len(), actual: bytes.len() - 1 })
    );
}

#[test]
fn length_fields_that_lie_are_refused() {
    let good = batch();
    let mut longer = good.clone();
    put(&mut longer, LENGTH_AT, &((good.len() - 12 + 5) as i32).to_be_bytes());
    assert_eq!(
        validate(&longer, MAX),
        Err(BatchError::LengthMismatch { declared: good.len() + 5, actual: good.len() })
    );
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"junk");
    assert!(matches!(validate(&trailing, MAX), Err(BatchError::LengthMismatch { .. })));
    for length in [-1, i32::MIN, 0, 48] {
        let mut bad = good.clone();
        put(&mut bad, LENGTH_AT, &length.to_be_bytes());
        assert_eq!(validate(&bad, MAX), Err(BatchError::BadBatchLength(length)));
    }
}

#[test]
fn a_batch_over_the_limit_is_too_large() {
    let bytes = batch();
    assert_eq!(
        validate(&bytes, bytes.len() - 1),
        Err(BatchError::TooLarge { bytes: bytes.len(), max: bytes.len() - 1 })
    );
    assert!(validate(&bytes, bytes.len()).is_ok());
}

#[test]
fn a_wrong_magic_is_refused() {
    for magic in [0, 1, 3, -1] {
        let mut bytes = batch();
        bytes[MAGIC_AT] = magic as u8;
        assert_eq!(validate(&bytes, MAX), Err(BatchError::BadMagic(magic)));
    }
}

#[test]
fn any_flipped_byte_under_the_crc_is_caught() {
    let good = batch();
    for at in [CRC_AT, CRC_START, RECORD_COUNT_AT, BATCH_HEADER_BYTES, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        let result = validate(&bad, MAX);
        assert!(matches!(result, Err(BatchError::CrcMismatch { .. })), "byte {at}: {result:?}");
    }
}

#[test]
fn an_unknown_codec_is_unsupported() {
    let mut bytes = batch();
    put(&mut bytes, ATTRIBUTES_AT, &5i16.to_be_bytes());
    recrc(&mut bytes);
    assert_eq!(validate(&bytes, MAX), Err(BatchError::UnsupportedCompression(5)));
}

#[test]
fn a_record_count_beyond_the_bytes_is_refused_before_parsing() {
    let mut bytes = batch();
    let max = payload(&bytes).len() / RECORD_MIN_BYTES;
    for count in [max as i32 + 1, i32::MAX, -1, i32::MIN] {
        put(&mut bytes, RECORD_COUNT_AT, &count.to_be_bytes());
        put(&mut bytes, LAST_OFFSET_DELTA_AT, &i32::MAX.to_be_bytes());
        recrc(&mut bytes);
        assert_eq!(validate(&bytes, MAX), Err(BatchError::BadRecordCount { count, max }));
    }
}

#[test]
fn fewer_records_than_declared_is_a_count_mismatch() {
    let mut bytes = batch();
    put(&mut bytes, RECORD_COUNT_AT, &4i32.to_be_bytes());
    put(&mut bytes, LAST_OFFSET_DELTA_AT, &3i32.to_be_bytes());
    recrc(&mut bytes);
    assert_eq!(
        validate(&bytes, MAX),
        Err(BatchError::RecordCountMismatch { declared: 4, found: 3 })
    );
}

#[test]
fn bytes_after_the_declared_records_are_trailing() {
    let mut bytes = batch();
    put(&mut bytes, RECORD_COUNT_AT, &2i32.to_be_bytes());
    recrc(&mut bytes);
    let result = validate(&bytes, MAX);
    assert!(matches!(result, Err(BatchError::TrailingBytes { .. })), "{result:?}");
    let good = batch();
    let fixed = with_payload(good.clone(), &[payload(&good), vec![0; 9]].concat());
    assert_eq!(validate(&fixed, MAX), Err(BatchError::TrailingBytes { extra: 9 }));
}

#[test]
fn a_last_offset_delta_too_small_for_the_count_is_refused() {
    for delta in [-1i32, 0, 1] {
        let mut bytes = batch();
        put(&mut bytes, LAST_OFFSET_DELTA_AT, &delta.to_be_bytes());
        recrc(&mut bytes);
        assert_eq!(
            validate(&bytes, MAX),
            Err(BatchError::BadLastOffsetDelta { last_offset_delta: delta, count: 3 })
        );
    }
}

#[test]
fn a_gap_before_last_offset_delta_is_a_log_batch_not_a_produce_batch() {
    // What the compaction cleaner writes: records 0 and 2 kept, last offset preserved at 5.
    let options = BatchOptions { last_offset_delta: Some(5), ..BatchOptions::default() };
    let bytes = batch_with(&[spec(0, b"a", b"1"), spec(2, b"c", b"3")], options);
    let header = validate_deep(&bytes, MAX).unwrap();
    assert_eq!(header.last_offset(), 5);
    assert_eq!(
        validate_produce(&bytes, MAX),
        Err(BatchError::BadLastOffsetDelta { last_offset_delta: 5, count: 2 })
    );
    let offsets: Vec<i64> =
        records(&Bytes::from(bytes)).unwrap().iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [0, 2]);
}

#[test]
fn record_offset_deltas_out_of_order_or_range_are_refused() {
    for deltas in [[0, 0], [1, 0], [0, 5], [-1, 1]] {
        let specs = [spec(0, b"k", b"v"), spec(1, b"k", b"v")];
        // Encode with legal deltas, then write the illegal ones over them in place (each record
        // here is small, so every varint is one byte and sits at a fixed place).
        let mut bytes = batch_with(&specs, BatchOptions::default());
        put(&mut bytes, LAST_OFFSET_DELTA_AT, &1i32.to_be_bytes());
        let record_len = (payload(&bytes).len()) / 2;
        for (index, delta) in deltas.iter().enumerate() {
            let at = BATCH_HEADER_BYTES + index * record_len + 3;
            bytes[at] = ((delta << 1) ^ (delta >> 31)) as u8;
        }
        recrc(&mut bytes);
        let result = validate(&bytes, MAX);
        assert!(matches!(result, Err(BatchError::BadOffsetDelta { .. })), "{deltas:?}: {result:?}");
    }
}

#[test]
fn malformed_records_are_bad_records_not_panics() {
    let good = batch();
    let cases: [(&[u8], &str); 5] = [
        (&[0x01], "the record length is negative"),
        (&[0x7e], "the record runs past the batch"),
        // length 6: attributes, ts 0, offset 0, key length -2.
        (&[0x0c, 0, 0, 0, 0x03, 0, 0], "a length is below -1"),
        // length 6 but the fields want more: key length 1 with no key byte left for the rest.
        (&[0x0c, 0, 0, 0, 0x02, 0x61, 0], "a field runs past the record's length"),
        // length 7 but the fields end after 6.
        (&[0x0e, 0, 0, 0, 0x01, 0x01, 0, 0], "the record length exceeds its fields"),
    ];
    for (record, reason) in cases {
        let mut body = record.to_vec();
        body.resize(body.len().max(RECORD_MIN_BYTES), 0);
        let mut bytes = with_payload(good.clone(), &body);
        put(&mut bytes, RECORD_COUNT_AT, &1i32.to_be_bytes());
        recrc(&mut bytes);
        assert_eq!(validate(&bytes, MAX), Err(BatchError::BadRecord { index: 0, reason }));
    }
}

#[test]
fn negative_header_counts_and_key_lengths_are_refused() {
    // attributes, ts, offset, key null, value null, header count -1.
    let record = [0x0c, 0, 0, 0, 0x01, 0x01, 0x01];
    let mut bytes = with_payload(batch(), &record);
    put(&mut bytes, RECORD_COUNT_AT, &1i32.to_be_bytes());
    recrc(&mut bytes);
    assert_eq!(
        validate(&bytes, MAX),
        Err(BatchError::BadRecord { index: 0, reason: "the header count is negative" })
    );
    // One header whose key length is -1.
    let record = [0x0e, 0, 0, 0, 0x01, 0x01, 0x02, 0x01];
    let mut bytes = with_payload(batch(), &record);
    put(&mut bytes, RECORD_COUNT_AT, &1i32.to_be_bytes());
    recrc(&mut bytes);
    assert_eq!(
        validate(&bytes, MAX),
        Err(BatchError::BadRecord { index: 0, reason: "a header key length is negative" })
    );
}

#[test]
fn a_huge_header_count_fails_fast_without_allocating() {
    // Header count i32::MAX in a 7-byte record.
    let record = [0x14, 0, 0, 0, 0x01, 0x01, 0xfe, 0xff, 0xff, 0xff, 0x0f];
    let mut bytes = with_payload(batch(), &record);
    put(&mut bytes, RECORD_COUNT_AT, &1i32.to_be_bytes());
    recrc(&mut bytes);
    assert!(matches!(validate(&bytes, MAX), Err(BatchError::BadRecord { index: 0, .. })));
}

#[test]
fn shallow_validation_trusts_a_compressed_payload_and_deep_validation_does_not() {
    let options = BatchOptions { compression: Compression::Gzip, ..BatchOptions::default() };
    let good = batch_with(&three(), options);
    assert!(validate_deep(&good, MAX).is_ok());
    // Gzip magic, a trailer claiming 5 bytes, and no deflate stream between.
    let garbage = with_payload(good, b"\x1f\x8b not a gzip stream, honest\x05\x00\x00\x00");
    assert!(validate(&garbage, MAX).is_ok());
    assert_eq!(validate_deep(&garbage, MAX), Err(BatchError::Decompress(Compression::Gzip)));
    let empty = with_payload(garbage, b"");
    assert_eq!(validate(&empty, MAX), Err(BatchError::Corrupt("records declared but no payload")));
}

#[test]
fn an_empty_batch_flagged_compressed_needs_no_payload() {
    let mut bytes = batch_with(&[], BatchOptions::default());
    put(&mut bytes, ATTRIBUTES_AT, &(Compression::Zstd as i16).to_be_bytes());
    recrc(&mut bytes);
    let header = validate_deep(&bytes, MAX).unwrap();
    assert_eq!(header.compression(), Compression::Zstd);
    assert_eq!(records(&Bytes::from(bytes)), Ok(Vec::new()));
}

#[test]
fn deep_validation_checks_the_decompressed_record_count() {
    for compression in [Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let options = BatchOptions { compression, ..BatchOptions::default() };
        let mut bytes = batch_with(&three(), options);
        put(&mut bytes, RECORD_COUNT_AT, &2i32.to_be_bytes());
        recrc(&mut bytes);
        assert!(validate(&bytes, MAX).is_ok());
        assert!(
            matches!(validate_deep(&bytes, MAX), Err(BatchError::TrailingBytes { .. })),
            "{compression:?}"
        );
    }
}

/// A bit flipped in transit in the part of the batch its CRC covers (attributes on) is
/// corruption, which a producer retries, whichever field it lands in: the CRC is checked before
/// the produce rules.
#[test]
fn a_flipped_bit_in_a_produced_batch_is_corruption_before_any_produce_rule() {
    let mut no_sequence = batch();
    put(&mut no_sequence, PRODUCER_ID_AT, &5i64.to_be_bytes());
    put(&mut no_sequence, BASE_SEQUENCE_AT, &(-1i32).to_be_bytes());
    assert!(matches!(validate_produce(&no_sequence, MAX), Err(BatchError::CrcMismatch { .. })));
    let mut control = batch_with(&three(), BatchOptions { control: true, ..Default::default() });
    let last = control.len() - 1;
    control[last] ^= 0x01;
    assert!(matches!(validate_produce(&control, MAX), Err(BatchError::CrcMismatch { .. })));
}

#[test]
fn a_second_batch_in_a_produce_is_invalid_unless_the_first_is_corrupt() {
    let two = [batch(), batch()].concat();
    assert_eq!(validate_produce(&two, MAX), Err(BatchError::NotOneBatch));
    assert_eq!(BatchError::NotOneBatch.response_error(), ResponseError::InvalidRecord);
    let one = batch().len();
    let mut stray = batch();
    stray.push(0);
    assert_eq!(validate_produce(&stray, MAX), Err(BatchError::NotOneBatch));
    let mut corrupt_first = two.clone();
    corrupt_first[one - 1] ^= 0x01;
    assert!(matches!(validate_produce(&corrupt_first, MAX), Err(BatchError::CrcMismatch { .. })));
    // A length field flipped in transit: the first batch read short fails its CRC.
    let mut short = batch();
    let length = i32::from_be_bytes(short[8..12].try_into().unwrap());
    put(&mut short, 8, &(length - 4).to_be_bytes());
    assert!(matches!(validate_produce(&short, MAX), Err(BatchError::CrcMismatch { .. })));
}

#[test]
fn produce_rules_refuse_what_only_the_broker_may_write() {
    let control = BatchOptions { control: true, ..BatchOptions::default() };
    assert_eq!(
        validate_produce(&batch_with(&three(), control), MAX),
        Err(BatchError::ControlBatchFromClient)
    );
    let transactional = BatchOptions {
        transactional: true,
        producer_id: 7,
        producer_epoch: 0,
        base_sequence: 0,
        ..BatchOptions::default()
    };
    assert_eq!(
        validate_produce(&batch_with(&three(), transactional), MAX),
        Err(BatchError::TransactionalFromClient)
    );
    assert_eq!(
        validate_produce(&batch_with(&[], BatchOptions::default()), MAX),
        Err(BatchError::EmptyBatch)
    );
    let mut no_sequence = batch();
    put(&mut no_sequence, PRODUCER_ID_AT, &5i64.to_be_bytes());
    put(&mut no_sequence, BASE_SEQUENCE_AT, &(-1i32).to_be_bytes());
    recrc(&mut no_sequence);
    assert_eq!(validate_produce(&no_sequence, MAX), Err(BatchError::BadSequence(-1)));
    // kafkajs: producer id -1 with epoch 0 and sequence 0 is not idempotent, and fine.
    let kafkajs = BatchOptions { producer_epoch: 0, base_sequence: 0, ..BatchOptions::default() };
    assert!(validate_produce(&batch_with(&three(), kafkajs), MAX).is_ok());
}

#[test]
fn stamping_changes_offset_and_epoch_and_keeps_the_crc_valid() {
    let mut bytes = batch();
    let before = validate(&bytes, MAX).unwrap();
    stamp(&mut bytes, 1_234_567, 9).unwrap();
    let after = validate(&bytes, MAX).unwrap();
    assert_eq!(after.crc(), before.crc());
    assert_eq!(after.base_offset(), 1_234_567);
    assert_eq!(after.partition_leader_epoch(), 9);
    assert_eq!(after.last_offset(), 1_234_569);
    let offsets: Vec<i64> =
        records(&Bytes::from(bytes.clone())).unwrap().iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [1_234_567, 1_234_568, 1_234_569]);
    let decoded = RecordBatchDecoder::decode(&mut Bytes::from(bytes)).unwrap();
    assert_eq!(decoded.records[0].offset, 1_234_567);
    assert_eq!(decoded.records[0].partition_leader_epoch, 9);
    assert_eq!(stamp(&mut [0u8; 60], 0, 0), Err(BatchError::TooShort { needed: 61, actual: 60 }));
}

#[test]
fn log_append_time_rewrites_type_and_max_timestamp_under_a_fresh_crc() {
    for compression in [Compression::None, Compression::Zstd] {
        let options = BatchOptions { compression, ..BatchOptions::default() };
        let mut bytes = batch_with(&three(), options);
        let before = validate_deep(&bytes, MAX).unwrap();
        let after = set_log_append_time(&mut bytes, 42_000).unwrap();
        assert_eq!(validate_deep(&bytes, MAX), Ok(after));
        assert_ne!(after.crc(), before.crc());
        assert_eq!(after.timestamp_type(), TimestampType::LogAppend);
        assert_eq!(after.max_timestamp(), 42_000);
        assert_eq!(after.base_timestamp(), before.base_timestamp());
        assert_eq!(after.compression(), compression);
        let ours = records(&Bytes::from(bytes.clone())).unwrap();
        assert!(ours.iter().all(|r| r.timestamp == 42_000));
        // kafka-protocol accepts the CRC and sees the type; it reads record timestamps as
        // base + delta even under LogAppendTime (the Java client uses maxTimestamp, as we do).
        let decoded = RecordBatchDecoder::decode(&mut Bytes::from(bytes.clone())).unwrap();
        assert_eq!(decoded.records.len(), 3);
        for record in &decoded.records {
            assert_eq!(record.timestamp_type, kafka_protocol::records::TimestampType::LogAppend);
        }
        // Idempotent: the same time again leaves every byte alone.
        let snapshot = bytes.clone();
        set_log_append_time(&mut bytes, 42_000).unwrap();
        assert_eq!(bytes, snapshot);
    }
}

#[test]
fn log_append_time_refuses_to_launder_a_corrupt_batch() {
    let mut bytes = batch();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    assert!(matches!(set_log_append_time(&mut bytes, 1), Err(BatchError::CrcMismatch { .. })));
}

#[test]
fn errors_map_to_kafka_produce_errors() {
    use kafka_protocol::ResponseError;
    let crc = BatchError::CrcMismatch { stored: 1, computed: 2 };
    assert_eq!(crc.response_error(), ResponseError::CorruptMessage);
    let large = BatchError::TooLarge { bytes: 2, max: 1 };
    assert_eq!(large.response_error(), ResponseError::MessageTooLarge);
    assert_eq!(BatchError::NotOneBatch.response_error(), ResponseError::InvalidRecord);
}

#[test]
fn sequences_wrap_like_kafkas() {
    let mut bytes = batch();
    put(&mut bytes, BASE_SEQUENCE_AT, &(i32::MAX - 1).to_be_bytes());
    recrc(&mut bytes);
    let header = validate(&bytes, MAX).unwrap();
    assert_eq!(header.last_sequence(), 0);
    let header = validate(&batch(), MAX).unwrap();
    assert_eq!(header.last_sequence(), NO_SEQUENCE);
}

#[test]
fn a_delete_horizon_is_read_from_the_base_timestamp() {
    let options = BatchOptions { delete_horizon_ms: Some(5_000), ..BatchOptions::default() };
    let bytes = batch_with(&three(), options);
    let header = validate(&bytes, MAX).unwrap();
    assert_eq!(header.delete_horizon_ms(), Some(5_000));
    assert_eq!(header.base_timestamp(), 5_000);
    let timestamps: Vec<i64> =
        records(&Bytes::from(bytes)).unwrap().iter().map(|r| r.timestamp).collect();
    assert_eq!(timestamps, [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002]);
}

#[test]
fn a_log_append_time_header_is_the_header_set_log_append_time_writes() {
    for compression in [Compression::None, Compression::Lz4] {
        let options = BatchOptions { compression, ..BatchOptions::default() };
        let original = batch_with(&three(), options);
        let head = log_append_time_header(&original, 42_000).unwrap();
        let mut rewritten = original.clone();
        set_log_append_time(&mut rewritten, 42_000).unwrap();
        assert_eq!(&head[..], &rewritten[..BATCH_HEADER_BYTES]);
        assert_eq!(&original[BATCH_HEADER_BYTES..], &rewritten[BATCH_HEADER_BYTES..]);
        // The header in front of the untouched records makes a valid batch.
        let mut joined = head.to_vec();
        joined.extend_from_slice(&original[BATCH_HEADER_BYTES..]);
        assert_eq!(validate_deep(&joined, MAX).map(|h| h.max_timestamp()), Ok(42_000));
    }
    let mut corrupt = batch();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert!(matches!(log_append_time_header(&corrupt, 1), Err(BatchError::CrcMismatch { .. })));
    assert_eq!(head(&[0u8; 60]), Err(BatchError::TooShort { needed: 61, actual: 60 }));
    assert_eq!(head(&batch()).map(|h| h.to_vec()), Ok(batch()[..BATCH_HEADER_BYTES].to_vec()));
}
