//! Fault scenario: a partition log reopens while its disk flips a bit in some reads, and no
//! flipped bit may become what the log believes or answers. Reopening loads the active
//! segment's index entries and every sealed segment's largest timestamp from index files that
//! have no checksum, and keeps them for as long as it runs: a flipped bit there would send
//! every later read of the tail to a wrong place, decide retention and timestamp lookups from a
//! wrong timestamp, and be written back into the next index file as if it were true. A
//! timestamp lookup believes the time index as read, and the base offsets of the batches it
//! scans lie outside their CRC.
//!
//! The log is written, checkpointed and its host killed; it reopens under read faults, looks up
//! every third timestamp from below its lowest to above its highest (retrying a lookup that
//! fails, as a client would), and is rolled, which writes the active segment's index out.
//! Every lookup must give the model's answer, and every index entry on disk must then name what
//! its segment holds.
//!
//! Cluster sweep seed 0x160c4 (disk faults) found this: a flipped bit in a reopened leader's
//! active index named offset 16 at byte 0, where offset 0 is, and every read of the tail
//! failed. Without the fix, 0x160c4's class shows here as wrong index entries on disk, and
//! lookups answer wrong offsets (flipped base offsets, time index reads sending the search the
//! wrong way) or fail every time.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::log::batch::parse_header;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{FlushPolicy, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Host, Sim};

/// Batches appended before the log reopens.
const BATCHES: i64 = 48;
/// Records in each batch.
const RECORDS: i64 = 2;
/// Share of reads that return a flipped bit while the log reopens and is queried.
const READ_CORRUPTION: f64 = 0.1;
/// Timestamps looked up: every this many from below the lowest to above the highest.
const LOOKUP_STEP: usize = 3;
/// Lookups of one timestamp before the scenario gives up on it.
const LOOKUP_ATTEMPTS: usize = 20;

fn dir() -> PathBuf {
    PathBuf::from("events-0")
}

/// Small segments, so the log has sealed ones, and an index entry for nearly every batch.
fn config() -> LogConfig {
    LogConfig {
        flush_policy: FlushPolicy::Ack,
        retention_ms: -1,
        segment_bytes: 4_096,
        index_interval_bytes: 64,
        ..LogConfig::default()
    }
}

/// The timestamp of record `i` of batch `n`: rising, with dips, so the time index has entries
/// and the first record at or after a timestamp is not simply the one holding it.
fn timestamp(seed: u64, n: i64, i: i64) -> i64 {
    1_000 + n * 10 + i - (((seed as i64) + n * 7) % 5) * 12
}

