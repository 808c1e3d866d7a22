//! A checkpoint whose read returns a flipped bit must be read again before it is ignored. The
//! partition checkpoint is the only record of where DeleteRecords moved the log start (and of
//! the recovery point): a log that took one bad read of it for damage reopened with its
//! deleted records back in view, and walked its whole log as an unflushed tail.
//!
//! A log is written, its start moved by DeleteRecords, checkpointed, and its host killed; it
//! reopens while its disk flips a bit in a third of all reads. It must reopen starting where
//! DeleteRecords left it, and ending where it ended.

use std::time::Duration;

use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, batch, dir};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Batches appended.
const BATCHES: u8 = 10;
/// Share of reads that return a flipped bit while the log reopens.
const READ_CORRUPTION: f64 = 0.3;

/// One segment for all the batches, and no retention by time (their timestamps are old).
fn config() -> LogConfig {
    LogConfig { retention_ms: -1, ..LogConfig::default() }
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    let start = Offset(BATCH_RECORDS * 4 + 1);
    let end = Offset(BATCH_RECORDS * i64::from(BATCHES));
    sim.block_on(host, limit, move |env| async move {
        let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
        for n in 0..BATCHES {
            log.append(batch(n, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        log.delete_records_before(start, end).await.map_err(|e| e.to_string())?;
        log.checkpoint().await.map_err(|e| e.to_string())?;
        ensure(log.durable_log_start_offset() == start, || {
            format!("the durable log start is {}", log.durable_log_start_offset())
        })
    })
    .ok_or("the appends did not finish")??;
    sim.kill(host);
    sim.set_disk_faults(
        host,
        DiskFaults { read_corruption: READ_CORRUPTION, ..Default::default() },
    );
    sim.start(host);
    let (reopened_start, reopened_end) = sim
        .block_on(host, limit, |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((log.log_start_offset(), log.log_end_offset()))
        })
        .ok_or("the reopen did not finish")??;
    ensure(reopened_start == start, || {
        format!("the log reopened starting at {reopened_start}: DeleteRecords left it at {start}")
    })?;
    ensure(reopened_end == end, || format!("the log reopened ending at {reopened_end}, not {end}"))
}

#[test]
fn log_checkpoint_read_again_before_it_is_ignored() {
    for_each_seed("log_checkpoint_read_again_before_it_is_ignored", 0..32, scenario);
}
