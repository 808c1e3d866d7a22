//! Properties of the RecordBatch v2 code in `weir::log`, against kafka-protocol as the reference
//! codec:
//!
//! - what we encode, with any codec, validates and reads back exactly, and kafka-protocol's
//!   decoder reads the same records from it;
//! - what kafka-protocol encodes, we validate and read the same way;
//! - no mutation of a valid batch — flipped bytes, lying fields with a recomputed CRC, truncation,
//!   appended junk — makes any entry point panic, and whatever still validates genuinely carries
//!   its CRC and reads back.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
};
use proptest::prelude::*;
use proptest::sample::Index;

use weir::log::batch::{
    BatchHeader, Compression, TimestampType, parse_header, set_log_append_time, stamp, validate,
    validate_deep, validate_produce,
};
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::records::{Header, Record, records};
use weir::log::split::{single_batch, split_batches};

fn codec() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd),
    ]
}

fn nullable_bytes(max: usize) -> impl Strategy<Value = Option<Bytes>> {
    prop::option::weighted(0.8, prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from))
}

/// Header keys from a small alphabet, so repeats happen; always UTF-8 for kafka-protocol.
fn header() -> impl Strategy<Value = Header> {
    ("[a-c]{0,2}", nullable_bytes(8))
        .prop_map(|(key, value)| Header { key: Bytes::from(key), value })
}

/// (key, value, headers, timestamp offset from the batch's first timestamp)
type Fields = (Option<Bytes>, Option<Bytes>, Vec<Header>, i64);

fn fields() -> impl Strategy<Value = Fields> {
    (
        nullable_bytes(40),
        nullable_bytes(200),
        prop::collection::vec(header(), 0..4),
        -10_000i64..10_000,
    )
}

fn options() -> impl Strategy<Value = BatchOptions> {
    (
        (0i64..1 << 40, -1i32..50, codec(), prop::option::of(0i64..1 << 42)),
        (-1i64..1000, -1i16..5, -1i32..1000, any::<bool>()),
    )
        .prop_map(
            |(
                (base_offset, leader_epoch, compression, log_append_time),
                (pid, epoch, seq, txn),
            )| {
                BatchOptions {
                    base_offset,
                    leader_epoch,
                    compression,
                    log_append_time,
                    producer_id: pid,
                    producer_epoch: epoch,
                    base_sequence: seq,
                    transactional: txn,
                    ..BatchOptions::default()
                }
            },
        )
}

fn specs(all: Vec<Fields>, first_timestamp: i64) -> Vec<RecordSpec> {
    all.into_iter()
        .zip(0i32..)
        .map(|((key, value, headers, skew), offset_delta)| RecordSpec {
            offset_delta,
            timestamp: first_timestamp + skew,
            key,
            value,
            headers,
        })
        .collect()
}

fn expected(specs: &[RecordSpec], options: &BatchOptions) -> Vec<Record> {
    specs
        .iter()
        .map(|spec| Record {
            offset: options.base_offset + i64::from(spec.offset_delta),
            timestamp: options.log_append_time.unwrap_or(spec.timestamp),
            key: spec.key.clone(),
            value: spec.value.clone(),
            headers: spec.headers.clone(),
        })
        .collect()
}

fn check_header(header: &BatchHeader, specs: &[RecordSpec], options: &BatchOptions, len: usize) {
    assert_eq!(header.total_bytes(), len);
    assert_eq!(header.base_offset(), options.base_offset);
    assert_eq!(header.partition_leader_epoch(), options.leader_epoch);
    assert_eq!(header.record_count() as usize, specs.len());
    assert_eq!(header.producer_id(), options.producer_id);
    assert_eq!(header.producer_epoch(), options.producer_epoch);
    assert_eq!(header.base_sequence(), options.base_sequence);
    assert_eq!(header.is_transactional(), options.transactional);
    let compression = match specs.is_empty() {
        true => Compression::None,
        false => options.compression,
    };
    assert_eq!(header.compression(), compression);
    let log_append = options.log_append_time.is_some();
    assert_eq!(header.timestamp_type() == TimestampType::LogAppend, log_append);
}