fn batch(seed: u64, n: i64) -> Bytes {
    let records: Vec<RecordSpec> = (0..RECORDS)
        .map(|i| RecordSpec {
            offset_delta: i as i32,
            timestamp: timestamp(seed, n, i),
            key: Some(Bytes::from(format!("k{n}-{i}"))),
            value: Some(Bytes::from(vec![n as u8; 100 + (seed as usize * 13 + n as usize) % 200])),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&records, &BatchOptions::default()).expect("a valid batch")
}

/// The model's answer to a lookup of `at`: the first offset whose timestamp is at or after it.
fn first_at_or_after(seed: u64, at: i64) -> Lookup {
    (0..BATCHES)
        .flat_map(|n| (0..RECORDS).map(move |i| (n * RECORDS + i, timestamp(seed, n, i))))
        .find(|&(_, t)| t >= at)
        .map(|(offset, t)| (Offset(offset), t))
}

/// Looks up `at` as a client would: a read that failed (a flipped bit in every read of some
/// batch) is an error the client retries, and may succeed then; a wrong answer never may.
async fn lookup(log: &Log, at: i64) -> Result<Lookup, String> {
    let mut failed = Vec::new();
    while failed.len() < LOOKUP_ATTEMPTS {
        match log.offset_for_timestamp(at).await {
            Ok(found) => return Ok(found),
            Err(e) => failed.push(e.to_string()),
        }
    }
    Err(format!("looking up {at} failed every time: {failed:?}"))
}

async fn open(env: Env) -> Result<Log, String> {
    Log::open(env, dir(), config()).await.map_err(|e| e.to_string())
}

/// Every index entry in the log's folder that does not say what its segment holds: an offset
/// entry must name a batch boundary and that batch's base offset, a time entry a batch and the
/// largest timestamp of the segment up to and including it. Read without faults.
async fn wrong_index_entries(env: Env) -> Result<Vec<String>, String> {
    let read_all = |name: String| {
        let disk = env.disk.clone();
        async move {
            let file = disk.open(&dir().join(&name)).await.map_err(|e| e.to_string())?;
            file.read_at(0, file.len() as usize).await.map_err(|e| e.to_string())
        }
    };
    let (mut wrong, mut indexed) = (Vec::new(), 0);
    let names = env.disk.list(&dir()).await.map_err(|e| e.to_string())?;
    for name in &names {
        let Some(stem) = name.strip_suffix(".log") else { continue };
        if !names.contains(&format!("{stem}.index")) {
            // The active segment, fresh from the roll: its index is in memory only.
            continue;
        }
        let base: i64 = stem.parse().map_err(|_| format!("segment name {name}"))?;
        indexed += 1;
        // (position, base offset, largest timestamp so far) of every batch.
        let mut batches = Vec::new();
        let (mut position, mut max) = (0u64, i64::MIN);
        for stored in split_batches(&read_all(name.clone()).await?) {
            let stored = stored.map_err(|e| format!("{name}: {e}"))?;
            let header = parse_header(&stored).map_err(|e| format!("{name}: {e}"))?;
            max = max.max(header.max_timestamp());
            batches.push((position, header.base_offset(), max));
            position += stored.len() as u64;
        }
        let offsets = read_all(format!("{stem}.index")).await?;
        for entry in offsets.chunks_exact(8) {
            let relative = i64::from(u32::from_be_bytes(entry[..4].try_into().expect("4 bytes")));
            let at = u64::from(u32::from_be_bytes(entry[4..].try_into().expect("4 bytes")));
            if !batches.iter().any(|&(p, b, _)| p == at && b == base + relative) {
                wrong.push(format!("{stem}.index: offset {} at byte {at}", base + relative));
            }
        }
        let times = read_all(format!("{stem}.timeindex")).await?;
        for entry in times.chunks_exact(12) {
            let time = i64::from_be_bytes(entry[..8].try_into().expect("8 bytes"));
            let relative = i64::from(u32::from_be_bytes(entry[8..].try_into().expect("4 bytes")));
            if !batches.iter().any(|&(_, b, m)| b == base + relative && m == time) {
                wrong.push(format!("{stem}.timeindex: timestamp {time} at {}", base + relative));
            }
        }
    }
    ensure(indexed > 2, || format!("{indexed} segments have index files"))?;
    Ok(wrong)
}

/// What a timestamp lookup found: the offset and timestamp of the first record at or after it.
type Lookup = Option<(Offset, i64)>;

/// Writes the log on `host`, checkpointed (its active index written out with it), kills the
/// host, reopens the log under `faults`, looks up timestamps, rolls, and returns the lookups
/// and then, read without faults, the index entries that are wrong.
fn run(
    sim: &Sim,
    host: Host,
    seed: u64,
    faults: DiskFaults,
) -> Result<(Vec<Lookup>, Vec<String>), String> {
    let limit = Duration::from_secs(600);
    sim.block_on(host, limit, move |env| async move {
        let log = open(env).await?;
        for n in 0..BATCHES {
            log.append(batch(seed, n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        log.checkpoint().await.map_err(|e| e.to_string())?;
        ensure(log.segment_count() > 2, || format!("{} segments", log.segment_count()))
    })
    .ok_or("the appends did not finish")??;
    sim.kill(host);
    sim.set_disk_faults(host, faults);
    sim.start(host);
    let lookups = sim
        .block_on(host, limit, move |env| async move {
            let log = open(env).await?;
            ensure(log.log_end_offset() == Offset(BATCHES * RECORDS), || {
                format!("the log reopened ending at {:?}", log.log_end_offset())
            })?;
            let (lowest, highest) = (timestamp(seed, 0, 0) - 60, 1_000 + BATCHES * 10 + 60);
            let mut lookups = Vec::new();
            for at in (lowest..=highest).step_by(LOOKUP_STEP) {
                lookups.push(lookup(&log, at).await?);
            }
            log.roll().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(lookups)
        })
        .ok_or("the lookups did not finish")??;
    sim.kill(host);
    sim.set_disk_faults(host, DiskFaults::default());
    sim.start(host);
    let wrong =
        sim.block_on(host, limit, wrong_index_entries).ok_or("checking did not finish")??;
    Ok((lookups, wrong))
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let faulty = sim.add_client("faulty");
    let read_corruption = DiskFaults { read_corruption: READ_CORRUPTION, ..DiskFaults::default() };
    let (lookups, wrong) = run(&sim, faulty, seed, read_corruption)?;
    let lowest = timestamp(seed, 0, 0) - 60;
    for (at, got) in (lowest..).step_by(LOOKUP_STEP).zip(&lookups) {
        let want = first_at_or_after(seed, at);
        ensure(*got == want, || {
            format!("timestamp {at}: looked up {got:?}, the model says {want:?}")
        })?;
    }
    ensure(wrong.is_empty(), || format!("wrong index entries: {wrong:?}"))
}

#[test]
fn log_index_read_corruption_never_reaches_an_index() {
    for_each_seed("log_index_read_corruption_never_reaches_an_index", 0..128, scenario);
}
