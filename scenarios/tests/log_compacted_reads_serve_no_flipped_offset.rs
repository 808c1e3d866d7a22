//! A compacted log has offset gaps, so the offset sequence cannot vouch for a batch's base
//! offset, which lies outside its CRC: a read whose disk flips a bit there would serve the
//! batch's records under other offsets, and a timestamp lookup would answer one. Such a log must
//! read a batch's base offset again before it believes it.
//!
//! A compacted log is written and cleaned (leaving gaps), and its host killed; it reopens while
//! its disk flips a bit in a tenth of all reads, and is read from its start again and again
//! (retrying a read that fails, as a client would), and each record's timestamp looked up.
//! Every batch a read returns must be byte for byte the one stored at its offset; every lookup
//! must find the record's offset.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use weir::log::batch::parse_header;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{CleanOutcome, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::compacted;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Batches appended, one record each, over [`KEYS`] keys.
const BATCHES: i64 = 60;
const KEYS: i64 = 5;
/// Share of reads that return a flipped bit once the log is compacted.
const READ_CORRUPTION: f64 = 0.1;
/// Times the whole log is read under faults.
const PASSES: usize = 4;
/// Reads of one place before the scenario gives up on it.
const ATTEMPTS: usize = 40;

fn dir() -> PathBuf {
    PathBuf::from("compact-0")
}

fn config() -> LogConfig {
    compacted()
}

/// Batch `n`: one record of key `key-(n % KEYS)`, whose timestamp is `n`-th and unique.
fn batch(seed: u64, n: i64) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 50_000 + n * 10,
        key: Some(Bytes::from(format!("key-{}", n % KEYS))),
        value: Some(Bytes::from(vec![n as u8; 20 + (seed as usize + n as usize) % 60])),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

/// Every batch from the log's start, by base offset; reads that fail are retried.
async fn read_all(log: &Log) -> Result<BTreeMap<i64, Bytes>, String> {
    let (mut batches, mut at, end) =
        (BTreeMap::new(), log.log_start_offset(), log.log_end_offset());
    let mut failed = 0;
    while at < end {
        let read = match log.read(at, 1 << 20, end).await {
            Ok(read) => read,
            Err(_) if failed < ATTEMPTS => {
                failed += 1;
                continue;
            }
            Err(e) => return Err(format!("reading {at} failed {failed} times: {e}")),
        };
        failed = 0;
        ensure(read.next_offset > at, || format!("a read at {at} made no progress"))?;
        for stored in split_batches(&read.records) {
            let stored = stored.map_err(|e| e.to_string())?;
            let base = parse_header(&stored).map_err(|e| e.to_string())?.base_offset();
            batches.insert(base, stored);
        }
        at = read.next_offset;
    }
    Ok(batches)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(600);
    let stored = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env.clone(), dir(), config()).await.map_err(|e| e.to_string())?;
            for n in 0..BATCHES {
                log.append(batch(seed, n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            let end = log.log_end_offset();
            let outcome = log.clean(env.clock.wall_ms(), end).await.map_err(|e| e.to_string())?;
            ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || format!("{outcome:?}"))?;
            log.close().await.map_err(|e| e.to_string())?;
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            read_all(&log).await
        })
        .ok_or("the appends did not finish")??;
    let kept = stored.len() as i64;
    ensure((KEYS..BATCHES).contains(&kept), || format!("{kept} batches left by the clean"))?;
    sim.kill(host);
    sim.set_disk_faults(
        host,
        DiskFaults { read_corruption: READ_CORRUPTION, ..Default::default() },
    );
    sim.start(host);
    let (passes, lookups) = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            let mut passes = Vec::new();
            for _ in 0..PASSES {
                passes.push(read_all(&log).await?);
            }
            let mut lookups = Vec::new();
            for n in 0..BATCHES {
                let at = 50_000 + n * 10;
                let mut attempt = 0;
                let found = loop {
                    match log.offset_for_timestamp(at).await {
                        Ok(found) => break found,
                        Err(_) if attempt < ATTEMPTS => attempt += 1,
                        Err(e) => return Err(format!("looking up {at} failed: {e}")),
                    }
                };
                lookups.push((n, found));
            }
            Ok::<_, String>((passes, lookups))
        })
        .ok_or("the reads did not finish")??;
    for read in &passes {
        for (base, batch) in read {
            ensure(stored.get(base) == Some(batch), || {
                format!("a read returned a batch at {base} that is not the one stored there")
            })?;
        }
        ensure(read.len() == stored.len(), || {
            format!("a read returned {} batches, {} are stored", read.len(), stored.len())
        })?;
    }
    // The batches the clean left a record in (it keeps an emptied batch where a segment ends).
    let mut records =
        stored.iter().filter(|(_, b)| parse_header(b).is_ok_and(|h| h.record_count() > 0));
    let records: Vec<i64> = records.by_ref().map(|(&base, _)| base).collect();
    for (n, found) in lookups {
        // The first record kept at or after batch n's timestamp: batch n's, or the next kept.
        let want = records.iter().find(|&&b| b >= n).map(|&b| (Offset(b), 50_000 + b * 10));
        ensure(found == want, || {
            format!("looking up batch {n}'s time found {found:?}, not {want:?}")
        })?;
    }
    Ok(())
}

#[test]
fn log_compacted_reads_serve_no_flipped_offset() {
    for_each_seed("log_compacted_reads_serve_no_flipped_offset", 0..32, scenario);
}
