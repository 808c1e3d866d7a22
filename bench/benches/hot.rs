//! Microbenchmarks of the broker's hot functions, so a regression shows up as a number: batch
//! validation (CRC-32C and header checks) on produce, decoding a Produce request frame, framing
//! a Fetch response, the offset index lookup, and a fetch-sized read of whole batches from a log
//! in the page cache.
//!
//! A small harness rather than a framework: each case runs for a fixed time after a warm-up,
//! and prints nanoseconds per operation (and MB/s where bytes move). `cargo bench -p weir-bench`
//! runs it; `cargo bench -p weir-bench -- NAME` runs the cases whose name contains NAME.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes, encode_request_header_into_buffer};
use weir::log::batch::validate_produce;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::index::{OffsetEntry, floor_offset};
use weir::log::{FlushPolicy, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir::protocol::{Response, decode_request, encode_response};

/// How long each case is timed.
const MEASURE: Duration = Duration::from_millis(700);
/// How long each case runs before timing starts.
const WARM_UP: Duration = Duration::from_millis(150);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A Fetch v12 response of one partition holding `records`, and the request header it answers.
fn fetch_response(records: Bytes) -> (RequestHeader, Response) {
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    let partition =
        PartitionData::default().with_high_watermark(1 << 20).with_records(Some(records));
    let topic = FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("bench")))
        .with_partitions(vec![partition]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(12)
        .with_correlation_id(1);
    (header, Response::Fetch(FetchResponse::default().with_responses(vec![topic])))
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; anything else is a name filter.
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f));
    println!("{:<52} {:>12} {:>12} {:>10}", "case", "ns/op", "MB/s", "ops");

    for (records, size) in [(16usize, 1024usize), (64, 1024), (160, 100)] {
        let batch = batch_of(records, size)?;
        let name = format!("validate_produce {records}×{size} B ({} B batch)", batch.len());
        if wanted(&name) {
            time(&name, batch.len(), || {
                black_box(validate_produce(black_box(&batch), usize::MAX).is_ok());
            });
        }
    }

    let batch = batch_of(16, 1024)?;
    let frame = produce_frame(&batch)?;
    let name = format!("decode_request Produce v9, one 16 KiB batch ({} B)", frame.len());
    if wanted(&name) {
        time(&name, frame.len(), || {
            black_box(decode_request(black_box(frame.clone())).is_ok());
        });
    }

    // A fetch response of 1 MiB of records: framing it should not cost a copy of them.
    let records: Bytes = (0..1usize << 20).map(|i| i as u8).collect::<Vec<_>>().into();
    let (header, response) = fetch_response(records);
    let name = "encode_response Fetch v12, 1 MiB of records";
    if wanted(name) {
        time(name, 1 << 20, || {
            black_box(encode_response(black_box(&header), black_box(&response)).is_some());
        });
    }

    for entries in [1_000u32, 100_000] {
        // Entries every 4 KiB of log, as `index.interval.bytes` makes them, 4 records apart.
        let index: Vec<OffsetEntry> =
            (0..entries).map(|i| OffsetEntry { relative: i * 4, position: i * 4096 }).collect();
        let name = format!("index floor_offset, {entries} entries");
        if wanted(&name) {
            let mut probe = 0u32;
            time(&name, 0, || {
                probe = probe.wrapping_mul(1_103_515_245).wrapping_add(12_345) % (entries * 4);
                black_box(floor_offset(black_box(&index), probe));
            });
        }
    }

    let name = "runtime: one disk-pool round trip (spawn_blocking)";
    if wanted(name) {
        // Every file operation of the production disk pays this once: the floor under any
        // read or append, whatever its size.
        let runtime = weir::runtime::build_runtime()?;
        runtime.block_on(async {
            let start = Instant::now();
            let mut ops = 0u64;
            while start.elapsed() < MEASURE {
                black_box(tokio::task::spawn_blocking(|| black_box(1u64)).await.ok());
                ops += 1;
            }
            report(name, start.elapsed(), ops, 0);
        });
    }

    let name = "Log::append 16 KiB batch, interval (page cache)";
    if wanted(name) {
        log_append(name)?;
    }

    for budget in [64usize << 10, 1 << 20] {
        let name = format!("Log::read {} KiB of 16 KiB batches (page cache)", budget >> 10);
        if wanted(&name) {
            log_read(&name, budget)?;
        }
    }
    Ok(())
}

/// Runs `op` repeatedly for [`MEASURE`] after [`WARM_UP`], and prints its cost.
fn time(name: &str, bytes_per_op: usize, mut op: impl FnMut()) {
    let warm = Instant::now();
    while warm.elapsed() < WARM_UP {
        op();
    }
    let mut ops = 0u64;
    let mut batch = 1u64;
    let start = Instant::now();
    loop {
        for _ in 0..batch {
            op();
        }
        ops += batch;
        if start.elapsed() >= MEASURE {
            break;
        }
        batch = (batch * 2).min(1 << 16);
    }
    report(name, start.elapsed(), ops, bytes_per_op);
}

