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
//!
//! A checkpoint the disk fails to read at the reopen is not written over while it cannot be
//! read: new damage met meanwhile waits. Once it reads (by seed, at the last try), what it
//! lists is known again beside the new damage, and both are listed; if it failed at every try,
//! it is written over with the new damage alone. The scrub's record of new damage meanwhile is
//! refused, not written over it. Before, the first checkpoint after new damage
//! wrote over it, and what it listed was lost.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Buf;
use weir::io::Env;
use weir::io::disk::WrapFiles;
use weir::log::{ReadError, Repair, checkpoint};
use weir::model::Offset;
use weir::partition::damage::{
    DAMAGE_CHECKPOINT, DAMAGE_CHECKPOINT_KIND, DAMAGE_CHECKPOINT_REREAD_ATTEMPTS,
};
use weir::partition::{Partition, SaveDamageError};
use weir_scenarios::hooked::{Hooked, Hooks};
use weir_scenarios::log::{
    BATCH_RECORDS, damage_batch, dir, kept_forever, open_partition, partition_of_batches,
};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{Host, Sim};

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

/// Fails a file's reads of any byte in `range` while `failing` is set, counted in `failed`.
#[derive(Clone)]
struct FailingReads {
    range: Range<u64>,
    failing: Arc<AtomicBool>,
    failed: Arc<AtomicUsize>,
}

impl FailingReads {
    fn new(range: Range<u64>) -> FailingReads {
        let (failing, failed) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
        FailingReads { range, failing, failed }
    }

    fn stop(&self) {
        self.failing.store(false, Ordering::SeqCst);
    }

    fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }
}

