//! A log whose checkpoint cannot be read at open (the read fails: a passing disk error) must not
//! open as if it had none. Without the checkpoint's recovery point, recovery takes every batch
//! for an unsynced tail, and a batch damaged in place (a latent sector error) among them looks
//! like a torn write: the log was cut there, and every acknowledged batch after it was deleted
//! for good. The open must fail instead, to be tried again, as it is when a segment's read
//! fails.
//!
//! The log holds 15 synced batches below its checkpoint's recovery point, one of them damaged.
//! It is reopened while a share of reads fail, until an open succeeds (at most 50 tries). That
//! open, and one after the faults end, must find the log ending where it did, every batch but
//! the damaged one intact.

use std::time::Duration;

use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, all_batches, batch, damage_batch, dir, read_range};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Batches appended, and the damaged one.
const BATCHES: u8 = 15;
const DAMAGED: u8 = 4;
/// Share of reads that fail while the log is reopened.
const READ_ERROR: f64 = 0.3;
/// Opens tried while reads fail.
const OPENS_MAX: usize = 50;

fn config() -> LogConfig {
    LogConfig { retention_ms: -1, ..LogConfig::default() }
}

fn offset_of(n: u8) -> Offset {
    Offset(i64::from(n) * BATCH_RECORDS)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    let stored = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            for n in 0..BATCHES {
                log.append(batch(n, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            log.checkpoint().await.map_err(|e| e.to_string())?;
            all_batches(&log).await
        })
        .ok_or("the appends did not finish")??;
    sim.kill(host);
    damage_batch(&sim, host, &stored, usize::from(DAMAGED), 61 + seed as usize % 40)?;
    sim.start(host);
    let end = offset_of(BATCHES);
    sim.set_disk_faults(host, DiskFaults { read_error: READ_ERROR, ..DiskFaults::default() });
    let opened = sim
        .block_on(host, limit, move |env| async move {
            for _ in 0..OPENS_MAX {
                if let Ok(log) = Log::open(env.clone(), dir(), config()).await {
                    return Some(log.log_end_offset());
                }
            }
            None
        })
        .ok_or("the opens did not finish")?;
    sim.set_disk_faults(host, DiskFaults::default());
    if let Some(reopened_end) = opened {
        ensure(reopened_end == end, || {
            format!("an open while reads failed found the log ending at {reopened_end}, not {end}")
        })?;
    }
    let (reopened_end, before, after) = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            let before = read_range(&log, Offset(0), offset_of(DAMAGED)).await?;
            let after = read_range(&log, offset_of(DAMAGED + 1), log.log_end_offset()).await?;
            Ok::<_, String>((log.log_end_offset(), before, after))
        })
        .ok_or("the last open did not finish")??;
    ensure(reopened_end == end, || {
        format!(
            "the log reopened ending at {reopened_end}, not {end}: acknowledged batches are gone"
        )
    })?;
    ensure(
        before[..] == stored[..usize::from(DAMAGED)]
            && after[..] == stored[usize::from(DAMAGED + 1)..],
        || {
            format!(
                "{} and {} batches read around the damage, not the ones stored",
                before.len(),
                after.len()
            )
        },
    )
}

#[test]
fn log_open_never_guesses_past_an_unread_checkpoint() {
    for_each_seed("log_open_never_guesses_past_an_unread_checkpoint", 0..32, scenario);
}
