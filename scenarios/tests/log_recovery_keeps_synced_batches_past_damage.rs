//! Recovery must never cut off synced batches. The partition checkpoint vouches that every byte
//! of the active segment below its recovery point was synced; recovery walks only what follows,
//! starting from the index entries the checkpoint wrote. Here those index files are gone, so
//! recovery walks the segment from its start, and it meets a batch damaged by a latent sector
//! error below the recovery point. That is damage to report, as in a sealed segment — never a
//! torn tail to cut off, which would delete every acknowledged batch after it, and on a leader
//! make its followers delete them too.
//!
//! With an odd seed the same happens to a sealed segment: a roll seals the batches' segment, its
//! index files are gone, and recovery walks it from its start though it trusts it whole.
//!
//! For one seed in four the damage is in the batch's partition leader epoch (outside its CRC),
//! raising it: recovery must not believe that epoch, or every later batch looks older than the
//! log's history and the batches past the recovery point are cut off as a torn tail.
//!
//! After the reopen the log must end where it did; every batch but the damaged one must read back
//! exactly (those between the damage and the recovery point too: the walk goes on past the
//! damage, so they stay indexed); a read of the damaged batch must fail.

use std::time::Duration;

use weir::log::{Log, LogConfig, ReadError};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, all_batches, batch, damage_batch, dir, read_range};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches appended before the checkpoint, and after it.
const BEFORE: u8 = 10;
const AFTER: u8 = 5;
/// The damaged batch, below the recovery point.
const DAMAGED: u8 = 5;
/// A byte of a batch's partition leader epoch (bytes 12 to 15, big-endian, outside the CRC).
const EPOCH_BYTE: usize = 13;

/// One segment for all the batches, and no retention by time (their timestamps are old).
fn config() -> LogConfig {
    LogConfig { retention_ms: -1, ..LogConfig::default() }
}

/// The first offset of batch `n`.
fn offset_of(n: u8) -> Offset {
    Offset(i64::from(n) * BATCH_RECORDS)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    let sealed = seed % 2 == 1;
    let stored = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            for n in 0..BEFORE + AFTER {
                if n == BEFORE && !sealed {
                    log.checkpoint().await.map_err(|e| e.to_string())?;
                }
                log.append(batch(n, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            if sealed {
                log.roll().await.map_err(|e| e.to_string())?;
                log.append(batch(BEFORE + AFTER, None), LeaderEpoch(0))
                    .await
                    .map_err(|e| e.to_string())?;
                log.checkpoint().await.map_err(|e| e.to_string())?;
            }
            all_batches(&log).await
        })
        .ok_or("the appends did not finish")??;
    let batches = usize::from(BEFORE + AFTER) + usize::from(sealed);
    ensure(stored.len() == batches, || format!("{} batches", stored.len()))?;
    sim.kill(host);
    // A bit of the damaged batch's records, inside its CRC (or of its epoch's second byte,
    // which the batches' epoch 0 can only raise), and the active index files go.
    let within = if seed % 4 == 2 { EPOCH_BYTE } else { 61 + seed as usize % 40 };
    damage_batch(&sim, host, &stored, usize::from(DAMAGED), within)?;
    sim.start(host);
    let end = offset_of(BEFORE + AFTER + u8::from(sealed));
    let (reopened_end, before, damaged, after) = sim
        .block_on(host, limit, move |env| async move {
            for ext in ["index", "timeindex"] {
                let path = dir().join(format!("{:020}.{ext}", 0));
                env.disk.remove(&path).await.map_err(|e| format!("removing {ext}: {e}"))?;
            }
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            let reopened_end = log.log_end_offset();
            let before = read_range(&log, Offset(0), offset_of(DAMAGED)).await?;
            let damaged = log.read(offset_of(DAMAGED), 1 << 20, end).await;
            let after = read_range(&log, offset_of(DAMAGED + 1), end).await?;
            Ok::<_, String>((reopened_end, before, damaged, after))
        })
        .ok_or("the reopen did not finish")??;
    ensure(reopened_end == end, || {
        format!(
            "the log reopened ending at {reopened_end}, not {end}: acknowledged batches are gone"
        )
    })?;
    ensure(before[..] == stored[..usize::from(DAMAGED)], || {
        format!("{} batches read before the damage, not the ones stored", before.len())
    })?;
    ensure(after[..] == stored[usize::from(DAMAGED + 1)..], || {
        format!("{} batches read past the damage, not the ones stored", after.len())
    })?;
    ensure(matches!(damaged, Err(ReadError::Corrupt { .. })), || {
        format!("reading the damaged batch gave {damaged:?}, not a corruption error")
    })
}

#[test]
fn log_recovery_keeps_synced_batches_past_damage() {
    for_each_seed("log_recovery_keeps_synced_batches_past_damage", 0..16, scenario);
}
