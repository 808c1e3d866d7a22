//! Fault scenario: a partition log's host is killed with an unflushed tail (`flush.policy=
//! interval`), and while the log recovers its disk flips a bit in some reads. Recovery verifies
//! the tail, writes it again (against fsyncgate) and syncs it, and the checkpoint then vouches
//! for it: a flipped bit from one of those reads must never be what reaches the disk. After a
//! power failure the log must reopen to exactly what recovery reported, every batch intact.
//!
//! Seeds 0x40e and 0x477 of the broker workload with disk faults found this: recovery wrote
//! back a fresh read of the tail instead of the bytes it had verified, so a passing read fault
//! became a corrupt batch below the recovery point, and the partition never opened again.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::log::split::split_batches;
use weir::log::{FlushPolicy, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Batches in the unflushed tail.
const BATCHES: usize = 40;
/// Share of reads that return a flipped bit while the log recovers.
const READ_CORRUPTION: f64 = 0.3;

fn dir() -> PathBuf {
    PathBuf::from("events-interval-0")
}

/// Interval flushing that is never due: the tail stays in the page cache until recovery.
fn config() -> LogConfig {
    LogConfig { flush_policy: FlushPolicy::Interval, retention_ms: -1, ..LogConfig::default() }
}

fn batch(seed: u64, n: usize) -> Bytes {
    weir_scenarios::log::varied_batch(seed, n, 4, (40, 300))
}

/// Every batch of `log` from its start, as stored; an error if any read fails.
async fn all_batches(log: &Log) -> Result<Vec<Bytes>, String> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    let end = log.log_end_offset();
    while at < end {
        let read = log.read(at, 1 << 20, end).await.map_err(|e| format!("reading {at:?}: {e}"))?;
        for batch in split_batches(&read.records) {
            out.push(batch.map_err(|e| format!("splitting at {at:?}: {e}"))?);
        }
        at = read.next_offset;
    }
    Ok(out)
}

async fn open(env: Env) -> Result<Log, String> {
    Log::open(env, dir(), config()).await.map_err(|e| e.to_string())
}

/// Appends the tail, none of it synced, and returns its batches as stored.
async fn append_unflushed(env: Env, seed: u64) -> Result<Vec<Bytes>, String> {
    let log = open(env).await?;
    for n in 0..BATCHES {
        log.append(batch(seed, n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
    }
    ensure(log.durable_offset() == Offset(0), || "the tail was synced".to_owned())?;
    all_batches(&log).await
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(600);
    let appended = sim
        .block_on(host, limit, move |env| append_unflushed(env, seed))
        .ok_or("the appends did not finish")??;
    ensure(appended.len() == BATCHES, || format!("{} batches appended", appended.len()))?;

    // The process dies; the page cache, and so the whole tail, survives it.
    sim.kill(host);
    sim.set_disk_faults(
        host,
        DiskFaults { read_corruption: READ_CORRUPTION, ..DiskFaults::default() },
    );
    sim.start(host);
    let recovered = sim
        .block_on(host, limit, |env: Env| async move {
            let log = open(env).await?;
            Ok::<_, String>(log.log_end_offset())
        })
        .ok_or("the recovery did not finish")??;

    // Recovery synced what it kept; a power failure now must not change a byte of it.
    sim.set_disk_faults(host, DiskFaults::default());
    sim.power_fail(host);
    sim.start(host);
    let (end, batches) = sim
        .block_on(host, limit, |env: Env| async move {
            let log = open(env).await?;
            let batches = all_batches(&log).await?;
            Ok::<_, String>((log.log_end_offset(), batches))
        })
        .ok_or("the reopen did not finish")??;
    ensure(end == recovered, || {
        format!("recovery reported the log ending at {recovered:?}, it reopened ending at {end:?}")
    })?;
    ensure(batches.len() <= appended.len() && batches[..] == appended[..batches.len()], || {
        format!("the reopened log is not a prefix of what was appended ({} batches)", batches.len())
    })?;
    ensure(end.0 > 0, || "recovery kept nothing".to_owned())
}

#[test]
fn log_recovery_read_corruption_never_reaches_disk() {
    for_each_seed("log_recovery_read_corruption_never_reaches_disk", 0..32, scenario);
}
