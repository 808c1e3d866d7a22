//! A damaged batch is repaired in place from an intact copy (as a follower gets one from its
//! leader), and nothing else is written. Until repairs, a latent sector error stayed in a log
//! for good, even where every other replica held the batch intact.
//!
//! The log holds 20 batches, in an active segment or a sealed one (by seed). One batch is
//! damaged in place, in its records, its length field, its leader epoch or its base offset
//! (the last two outside its CRC), or two in a row are (by seed).
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
use weir::log::split::split_batches;
use weir::log::{Log, LogConfig, Repair};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{
    BATCH_RECORDS, all_batches, batch, check_reads_around_damage, compacted, damage_batch, dir,
    first_segment, log_of_batches, write_first_segment,
};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

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
    // By seed, outside the CRC: the leader epoch, or the base offset (a batch intact by its
    // own checks, that disagrees with the epoch history, or with where it lies).
    let outside = !length_field && seed.is_multiple_of(5);
    let base_offset = outside && seed / 20 % 2 == 1;
    // (Two adjacent batches with flipped base offsets are not repaired: neither can be vouched
    // to end where the other begins.)
    let two = seed / 80 % 2 == 1 && first + 1 < BATCHES && !base_offset;
    let damaged: Vec<u8> = if two { vec![first, first + 1] } else { vec![first] };
    let (log, stored) = log_of_batches(&sim, host, BATCHES, sealed)?;
    for &n in &damaged {
        // In the length field (outside the CRC), or in the records (inside it).
        let within = if length_field {
            8 + seed as usize % 4
        } else if base_offset {
            7
        } else if outside {
            12 + seed as usize / 5 % 4
        } else {
            61 + seed as usize % 40
        };
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
        let whole = (0..BATCHES).find(|n| !damaged.contains(n)).expect("an intact batch");
        let refused = [
            ("an intact batch's copy", stored[usize::from(whole)].clone(), true),
            ("another epoch", batch(target, Some((base, LeaderEpoch(1)))), false),
            ("another length", other_batch(base, 3, LeaderEpoch(0)), false),
            ("past the end", other_batch(log.log_end_offset(), 1, LeaderEpoch(0)), false),
        ];
        for (what, copy, intact) in refused {
            let outcome = repair(&log, copy).await?;
            let fine = if intact {
                outcome == Repair::Intact { base: offsets(whole).0, last: offsets(whole).1 }
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

/// A batch of batch 1's offsets, its records' values sized so that the whole is `want` bytes.
fn copy_of_len(want: usize) -> Result<Bytes, String> {
    let (base, _) = offsets(1);
    for first in 0..2_000usize {
        let specs: Vec<RecordSpec> = (0..BATCH_RECORDS as i32)
            .map(|i| RecordSpec {
                offset_delta: i,
                timestamp: 1_000,
                key: Some(Bytes::from(format!("k1-{i}"))),
                value: Some(Bytes::from(vec![1u8; if i == 0 { first } else { 200 }])),
                headers: Vec::new(),
            })
            .collect();
        let options = BatchOptions { base_offset: base.0, leader_epoch: 0, ..Default::default() };
        let bytes = encode_batch(&specs, &options).map_err(|e| e.to_string())?;
        if bytes.len() == want {
            return Ok(bytes);
        }
    }
    Err(format!("no copy of {want} bytes"))
}

/// In a compacted log each replica compacts its own copy, so the leader's copy of a batch may
/// be longer than the follower's damaged one (not compacted yet), and by seed exactly as long as
/// the damaged batch and the intact one after it. Such a copy ends on a batch boundary and past
/// the batch's offsets a gap is allowed: it must not be written over the intact batch. The
/// damaged batch's own length field, which disagrees, tells. The copy of the right length is
/// then written.
fn compacted_scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let config = LogConfig { retention_ms: -1, ..compacted() };
    let config = LogConfig { segment_bytes: 1 << 20, ..config };
    let stored: Vec<Bytes> =
        (0..6u8).map(|n| batch(n, Some((offsets(n).0, LeaderEpoch(0))))).collect();
    let log = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env, dir(), config).await.map_err(|e| e.to_string())?;
            for n in 0..6u8 {
                log.append(batch(n, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Arc::new(log))
        })
        .ok_or("the appends did not finish")??;
    damage_batch(&sim, host, &stored, 1, 61 + seed as usize % 40)?;
    let longer =
        copy_of_len(stored[1].len() + if seed.is_multiple_of(2) { stored[2].len() } else { 0 })?;
    let segment = dir().join(format!("{:020}.log", 0));
    let before = sim.durable_contents(host, &segment).map_err(|e| e.to_string())?;
    let (l, right) = (Arc::clone(&log), stored[1].clone());
    let outcome = sim
        .block_on(host, Duration::from_secs(60), move |_env| async move {
            let outcome = repair(&l, longer).await?;
            let now = all_batches(&l).await.err();
            Ok::<_, String>((outcome, now))
        })
        .ok_or("the repair did not finish")??;
    if seed.is_multiple_of(2) {
        ensure(matches!(outcome.0, Repair::Mismatch(_)), || format!("longer: {outcome:?}"))?;
        let now = sim.durable_contents(host, &segment).map_err(|e| e.to_string())?;
        ensure(now == before, || "the longer copy changed the segment".to_owned())?;
        let l = Arc::clone(&log);
        let fixed =
            sim.block_on(host, Duration::from_secs(60), move |_env| async move {
                repair(&l, right).await
            })
            .ok_or("the repair did not finish")??;
        ensure(matches!(fixed, Repair::Repaired { .. }), || format!("right copy: {fixed:?}"))?;
    } else {
        // Same length, other records (as the leader's compaction may leave): it fits.
        ensure(matches!(outcome.0, Repair::Repaired { .. }), || format!("{outcome:?}"))?;
    }
    let read = sim
        .block_on(host, Duration::from_secs(60), move |_env| async move { all_batches(&log).await })
        .ok_or("the read did not finish")??;
    let bases: Vec<i64> = read
        .iter()
        .map(|b| weir::log::batch::parse_header(b).map(|h| h.base_offset()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let want: Vec<i64> = (0..6u8).map(|n| offsets(n).0.0).collect();
    ensure(bases == want, || format!("batches read back start at {bases:?}, not {want:?}"))
}

#[test]
fn log_repair_of_a_compacted_log_never_reaches_over_an_intact_batch() {
    for_each_seed(
        "log_repair_of_a_compacted_log_never_reaches_over_an_intact_batch",
        0..8,
        compacted_scenario,
    );
}

/// A repair whose write or sync fails takes the log offline, as a failed append does: the
/// failed sync may have dropped the unsynced appends after it (fsyncgate), and a later sync
/// must not report them durable.
fn failed_sync_scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let (log, stored) = log_of_batches(&sim, host, 5, false)?;
    damage_batch(&sim, host, &stored, 1, 61 + seed as usize % 40)?;
    let l = Arc::clone(&log);
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        for n in 5..9 {
            l.append_unsynced(batch(n, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    })
    .ok_or("the appends did not finish")??;
    let faults = if seed.is_multiple_of(2) {
        DiskFaults { sync_error: 1.0, ..DiskFaults::default() }
    } else {
        DiskFaults { write_error: 1.0, ..DiskFaults::default() }
    };
    sim.set_disk_faults(host, faults.clone());
    let (l, copy) = (Arc::clone(&log), stored[1].clone());
    let outcome = sim
        .block_on(host, Duration::from_secs(60), move |_env| async move { l.repair(copy).await })
        .ok_or("the repair did not finish")?;
    sim.set_disk_faults(host, DiskFaults::default());
    ensure(outcome.is_err() && log.offline().is_some(), || {
        format!("a repair under {faults:?} gave {outcome:?}, the log offline: {:?}", log.offline())
    })
}

#[test]
fn log_repair_that_fails_to_write_takes_the_log_offline() {
    for_each_seed(
        "log_repair_that_fails_to_write_takes_the_log_offline",
        0..4,
        failed_sync_scenario,
    );
}

/// A compacted follower log `[0..=2] [6..=8] [9..=11] [12..=14]` (its cleaner removed 3..=5,
/// which the leader still holds) with 6..=8 damaged: the walk meets the damage expecting offset
/// 3 or later. The leader's 3..=5, as long as the damaged batch, must not be taken for it
/// (offsets 6..=8 would be gone without a word); the leader's 6..=8 is then written.
fn compacted_gap_scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let config = LogConfig { retention_ms: -1, segment_bytes: 1 << 20, ..compacted() };
    let stored = |n: u8, at: i64| batch(n, Some((Offset(at), LeaderEpoch(0))));
    let held: Vec<Bytes> = vec![stored(0, 0), stored(2, 6), stored(3, 9), stored(4, 12)];
    let (gone, damaged) = (stored(1, 3), held[1].clone());
    ensure(gone.len() == damaged.len(), || "the batches differ in length".to_owned())?;
    let segment = first_segment();
    let written = held.clone();
    let log = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            write_first_segment(&env, &written).await?;
            Log::open(env, dir(), config).await.map_err(|e| e.to_string())
        })
        .ok_or("the open did not finish")??;
    let at = held[0].len() + 61 + seed as usize % 40;
    sim.corrupt_file(host, &segment, at as u64).map_err(|e| e.to_string())?;
    let before = sim.durable_contents(host, &segment).map_err(|e| e.to_string())?;
    let log = Arc::new(log);
    let l = Arc::clone(&log);
    let outcome = sim
        .block_on(host, Duration::from_secs(60), move |_env| async move { repair(&l, gone).await })
        .ok_or("the repair did not finish")??;
    ensure(!matches!(outcome, Repair::Repaired { .. }), || format!("3..=5: {outcome:?}"))?;
    let now = sim.durable_contents(host, &segment).map_err(|e| e.to_string())?;
    ensure(now == before, || "the copy of 3..=5 changed the segment".to_owned())?;
    let read = sim
        .block_on(host, Duration::from_secs(60), move |_env| async move {
            let fixed = repair(&log, damaged).await?;
            ensure(matches!(fixed, Repair::Repaired { .. }), || format!("6..=8: {fixed:?}"))?;
            all_batches(&log).await
        })
        .ok_or("the repair did not finish")??;
    ensure(read == held, || format!("{} batches read back, not as held", read.len()))
}

