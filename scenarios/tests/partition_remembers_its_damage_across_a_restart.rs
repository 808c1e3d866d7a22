//! A partition that learned its log holds a damaged batch still knows it after a restart, so
//! that it goes on telling the controller not to prefer it as leader, and, following, asks its
//! leader to repair the batch at once. Before, a restart forgot the damage until a read happened
//! to meet it again: a damaged preferred replica was given its partition back after every
//! restart, only to hand it over at the first read.
//!
//! A partition of 20 batches; a batch is damaged in place (which, by seed), a read meets it, and
//! the partition checkpoints. Then, by seed, nothing more, or the batch is repaired from its
//! intact copy before the host dies, without a checkpoint after the repair. After the host's
//! restart and reopen, the partition reports the damaged batch in the first case, and nothing in
//! the second (the checkpoint still lists it, but it reads intact now). A partition that never
//! met damage writes no such checkpoint at all.

use std::sync::Arc;
use std::time::Duration;

use weir::log::{ReadError, Repair};
use weir::model::Offset;
use weir::partition::Partition;
use weir::partition::damage::DAMAGE_CHECKPOINT;
use weir_scenarios::log::{
    BATCH_RECORDS, damage_batch, dir, kept_forever, open_partition, partition_of_batches,
};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches in the log.
const BATCHES: u8 = 20;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let damaged = (seed / 2 % u64::from(BATCHES)) as u8;
    let repaired = seed % 2 == 1;
    let at = Offset(i64::from(damaged) * BATCH_RECORDS + (seed / 40) as i64 % BATCH_RECORDS);
    let (partition, stored) = partition_of_batches(&sim, host, BATCHES)?;
    let listed = |sim: &Sim| sim.durable_contents(host, dir().join(DAMAGE_CHECKPOINT)).is_ok();
    ensure(!listed(&sim), || "a partition without damage wrote a damage checkpoint".to_owned())?;
    damage_batch(&sim, host, &stored, usize::from(damaged), 61 + seed as usize % 40)?;
    let copy = stored[usize::from(damaged)].clone();
    let p = Arc::clone(&partition);
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        let end = p.log.log_end_offset();
        let read = p.log.read(at, 1 << 20, end).await;
        ensure(matches!(read, Err(ReadError::Corrupt { .. })), || format!("read {at}: {read:?}"))?;
        p.note_damage(at);
        p.checkpoint(i64::MAX).await.map_err(|e| e.to_string())?;
        if repaired {
            let outcome = p.repair(copy).await.map_err(|e| e.to_string())?;
            ensure(matches!(outcome, Repair::Repaired { .. }), || format!("{outcome:?}"))?;
        }
        Ok::<_, String>(())
    })
    .ok_or("the read did not finish")??;
    ensure(listed(&sim), || "the damage checkpoint was not written".to_owned())?;
    drop(partition);
    sim.kill(host);
    sim.start(host);
    let reopened: Arc<Partition> = sim
        .block_on(host, Duration::from_secs(60), |env| open_partition(env, kept_forever()))
        .ok_or("the reopen did not finish")??;
    let known = reopened.lasting_damage();
    let to_repair = reopened.damage_to_repair(reopened.log.log_end_offset());
    if repaired {
        ensure(known.is_none() && to_repair.is_empty(), || {
            format!("after the repair, the reopened partition reports {known:?}, {to_repair:?}")
        })
    } else {
        ensure(known == Some(at) && to_repair == vec![at], || {
            format!(
                "the reopened partition reports {known:?}, {to_repair:?}, not the damage at {at}"
            )
        })
    }
}

#[test]
fn partition_remembers_its_damage_across_a_restart() {
    for_each_seed("partition_remembers_its_damage_across_a_restart", 0..80, scenario);
}
