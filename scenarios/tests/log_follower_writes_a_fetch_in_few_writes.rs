//! A follower appends the batches one fetch brought with `Log::append_replicated_all`: the
//! batches that continue each other in one epoch and one segment reach the segment file in one
//! write, not one write each, and the copy is the one appending them one by one makes:
//! byte-identical batches at the leader's offsets, the same segments and epochs, surviving a
//! power failure once flushed. A batch that is corrupt or does not continue the log stops the
//! append there: the batches before it stay appended, it and the rest are not.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use weir::io::Env;
use weir::io::disk::WrapFiles;
use weir::log::{AppendError, Log, LogConfig, batch};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::hooked::{Hooked, Hooks};
use weir_scenarios::log::all_batches;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// What makes the segments roll.
#[derive(Clone, Copy, Debug)]
enum Rolls {
    /// Small segments, so one fetch's batches cross several.
    BySize,
    /// Small offset indexes (three entries), so the segments roll when theirs fills.
    ByIndex,
}

fn config(rolls: Rolls) -> LogConfig {
    let config = LogConfig { index_interval_bytes: 256, retention_ms: -1, ..LogConfig::default() };
    match rolls {
        Rolls::BySize => LogConfig { segment_bytes: 4_000, ..config },
        Rolls::ByIndex => LogConfig { segment_index_bytes: 24, ..config },
    }
}

fn follower_dir() -> PathBuf {
    PathBuf::from("follower-0")
}

fn batch(seed: u64, n: usize) -> Bytes {
    weir_scenarios::log::varied_batch(seed, n, 4, (20, 200))
}

/// The writes made to segment (`.log`) files, counted.
#[derive(Clone, Default)]
struct SegmentWrites(Arc<Mutex<usize>>);

impl SegmentWrites {
    fn count(&self) -> usize {
        *self.0.lock().expect("not poisoned")
    }
}

impl Hooks for SegmentWrites {
    fn write(&self, _parts: &[Bytes]) {
        *self.0.lock().expect("not poisoned") += 1;
    }
}

/// `env` with the writes to segment files counted.
fn counted(env: &Env) -> (Env, SegmentWrites) {
    let writes = SegmentWrites::default();
    let counting = writes.clone();
    let disk = WrapFiles::new(Arc::clone(&env.disk), move |path: &Path, inner| {
        if path.extension().is_some_and(|ext| ext == "log") {
            Hooked::wrap(inner, counting.clone())
        } else {
            inner
        }
    });
    (Env { disk: Arc::new(disk), ..env.clone() }, writes)
}

/// The base offsets of the segments in `dir`.
async fn segment_bases(env: &Env, dir: &Path) -> Result<Vec<i64>, String> {
    let names = env.disk.list(dir).await.map_err(|e| e.to_string())?;
    Ok(names.iter().filter_map(|n| n.strip_suffix(".log")?.parse().ok()).collect())
}

/// The bytes of the segment files in `dir`.
async fn segment_bytes(env: &Env, dir: &Path) -> Result<u64, String> {
    let mut total = 0;
    for base in segment_bases(env, dir).await? {
        let path = dir.join(format!("{base:020}.log"));
        total += env.disk.open(&path).await.map_err(|e| e.to_string())?.len();
    }
    Ok(total)
}

/// How many runs of consecutive batches share a segment and an epoch: the writes a follower
/// appending `batches` at once needs.
fn runs(batches: &[Bytes], bases: &[i64]) -> Result<usize, String> {
    let mut runs = 0;
    let mut last = None;
    for b in batches {
        let header = batch::parse_header(b).map_err(|e| e.to_string())?;
        let segment = bases.iter().rev().find(|&&base| base <= header.base_offset());
        let key = (segment.copied(), header.partition_leader_epoch());
        if last != Some(key) {
            runs += 1;
            last = Some(key);
        }
    }
    Ok(runs)
}

