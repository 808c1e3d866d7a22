//! An append that must start a new segment when the process is out of file descriptors, or the
//! disk is full, is refused, and the log stays as it was: readable, online, and taking appends
//! again as soon as there is room, at the next offset. Before, a roll that could not write its
//! index files or create the next segment took the log offline until the broker restarted, so
//! a burst of connections at the descriptor limit, or a full disk, could take partitions
//! offline for good.
//!
//! Out of descriptors, the roll writes the active segment's index files in full before the
//! next segment's file is refused; the checkpoint's recovery point lies before the last batch.
//! A kill then (the log dropped unclosed) must recover every batch at its offset: recovery
//! trusts those index files only up to its recovery point. A kill after writes resumed must
//! too.
//!
//! The same holds for the leader-epoch checkpoint an append in a new epoch writes: refused,
//! the epoch is forgotten again, so no batch is ever written under an epoch recovery cannot
//! vouch for. So does a follower's forgetting of an epoch begun at its log end with nothing
//! written in it: refused, the epoch is kept, and the follower asks again. A new leader's
//! `begin_epoch`, which nothing would try again, keeps the epoch in memory instead and counts
//! as a refusal for room (so that the partition is handed over): the log stays online, the
//! first append in the epoch records it durably before it writes, and until then a kill loses
//! only the epoch, in which nothing was written. Before, it took the log offline until the
//! broker restarted.
//!
//! So does a follower's cut of its log (a divergent tail, or a start again past its end):
//! refused before anything changes, the log stays online as it was, and the cut is made once
//! there is room. Before, it too took the log offline until the broker restarted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weir::io::Env;
use weir::log::{AppendError, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::refusing::{Refuse, RefusingDisk};
use weir_scenarios::{ensure, for_each_seed, log};
use weir_sim::{DiskFaults, Host, Sim};

/// Appends refused in a row.
const REFUSED: usize = 4;
/// Batches appended in all.
const BATCHES: u8 = 6;

/// What is short.
#[derive(Clone, Copy, Debug)]
enum Short {
    Descriptors,
    Space,
}

/// Three [`log::batch`]es to a segment (the fourth rolls), an index entry for each.
fn config() -> LogConfig {
    LogConfig { segment_bytes: 2_200, index_interval_bytes: 1, ..log::kept_forever() }
}

/// The scenario's host, its log's environment, and what makes room short.
struct Setup {
    sim: Sim,
    host: Host,
    env: Env,
    refusing: Arc<AtomicBool>,
    short: Short,
}

impl Setup {
    fn new(seed: u64, short: Short) -> Setup {
        let sim = Sim::new(seed);
        let host = sim.add_client("broker");
        let env = sim.env(host);
        let (disk, refusing) = RefusingDisk::new(Arc::clone(&env.disk), Refuse::SegmentLogs);
        let env = Env { disk: Arc::new(disk), ..env };
        Setup { sim, host, env, refusing, short }
    }

    fn run<T, F>(&self, what: &str, f: F) -> Result<T, String>
    where
        F: Future<Output = Result<T, String>> + Send + 'static,
        T: Send + 'static,
    {
        self.sim
            .block_on(self.host, Duration::from_secs(60), move |_| f)
            .ok_or_else(|| format!("{what} did not finish"))?
    }

    fn open(&self) -> Result<Arc<Log>, String> {
        let env = self.env.clone();
        self.run("the open", async move {
            Log::open(env, log::dir(), config()).await.map(Arc::new).map_err(|e| e.to_string())
        })
    }

    fn set_short(&self, short: bool) {
        match self.short {
            Short::Descriptors => self.refusing.store(short, Ordering::SeqCst),
            // Room for less than the index entry a roll writes.
            Short::Space if short => {
                let capacity = Some(self.sim.disk_usage(self.host) + 4);
                let faults = DiskFaults { capacity_bytes: capacity, ..Default::default() };
                self.sim.set_disk_faults(self.host, faults);
            }
            Short::Space => self.sim.set_disk_faults(self.host, DiskFaults::default()),
        }
    }

    /// Appends batch `n`, which must be refused [`REFUSED`] times for want of room, leaving
    /// the log online, unchanged and readable.
    fn refused(&self, log: &Arc<Log>, n: u8) -> Result<(), String> {
        self.set_short(true);
        let end = log.log_end_offset();
        let appending = Arc::clone(log);
        let errors = self.run("the refused appends", async move {
            let mut errors = Vec::new();
            for _ in 0..REFUSED {
                errors.push(appending.append(log::batch(n, None), LeaderEpoch(0)).await.err());
            }
            Ok(errors)
        })?;
        self.set_short(false);
        for error in &errors {
            let expected = match self.short {
                Short::Descriptors => matches!(error, Some(AppendError::OutOfDescriptors)),
                Short::Space => matches!(error, Some(AppendError::DiskFull)),
            };
            ensure(expected, || {
                format!("with no {:?} left, an append needing a roll: {error:?}", self.short)
            })?;
        }
        ensure(log.offline().is_none(), || format!("the log went offline: {:?}", log.offline()))?;
        ensure(log.log_end_offset() == end, || {
            format!("the log end moved from {end} to {}", log.log_end_offset())
        })?;
        self.check(log, n)
    }

    /// Batches `0..count`, exactly as appended, are all the log holds.
    fn check(&self, log: &Arc<Log>, count: u8) -> Result<(), String> {
        let reading = Arc::clone(log);
        let stored = self.run("the read", async move { log::all_batches(&reading).await })?;
        ensure(stored.len() == usize::from(count), || {
            format!("{} batches read, not {count}", stored.len())
        })?;
        for (n, got) in stored.iter().enumerate() {
            let at = Offset(n as i64 * log::BATCH_RECORDS);
            let expected = log::batch(n as u8, Some((at, LeaderEpoch(0))));
            ensure(*got == expected, || format!("batch {n} reads back changed"))?;
        }
        Ok(())
    }

    /// Appends batches `range`, each at its offset.
    fn append(&self, log: &Arc<Log>, range: std::ops::Range<u8>) -> Result<(), String> {
        let appending = Arc::clone(log);
        self.run("the appends", async move {
            for n in range {
                let info = appending.append(log::batch(n, None), LeaderEpoch(0)).await;
                let info = info.map_err(|e| format!("batch {n}: {e}"))?;
                let at = Offset(i64::from(n) * log::BATCH_RECORDS);
                ensure(info.base_offset == at, || {
                    format!("batch {n} went to {}", info.base_offset)
                })?;
            }
            Ok(())
        })
    }
}

fn scenario(seed: u64, short: Short) -> Result<(), String> {
    let s = Setup::new(seed, short);
    let log = s.open()?;
    s.append(&log, 0..2)?;
    let checkpointing = Arc::clone(&log);
    s.run(
        "the checkpoint",
        async move { checkpointing.checkpoint().await.map_err(|e| e.to_string()) },
    )?;
    s.append(&log, 2..3)?;
    s.refused(&log, 3)?;
    // Killed while refusing, it recovers every batch.
    drop(log);
    let log = s.open()?;
    s.check(&log, 3)?;
    // Refused again, then room: the same log takes the next batches at the next offsets.
    s.refused(&log, 3)?;
    s.append(&log, 3..BATCHES)?;
    s.check(&log, BATCHES)?;
    drop(log);
    let log = s.open()?;
    s.check(&log, BATCHES)
}

#[test]
fn out_of_descriptors_refuses_the_append_that_rolls() {
    for_each_seed("log_roll_without_room_refuses_the_append", 0..4, |seed| {
        scenario(seed, Short::Descriptors)
    });
}

#[test]
fn a_full_disk_refuses_the_append_that_rolls() {
    for_each_seed("log_roll_without_room_refuses_the_append", 0..4, |seed| {
        scenario(seed, Short::Space)
    });
}

fn epoch_scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let env = sim.env(host);
    let (disk, refusing) = RefusingDisk::new(Arc::clone(&env.disk), Refuse::NewFiles);
    let env = Env { disk: Arc::new(disk), ..env };
    sim.block_on(host, Duration::from_secs(60), move |_| async move {
        let config = log::kept_forever();
        let log =
            Log::open(env.clone(), log::dir(), config.clone()).await.map_err(|e| e.to_string())?;
        log.append(log::batch(0, None), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
        refusing.store(true, Ordering::SeqCst);
        let appended = log.append(log::batch(1, None), LeaderEpoch(2)).await;
        ensure(matches!(appended, Err(AppendError::OutOfDescriptors)), || {
            format!("out of descriptors, an append in a new epoch: {appended:?}")
        })?;
        let latest = log.epochs().latest();
        ensure(latest == Some((LeaderEpoch(1), Offset(0))), || {
            format!("an epoch not recorded is kept: {latest:?}")
        })?;
        ensure(log.offline().is_none(), || format!("the log went offline: {:?}", log.offline()))?;
        refusing.store(false, Ordering::SeqCst);
        let info =
            log.append(log::batch(1, None), LeaderEpoch(2)).await.map_err(|e| e.to_string())?;
        ensure(info.base_offset == Offset(log::BATCH_RECORDS), || {
            format!("the append in the new epoch went to {}", info.base_offset)
        })?;
        drop(log);
        let log = Log::open(env.clone(), log::dir(), config).await.map_err(|e| e.to_string())?;
        let epochs = log.epochs().entries().to_vec();
        let expected =
            vec![(LeaderEpoch(1), Offset(0)), (LeaderEpoch(2), Offset(log::BATCH_RECORDS))];
        ensure(epochs == expected, || format!("after a kill the epochs are {epochs:?}"))?;
        let stored = log::all_batches(&log).await?;
        ensure(stored.len() == 2, || format!("{} batches after the kill", stored.len()))?;
        // An epoch begun at the log end, with nothing written in it, that a follower must
        // forget: out of descriptors it is kept, in memory as on disk, and the log stays online.
        let end = Offset(2 * log::BATCH_RECORDS);
        log.begin_epoch(LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
        refusing.store(true, Ordering::SeqCst);
        let forgot = log.forget_epochs_at_end().await;
        let latest = log.epochs().latest();
        ensure(forgot.is_err() && latest == Some((LeaderEpoch(3), end)), || {
            format!("out of descriptors, forgetting the epoch at the end: {forgot:?}, {latest:?}")
        })?;
        ensure(log.offline().is_none(), || format!("the log went offline: {:?}", log.offline()))?;
        refusing.store(false, Ordering::SeqCst);
        log.forget_epochs_at_end().await.map_err(|e| e.to_string())?;
        drop(log);
        let log = Log::open(env.clone(), log::dir(), log::kept_forever())
            .await
            .map_err(|e| e.to_string())?;
        let epochs = log.epochs().entries().to_vec();
        ensure(epochs == expected, || format!("after forgetting, the epochs are {epochs:?}"))?;
        // A new leader's epoch that cannot be recorded is kept in memory, and the log stays
        // online, refusing appends in the epoch until it can record it.
        ensure(!log.refused_for_room(), || "a refusal for room before any".to_owned())?;
        refusing.store(true, Ordering::SeqCst);
        let begun = log.begin_epoch(LeaderEpoch(3)).await;
        let latest = log.epochs().latest();
        ensure(begun.is_ok() && latest == Some((LeaderEpoch(3), end)), || {
            format!("out of descriptors, a new leader's epoch began with {begun:?}: {latest:?}")
        })?;
        ensure(log.offline().is_none(), || format!("the log went offline: {:?}", log.offline()))?;
        ensure(log.refused_for_room(), || "the epoch not recorded is no refusal".to_owned())?;
        let appended = log.append(log::batch(2, None), LeaderEpoch(3)).await;
        ensure(matches!(appended, Err(AppendError::OutOfDescriptors)), || {
            format!("out of descriptors, an append in the unrecorded epoch: {appended:?}")
        })?;
        ensure(log.epochs().latest() == Some((LeaderEpoch(3), end)), || {
            format!("the refused append lost the epoch: {:?}", log.epochs().latest())
        })?;
        // Killed then, the log reopens without it.
        drop(log);
        refusing.store(false, Ordering::SeqCst);
        let log = Log::open(env.clone(), log::dir(), log::kept_forever())
            .await
            .map_err(|e| e.to_string())?;
        let epochs = log.epochs().entries().to_vec();
        ensure(epochs == expected, || format!("after a kill the epochs are {epochs:?}"))?;
        // Begun again without room, then room: the first append records it, then writes.
        refusing.store(true, Ordering::SeqCst);
        log.begin_epoch(LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
        refusing.store(false, Ordering::SeqCst);
        let info =
            log.append(log::batch(2, None), LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
        ensure(info.base_offset == end, || format!("the append went to {}", info.base_offset))?;
        drop(log);
        let log = Log::open(env.clone(), log::dir(), log::kept_forever())
            .await
            .map_err(|e| e.to_string())?;
        let epochs = log.epochs().entries().to_vec();
        let recorded = [expected, vec![(LeaderEpoch(3), end)]].concat();
        ensure(epochs == recorded, || format!("after the append the epochs are {epochs:?}"))?;
        let stored = log::all_batches(&log).await?;
        ensure(stored.len() == 3, || format!("{} batches after the append", stored.len()))
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn out_of_descriptors_refuses_an_append_in_a_new_epoch_and_forgets_it() {
    for_each_seed("log_roll_without_room_refuses_the_append", 0..4, epoch_scenario);
}

/// The batch a follower's cut removes, the last; the ones before it are indexed, so that the
/// index files the cut rewrites are larger than the checkpoints.
const CUT_BATCH: u8 = 40;

/// A follower's cut of its divergent tail, or its start again past its end, with no room for
/// the files it rewrites (out of descriptors, or the disk full: with room for none, for the
/// partition checkpoint only, or for both checkpoints but not the truncated segment's index
/// files nor, out of descriptors, the fresh segment of the start again, by seed) is refused
/// before anything changes: the log
/// stays online holding what it held, in memory and after a kill, no temporary file is left
/// taking room, and the refusal counts as one for room (see `Log::refused_for_room`). Once
/// there is room the cut is made, and holds after a kill. Before, the log went offline until
/// the broker restarted.
fn cut_scenario(seed: u64, short: Short) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let env = sim.env(host);
    let (disk, refusing, allowed) = RefusingDisk::allowing(Arc::clone(&env.disk), Refuse::NewFiles);
    let env = Env { disk: Arc::new(disk), ..env };
    // An index entry for each batch.
    let config = LogConfig { index_interval_bytes: 1, ..log::kept_forever() };
    let open = move || {
        let (env, config) = (env.clone(), config.clone());
        async move { Log::open(env, log::dir(), config).await.map_err(|e| e.to_string()) }
    };
    let r = log::BATCH_RECORDS;
    let cut_at = Offset(i64::from(CUT_BATCH) * r);
    let epochs = [(LeaderEpoch(1), Offset(0)), (LeaderEpoch(2), cut_at)];
    let opened = open.clone();
    let log = sim
        .block_on(host, Duration::from_secs(60), move |_| async move {
            let log = opened().await?;
            for n in 0..=CUT_BATCH {
                let epoch = if n < CUT_BATCH { 1 } else { 2 };
                let appended = log.append(log::batch(n, None), LeaderEpoch(epoch)).await;
                appended.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(log)
        })
        .ok_or("the appends did not finish")??;
    let usage = sim.disk_usage(host);
    // New files the cut may make, out of descriptors: none, the partition checkpoint's, or
    // both checkpoints'.
    let spare = (seed % 3) as usize;
    match short {
        Short::Descriptors => refusing.store(true, Ordering::SeqCst),
        Short::Space => {
            let len = |name: &str| {
                let contents = sim.durable_contents(host, log::dir().join(name));
                contents.map(|c| c.len() as u64).map_err(|e| format!("{name}: {e}"))
            };
            let partition = len(weir::log::PARTITION_CHECKPOINT)?;
            let epochs = len(weir::log::epochs::EPOCH_CHECKPOINT)?;
            let room = seed % 4
                + match seed % 3 {
                    0 => 0,
                    1 => partition,
                    _ => partition + epochs,
                };
            let faults = DiskFaults { capacity_bytes: Some(usage + room), ..Default::default() };
            sim.set_disk_faults(host, faults);
        }
    }
    let allowance = Arc::clone(&allowed);
    sim.block_on(host, Duration::from_secs(60), move |_| async move {
        allowance.store(spare, Ordering::SeqCst);
        let cut = log.truncate_to(cut_at).await;
        // A start again rewrites no index file, and its empty segment takes no room: on a disk
        // with room for both checkpoints it would be made.
        allowance.store(spare, Ordering::SeqCst);
        let restarted = match short {
            Short::Space if seed % 3 == 2 => Err(None),
            _ => log.restart_at(Offset(100 * r)).await.map_err(Some),
        };
        ensure(cut.is_err() && restarted.is_err(), || {
            format!("without room, the cut gave {cut:?} and the start again {restarted:?}")
        })?;
        ensure(log.offline().is_none(), || format!("the log went offline: {:?}", log.offline()))?;
        ensure(log.refused_for_room(), || "a refused cut is no refusal for room".to_owned())?;
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        ensure(start == Offset(0) && end == Offset(cut_at.0 + r), || {
            format!("the refused cuts left the log at {start}..{end}")
        })?;
        ensure(log.epochs().entries() == &epochs[..], || {
            format!("the refused cuts left the epochs {:?}", log.epochs().entries())
        })?;
        let stored = log::all_batches(&log).await?;
        let n = stored.len();
        ensure(n == usize::from(CUT_BATCH) + 1, || format!("{n} batches after the refused cuts"))
    })
    .ok_or("the refused cuts did not finish")??;
    ensure(sim.disk_usage(host) == usage, || {
        format!("the refused cuts left {} bytes more", sim.disk_usage(host) - usage)
    })?;
    refusing.store(false, Ordering::SeqCst);
    allowed.store(0, Ordering::SeqCst);
    sim.set_disk_faults(host, DiskFaults::default());
    // Killed, the log reopens as it was; then the cut is made, and holds after a kill.
    sim.block_on(host, Duration::from_secs(60), move |_| async move {
        let log = open().await?;
        ensure(log.epochs().entries() == &epochs[..], || {
            format!("after a kill the epochs are {:?}", log.epochs().entries())
        })?;
        let stored = log::all_batches(&log).await?;
        let n = stored.len();
        ensure(n == usize::from(CUT_BATCH) + 1, || format!("{n} batches after the kill"))?;
        let end = log.truncate_to(cut_at).await.map_err(|e| e.to_string())?;
        ensure(end == cut_at, || format!("the cut ended the log at {end}"))?;
        drop(log);
        let log = open().await?;
        let kept = log.epochs().entries().to_vec();
        ensure(kept == epochs[..1], || format!("after the cut the epochs are {kept:?}"))?;
        let stored = log::all_batches(&log).await?;
        let n = stored.len();
        ensure(n == usize::from(CUT_BATCH), || format!("{n} batches after the cut"))?;
        log.restart_at(Offset(100 * r)).await.map_err(|e| e.to_string())?;
        drop(log);
        let log = open().await?;
        let (start, end) = (log.log_start_offset(), log.log_end_offset());
        ensure(start == Offset(100 * r) && end == start, || {
            format!("started again at {}, the log reopens at {start}..{end}", 100 * r)
        })
    })
    .ok_or("the cut did not finish")?
}

#[test]
fn out_of_descriptors_refuses_a_cut_and_leaves_the_log_as_it_was() {
    for_each_seed("log_roll_without_room_refuses_the_append", 0..6, |seed| {
        cut_scenario(seed, Short::Descriptors)
    });
}

#[test]
fn a_full_disk_refuses_a_cut_and_leaves_the_log_as_it_was() {
    for_each_seed("log_roll_without_room_refuses_the_append", 0..12, |seed| {
        cut_scenario(seed, Short::Space)
    });
}
