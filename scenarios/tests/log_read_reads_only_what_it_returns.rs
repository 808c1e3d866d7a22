//! A read bounded by a byte budget reads from the disk about what it returns: the batches that
//! fit, the distance from the index entry it starts at, and the header of the first batch it
//! leaves out — not that batch's body. A consumer whose budget holds exactly one large batch
//! would otherwise cost two batches' reads (and checksums) per fetch.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir::log::batch::BATCH_HEADER_BYTES;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{INDEX_SLACK_BYTES, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::{ensure, for_each_seed, log};
use weir_sim::Sim;

/// Batches appended.
const BATCHES: usize = 30;
/// Bytes of a record's value.
const RECORD_BYTES: usize = 1024;

/// A batch of `records` records of 1 KiB.
fn batch(n: usize, records: usize) -> Bytes {
    let records: Vec<RecordSpec> = (0..records as i32)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000,
            key: Some(Bytes::from(format!("b{n}-{i}"))),
            value: Some(Bytes::from(vec![n as u8; RECORD_BYTES])),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&records, &BatchOptions::default()).expect("a valid batch")
}

/// The next of a sequence of numbers drawn from `state` (splitmix64).
fn mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("reader");
    // Batches of 16 to 64 records: each larger than the slack a read allows for the index.
    let mut state = seed;
    let sizes: Vec<usize> = (0..BATCHES).map(|_| 16 + (mix(&mut state) % 49) as usize).collect();
    let log = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env, log::dir(), LogConfig::default())
                .await
                .map_err(|e| e.to_string())?;
            for (n, &records) in sizes.iter().enumerate() {
                log.append(batch(n, records), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Arc::new(log))
        })
        .ok_or("the appends did not finish")??;
    let stored =
        {
            let log = Arc::clone(&log);
            sim.block_on(host, Duration::from_secs(60), move |_| async move {
                log::all_batches(&log).await
            })
            .ok_or("the read of the whole log did not finish")??
        };
    ensure(stored.len() == BATCHES, || format!("{} batches stored", stored.len()))?;
    let base = |b: &Bytes| i64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    for first in 0..BATCHES {
        for wanted in 1..=3usize.min(BATCHES - first) {
            let expected = &stored[first..first + wanted];
            // Room for the wanted batches and half the next: it must be left out, unread.
            let budget = expected.iter().map(Bytes::len).sum::<usize>()
                + stored.get(first + wanted).map_or(0, |next| next.len() / 2);
            let start = Offset(base(&stored[first]));
            let before = sim.bytes_read(host);
            let records = {
                let log = Arc::clone(&log);
                sim.block_on(host, Duration::from_secs(60), move |_| async move {
                    let end = log.log_end_offset();
                    log.read(start, budget, end).await.map_err(|e| e.to_string())
                })
                .ok_or("a read did not finish")??
                .records
            };
            let read = sim.bytes_read(host) - before;
            let got: Vec<Bytes> =
                split_batches(&records).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
            ensure(got == expected, || {
                format!(
                    "a read of {budget} bytes from batch {first} returned {} batches, not the \
                     {wanted} that fit it",
                    got.len()
                )
            })?;
            // The same batches again, bounded by an upper offset (a high watermark) at the
            // next batch instead of by the budget: the batch at the bound is left out too.
            if let Some(next) = stored.get(first + wanted) {
                let upper = Offset(base(next));
                let log = Arc::clone(&log);
                let bounded = sim
                    .block_on(host, Duration::from_secs(60), move |_| async move {
                        log.read(start, 64 << 20, upper).await.map_err(|e| e.to_string())
                    })
                    .ok_or("a read did not finish")??;
                ensure(bounded.records == records && bounded.next_offset == upper, || {
                    format!(
                        "a read from batch {first} below offset {upper} returned up to {}, not \
                         batches {first}..{}",
                        bounded.next_offset,
                        first + wanted
                    )
                })?;
            }
            let most = (budget + INDEX_SLACK_BYTES + BATCH_HEADER_BYTES) as u64;
            ensure(read <= most, || {
                format!(
                    "a read of {budget} bytes (batches {first}..{}) read {read} bytes from the \
                     disk; at most {most} are needed",
                    first + wanted
                )
            })?;
        }
    }
    Ok(())
}

#[test]
fn log_read_reads_only_what_it_returns() {
    for_each_seed("log_read_reads_only_what_it_returns", 0..8, scenario);
}