#[test]
fn log_repair_never_takes_a_batch_a_gap_hides_for_the_damaged_one() {
    for_each_seed(
        "log_repair_never_takes_a_batch_a_gap_hides_for_the_damaged_one",
        0..8,
        compacted_gap_scenario,
    );
}

/// Two adjacent batches damaged (as one bad sector damages several small batches), each in its
/// records or in its length field, or the second (by seed) in its base offset, outside its CRC:
/// the first is repaired while the second is still damaged (its header states where it starts,
/// or it passes its own checks there), then the second.
fn adjacent_scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let (log, stored) = log_of_batches(&sim, host, BATCHES, seed % 2 == 1)?;
    let first = 1 + (seed / 2 % u64::from(BATCHES - 2)) as u8;
    let flipped_base = (seed >> 4) % 2 == 1;
    for (i, n) in [first, first + 1].into_iter().enumerate() {
        let within = if i == 1 && flipped_base {
            7
        } else if (seed >> (2 + i)) % 2 == 1 {
            8 + seed as usize % 4
        } else {
            61
        };
        damage_batch(&sim, host, &stored, usize::from(n), within)?;
    }
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        for n in [first, first + 1] {
            let outcome = repair(&log, stored[usize::from(n)].clone()).await?;
            let (base, last) = offsets(n);
            ensure(outcome == Repair::Repaired { base, last }, || format!("{n}: {outcome:?}"))?;
        }
        check_reads_around_damage(&log, &stored, &[]).await
    })
    .ok_or("the repairs did not finish")?
}

