//! Group commit under `flush.policy=ack`: many tasks append to one log, each waiting for its
//! batch to be durable before appending the next. Every appender is waiting on a sync at any
//! moment, so one `fdatasync` per round of appends is the fewest possible. A sync that starts
//! before the appenders the last one released have appended again leaves them for the sync after
//! it, and the syncs per round double (each carries half the appenders). The disk's syncs are
//! slow here, as a real device's are next to page-cache writes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Tasks appending concurrently.
const APPENDERS: usize = 16;
/// Batches each of them appends, one after the other.
const ROUNDS: usize = 20;
/// Records per batch.
const RECORDS: i32 = 4;

fn batch(appender: usize, round: usize) -> Bytes {
    let records: Vec<RecordSpec> = (0..RECORDS)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000,
            key: Some(Bytes::from(format!("a{appender}-r{round}-{i}"))),
            value: Some(Bytes::from(vec![appender as u8; 200])),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&records, &BatchOptions::default()).expect("a valid batch")
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    sim.set_disk_faults(
        host,
        DiskFaults { sync_latency: Duration::from_millis(2), ..DiskFaults::default() },
    );
    let log = sim
        .block_on(host, Duration::from_secs(60), |env| async move {
            Log::open(env, PathBuf::from("events-0"), LogConfig::default())
                .await
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .ok_or("the log did not open")??;
    let syncs_before = sim.file_syncs(host);
    let finished = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for appender in 0..APPENDERS {
        let (log, finished, errors) =
            (Arc::clone(&log), Arc::clone(&finished), Arc::clone(&errors));
        tasks.push(sim.spawn(host, "appender", move |_| async move {
            for round in 0..ROUNDS {
                if let Err(e) = log.append(batch(appender, round), LeaderEpoch(0)).await {
                    errors.lock().unwrap_or_else(|p| p.into_inner()).push(e.to_string());
                    return;
                }
            }
            finished.fetch_add(1, Ordering::SeqCst);
        }));
    }
    sim.run_until(Duration::from_secs(60), || finished.load(Ordering::SeqCst) == APPENDERS);
    let errors = errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    ensure(errors.is_empty(), || format!("appends failed: {errors:?}"))?;
    ensure(finished.load(Ordering::SeqCst) == APPENDERS, || {
        format!("{} of {APPENDERS} appenders finished", finished.load(Ordering::SeqCst))
    })?;
    let syncs = sim.file_syncs(host) - syncs_before;
    // The simulator runs ready tasks in a random order, so a leader may start a sync before
    // the last appender it released is back: allow a quarter more than one sync per round. A
    // leader that does not wait for them at all takes two per round.
    let most = ROUNDS as u64 * 5 / 4;
    ensure(syncs <= most, || {
        format!(
            "{syncs} syncs for {ROUNDS} rounds of {APPENDERS} appenders (at most {most}): \
             {:.1} appends per sync",
            (APPENDERS * ROUNDS) as f64 / syncs as f64
        )
    })?;
    // Everything is there, durable and in one piece.
    let end = Offset((APPENDERS * ROUNDS) as i64 * i64::from(RECORDS));
    let (durable, batches) = sim
        .block_on(host, Duration::from_secs(60), move |_| async move {
            let read = log.read(Offset(0), 64 << 20, end).await.map_err(|e| e.to_string())?;
            let batches = split_batches(&read.records).count();
            Ok::<_, String>((log.durable_offset(), batches))
        })
        .ok_or("the read did not finish")??;
    ensure(durable == end, || format!("durable to {durable}, not {end}"))?;
    ensure(batches == APPENDERS * ROUNDS, || format!("{batches} batches read back"))
}

#[test]
fn log_group_commit_carries_every_waiting_appender() {
    for_each_seed("log_group_commit_carries_every_waiting_appender", 0..16, scenario);
}
