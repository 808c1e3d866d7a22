//! A damaged batch is repaired in place from an intact copy (as a follower gets one from its
//! leader), and nothing else is written. Until repairs, a latent sector error stayed in a log
//! for good, even where every other replica held the batch intact.
//!
//! The log holds 20 batches, in an active segment or a sealed one (by seed). One batch is
//! damaged in place, in its records or in its length field, or two in a row are (by seed).
//! Before any repair, copies that must change no byte of the segment are offered: an intact
//! batch's own copy (it reads intact: nothing to repair), the damaged batch's copy stamped with
//! another leader epoch, a batch of the damaged one's offsets but another length, and a batch
//! past the log end. Then the damaged batches are repaired, the second of two first (by seed): it is found
//! past the first's damage through the length field, or, where that field is the damaged part,
//! the repair says the damage begins at the first. After the repairs every read from every
//! offset returns the batches as stored, and so does the log reopened after a power failure
//! (the copy was synced).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{Log, LogConfig, Repair};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{
    BATCH_RECORDS, all_batches, batch, check_reads_around_damage, damage_batch, dir, log_of_batches,
};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches in the segment.
const BATCHES: u8 = 20;

/// The offsets of batch `n`.
fn offsets(n: u8) -> (Offset, Offset) {
    let base = i64::from(n) * BATCH_RECORDS;
    (Offset(base), Offset(base + BATCH_RECORDS - 1))
}

/// A batch of `records` records of 200 bytes, stored from `base` in `epoch`.
fn other_batch(base: Offset, records: i32, epoch: LeaderEpoch) -> Bytes {
    let specs: Vec<RecordSpec> = (0..records)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000,
            key: Some(Bytes::from(format!("other-{i}"))),
            value: Some(Bytes::from(vec![7u8; 200])),
            headers: Vec::new(),
        })
        .collect();
    let options = BatchOptions { base_offset: base.0, leader_epoch: epoch.0, ..Default::default() };
    encode_batch(&specs, &options).expect("a valid batch")
}

async fn repair(log: &Log, copy: Bytes) -> Result<Repair, String> {
    log.repair(copy).await.map_err(|e| format!("repair: {e}"))
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let sealed = seed % 2 == 1;
    let first = (seed / 2 % u64::from(BATCHES)) as u8;
    let length_field = seed / 40 % 2 == 1;
    let two = seed / 80 % 2 == 1 && first + 1 < BATCHES;
    let damaged: Vec<u8> = if two { vec![first, first + 1] } else { vec![first] };
    let (log, stored) = log_of_batches(&sim, host, BATCHES, sealed)?;
    for &n in &damaged {
        // In the length field (outside the CRC), or in the records (inside it).
        let within = if length_field { 8 + seed as usize % 4 } else { 61 + seed as usize % 40 };
        damage_batch(&sim, host, &stored, usize::from(n), within)?;
    }
    let log2 = Arc::clone(&log);
    let (stored2, damaged2) = (stored.clone(), damaged.clone());
    let segment = dir().join(format!("{:020}.log", 0));
    let before = sim.durable_contents(host, &segment).map_err(|e| e.to_string())?;
    sim.block_on(host, Duration::from_secs(60), move |env| async move {
        let (log, stored, damaged) = (log2, stored2, damaged2);
        let target = *damaged.last().expect("one damaged");
        let (base, last) = offsets(target);
        let intact = (0..BATCHES).find(|n| !damaged.contains(n)).expect("an intact batch");
        let refused = [
            ("an intact batch's copy", stored[usize::from(intact)].clone(), true),
            ("another epoch", batch(target, Some((base, LeaderEpoch(1)))), false),
            ("another length", other_batch(base, 3, LeaderEpoch(0)), false),
            ("past the end", other_batch(log.log_end_offset(), 1, LeaderEpoch(0)), false),
        ];
        for (what, copy, intact) in refused {
            let outcome = repair(&log, copy).await?;
            let fine = if intact {
                outcome == Repair::Intact
            } else {
                matches!(outcome, Repair::Mismatch(_) | Repair::Earlier(_))
            };
            ensure(fine, || format!("{what}: {outcome:?}"))?;
        }
        check_reads_around_damage(&log, &stored, &damaged).await?;
        let now = env.disk.open(&segment).await.map_err(|e| e.to_string())?;
        let now = now.read_at(0, before.len() + 1).await.map_err(|e| e.to_string())?;
        ensure(now == before, || "a copy that does not fit changed the segment".to_owned())?;
        // The last damaged batch first: past the first's damage if its length field leads there.
        let outcome = repair(&log, stored[usize::from(target)].clone()).await?;
        let first_base = offsets(damaged[0]).0;
        match outcome {
            Repair::Repaired { base: b, last: l } if (b, l) == (base, last) => {}
            Repair::Earlier(at) if two && length_field && at == first_base => {
                let again = repair(&log, stored[usize::from(damaged[0])].clone()).await?;
                ensure(matches!(again, Repair::Repaired { .. }), || format!("first: {again:?}"))?;
                let again = repair(&log, stored[usize::from(target)].clone()).await?;
                ensure(matches!(again, Repair::Repaired { .. }), || format!("then: {again:?}"))?;
            }
            other => return Err(format!("repairing batch {target} ({damaged:?}): {other:?}")),
        }
        let left: Vec<u8> = damaged.iter().copied().filter(|&n| n != target).collect();
        check_reads_around_damage(&log, &stored, &left).await?;
        for n in left {
            let outcome = repair(&log, stored[usize::from(n)].clone()).await?;
            ensure(matches!(outcome, Repair::Repaired { .. }), || format!("{n}: {outcome:?}"))?;
        }
        check_reads_around_damage(&log, &stored, &[]).await
    })
    .ok_or("the repairs did not finish")??;
    drop(log);
    sim.power_fail(host);
    sim.start(host);
    let config = LogConfig { retention_ms: -1, ..LogConfig::default() };
    let batches = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env, dir(), config).await.map_err(|e| e.to_string())?;
            all_batches(&log).await
        })
        .ok_or("the reopen did not finish")??;
    let upto = batches.len().min(stored.len());
    ensure(batches.len() >= stored.len() && batches[..upto] == stored[..], || {
        format!("after a power failure the log holds {} batches, not as stored", batches.len())
    })
}

#[test]
fn log_repair_writes_an_intact_copy_over_a_damaged_batch() {
    for_each_seed("log_repair_writes_an_intact_copy_over_a_damaged_batch", 0..160, scenario);
}