impl Hooks for FailingReads {
    fn read(&self, pos: u64, len: usize) -> Option<io::Error> {
        let end = pos + len as u64;
        let fails =
            self.failing.load(Ordering::SeqCst) && pos < self.range.end && self.range.start < end;
        fails.then(|| {
            self.failed.fetch_add(1, Ordering::SeqCst);
            io::Error::other("injected read failure")
        })
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
    let failing = FailingReads::new(range);
    let hooks = failing.clone();
    let reopened: Arc<Partition> = sim
        .block_on(host, Duration::from_secs(60), move |env| {
            let disk = WrapFiles::new(Arc::clone(&env.disk), move |_path, inner| {
                Hooked::wrap(inner, hooks.clone())
            });
            open_partition(Env { disk: Arc::new(disk), ..env }, kept_forever())
        })
        .ok_or("the reopen did not finish")??;
    failing.stop();
    // The batch itself is damaged too: had its read not failed, it would have read as damaged.
    let failed = failing.failed();
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

/// The offsets the damage checkpoint on `host`'s disk lists.
fn listed_on_disk(sim: &Sim, host: Host) -> Result<Vec<i64>, String> {
    let written = sim
        .durable_contents(host, dir().join(DAMAGE_CHECKPOINT))
        .map_err(|e| format!("no damage checkpoint: {e:?}"))?;
    let (_, mut body) = checkpoint::decode(DAMAGE_CHECKPOINT_KIND, &written.into())
        .map_err(|e| format!("the damage checkpoint: {e}"))?;
    let count = body.get_u32() as usize;
    ensure(body.remaining() == count * 8, || format!("a body of {count} offsets is malformed"))?;
    Ok((0..count).map(|_| body.get_i64()).collect())
}

fn checkpoint_unreadable_at_the_reopen(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let (first, second) = ((seed % 10) as u8, 10 + (seed / 2 % 10) as u8);
    let offset = |n: u8| Offset(i64::from(n) * BATCH_RECORDS);
    let (a, b) = (offset(first), offset(second));
    // The disk goes on failing every read of the checkpoint, or reads it at the last try.
    let gives_up = seed % 2 == 1;
    let (partition, stored) = partition_of_batches(&sim, host, BATCHES)?;
    damage_batch(&sim, host, &stored, usize::from(first), 61 + seed as usize % 40)?;
    damage_batch(&sim, host, &stored, usize::from(second), 61 + seed as usize % 40)?;
    let read_and_note = |p: Arc<Partition>, at: Offset| async move {
        let read = p.log.read(at, 1 << 20, p.log.log_end_offset()).await;
        ensure(matches!(read, Err(ReadError::Corrupt { .. })), || format!("read {at}: {read:?}"))?;
        p.note_damage(at);
        p.checkpoint(i64::MAX).await.map_err(|e| e.to_string())
    };
    let p = Arc::clone(&partition);
    sim.block_on(host, Duration::from_secs(60), move |_env| read_and_note(p, a))
        .ok_or("the read did not finish")??;
    ensure(listed_on_disk(&sim, host)? == [a.0], || "the first damage was not listed".to_owned())?;
    drop(partition);
    sim.kill(host);
    sim.start(host);
    // Every read of the damage checkpoint fails, at the reopen and after, until stopped.
    let failing = FailingReads::new(0..u64::MAX);
    let hooks = failing.clone();
    let reopened: Arc<Partition> = sim
        .block_on(host, Duration::from_secs(60), move |env| {
            let disk = WrapFiles::new(Arc::clone(&env.disk), move |path, inner| {
                if path.ends_with(DAMAGE_CHECKPOINT) {
                    Hooked::wrap(inner, hooks.clone())
                } else {
                    inner
                }
            });
            open_partition(Env { disk: Arc::new(disk), ..env }, kept_forever())
        })
        .ok_or("the reopen did not finish")??;
    ensure(failing.failed() > 0, || "no read of the damage checkpoint failed".to_owned())?;
    let known = reopened.lasting_damage();
    ensure(known.is_none(), || {
        format!("with its checkpoint unread, damage is known at {known:?}")
    })?;
    // New damage is met; while the old checkpoint cannot be read, it is not written over.
    let p = Arc::clone(&reopened);
    sim.block_on(host, Duration::from_secs(60), move |_env| read_and_note(p, b))
        .ok_or("the read did not finish")??;
    let listed = listed_on_disk(&sim, host)?;
    ensure(listed == [a.0], || format!("after new damage the checkpoint lists {listed:?}"))?;
    // Nor does the scrub's record of it write over it: it is refused, so that the scrub holds
    // its cursor before the damage.
    let p = Arc::clone(&reopened);
    let saved = sim
        .block_on(host, Duration::from_secs(60), move |_env| async move { p.save_damage().await })
        .ok_or("the save did not finish")?;
    ensure(matches!(saved, Err(SaveDamageError::Unread)), || {
        format!("a record of new damage while the checkpoint is unread: {saved:?}")
    })?;
    let listed = listed_on_disk(&sim, host)?;
    ensure(listed == [a.0], || {
        format!("after the scrub's record the checkpoint lists {listed:?}")
    })?;
    for n in 2..DAMAGE_CHECKPOINT_REREAD_ATTEMPTS {
        let p = Arc::clone(&reopened);
        sim.block_on(host, Duration::from_secs(60), move |_env| async move {
            p.checkpoint(i64::MAX).await.map_err(|e| e.to_string())
        })
        .ok_or("the checkpoint did not finish")??;
        let listed = listed_on_disk(&sim, host)?;
        ensure(listed == [a.0], || {
            format!("after {n} checkpoints the checkpoint lists {listed:?}")
        })?;
    }
    if !gives_up {
        failing.stop();
    }
    let p = Arc::clone(&reopened);
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        p.checkpoint(i64::MAX).await.map_err(|e| e.to_string())
    })
    .ok_or("the checkpoint did not finish")??;
    let listed = listed_on_disk(&sim, host)?;
    let known = (reopened.lasting_damage(), reopened.damage_to_repair(Offset(i64::MAX)));
    if gives_up {
        // Written over with what is known, once it failed to read at every try.
        ensure(listed == [b.0] && known == (Some(b), vec![b]), || {
            format!("after the last try failed: listed {listed:?}, known {known:?}")
        })
    } else {
        ensure(listed == [a.0, b.0] && known == (Some(a), vec![a, b]), || {
            format!("once the checkpoint read: listed {listed:?}, known {known:?}, not {a} and {b}")
        })
    }
}

#[test]
fn partition_does_not_write_over_a_damage_checkpoint_it_could_not_read() {
    for_each_seed(
        "partition_remembers_its_damage_across_a_restart",
        0..8,
        checkpoint_unreadable_at_the_reopen,
    );
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
