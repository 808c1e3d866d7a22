//! A known-damage checkpoint this code cannot read — of another version (written by another
//! release), or malformed — is ignored, not guessed at, and written afresh at the next
//! checkpoint, so that it is not warned of at every start.
//!
//! A partition of 10 batches, one damaged in place and noted, checkpointed. The checkpoint is
//! then replaced, by seed, with one of version 2 whose body lists that very batch as version 1
//! would, or with a version-1 checkpoint whose body is cut short. After a restart the partition
//! reports no damage (what the checkpoint listed is found again by the reads that meet it),
//! and its next checkpoint writes version 1, listing nothing.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use weir::log::ReadError;
use weir::log::checkpoint;
use weir::model::Offset;
use weir::partition::damage::{DAMAGE_CHECKPOINT, DAMAGE_CHECKPOINT_KIND};
use weir_scenarios::log::{
    BATCH_RECORDS, damage_batch, dir, kept_forever, open_partition, partition_of_batches,
};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches in the log.
const BATCHES: u8 = 10;
/// The version this code writes.
const CURRENT: u8 = 1;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let damaged = (seed / 2 % u64::from(BATCHES)) as u8;
    let at = Offset(i64::from(damaged) * BATCH_RECORDS);
    let (partition, stored) = partition_of_batches(&sim, host, BATCHES)?;
    damage_batch(&sim, host, &stored, usize::from(damaged), 61 + seed as usize % 40)?;
    let other_version = seed.is_multiple_of(2);
    sim.block_on(host, Duration::from_secs(60), move |env| async move {
        let end = partition.log.log_end_offset();
        let read = partition.log.read(at, 1 << 20, end).await;
        ensure(matches!(read, Err(ReadError::Corrupt { .. })), || format!("read {at}: {read:?}"))?;
        partition.note_damage(at);
        partition.checkpoint(i64::MAX).await.map_err(|e| e.to_string())?;
        // The body version 1 would hold for the damaged batch, or one cut short.
        let mut body = BytesMut::new();
        body.put_u32(1);
        body.put_i64(at.0);
        let (version, body) = if other_version {
            (CURRENT + 1, body.freeze())
        } else {
            (CURRENT, body.freeze().slice(..7))
        };
        let framed = checkpoint::encode(DAMAGE_CHECKPOINT_KIND, version, &body);
        checkpoint::write_atomic(&*env.disk, &dir(), DAMAGE_CHECKPOINT, framed)
            .await
            .map_err(|e| e.to_string())
    })
    .ok_or("the checkpoint was not replaced")??;
    sim.kill(host);
    sim.start(host);
    let reopened = sim
        .block_on(host, Duration::from_secs(60), |env| open_partition(env, kept_forever()))
        .ok_or("the reopen did not finish")??;
    let known = reopened.lasting_damage();
    ensure(known.is_none(), || format!("an unreadable checkpoint was believed: {known:?}"))?;
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        reopened.checkpoint(i64::MAX).await.map_err(|e| e.to_string())
    })
    .ok_or("the checkpoint did not finish")??;
    let written = sim
        .durable_contents(host, dir().join(DAMAGE_CHECKPOINT))
        .map_err(|e| format!("no damage checkpoint after the restart: {e:?}"))?;
    let (version, body) = checkpoint::decode(DAMAGE_CHECKPOINT_KIND, &written.into())
        .map_err(|e| format!("the rewritten checkpoint: {e}"))?;
    ensure(version == CURRENT && body.as_ref() == [0, 0, 0, 0], || {
        format!("rewritten as version {version} with body {body:?}, not version 1 listing nothing")
    })
}

#[test]
fn partition_ignores_a_damage_checkpoint_it_cannot_read() {
    for_each_seed("partition_ignores_a_damage_checkpoint_it_cannot_read", 0..8, scenario);
}
