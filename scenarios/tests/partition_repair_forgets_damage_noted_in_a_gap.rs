//! In a compacted log a read (a consumer's, or the scrub's going on from the batch before) may
//! start in a gap compaction left and meet a damaged batch first: the damage is then noted at
//! the offset in the gap, where the read started, not at the batch's base. A repair of that
//! batch must forget the offset in the gap too, once a read from it meets the batch intact;
//! else the partition goes on reporting damage it no longer holds (the controller would never
//! prefer it as leader again) and asks its leader about it after every restart.
//!
//! A compacted partition `[0..=2] [6..=8] [9..=11]` (3..=5 cleaned away) with 6..=8 damaged in
//! place: a read from 3, 4 or 5 (by seed) meets the damage and notes it there. Repaired from an
//! intact copy of 6..=8 (the batch a leader's read from that offset returns), the partition
//! must report no damage, and read from that offset on intact. By seed, 9..=11 is damaged too:
//! the read walked past it without noting it, so the repair of 6..=8, which now reads intact up
//! to it, must note it, to be asked about in turn.

use std::time::Duration;

use bytes::Bytes;
use weir::log::{LogConfig, ReadError, Repair};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{batch, compacted, first_segment, open_partition, write_first_segment};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let config = LogConfig { segment_bytes: 1 << 20, ..compacted() };
    let stored = |n: u8, at: i64| batch(n, Some((Offset(at), LeaderEpoch(0))));
    let held: Vec<Bytes> = vec![stored(0, 0), stored(2, 6), stored(3, 9)];
    let copy = held[1].clone();
    let segment = first_segment();
    let written = held.clone();
    let partition = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            write_first_segment(&env, &written).await?;
            open_partition(env, config).await
        })
        .ok_or("the open did not finish")??;
    // A bit of the records of 6..=8 flips; by seed, of 9..=11 too.
    let at = held[0].len() + 61 + seed as usize % 40;
    sim.corrupt_file(host, &segment, at as u64).map_err(|e| e.to_string())?;
    let next_damaged = seed >= 3;
    if next_damaged {
        let at = held[0].len() + held[1].len() + 61 + seed as usize % 40;
        sim.corrupt_file(host, &segment, at as u64).map_err(|e| e.to_string())?;
    }
    let gap = Offset(3 + (seed % 3) as i64);
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        let end = partition.log.log_end_offset();
        let read = partition.log.read(gap, 1 << 20, end).await;
        let Err(ReadError::Corrupt { offset, resume, .. }) = read else {
            return Err(format!("a read from {gap} gave {read:?}"));
        };
        partition.damage_found_in_background(offset, resume);
        ensure(partition.lasting_damage() == Some(gap), || {
            format!("the damage met from {gap} is known as {:?}", partition.lasting_damage())
        })?;
        let repaired = partition.repair(copy).await.map_err(|e| e.to_string())?;
        ensure(matches!(repaired, Repair::Repaired { base: Offset(6), last: Offset(8) }), || {
            format!("{repaired:?}")
        })?;
        let known = (partition.lasting_damage(), partition.damage_to_repair(end));
        if next_damaged {
            return ensure(known == (Some(Offset(9)), vec![Offset(9)]), || {
                format!("after the repair of 6..=8 the partition reports {known:?}, not 9..=11")
            });
        }
        ensure(known == (None, Vec::new()), || {
            format!("after the repair the partition still reports {known:?}")
        })?;
        let read = partition.log.read(gap, 1 << 20, end).await.map_err(|e| e.to_string())?;
        ensure(read.records == held[1..].concat(), || "the read from the gap differs".to_owned())
    })
    .ok_or("the repair did not finish")?
}

#[test]
fn partition_repair_forgets_damage_noted_in_a_gap() {
    for_each_seed("partition_repair_forgets_damage_noted_in_a_gap", 0..6, scenario);
}