#[test]
fn log_repair_of_adjacent_damaged_batches_goes_in_either_order() {
    for_each_seed(
        "log_repair_of_adjacent_damaged_batches_goes_in_either_order",
        0..32,
        adjacent_scenario,
    );
}

/// A damaged batch the log start lies inside (a DeleteRecords to its middle) still holds
/// offsets the log serves: it is repaired like any other, and reads from the log start return
/// it intact.
fn straddled_scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let target = 1 + (seed % u64::from(BATCHES - 1)) as u8;
    let (log, stored) = log_of_batches(&sim, host, BATCHES, seed % 2 == 1)?;
    damage_batch(&sim, host, &stored, usize::from(target), 61 + seed as usize % 40)?;
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        let (base, last) = offsets(target);
        let start = Offset(base.0 + 1 + (seed / 2) as i64 % (last.0 - base.0));
        let end = log.log_end_offset();
        log.delete_records_before(start, end).await.map_err(|e| e.to_string())?;
        let outcome = repair(&log, stored[usize::from(target)].clone()).await?;
        ensure(outcome == Repair::Repaired { base, last }, || {
            format!("repairing batch {target} with the log start at {start}: {outcome:?}")
        })?;
        let read = log.read(start, 1 << 20, end).await.map_err(|e| e.to_string())?;
        let got: Vec<Bytes> = split_batches(&read.records)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("reading {start}: {e}"))?;
        ensure(got[..] == stored[usize::from(target)..], || {
            format!("the read from {start} after the repair returned {} batches", got.len())
        })
    })
    .ok_or("the repair did not finish")?
}

#[test]
fn log_repair_of_a_batch_the_log_start_lies_inside() {
    for_each_seed(
        "log_repair_writes_an_intact_copy_over_a_damaged_batch",
        0..12,
        straddled_scenario,
    );
}
