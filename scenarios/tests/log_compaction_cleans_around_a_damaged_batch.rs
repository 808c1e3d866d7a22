//! A damaged batch in a compacted log must not stop its compaction. A pass used to give up at
//! the first batch that failed its checks, so one latent sector error stopped the partition's
//! compaction for good (on `__consumer_offsets`, growth without end). Now a pass cleans around
//! it: the segment holding the damage is left exactly as it was (its damaged offsets still read
//! as corrupt, the rest as written), the other segments are cleaned, a record superseded only
//! by the unreadable batch stays, and past the damage no expired tombstone goes.
//!
//! Six sealed segments and an active one; a batch of segment 3 is damaged in its records or in
//! its length field (by seed). Three passes: the first at time 0 (tombstones get their delete
//! horizon), the second long past every horizon, the third changing nothing more. After each,
//! the whole log is read back and compared with what those rules leave. The control runs the
//! same log without damage, and must lose what the damaged run keeps.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{CleanOutcome, CleanStats, Log, LogConfig, ReadError, records};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{compacted, segment_batches};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{Host, Sim};

const DELETE_RETENTION_MS: i64 = 10_000;
/// The segment holding the damaged batch.
const DAMAGED_SEGMENT: usize = 3;
/// Which batch of it is damaged.
const DAMAGED_BATCH: usize = 1;
/// Bytes of each padding record's value: three of them make a segment too large to be grouped
/// with a neighbour, so every segment is a group of its own.
const PAD_BYTES: usize = 250;

