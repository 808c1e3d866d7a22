//! A follower's cut must not fall below its target because of damage far below it. A latent
//! sector error in a synced batch is damage that reads report; the batches after it are intact
//! and acknowledged. A cut that walked the holding segment from its start stopped at the damage
//! and cut there, deleting every batch between the damage and the target (on a follower still in
//! the ISR, acknowledged batches that a failover to it would lose).
//!
//! The log holds 15 batches of one segment (sealed by a roll, or still active, by seed) with an
//! index entry every batch or every few batches, by seed. Batch 2, 10 or 11 is damaged (by seed:
//! far below the cut, or among the batches the cut walks), then the log is cut inside batch 12.
//! The log must end at batch 12, before and after a crash and reopen; every batch below it but
//! the damaged one must read back exactly, the damaged one must fail to read; and the largest
//! timestamp must be batch 4's.

use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{Log, LogConfig, ReadError};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{damage_batch, dir, read_range};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches in the holding segment.
const BATCHES: u8 = 15;
/// The batches that may be damaged.
const DAMAGED: [u8; 3] = [2, 10, 11];
/// The batch holding the cut.
const CUT: u8 = 12;
/// The batch with the largest timestamp below the cut, and the one above it.
const NEWEST_KEPT: u8 = 4;
const NEWEST: u8 = 13;
/// Records per batch.
const RECORDS: i64 = 3;

/// Batch `n`'s timestamp: growing, but for two that jump ahead.
fn timestamp(n: u8) -> i64 {
    match n {
        NEWEST_KEPT => 5_000,
        NEWEST => 9_000,
        n => 1_000 + 10 * i64::from(n),
    }
}

/// Batch `n`: [`RECORDS`] records of 200 bytes of `n`, at [`timestamp`].
fn batch(n: u8) -> Bytes {
    let records: Vec<RecordSpec> = (0..RECORDS as i32)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: timestamp(n),
            key: Some(Bytes::from(format!("k{n}-{i}"))),
            value: Some(Bytes::from(vec![n; 200])),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&records, &BatchOptions::default()).expect("a valid batch")
}

fn offset_of(n: u8) -> Offset {
    Offset(i64::from(n) * RECORDS)
}

/// No retention by time (the timestamps are old); an index entry every batch (1 byte) or about
/// every third one.
fn config(seed: u64) -> LogConfig {
    let interval = if (seed / 2).is_multiple_of(2) { 1 } else { 1_500 };
    LogConfig { retention_ms: -1, index_interval_bytes: interval, ..LogConfig::default() }
}

/// Checks the cut log (`when`: before or after the reopen) against the batches `stored`.
async fn check(log: &Log, stored: &[Bytes], damaged: u8, when: &str) -> Result<(), String> {
    let end = log.log_end_offset();
    ensure(end == offset_of(CUT), || {
        format!("{when}, the log ends at {end}, not {}: the cut fell short", offset_of(CUT))
    })?;
    let before =
        read_range(log, Offset(0), offset_of(damaged)).await.map_err(|e| format!("{when}, {e}"))?;
    ensure(before[..] == stored[..usize::from(damaged)], || {
        format!("{when}, {} batches read before the damage, not the ones stored", before.len())
    })?;
    let read_damaged = log.read(offset_of(damaged), 1 << 20, end).await;
    ensure(matches!(read_damaged, Err(ReadError::Corrupt { .. })), || {
        format!("{when}, reading the damaged batch gave {read_damaged:?}, not a corruption error")
    })?;
    let after =
        read_range(log, offset_of(damaged + 1), end).await.map_err(|e| format!("{when}, {e}"))?;
    ensure(after[..] == stored[usize::from(damaged + 1)..usize::from(CUT)], || {
        format!("{when}, {} batches read past the damage, not the ones stored", after.len())
    })?;
    let newest = log.offset_of_max_timestamp().await.map_err(|e| e.to_string())?;
    let expected = (offset_of(NEWEST_KEPT), timestamp(NEWEST_KEPT));
    ensure(newest == Some(expected), || {
        format!("{when}, the largest timestamp is {newest:?}, not {expected:?}")
    })
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    let sealed = seed % 2 == 1;
    let damaged = DAMAGED[(seed / 12 % 3) as usize];
    let stored = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config(seed)).await.map_err(|e| e.to_string())?;
            for n in 0..BATCHES {
                log.append(batch(n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            if sealed {
                log.roll().await.map_err(|e| e.to_string())?;
                log.append(batch(BATCHES), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            log.checkpoint().await.map_err(|e| e.to_string())?;
            read_range(&log, Offset(0), log.log_end_offset()).await
        })
        .ok_or("the appends did not finish")??;
    sim.kill(host);
    // A bit of the damaged batch's records, inside its CRC.
    damage_batch(&sim, host, &stored, usize::from(damaged), 61 + seed as usize % 40)?;
    sim.start(host);
    let target = Offset(offset_of(CUT).0 + (seed / 4 % 3) as i64);
    let kept = stored.clone();
    sim.block_on(host, limit, move |env| async move {
        let log = Log::open(env, dir(), config(seed)).await.map_err(|e| e.to_string())?;
        let end = log.truncate_to(target).await.map_err(|e| e.to_string())?;
        ensure(end == offset_of(CUT), || format!("cutting at {target} answered {end}"))?;
        check(&log, &kept, damaged, "after the cut").await
    })
    .ok_or("the cut did not finish")??;
    sim.kill(host);
    sim.start(host);
    sim.block_on(host, limit, move |env| async move {
        let log = Log::open(env, dir(), config(seed)).await.map_err(|e| e.to_string())?;
        check(&log, &stored, damaged, "after a crash and reopen").await
    })
    .ok_or("the reopen did not finish")?
}

#[test]
fn log_truncation_keeps_batches_past_damage_below_the_cut() {
    for_each_seed("log_truncation_keeps_batches_past_damage_below_the_cut", 0..36, scenario);
}