/// kafka-protocol's view of our batch: same records, headers folded into its map.
fn check_against_kafka_protocol(bytes: &Bytes, specs: &[RecordSpec], options: &BatchOptions) {
    let decoded = RecordBatchDecoder::decode(&mut bytes.clone()).unwrap();
    assert_eq!(decoded.records.len(), specs.len());
    for (theirs, spec) in decoded.records.iter().zip(specs) {
        assert_eq!(theirs.offset, options.base_offset + i64::from(spec.offset_delta));
        // kafka-protocol reads base + delta even under LogAppendTime.
        assert_eq!(theirs.timestamp, spec.timestamp);
        assert_eq!(theirs.key, spec.key);
        assert_eq!(theirs.value, spec.value);
        assert_eq!(theirs.producer_id, options.producer_id);
        assert_eq!(theirs.transactional, options.transactional);
        let mut headers = IndexMap::new();
        for header in &spec.headers {
            let key = StrBytes::from_utf8(header.key.clone()).unwrap();
            headers.insert(key, header.value.clone());
        }
        assert_eq!(theirs.headers, headers);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn encoded_batches_validate_and_read_back_exactly(
        all in prop::collection::vec(fields(), 0..12),
        first_timestamp in 0i64..1 << 41,
        options in options(),
    ) {
        let specs = specs(all, first_timestamp);
        let bytes = encode_batch(&specs, &options).unwrap();
        let header = validate(&bytes, usize::MAX).unwrap();
        check_header(&header, &specs, &options, bytes.len());
        prop_assert_eq!(validate_deep(&bytes, usize::MAX), Ok(header));
        prop_assert_eq!(records(&bytes).unwrap(), expected(&specs, &options));
        let produce = validate_produce(&bytes, usize::MAX);
        // Transactional batches are refused: transactions are not supported.
        let acceptable = !specs.is_empty()
            && !options.transactional
            && (options.producer_id < 0 || options.base_sequence >= 0);
        prop_assert_eq!(produce.is_ok(), acceptable, "{:?}", produce);
        prop_assert_eq!(single_batch(&bytes), Ok(bytes.clone()));
        check_against_kafka_protocol(&bytes, &specs, &options);
    }

    #[test]
    fn stamping_and_log_append_time_keep_batches_valid(
        all in prop::collection::vec(fields(), 1..6),
        options in options(),
        base_offset in any::<i64>(),
        epoch in any::<i32>(),
        append_time in any::<i64>(),
    ) {
        let specs = specs(all, 1_700_000_000_000);
        let mut bytes = encode_batch(&specs, &options).unwrap().to_vec();
        let crc = validate_deep(&bytes, usize::MAX).unwrap().crc();
        stamp(&mut bytes, base_offset, epoch).unwrap();
        let stamped = validate_deep(&bytes, usize::MAX).unwrap();
        prop_assert_eq!(stamped.crc(), crc);
        prop_assert_eq!((stamped.base_offset(), stamped.partition_leader_epoch()), (base_offset, epoch));
        set_log_append_time(&mut bytes, append_time).unwrap();
        let header = validate_deep(&bytes, usize::MAX).unwrap();
        prop_assert_eq!(header.max_timestamp(), append_time);
        let read = records(&Bytes::from(bytes)).unwrap();
        prop_assert!(read.iter().all(|record| record.timestamp == append_time));
        prop_assert_eq!(read.len(), specs.len());
    }

    #[test]
    fn kafka_protocol_batches_validate_and_read_the_same(
        all in prop::collection::vec(fields(), 1..10),
        compression in codec(),
        base_offset in 0i64..1 << 40,
    ) {
        let theirs: Vec<KpRecord> = all.iter().enumerate().map(|(i, (key, value, headers, skew))| {
            KpRecord {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 3,
                producer_id: 11,
                producer_epoch: 1,
                timestamp_type: kafka_protocol::records::TimestampType::Creation,
                offset: base_offset + i as i64,
                sequence: i as i32,
                timestamp: 1_700_000_000_000 + skew,
                key: key.clone(),
                value: value.clone(),
                headers: headers
                    .iter()
                    .map(|h| (StrBytes::from_utf8(h.key.clone()).unwrap(), h.value.clone()))
                    .collect(),
            }
        }).collect();
        let mut buf = BytesMut::new();
        let encode_options = RecordEncodeOptions { version: 2, compression };
        RecordBatchEncoder::encode(&mut buf, &theirs, &encode_options).unwrap();
        let bytes = single_batch(&buf.freeze()).unwrap();
        let header = validate_produce(&bytes, usize::MAX).unwrap();
        prop_assert_eq!(header.record_count() as usize, theirs.len());
        prop_assert_eq!(header.last_sequence(), theirs.len() as i32 - 1);
        let ours = records(&bytes).unwrap();
        for (ours, theirs) in ours.iter().zip(&theirs) {
            prop_assert_eq!(ours.offset, theirs.offset);
            prop_assert_eq!(ours.timestamp, theirs.timestamp);
            prop_assert_eq!(&ours.key, &theirs.key);
            prop_assert_eq!(&ours.value, &theirs.value);
            prop_assert_eq!(ours.headers.len(), theirs.headers.len());
        }
    }
}

/// One change to a batch's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR a byte anywhere.
    Flip(Index, u8),
    /// Overwrite a header byte (where lies about lengths and counts live).
    Header(Index, u8),
    /// Overwrite a byte of the records payload.
    Payload(Index, u8),
    /// Cut the batch short.
    Truncate(Index),
    /// Append junk.
    Extend(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 1u8..).prop_map(|(at, x)| Mutation::Flip(at, x)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Mutation::Header(at, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Mutation::Payload(at, b)),
        any::<Index>().prop_map(Mutation::Truncate),
        prop::collection::vec(any::<u8>(), 1..80).prop_map(Mutation::Extend),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len();
    match mutation {
        Mutation::Flip(at, x) if len > 0 => bytes[at.index(len)] ^= x,
        Mutation::Header(at, b) if len > 0 => bytes[at.index(len.min(61))] = *b,
        Mutation::Payload(at, b) if len > 61 => bytes[61 + at.index(len - 61)] = *b,
        Mutation::Truncate(at) if len > 0 => bytes.truncate(at.index(len)),
        Mutation::Extend(junk) => bytes.extend_from_slice(junk),
        _ => {}
    }
}

fn recompute_crc(bytes: &mut [u8]) {
    if bytes.len() >= 21 {
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }
}

/// Every entry point, on bytes that may be anything; none may panic.
fn exercise(bytes: &[u8]) {
    let shared = Bytes::copy_from_slice(bytes);
    let _ = parse_header(bytes);
    let shallow = validate(bytes, usize::MAX);
    let deep = validate_deep(bytes, usize::MAX);
    let _ = validate_produce(bytes, usize::MAX);
    let read = records(&shared);
    let _ = split_batches(&shared).count();
    let _ = single_batch(&shared);
    let _ = stamp(&mut bytes.to_vec(), 5, 5);
    let _ = set_log_append_time(&mut bytes.to_vec(), 5);

    if let Ok(header) = shallow {
        assert_eq!(header.total_bytes(), bytes.len());
        let stored = u32::from_be_bytes(bytes[17..21].try_into().unwrap());
        assert_eq!(stored, crc32c::crc32c(&bytes[21..]));
        assert_eq!(header.crc(), stored);
    }
    if let Ok(header) = deep {
        // Deep validation and reading must agree: one parser, two callers.
        let read = read.unwrap();
        assert_eq!(read.len(), header.record_count() as usize);
    } else if shallow.is_ok() {
        assert!(read.is_err(), "deep {deep:?} failed but records() read {read:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn mutated_batches_never_panic_and_never_validate_without_their_crc(
        all in prop::collection::vec(fields(), 0..6),
        options in options(),
        mutations in prop::collection::vec(mutation(), 1..4),
        fix_crc in any::<bool>(),
    ) {
        let specs = specs(all, 1_700_000_000_000);
        let mut bytes = encode_batch(&specs, &options).unwrap().to_vec();
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        if fix_crc {
            recompute_crc(&mut bytes);
        }
        exercise(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        exercise(&bytes);
    }
}
