//! Retention deletes the oldest segments: it takes them out of the log, makes the new log start
//! durable (a synced checkpoint) and removes their files (a synced folder), which on a slow disk
//! takes several sync latencies. Appends to the active segment must go on meanwhile, and the
//! deletion must still complete: the log starts past the deleted segments and holds the new
//! batches.

use std::sync::Arc;
use std::time::Duration;

use weir::log::{Log, LogConfig};
use weir::model::LeaderEpoch;
use weir_scenarios::log::{all_batches, appends_beside, batch, dir, segment_per_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// How long each sync takes on the slow disk.
const SYNC: Duration = Duration::from_millis(20);
/// Batches written first, each in its own segment.
const OLD: u8 = 4;
/// Batches appended while retention runs.
const APPENDS: u8 = 8;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    let log = sim
        .block_on(host, Duration::from_secs(60), |env| async move {
            let log =
                Log::open(env, dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
            for n in 0..OLD {
                log.append(batch(n, None), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
            }
            // From here on the active segment has room for every later batch, and the log
            // keeps as little as retention allows: only the active segment.
            log.set_config(LogConfig { retention_bytes: 1, ..LogConfig::default() });
            Ok::<_, String>(Arc::new(log))
        })
        .ok_or("the log did not open")??;
    let end = log.log_end_offset();
    appends_beside(&sim, host, &log, "retention", SYNC, OLD, APPENDS, move |log| async move {
        if let Err(e) = log.apply_retention(end).await {
            eprintln!("retention failed: {e}");
        }
    })?;
    let start = log.log_start_offset();
    ensure(start > weir::model::Offset(0), || "retention deleted nothing".into())?;
    let batches = sim
        .block_on(host, Duration::from_secs(60), move |_| async move { all_batches(&log).await })
        .ok_or("the read did not finish")??;
    // The last old batch (the active segment) and every new one are left.
    let left = 1 + usize::from(APPENDS);
    ensure(batches.len() == left, || {
        format!("{} batches left from {start} (expected {left})", batches.len())
    })
}

#[test]
fn log_retention_does_not_hold_up_appends() {
    for_each_seed("log_retention_does_not_hold_up_appends", 0..16, scenario);
}