fn report(name: &str, elapsed: Duration, ops: u64, bytes_per_op: usize) {
    let ns = elapsed.as_nanos() as f64 / ops.max(1) as f64;
    let mbs = if bytes_per_op > 0 {
        format!("{:.0}", bytes_per_op as f64 / ns * 1e3)
    } else {
        "-".to_owned()
    };
    println!("{name:<52} {ns:>12.1} {mbs:>12} {ops:>10}");
}

/// A batch of `records` records of `size` payload bytes, as a producer sends it.
fn batch_of(records: usize, size: usize) -> Result<Bytes> {
    let value = Bytes::from(vec![0x5a; size]);
    let specs: Vec<RecordSpec> = (0..records)
        .map(|i| RecordSpec {
            offset_delta: i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: None,
            value: Some(value.clone()),
            headers: Vec::new(),
        })
        .collect();
    Ok(encode_batch(&specs, &BatchOptions::default())?)
}

/// A Produce v9 request body (after the frame's size) carrying `batch` for one partition.
fn produce_frame(batch: &Bytes) -> Result<Bytes> {
    const VERSION: i16 = 9;
    let mut header = RequestHeader::default();
    header.request_api_key = ApiKey::Produce as i16;
    header.request_api_version = VERSION;
    header.correlation_id = 7;
    header.client_id = Some(StrBytes::from_static_str("rdkafka"));
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(batch.clone());
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_static_str("bench-topic"));
    topic.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 30_000;
    request.topic_data = vec![topic];
    let mut buf = BytesMut::new();
    encode_request_header_into_buffer(&mut buf, &header)?;
    request.encode(&mut buf, VERSION)?;
    Ok(buf.freeze())
}

/// Batches appended untimed before [`log_append`] times [`APPENDS_TIMED`] more: a fixed count,
/// not a duration, so that the file stays at 160 MiB however fast the disk is.
const APPENDS_WARM_UP: u64 = 2048;
/// Batches [`log_append`] times.
const APPENDS_TIMED: u64 = 8192;

/// Times appends of one 16 KiB batch of 1 KiB records by one appender: validation, stamping,
/// the write into the page cache and the index, without a sync. The whole run is done twice and
/// only the second is reported: it writes into the pages the first freed, not into memory the
/// host of a virtual machine has taken back (which costs a fault per page, and dominates).
fn log_append(name: &str) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("weir-hot-append-{}", std::process::id()));
    let runtime = weir::runtime::build_runtime()?;
    let mut last = (Duration::ZERO, 0);
    for _pass in 0..2 {
        std::fs::create_dir_all(&dir)?;
        let outcome = runtime.block_on(async {
            let env = weir::runtime::production_env(dir.clone());
            let config = LogConfig { flush_policy: FlushPolicy::Interval, ..LogConfig::default() };
            let log = Log::open(env, PathBuf::from("append"), config).await?;
            let batch = batch_of(16, 1024)?;
            for _ in 0..APPENDS_WARM_UP {
                log.append(batch.clone(), LeaderEpoch(0)).await?;
            }
            let start = Instant::now();
            for _ in 0..APPENDS_TIMED {
                black_box(log.append(batch.clone(), LeaderEpoch(0)).await?);
            }
            let elapsed = start.elapsed();
            log.close().await?;
            Result::Ok((elapsed, batch.len()))
        });
        let _ = std::fs::remove_dir_all(&dir);
        last = outcome?;
    }
    let (elapsed, bytes_per_op) = last;
    report(name, elapsed, APPENDS_TIMED, bytes_per_op);
    Ok(())
}

/// Fills a log with 32 MiB of 16 KiB batches, then times reads of `budget` bytes from offsets
/// spread over it (the log's files stay in the page cache: this is the CPU cost of a fetch).
fn log_read(name: &str, budget: usize) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("weir-hot-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let runtime = weir::runtime::build_runtime()?;
    let outcome = runtime.block_on(async {
        let env = weir::runtime::production_env(dir.clone());
        let config = LogConfig { flush_policy: FlushPolicy::Interval, ..LogConfig::default() };
        let log = Log::open(env, PathBuf::from("read"), config).await?;
        let batch = batch_of(16, 1024)?;
        for _ in 0..2048 {
            log.append(Bytes::copy_from_slice(&batch), LeaderEpoch(0)).await?;
        }
        let end = log.log_end_offset();
        let mut probe = 0i64;
        let mut next = || {
            probe = (probe * 1_103_515_245 + 12_345).rem_euclid(end.0);
            Offset(probe)
        };
        let warm = Instant::now();
        while warm.elapsed() < WARM_UP {
            black_box(log.read(next(), budget, end).await?);
        }
        let (mut ops, mut bytes) = (0u64, 0usize);
        let start = Instant::now();
        while start.elapsed() < MEASURE {
            let got = log.read(next(), budget, end).await?;
            bytes += got.records.len();
            ops += 1;
        }
        let elapsed = start.elapsed();
        log.close().await?;
        Result::Ok((elapsed, ops, bytes / ops.max(1) as usize))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (elapsed, ops, bytes_per_op) = outcome?;
    report(name, elapsed, ops, bytes_per_op);
    Ok(())
}
