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
//!
//! A listed batch the disk fails to read at the reopen is not known to be intact: the partition
//! still reports it, and its next checkpoint still lists it. Before, a failed read dropped it
//! as if it read intact, and the checkpoint was rewritten without it.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, Bytes};
use weir::io::disk::WrapFiles;
use weir::io::{BoxFuture, Env, File};
use weir::log::{ReadError, Repair, checkpoint};
use weir::model::Offset;
use weir::partition::Partition;
use weir::partition::damage::{DAMAGE_CHECKPOINT, DAMAGE_CHECKPOINT_KIND};
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

/// A file whose reads of any byte in `range` fail while `failing` is set, counted in
/// `failed`.
struct FailingReads {
    inner: Arc<dyn File>,
    range: Range<u64>,
    failing: Arc<AtomicBool>,
    failed: Arc<AtomicUsize>,
}

impl File for FailingReads {
    fn read_at(&self, pos: u64, len: usize) -> BoxFuture<'_, io::Result<Bytes>> {
        let end = pos + len as u64;
        if self.failing.load(Ordering::SeqCst) && pos < self.range.end && self.range.start < end {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Box::pin(async { Err(io::Error::other("injected read failure")) });
        }
        self.inner.read_at(pos, len)
    }

    fn write_at(&self, pos: u64, data: Bytes) -> BoxFuture<'_, io::Result<()>> {
        self.inner.write_at(pos, data)
    }

    fn write_gathered_at(&self, pos: u64, parts: Vec<Bytes>) -> BoxFuture<'_, io::Result<()>> {
        self.inner.write_gathered_at(pos, parts)
    }

    fn append(&self, data: Bytes) -> BoxFuture<'_, io::Result<u64>> {
        self.inner.append(data)
    }

    fn truncate(&self, len: u64) -> BoxFuture<'_, io::Result<()>> {
        self.inner.truncate(len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn sync_data(&self) -> BoxFuture<'_, io::Result<()>> {
        self.inner.sync_data()
    }
}

fn unreadable_at_the_reopen(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    // Batches 5 to 12 (of about 700 bytes each): the partition's small files (checkpoints,
    // index entries) are read from byte 0 and lie below the bytes whose reads fail, and the
    // open's walk from the last index entry (batch 18) to the log end stays above them.
    let damaged = 5 + (seed % 8) as u8;
    let at = Offset(i64::from(damaged) * BATCH_RECORDS);
    let (partition, stored) = partition_of_batches(&sim, host, BATCHES)?;
    damage_batch(&sim, host, &stored, usize::from(damaged), 61 + seed as usize % 40)?;
    let p = Arc::clone(&partition);
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        let read = p.log.read(at, 1 << 20, p.log.log_end_offset()).await;
        ensure(matches!(read, Err(ReadError::Corrupt { .. })), || format!("read {at}: {read:?}"))?;
        p.note_damage(at);
        p.checkpoint(i64::MAX).await.map_err(|e| e.to_string())
    })
    .ok_or("the read did not finish")??;
    drop(partition);
    sim.kill(host);
    sim.start(host);
    let first: u64 = stored[..usize::from(damaged)].iter().map(|b| b.len() as u64).sum();
    let range = first..first + stored[usize::from(damaged)].len() as u64;
    let failing = Arc::new(AtomicBool::new(true));
    let failed = Arc::new(AtomicUsize::new(0));
    let (fail, count) = (Arc::clone(&failing), Arc::clone(&failed));
    let reopened: Arc<Partition> = sim
        .block_on(host, Duration::from_secs(60), move |env| {
            let disk = WrapFiles::new(Arc::clone(&env.disk), move |inner| {
                let (failing, failed) = (Arc::clone(&fail), Arc::clone(&count));
                let range = range.clone();
                Arc::new(FailingReads { inner, range, failing, failed }) as Arc<dyn File>
            });
            open_partition(Env { disk: Arc::new(disk), ..env }, kept_forever())
        })
        .ok_or("the reopen did not finish")??;
    failing.store(false, Ordering::SeqCst);
    // The batch itself is damaged too: had its read not failed, it would have read as damaged.
    let failed = failed.load(Ordering::SeqCst);
    ensure(failed > 0, || "no read of the listed batch failed at the reopen".to_owned())?;
    let known = reopened.lasting_damage();
    ensure(known == Some(at), || {
        format!(
            "with its batch unreadable at the reopen, the partition reports {known:?}, not {at}"
        )
    })?;
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        reopened.checkpoint(i64::MAX).await.map_err(|e| e.to_string())
    })
    .ok_or("the checkpoint did not finish")??;
    let written = sim
        .durable_contents(host, dir().join(DAMAGE_CHECKPOINT))
        .map_err(|e| format!("no damage checkpoint: {e:?}"))?;
    let (_, mut body) = checkpoint::decode(DAMAGE_CHECKPOINT_KIND, &written.into())
        .map_err(|e| format!("the damage checkpoint: {e}"))?;
    let listed = (body.remaining() == 12).then(|| (body.get_u32(), body.get_i64()));
    ensure(listed == Some((1, at.0)), || {
        format!("the damage checkpoint lists {listed:?}, not the one batch at {at}")
    })
}

#[test]
fn partition_keeps_damage_it_cannot_read_at_a_restart() {
    for_each_seed(
        "partition_keeps_damage_it_cannot_read_at_a_restart",
        0..8,
        unreadable_at_the_reopen,
    );
}

#[test]
fn partition_remembers_its_damage_across_a_restart() {
    for_each_seed("partition_remembers_its_damage_across_a_restart", 0..80, scenario);
}