/// One record: key, and segment it was written in (its value names both), or a tombstone.
type Rec = (&'static str, usize, bool);

/// The log's batches, by segment: one record per batch, tombstones marked `true`.
fn layout() -> Vec<Vec<Rec>> {
    vec![
        vec![("early", 0, false), ("dup", 0, false), ("early", 0, true)],
        vec![("hidden", 1, false), ("late", 1, false), ("dup", 1, false)],
        vec![],
        // Batch 1 ("hidden") is the damaged one: its record is the latest of its key.
        vec![("inside", 3, false), ("hidden", 3, false)],
        vec![("late", 4, true), ("inside", 4, true), ("dup", 4, false)],
        vec![],
        vec![("active", 6, false)],
    ]
}

/// Records appended, each in a segment of its own, before passes 2 and 3, so that each of them
/// has something dirty to clean (a log with nothing dirty is not cleaned at all).
const MORE: [Rec; 2] = [("more-2", 7, false), ("more-3", 8, false)];

/// Every record written.
fn all_records() -> Vec<Rec> {
    layout().into_iter().flatten().chain(MORE).collect()
}

/// What a read of the whole log must hold after `pass` (1–3) passes.
fn expected(damaged: bool, pass: u8) -> BTreeSet<Rec> {
    let mut want: BTreeSet<Rec> = layout().into_iter().flatten().collect();
    want.extend(MORE.iter().take(usize::from(pass) - 1));
    // Superseded by a readable record in every run.
    for gone in [("early", 0, false), ("dup", 0, false), ("dup", 1, false), ("late", 1, false)] {
        want.remove(&gone);
    }
    if damaged {
        // Unreadable; the older "hidden" it supersedes stays, the newest that can be read.
        want.remove(&("hidden", 3, false));
    } else {
        want.remove(&("hidden", 1, false));
        want.remove(&("inside", 3, false));
    }
    if pass >= 2 {
        // Past its horizon, in a group before any damage.
        want.remove(&("early", 0, true));
        if !damaged {
            want.remove(&("late", 4, true));
            want.remove(&("inside", 4, true));
        }
    }
    want
}

fn config() -> LogConfig {
    LogConfig { delete_retention_ms: DELETE_RETENTION_MS, ..compacted() }
}

fn dir() -> PathBuf {
    PathBuf::from("compact-0")
}

fn value((key, segment, tombstone): Rec) -> Option<Bytes> {
    (!tombstone).then(|| Bytes::from(format!("{key}@{segment}")))
}

fn batch_of(specs: Vec<RecordSpec>) -> Bytes {
    encode_batch(&specs, &BatchOptions::default()).expect("a valid batch")
}

fn record(key: String, value: Option<Bytes>) -> RecordSpec {
    RecordSpec {
        offset_delta: 0,
        timestamp: 1_000,
        key: Some(Bytes::from(key)),
        value,
        headers: Vec::new(),
    }
}

/// Writes [`layout`], each segment padded with three records of keys of its own; returns the
/// log and the base offset of every segment.
fn write(sim: &Sim, host: Host) -> Result<(Arc<Log>, Vec<Offset>), String> {
    sim.block_on(host, Duration::from_secs(60), |env| async move {
        let log = Arc::new(Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?);
        let segments = layout();
        let mut bases = Vec::new();
        for (s, recs) in segments.iter().enumerate() {
            if s > 0 {
                log.roll().await.map_err(|e| e.to_string())?;
            }
            bases.push(log.log_end_offset());
            let mut batches: Vec<Bytes> =
                recs.iter().map(|&r| batch_of(vec![record(r.0.into(), value(r))])).collect();
            if s + 1 < segments.len() {
                for i in 0..3 {
                    let pad = Bytes::from(vec![b'p'; PAD_BYTES]);
                    batches.push(batch_of(vec![record(format!("pad-{s}-{i}"), Some(pad))]));
                }
            }
            for b in batches {
                log.append(b, LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
        }
        Ok((log, bases))
    })
    .ok_or("the appends did not finish")?
}

/// What a read of the whole log returns: the records (padding left out) and the offsets that
/// read as corrupt.
async fn read_all(log: &Log) -> Result<(BTreeSet<Rec>, Vec<i64>), String> {
    let (mut at, end) = (log.log_start_offset(), log.log_end_offset());
    let (mut got, mut corrupt) = (BTreeSet::new(), Vec::new());
    let recs = all_records();
    while at < end {
        let read = match log.read(at, 1 << 20, end).await {
            Ok(read) => read,
            Err(ReadError::Corrupt { resume: Some(resume), .. }) if resume > at => {
                corrupt.extend(at.0..resume.0);
                at = resume;
                continue;
            }
            Err(e) => return Err(format!("reading {at}: {e}")),
        };
        ensure(read.next_offset > at, || format!("a read at {at} made no progress"))?;
        for b in split_batches(&read.records) {
            for r in records::records(&b.map_err(|e| e.to_string())?).map_err(|e| e.to_string())? {
                let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).to_string();
                if key.starts_with("pad-") {
                    continue;
                }
                let found = recs.iter().find(|&&rec| rec.0 == key && value(rec) == r.value);
                let &rec = found.ok_or_else(|| format!("offset {} reads {r:?}", r.offset))?;
                ensure(got.insert(rec), || format!("{rec:?} read twice"))?;
            }
        }
        at = read.next_offset;
    }
    Ok((got, corrupt))
}

fn segment_path(base: Offset) -> PathBuf {
    dir().join(format!("{:020}.log", base.0))
}

fn scenario(seed: u64, damaged: bool) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let (log, bases) = write(&sim, host)?;
    let damaged_base = bases[DAMAGED_SEGMENT];
    let path = segment_path(damaged_base);
    let stored = sim.durable_contents(host, &path).map_err(|e| e.to_string())?;
    let batches = segment_batches(&stored);
    let &(position, _, first, last) = batches.get(DAMAGED_BATCH).ok_or("no batch to damage")?;
    if damaged {
        // In the records (inside the CRC), or in the length field (outside it).
        let within =
            if seed.is_multiple_of(2) { 61 + seed as usize % 7 } else { 8 + seed as usize % 4 };
        sim.corrupt_file(host, &path, (position + within) as u64).map_err(|e| e.to_string())?;
    }
    let before = sim.durable_contents(host, &path).map_err(|e| e.to_string())?;
    let unreadable: Vec<i64> = if damaged { (first..=last).collect() } else { Vec::new() };
    let far = 1_000 * DELETE_RETENTION_MS;
    for (pass, now) in [(1u8, 0), (2, far), (3, far + 1)] {
        let cleaner = Arc::clone(&log);
        let more = usize::from(pass).checked_sub(2).map(|i| MORE[i]);
        let outcome = sim
            .block_on(host, Duration::from_secs(60), move |_| async move {
                if let Some(rec) = more {
                    cleaner.roll().await.map_err(|e| e.to_string())?;
                    let batch = batch_of(vec![record(rec.0.into(), value(rec))]);
                    cleaner.append(batch, LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
                }
                let end = cleaner.log_end_offset();
                let outcome = cleaner.clean(now, end).await;
                Ok::<_, String>((outcome, read_all(&cleaner).await))
            })
            .ok_or("the pass did not finish")??;
        let (outcome, read) = outcome;
        let stats = match outcome {
            Ok(CleanOutcome::Cleaned(stats)) => stats,
            other => return Err(format!("pass {pass} did not clean: {other:?}")),
        };
        let (got, corrupt) = read?;
        let want = expected(damaged, pass);
        ensure(got == want, || {
            let lost: Vec<_> = want.difference(&got).collect();
            let kept: Vec<_> = got.difference(&want).collect();
            format!("after pass {pass}: lost {lost:?}, kept {kept:?} ({stats:?})")
        })?;
        ensure(corrupt == unreadable, || {
            format!("after pass {pass}: offsets {corrupt:?} read as corrupt, not {unreadable:?}")
        })?;
        check_stats(pass, damaged, (damaged_base, Offset(first)), &stats)?;
        if damaged {
            let now = sim.durable_contents(host, &path).map_err(|e| e.to_string())?;
            ensure(now == before, || format!("pass {pass} changed the damaged segment"))?;
        }
    }
    Ok(())
}

fn check_stats(
    pass: u8,
    damaged: bool,
    (at, batch): (Offset, Offset),
    stats: &CleanStats,
) -> Result<(), String> {
    // What the partition is told of: the damaged batch itself, not its segment.
    let met = &stats.damage_met;
    ensure(
        if damaged { !met.is_empty() && met.iter().all(|&o| o == batch) } else { met.is_empty() },
        || format!("pass {pass} met damage at {met:?}, not at {batch} ({stats:?})"),
    )?;
    let removed = (stats.records_superseded, stats.tombstones_removed);
    let (superseded, tombstones) = match (pass, damaged) {
        (1, true) => (4, 0),
        (1, false) => (6, 0),
        (2, true) => (0, 1),
        (2, false) => (0, 3),
        _ => (0, 0),
    };
    ensure(removed == (superseded, tombstones), || {
        format!("pass {pass} removed {removed:?}, not ({superseded}, {tombstones}): {stats:?}")
    })?;
    let (damaged_at, left, first_dirty) =
        if damaged { (Some(at), 1, Some(at)) } else { (None, 0, None) };
    ensure(stats.damaged_at == damaged_at && stats.groups_left_damaged == left, || {
        format!(
            "pass {pass} reports damage {:?} in {} groups: {stats:?}",
            stats.damaged_at, stats.groups_left_damaged
        )
    })?;
    // With damage, the first dirty offset stays at the damaged segment, so each pass maps it
    // again; without, it moves to the end of the cleanable segments.
    ensure(first_dirty.is_none_or(|f| stats.first_dirty_after == f), || {
        format!("pass {pass} moved the first dirty offset past the damage: {stats:?}")
    })?;
    ensure(damaged || stats.first_dirty_after > at, || {
        format!("pass {pass} without damage left the first dirty offset at {at}: {stats:?}")
    })
}

#[test]
fn log_compaction_cleans_around_a_damaged_batch() {
    for_each_seed("log_compaction_cleans_around_a_damaged_batch", 0..12, |seed| {
        scenario(seed, true)
    });
}

#[test]
fn log_compaction_without_damage_drops_what_the_damaged_run_keeps() {
    for_each_seed("log_compaction_without_damage_drops_what_the_damaged_run_keeps", 0..2, |seed| {
        scenario(seed, false)
    });
}