/// The leader's log, and the follower's copy of it up to batch 43 (exclusive).
async fn copy(env: Env, seed: u64, rolls: Rolls) -> Result<Copy, String> {
    let leader = Log::open(env.clone(), PathBuf::from("leader-0"), config(rolls))
        .await
        .map_err(|e| e.to_string())?;
    for n in 0..30 {
        leader.append(batch(seed, n), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
    }
    leader.begin_epoch(LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
    for n in 30..60 {
        leader.append(batch(seed, n), LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
    }
    let batches = all_batches(&leader).await?;
    ensure(batches.len() == 60, || format!("{} batches in the leader", batches.len()))?;

    let (counted_env, writes) = counted(&env);
    let follower =
        Log::open(counted_env, follower_dir(), config(rolls)).await.map_err(|e| e.to_string())?;
    // One fetch's worth across both epochs and several segments.
    let first = &batches[..40];
    let copied = follower.append_replicated_all(first).await;
    ensure(copied.stopped.is_none(), || format!("the first fetch stopped: {:?}", copied.stopped))?;
    let ends: Vec<Offset> = copied.appended.iter().map(|info| info.last_offset).collect();
    let leader_ends: Vec<Offset> = first
        .iter()
        .map(|b| batch::parse_header(b).map(|h| Offset(h.last_offset())))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    ensure(ends == leader_ends, || format!("appended {ends:?}, the leader's {leader_ends:?}"))?;
    let bases = segment_bases(&env, &follower_dir()).await?;
    let leader_bases = segment_bases(&env, Path::new("leader-0")).await?;
    ensure(bases.len() >= 3 && bases == leader_bases[..bases.len()], || {
        format!("follower segments {bases:?}, the leader's {leader_bases:?}")
    })?;
    let expected = runs(first, &bases)?;
    // A run counts on each batch adding an index entry, so where the index fills first it
    // may end a run early (and the next batch starts the next run, in the same segment).
    let few = match rolls {
        Rolls::BySize => writes.count() == expected && expected < first.len() / 2,
        Rolls::ByIndex => (expected..first.len()).contains(&writes.count()),
    };
    ensure(few, || {
        format!(
            "{} segment writes for {} batches in {expected} runs of one segment and epoch",
            writes.count(),
            first.len()
        )
    })?;

    // A corrupt batch stops the append after the batches before it.
    let mut corrupt = BytesMut::from(&batches[42][..]);
    let at = corrupt.len() - 1;
    corrupt[at] ^= 0x40;
    let fetch = [batches[40].clone(), batches[41].clone(), corrupt.freeze(), batches[43].clone()];
    let copied = follower.append_replicated_all(&fetch).await;
    ensure(
        copied.appended.len() == 2 && matches!(copied.stopped, Some(AppendError::Invalid(_))),
        || format!("{} appended, stopped by {:?}", copied.appended.len(), copied.stopped),
    )?;
    let end = |b: &Bytes| batch::parse_header(b).map(|h| Offset(h.last_offset() + 1));
    let after_41 = end(&batches[41]).map_err(|e| e.to_string())?;
    ensure(follower.log_end_offset() == after_41, || {
        format!("log end {} after a corrupt third batch, not {after_41}", follower.log_end_offset())
    })?;
    // A batch that skips one stops it too.
    let copied = follower.append_replicated_all(&[batches[42].clone(), batches[44].clone()]).await;
    let expected = end(&batches[42]).map_err(|e| e.to_string())?;
    ensure(
        copied.appended.len() == 1
            && matches!(copied.stopped, Some(AppendError::OutOfOrder { expected: e, .. }) if e == expected),
        || format!("{} appended, stopped by {:?}", copied.appended.len(), copied.stopped),
    )?;
    Ok(Copy { batches, follower, leader })
}

/// The copy so far, and the leader it copies.
struct Copy {
    batches: Vec<Bytes>,
    follower: Log,
    leader: Log,
}
fn scenario(seed: u64, rolls: Rolls) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(600);
    let copied = sim
        .block_on(host, limit, move |env| copy(env, seed, rolls))
        .ok_or("the copy did not finish")??;
    // A full disk refuses the rest, with nothing of the run it cut written; the log stays as
    // it was, and takes the same batches once there is room again.
    let Copy { batches, follower, leader } = copied;
    let room = batches[43].len() + batches[44].len() / 2;
    let capacity = Some(sim.disk_usage(host) + room as u64);
    sim.set_disk_faults(host, DiskFaults { capacity_bytes: capacity, ..Default::default() });
    let rest = batches[43..].to_vec();
    let held: u64 = batches[..43].iter().map(|b| b.len() as u64).sum();
    let full = sim.block_on(host, limit, move |env| async move {
        let copied = follower.append_replicated_all(&rest).await;
        // The segment files hold exactly the batches appended: what a write cut short put
        // down was cut off again.
        let appended: u64 = rest[..copied.appended.len()].iter().map(|b| b.len() as u64).sum();
        let cut_back = segment_bytes(&env, &follower_dir()).await == Ok(held + appended);
        let refused = matches!(copied.stopped, Some(AppendError::DiskFull));
        let outcome =
            format!("{} appended, stopped by {:?}", copied.appended.len(), copied.stopped);
        let refused = refused && cut_back && follower.refused_for_room();
        (follower, refused, outcome)
    });
    let (follower, refused, outcome) = full.ok_or("the append to a full disk did not finish")?;
    ensure(refused, || format!("on a full disk: {outcome}, or the log end moved past it"))?;
    sim.set_disk_faults(host, DiskFaults::default());
    let finished = sim.block_on(host, limit, move |_env| async move {
        let from = (43..batches.len())
            .find(|&n| {
                batch::parse_header(&batches[n])
                    .is_ok_and(|h| Offset(h.base_offset()) == follower.log_end_offset())
            })
            .ok_or("the log end is at no batch's base")?;
        let copied = follower.append_replicated_all(&batches[from..]).await;
        ensure(copied.stopped.is_none() && copied.appended.len() == batches.len() - from, || {
            format!(
                "the last fetch: {} appended, stopped by {:?}",
                copied.appended.len(),
                copied.stopped
            )
        })?;
        follower.flush().await.map_err(|e| e.to_string())?;
        let epochs = follower.epochs().entries().to_vec();
        let leader_epochs = leader.epochs().entries().to_vec();
        ensure(epochs == leader_epochs, || {
            format!("follower epochs {epochs:?}, the leader's {leader_epochs:?}")
        })?;
        Ok::<_, String>(batches)
    });
    let batches = finished.ok_or("the last fetch did not finish")??;
    sim.power_fail(host);
    sim.start(host);
    let after = sim.block_on(host, limit, move |env: Env| async move {
        let follower = Log::open(env.clone(), follower_dir(), config(rolls))
            .await
            .map_err(|e| e.to_string())?;
        let bases = segment_bases(&env, &follower_dir()).await?;
        let leader_bases = segment_bases(&env, Path::new("leader-0")).await?;
        Ok::<_, String>((all_batches(&follower).await?, bases == leader_bases))
    });
    let (copy, same_segments) = after.ok_or("the reopen did not finish")??;
    ensure(same_segments, || "the follower's segments are not the leader's".to_owned())?;
    ensure(copy == batches, || {
        format!(
            "the copy differs after a power failure: {} of {} batches",
            copy.len(),
            batches.len()
        )
    })
}

#[test]
fn log_follower_writes_a_fetch_in_few_writes() {
    for_each_seed("log_follower_writes_a_fetch_in_few_writes", 0..8, |seed| {
        scenario(seed, Rolls::BySize)?;
        scenario(seed, Rolls::ByIndex)
    });
}
