//! Model-based test of log compaction on the simulated disk: random appends over a few keys
//! (some tombstones, some compressed, some from idempotent producers), rolls, DeleteRecords,
//! reads from random offsets, cleaning passes at random times and bounds — and kills and power
//! failures between passes and *during* them, at random instants.
//!
//! The model is every record ever acknowledged. After every step the whole log is read back and:
//! - every record read is one that was appended, at its original offset, with its key, value and
//!   timestamp, in a batch with its original base/last offset, leader epoch, producer fields and
//!   codec; offsets strictly increase;
//! - a record may be missing only if a later record of its key lies below the bound of some pass
//!   (so the active segment and everything at or past the high watermark is untouched), or if it
//!   is a tombstone that some pass could have stamped with a delete horizon and a later pass
//!   could have seen expired;
//! - if anything of a key is left, its latest record is (a dropped tombstone never resurrects an
//!   older value);
//! - below the first dirty offset of a completed pass, no superseded record is left.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use weir::io::Env;
use weir::log::batch::{self, Compression, TimestampType};
use weir::log::cleaner::OFFSET_MAP_ENTRY_OVERHEAD_BYTES;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{
    AppendError, CleanOutcome, CleanupPolicy, Log, LogConfig, MaintenanceError, records,
};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::compacted;
use weir_sim::{DiskFaults, Host, Sim};

const DELETE_RETENTION_MS: i64 = 10_000;
const KEYS: u8 = 6;
/// Bytes of every key (`key-0`…).
const KEY_BYTES: usize = 5;
const STEP_LIMIT: Duration = Duration::from_secs(600);

fn config(min_ratio: f64) -> LogConfig {
    LogConfig {
        delete_retention_ms: DELETE_RETENTION_MS,
        min_cleanable_dirty_ratio: min_ratio,
        ..compacted()
    }
}

fn dir() -> PathBuf {
    PathBuf::from("compact-0")
}

/// A batch to append: records (key, value length or tombstone), codec, producer, epoch bump.
#[derive(Clone, Debug)]
struct BatchSpec(Vec<(u8, Option<u8>)>, u8, Option<u8>, bool);

/// A pass: now (ms after the model's clock), bound (fraction of the log, or its end), map size
/// in keys (or unbounded), a 0.5 dirty ratio, batches appended while it runs, a retention by
/// size (`compact,delete`) run while it runs, and whether the whole log is read while it runs.
#[derive(Clone, Debug)]
struct CleanSpec(u32, Option<u16>, Option<u8>, bool, Vec<BatchSpec>, Option<u16>, bool);

#[derive(Clone, Debug)]
enum Op {
    Append(BatchSpec),
    AppendKeyless,
    Roll,
    Read(u16),
    DeleteRecords(u16),
    Clean(CleanSpec),
    /// A pass, and a crash `µs` into it (power failure or kill).
    CleanCrash(CleanSpec, u32, bool),
    /// A pass whose reads return a flipped bit at one of three rates (the stored bytes are
    /// unharmed): every batch the pass finds damaged reads again afterwards, so whatever it
    /// left as it was and whatever it kept because of it must still satisfy the model.
    CleanFlaky(CleanSpec, u8),
    Reopen,
    Crash(bool),
}

/// `values`: the share of records that are not tombstones (varied per case: swarm testing).
fn batch_spec(values: f64) -> impl Strategy<Value = BatchSpec> {
    let record = (0..KEYS, prop::option::weighted(values, 0u8..120));
    (
        prop::collection::vec(record, 1..6),
        0u8..10,
        prop::option::of(0u8..3),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(r, codec, producer, bump)| BatchSpec(r, codec, producer, bump))
}

fn clean_spec(values: f64) -> impl Strategy<Value = CleanSpec> {
    let ms = 0..(3 * DELETE_RETENTION_MS) as u32;
    let upper = prop::option::weighted(0.3, any::<u16>());
    let map = prop::option::weighted(0.3, 1u8..5);
    let appends = prop::collection::vec(batch_spec(values), 0..3);
    let retention = prop::option::weighted(0.25, 300u16..4_000);
    let knobs = (prop::bool::weighted(0.2), retention, prop::bool::weighted(0.3));
    (ms, upper, map, appends, knobs).prop_map(|(ms, upper, map, add, (half, keep, read))| {
        CleanSpec(ms, upper, map, half, add, keep, read)
    })
}

fn op(values: f64) -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => batch_spec(values).prop_map(Op::Append),
        1 => Just(Op::AppendKeyless),
        2 => Just(Op::Roll),
        2 => any::<u16>().prop_map(Op::Read),
        1 => any::<u16>().prop_map(Op::DeleteRecords),
        4 => clean_spec(values).prop_map(Op::Clean),
        3 => (clean_spec(values), prop_oneof![0u32..3_000, 0u32..30_000], any::<bool>()).prop_map(|(c, us, p)| Op::CleanCrash(c, us, p)),
        2 => (clean_spec(values), any::<u8>()).prop_map(|(c, level)| Op::CleanFlaky(c, level)),
        1 => Just(Op::Reopen),
        1 => any::<bool>().prop_map(Op::Crash),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct Rec {
    key: u8,
    value: Option<Bytes>,
    timestamp: i64,
}

/// What a batch was appended with: last offset, epoch, producer (id, epoch, sequence), codec.
type BatchInfo = (i64, i32, (i64, i16, i32), Compression);

#[derive(Default)]
struct Model {
    records: BTreeMap<i64, Rec>,
    batches: BTreeMap<i64, BatchInfo>,
    next: i64,
    log_start: i64,
    epoch: i32,
    sequences: BTreeMap<i64, i32>,
    clock_ms: i64,
    values: u64,
    /// The largest bound of any pass: superseded records below it may be gone.
    max_limit: i64,
    /// Per tombstone, the smallest `now` of the passes that could have stamped its horizon.
    first_now: BTreeMap<i64, i64>,
    vanishable: BTreeSet<i64>,
    /// Below this, a completed pass left no superseded record.
    deduped_below: i64,
    /// Whether a pass has met damage (and so may have left superseded records in place).
    damage_seen: bool,
}

impl Model {
    fn point(&self, fraction: u16) -> i64 {
        let span = (self.next - self.log_start) as u64;
        self.log_start + (span * u64::from(fraction) / u64::from(u16::MAX)) as i64
    }

    /// The batch bytes for `spec`, and the epoch to append it with.
    fn make(&mut self, spec: &BatchSpec) -> (Bytes, i32) {
        let BatchSpec(records, codec, producer, bump) = spec;
        self.epoch += i32::from(*bump);
        let mut specs = Vec::new();
        for (i, &(key, len)) in records.iter().enumerate() {
            self.values += 1;
            let value =
                len.map(|n| Bytes::from(format!("{}:{}", self.values, "v".repeat(n.into()))));
            specs.push(RecordSpec {
                offset_delta: i as i32,
                timestamp: 1_700_000_000_000 + self.values as i64,
                key: Some(Bytes::from(format!("key-{key}"))),
                value,
                headers: Vec::new(),
            });
        }
        let compression = match codec {
            0 => Compression::Gzip,
            1 => Compression::Snappy,
            2 => Compression::Lz4,
            3 => Compression::Zstd,
            _ => Compression::None,
        };
        let mut options = BatchOptions { compression, ..BatchOptions::default() };
        if let Some(p) = producer {
            options.producer_id = 1_000 + i64::from(*p);
            options.producer_epoch = 0;
            options.base_sequence = *self.sequences.entry(options.producer_id).or_default();
        }
        (encode_batch(&specs, &options).unwrap(), self.epoch)
    }

    fn appended(&mut self, raw: &Bytes, base: Offset, epoch: i32) -> Result<(), String> {
        if base.0 != self.next {
            return Err(format!("append got offset {base} but the model expects {}", self.next));
        }
        let h = batch::validate(raw, usize::MAX).unwrap();
        let producer = (h.producer_id(), h.producer_epoch(), h.base_sequence());
        if h.has_producer_id() {
            self.sequences.insert(h.producer_id(), h.base_sequence() + h.record_count());
        }
        self.batches.insert(
            base.0,
            (base.0 + i64::from(h.last_offset_delta()), epoch, producer, h.compression()),
        );
        for r in records::records(raw).unwrap() {
            let key = r.key.unwrap()[4] - b'0';
            self.records
                .insert(base.0 + r.offset, Rec { key, value: r.value, timestamp: r.timestamp });
        }
        self.next = base.0 + i64::from(h.last_offset_delta()) + 1;
        Ok(())
    }

    /// A pass with bound `limit` and clock `now` started: widen what may be missing.
    fn pass_started(&mut self, limit: i64, now: i64) {
        self.max_limit = self.max_limit.max(limit);
        for (&o, rec) in self.records.range(..limit) {
            if rec.value.is_some() {
                continue;
            }
            let first = self.first_now.entry(o).or_insert(now);
            if now >= first.saturating_add(DELETE_RETENTION_MS) {
                self.vanishable.insert(o);
            }
            *first = (*first).min(now);
        }
    }

    fn superseded_below(&self, o: i64, key: u8, below: i64) -> bool {
        self.records.range(o + 1..below.max(o + 1)).any(|(_, r)| r.key == key)
    }
}

/// Reads the whole log and checks it against the model (see the file header). Returns the
/// offsets present. `during_pass`: a pass may be swapping segments under the read, so the
/// reader may see an old value from a segment read before a swap and miss the tombstone that a
/// later swap dropped — as a Kafka consumer may, which is what `delete.retention.ms` is for;
/// every other property holds at every instant.
async fn check_log(log: &Log, m: &Model, during_pass: bool) -> Result<BTreeSet<i64>, String> {
    let (start, end) = (log.log_start_offset().0, log.log_end_offset().0);
    if (start, end) != (m.log_start, m.next) {
        return Err(format!(
            "log spans [{start}, {end}) but the model [{}, {})",
            m.log_start, m.next
        ));
    }
    let mut present = BTreeSet::new();
    let (mut from, mut last) = (start, -1);
    while from < end {
        let result = log
            .read(Offset(from), 2_000, Offset(end))
            .await
            .map_err(|e| format!("read {from}: {e}"))?;
        if result.records.is_empty() {
            break;
        }
        for b in split_batches(&result.records) {
            let b = b.map_err(|e| e.to_string())?;
            let h = batch::validate(&b, usize::MAX)
                .map_err(|e| format!("read an invalid batch: {e}"))?;
            let Some(&(last_offset, epoch, producer, codec)) = m.batches.get(&h.base_offset())
            else {
                return Err(format!("batch at {} was never appended", h.base_offset()));
            };
            let same = h.last_offset() == last_offset
                && h.partition_leader_epoch() == epoch
                && (h.producer_id(), h.producer_epoch(), h.base_sequence()) == producer
                && (h.record_count() == 0 || h.compression() == codec)
                && h.timestamp_type() == TimestampType::Creation;
            if !same || h.base_offset() <= last {
                return Err(format!(
                    "batch at {} changed its identity or order: {h:?}",
                    h.base_offset()
                ));
            }
            for r in records::records(&b).map_err(|e| e.to_string())? {
                let want = m.records.get(&r.offset).cloned().map(|w| (w.key, w.value, w.timestamp));
                let key = r.key.as_ref().map(|k| k[4] - b'0');
                if r.offset <= last || want != key.map(|k| (k, r.value.clone(), r.timestamp)) {
                    return Err(format!("offset {} reads {r:?}, expected {want:?}", r.offset));
                }
                last = r.offset;
                if r.offset >= start {
                    present.insert(r.offset);
                }
            }
            last = last.max(h.last_offset());
        }
        from = result.next_offset.0;
    }
    let mut latest: BTreeMap<u8, i64> = BTreeMap::new();
    for (&o, rec) in m.records.range(start..) {
        latest.insert(rec.key, o);
        let excused = m.superseded_below(o, rec.key, m.max_limit)
            || (rec.value.is_none() && m.vanishable.contains(&o));
        if !present.contains(&o) && !excused {
            return Err(format!("record at {o} ({rec:?}) is lost"));
        }
        // Once a pass has left damaged data as it was, a record there may outlive later records
        // of its key that the same pass dropped elsewhere; what must hold is that no record
        // below the first dirty offset has a later one of its key there that is still present
        // (what keeps a dropped tombstone from bringing an older value back).
        let superseded = if m.damage_seen {
            let mut later = present.range(o + 1..m.deduped_below.max(o + 1));
            later.any(|p| m.records.get(p).is_some_and(|r| r.key == rec.key))
        } else {
            m.superseded_below(o, rec.key, m.deduped_below)
        };
        if present.contains(&o) && o < m.deduped_below && superseded {
            return Err(format!(
                "record at {o} is superseded below {} but was kept",
                m.deduped_below
            ));
        }
    }
    for (key, o) in latest {
        let any = m.records.range(start..).any(|(p, r)| r.key == key && present.contains(p));
        if any && !present.contains(&o) && !during_pass {
            return Err(format!(
                "key {key}: its latest record {o} is gone but an older one is back"
            ));
        }
    }
    Ok(present)
}

/// One simulated host with the log, and the model beside it.
struct Harness {
    sim: Sim,
    host: Host,
    log: Option<Arc<Log>>,
    m: Model,
    /// The offsets the last check found.
    present: BTreeSet<i64>,
    /// Counts of what happened, printed with `COMPACTION_DEBUG` set.
    seen: BTreeMap<&'static str, u64>,
}

impl Harness {
    fn new(seed: u64) -> Harness {
        let sim = Sim::new(seed);
        let host = sim.add_client("host");
        Harness {
            sim,
            host,
            log: None,
            m: Model::default(),
            present: BTreeSet::new(),
            seen: BTreeMap::new(),
        }
    }

    fn block<T: Send + 'static, Fut: Future<Output = T> + Send + 'static>(
        &self,
        f: impl FnOnce(Env, Arc<Log>) -> Fut,
    ) -> Result<T, String> {
        let log = Arc::clone(self.log.as_ref().ok_or("no log open")?);
        self.sim
            .block_on(self.host, STEP_LIMIT, |env| f(env, log))
            .ok_or_else(|| "the simulation stalled".into())
    }

    fn open(&mut self) -> Result<(), String> {
        self.log = None;
        let opened = self.sim.block_on(self.host, STEP_LIMIT, |env| async move {
            Log::open(env, dir(), config(0.0)).await.map(Arc::new).map_err(|e| format!("open: {e}"))
        });
        self.log = Some(opened.ok_or("open stalled")??);
        self.check()
    }

    fn check(&mut self) -> Result<(), String> {
        let m = std::mem::take(&mut self.m);
        let (m, result) = self.block(|_, log| async move {
            let result = check_log(&log, &m, false).await;
            (m, result)
        })?;
        self.m = m;
        self.present = result?;
        Ok(())
    }

    /// Reads the whole log while a pass runs (readers hold the files of replaced segments).
    fn check_during_pass(&mut self) -> Result<(), String> {
        let m = std::mem::take(&mut self.m);
        let (m, result) = self.block(|_, log| async move {
            let result = check_log(&log, &m, true).await;
            (m, result)
        })?;
        self.m = m;
        *self.seen.entry("reads during a pass").or_default() += 1;
        result.map(|_| ()).map_err(|e| format!("during the pass: {e}"))
    }

    fn append_all(&mut self, specs: &[BatchSpec]) -> Result<(), String> {
        let made: Vec<(Bytes, i32)> = specs.iter().map(|s| self.m.make(s)).collect();
        let sent = made.clone();
        let infos = self.block(|_, log| async move {
            let mut infos = Vec::new();
            for (raw, epoch) in sent {
                infos.push(
                    log.append(raw, LeaderEpoch(epoch))
                        .await
                        .map_err(|e| format!("append: {e}"))?,
                );
            }
            Ok::<_, String>(infos)
        })??;
        for ((raw, epoch), info) in made.iter().zip(infos) {
            self.m.appended(raw, info.base_offset, *epoch)?;
        }
        Ok(())
    }

    /// Starts a pass as a task; returns where its outcome will land and the pass's bounds.
    fn start_clean(&mut self, spec: &CleanSpec, latency: bool) -> Result<CleanRun, String> {
        let CleanSpec(ms, upper, map_keys, half, appends, retention, read) = spec;
        let log = Arc::clone(self.log.as_ref().ok_or("no log open")?);
        log.set_config(config(if *half { 0.5 } else { 0.0 }));
        self.m.clock_ms += DELETE_RETENTION_MS / 4;
        let now = self.m.clock_ms + i64::from(*ms);
        let upper = upper.map_or(self.m.next, |f| self.m.point(f));
        let map_bytes = map_keys
            .map_or(usize::MAX, |n| usize::from(n) * (KEY_BYTES + OFFSET_MAP_ENTRY_OVERHEAD_BYTES));
        let bases_before = log.segment_bases();
        if latency {
            let slow = Duration::from_micros(20);
            let faults =
                DiskFaults { latency_min: slow, latency_max: slow * 10, ..DiskFaults::default() };
            self.sim.set_disk_faults(self.host, faults);
        }
        let slot = Arc::new(Mutex::new(None));
        let out = Arc::clone(&slot);
        let _task = self.sim.spawn(self.host, "clean", move |_| async move {
            let result = log.clean_with_map_limit(now, Offset(upper), map_bytes).await;
            *out.lock().unwrap() = Some(result.map_err(|e| format!("clean: {e}")));
        });
        self.append_all(appends)?;
        if let Some(bytes) = *retention {
            let next = Offset(self.m.next);
            let outcome = self.block(move |_, log| async move {
                let mut config = log.config();
                config.cleanup_policy = CleanupPolicy::CompactDelete;
                config.retention_bytes = i64::from(bytes);
                log.set_config(config.clone());
                let outcome = log.apply_retention(next).await;
                config.cleanup_policy = CleanupPolicy::Compact;
                config.retention_bytes = -1;
                log.set_config(config);
                outcome.map_err(|e| format!("retention: {e}"))
            })??;
            *self.seen.entry("retention deleted").or_default() += outcome.segments as u64;
            self.m.log_start = self.m.log_start.max(outcome.log_start.0);
        }
        let bases = self.log.as_ref().map(|l| l.segment_bases()).unwrap_or_default();
        let below = |bases: &[Offset]| bases.iter().map(|b| b.0).filter(|&b| b <= upper).max();
        let limit = below(&bases).unwrap_or(self.m.log_start);
        self.m.pass_started(limit, now);
        if *read {
            let before = self.log.as_ref().map(|l| l.describe_segments());
            self.check_during_pass()?;
            let after = self.log.as_ref().map(|l| l.describe_segments());
            *self.seen.entry("reads across a swap").or_default() += u64::from(before != after);
        }
        let sealed = &bases_before[..bases_before.len().saturating_sub(1)];
        Ok(CleanRun { slot, limit, expected: below(sealed).unwrap_or(0) })
    }

    /// Takes the outcome of a pass that finished, checks what it claims, and notes what it cleaned.
    fn finish_clean(&mut self, run: &CleanRun) -> Result<(), String> {
        let Some(outcome) = run.slot.lock().unwrap().take() else {
            *self.seen.entry("crashed mid-pass").or_default() += 1;
            return Ok(());
        };
        let first_dirty = match outcome? {
            CleanOutcome::Cleaned(stats) if stats.abandoned => {
                *self.seen.entry("abandoned").or_default() += 1;
                if stats.first_dirty_after != stats.first_dirty_before {
                    return Err(format!(
                        "an abandoned pass moved the first dirty offset: {stats:?}"
                    ));
                }
                None
            }
            CleanOutcome::Cleaned(stats) => {
                *self.seen.entry("passes").or_default() += 1;
                *self.seen.entry("superseded").or_default() += stats.records_superseded;
                *self.seen.entry("tombstones").or_default() += stats.tombstones_removed;
                *self.seen.entry("segments replaced").or_default() +=
                    stats.segments_replaced as u64;
                *self.seen.entry("segments written").or_default() += stats.segments_written as u64;
                *self.seen.entry("map full").or_default() += u64::from(stats.map_full);
                *self.seen.entry("passes that met damage").or_default() +=
                    u64::from(stats.damaged_at.is_some());
                self.m.damage_seen |= stats.damaged_at.is_some();
                *self.seen.entry("groups left damaged").or_default() +=
                    stats.groups_left_damaged as u64;
                if let Some(at) = stats.damaged_at
                    && stats.first_dirty_after > at.max(stats.first_dirty_before)
                {
                    return Err(format!("the first dirty offset moved past damage: {stats:?}"));
                }
                let progress = stats.first_dirty_after > stats.first_dirty_before;
                if stats.map_full && !progress && stats.damaged_at.is_none() {
                    return Err(format!("a pass with a full map made no progress: {stats:?}"));
                }
                if stats.first_dirty_after.0 > run.limit.max(self.m.log_start) {
                    return Err(format!("cleaned past the bound {}: {stats:?}", run.limit));
                }
                self.m.deduped_below = self.m.deduped_below.max(stats.first_dirty_after.0);
                // A pass that met damage cleans short of it, on purpose.
                (!stats.map_full && stats.damaged_at.is_none()).then_some(stats.first_dirty_after)
            }
            CleanOutcome::NothingToClean { first_dirty } => {
                // The persisted claim of an earlier pass (maybe one a crash hid from us).
                self.m.deduped_below = self.m.deduped_below.max(first_dirty.0);
                Some(first_dirty)
            }
            CleanOutcome::BelowDirtyRatio(_) => None,
            CleanOutcome::NotCompacted => return Err("a compacted log was not compacted".into()),
        };
        match first_dirty {
            Some(d) if d.0 < run.expected => {
                Err(format!("cleaned only up to {d}, not {}", run.expected))
            }
            _ => Ok(()),
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Append(spec) => self.append_all(std::slice::from_ref(spec))?,
            Op::AppendKeyless => {
                let raw = encode_batch(
                    &[RecordSpec {
                        offset_delta: 0,
                        timestamp: 0,
                        key: None,
                        value: None,
                        headers: Vec::new(),
                    }],
                    &BatchOptions::default(),
                )
                .unwrap();
                let refused = self
                    .block(|_, log| async move { log.append(raw, LeaderEpoch(i32::MAX)).await })?;
                if !matches!(refused, Err(AppendError::KeylessOnCompacted)) {
                    return Err(format!("a keyless record was not refused: {refused:?}"));
                }
            }
            Op::Roll => {
                self.block(|_, log| async move { log.roll().await.map_err(|e| e.to_string()) })??
            }
            Op::Read(at) => {
                let (from, next) = (Offset(self.m.point(*at)), Offset(self.m.next));
                let read = self.block(move |_, log| async move {
                    log.read(from, 1, next).await.map_err(|e| e.to_string())
                })??;
                let mut got = Vec::new();
                for b in split_batches(&read.records) {
                    let records = records::records(&b.unwrap()).unwrap();
                    got.extend(records.iter().map(|r| r.offset).filter(|&o| o >= from.0));
                }
                self.check()?;
                let want: Vec<i64> =
                    self.present.range(from.0..read.next_offset.0).copied().collect();
                if got != want
                    || (want.is_empty()
                        && self.present.range(from.0..).next().is_some()
                        && read.next_offset <= from)
                {
                    return Err(format!(
                        "read from {from} returned {got:?} up to {}, but the log holds {want:?}",
                        read.next_offset
                    ));
                }
            }
            Op::DeleteRecords(at) => {
                let (target, next) = (Offset(self.m.point(*at)), Offset(self.m.next));
                let start = self.block(move |_, log| async move {
                    log.delete_records_before(target, next).await.map_err(|e| e.to_string())
                })??;
                self.m.log_start = start.0;
            }
            Op::Clean(spec) => {
                let run = self.start_clean(spec, false)?;
                self.sim.run_until(STEP_LIMIT, || run.slot.lock().unwrap().is_some());
                if run.slot.lock().unwrap().is_none() {
                    return Err("a pass stalled".into());
                }
                self.finish_clean(&run)?;
            }
            Op::CleanFlaky(spec, level) => {
                let CleanSpec(ms, upper, map, half, ..) = spec.clone();
                let spec = CleanSpec(ms, upper, map, half, Vec::new(), None, false);
                let rate = [0.3, 0.6, 0.9][usize::from(*level % 3)];
                let faults = DiskFaults { read_corruption: rate, ..DiskFaults::default() };
                self.sim.set_disk_faults(self.host, faults);
                let run = self.start_clean(&spec, false)?;
                self.sim.run_until(STEP_LIMIT, || run.slot.lock().unwrap().is_some());
                self.sim.set_disk_faults(self.host, DiskFaults::default());
                if run.slot.lock().unwrap().is_none() {
                    return Err("a pass stalled".into());
                }
                self.finish_clean(&run)?;
            }
            Op::CleanCrash(spec, us, power) => {
                let run = self.start_clean(spec, true)?;
                self.sim.run_for(Duration::from_micros(u64::from(*us)));
                self.finish_clean(&run)?;
                self.crash(*power);
                self.sim.set_disk_faults(self.host, DiskFaults::default());
                return self.open();
            }
            Op::Reopen => {
                self.block(|_, log| async move { log.close().await.map_err(|e| e.to_string()) })??;
                return self.open();
            }
            Op::Crash(power) => {
                self.crash(*power);
                return self.open();
            }
        }
        self.check()
    }

    fn crash(&mut self, power: bool) {
        let leftovers = self.leftovers();
        *self.seen.entry("crashes").or_default() += 1;
        *self.seen.entry("crashes mid-swap").or_default() += u64::from(!leftovers.is_empty());
        self.log = None;
        if power {
            self.sim.power_fail(self.host)
        } else {
            self.sim.kill(self.host)
        }
        self.sim.start(self.host);
    }

    /// Names in the log's folder that only an interrupted pass leaves.
    fn leftovers(&self) -> Vec<String> {
        let listed = self
            .sim
            .block_on(self.host, STEP_LIMIT, |env| async move { env.disk.list(&dir()).await });
        let names = listed.and_then(|l| l.ok()).unwrap_or_default();
        names.into_iter().filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned")).collect()
    }
}

struct CleanRun {
    slot: Arc<Mutex<Option<Result<CleanOutcome, String>>>>,
    /// The pass's bound: the largest segment base at or below the upper bound.
    limit: i64,
    /// Where a pass must at least clean to: the end of the last sealed segment below the bound.
    expected: i64,
}

fn run_case(seed: u64, ops: &[Op]) -> Result<(), String> {
    let mut h = Harness::new(seed);
    h.open()?;
    for (i, op) in ops.iter().enumerate() {
        h.step(op).map_err(|e| format!("op {i} {op:?}: {e}"))?;
    }
    if std::env::var("COMPACTION_DEBUG").is_ok() {
        let kept = h.m.records.len();
        eprintln!("records {kept} vanishable {} seen {:?}", h.m.vanishable.len(), h.seen);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_the_latest_record_of_every_key_across_crashes(
        (seed, ops) in (any::<u64>(), prop_oneof![Just(0.9), Just(0.5)])
            .prop_flat_map(|(seed, values)| (Just(seed), prop::collection::vec(op(values), 1..70))),
    ) {
        if let Err(e) = run_case(seed, &ops) {
            prop_assert!(false, "seed {seed:#x}: {e}\nops: {ops:?}");
        }
    }
}

/// A log with duplicates and tombstones over several segments, ready to clean.
fn prepared(seed: u64) -> Result<Harness, String> {
    let mut h = Harness::new(seed);
    h.open()?;
    for i in 0..40u8 {
        let records = (0..3).map(|j| ((i + j) % KEYS, (i % 7 != 0).then_some(30 + j))).collect();
        h.step(&Op::Append(BatchSpec(records, i % 5, None, false)))?;
    }
    h.step(&Op::Roll)?;
    h.append_all(&[BatchSpec(vec![(0, Some(1))], 9, None, false)])?;
    Ok(h)
}

/// Crashes a pass at evenly spread instants — including between writing `.swap` and renaming
/// it into place — and checks that every recovery finds a consistent log.
#[test]
fn a_crash_at_any_step_of_a_swap_recovers_a_consistent_log() {
    const STEPS: u64 = 80;
    let pass = CleanSpec(0, None, None, false, Vec::new(), None, false);
    let mut swaps_seen = 0;
    for seed in 0..3u64 {
        let mut dry = prepared(seed).unwrap();
        let run = dry.start_clean(&pass, true).unwrap();
        let started = dry.sim.now();
        dry.sim.run_until(STEP_LIMIT, || run.slot.lock().unwrap().is_some());
        let took = (dry.sim.now() - started).as_micros() as u64;
        dry.finish_clean(&run).unwrap();
        for step in 0..=STEPS {
            let mut h = prepared(seed).unwrap();
            let run = h.start_clean(&pass, true).unwrap();
            h.sim.run_for(Duration::from_micros(took * step / STEPS));
            h.finish_clean(&run).unwrap();
            h.crash(step % 3 == 0);
            let leftovers = h.leftovers();
            if std::env::var("COMPACTION_DEBUG").is_ok() {
                eprintln!(
                    "seed {seed} step {step}/{STEPS} of {took}µs: {leftovers:?} {:?}",
                    h.seen
                );
            }
            swaps_seen += leftovers.iter().filter(|n| n.ends_with(".swap")).count();
            h.sim.set_disk_faults(h.host, DiskFaults::default());
            let recovered = h.open().and_then(|()| h.step(&Op::Clean(pass.clone())));
            assert!(recovered.is_ok(), "seed {seed} step {step} ({leftovers:?}): {recovered:?}");
        }
    }
    assert!(swaps_seen > 0, "no crash landed between the .swap rename and its completion");
}

/// A map that cannot hold one key could never make progress: the pass says so instead of
/// returning as if it had cleaned. A map of exactly one entry does make progress.
#[test]
fn a_map_too_small_for_one_key_is_an_error() {
    let mut h = Harness::new(7);
    h.open().unwrap();
    for key in [0, 1, 0] {
        h.append_all(&[BatchSpec(vec![(key, Some(1))], 9, None, false)]).unwrap();
        h.step(&Op::Roll).unwrap();
    }
    h.append_all(&[BatchSpec(vec![(2, Some(1))], 9, None, false)]).unwrap();
    let one = KEY_BYTES + OFFSET_MAP_ENTRY_OVERHEAD_BYTES;
    let clean = |bytes: usize| {
        h.block(move |_, log| async move { log.clean_with_map_limit(0, Offset(99), bytes).await })
            .unwrap()
    };
    let refused = clean(one - 1);
    assert!(
        matches!(refused, Err(MaintenanceError::CleanerMapTooSmall { key_bytes: KEY_BYTES, .. })),
        "{refused:?}"
    );
    match clean(one) {
        Ok(CleanOutcome::Cleaned(stats)) => {
            assert!(stats.map_full && stats.keys == 1, "{stats:?}");
            assert_eq!(stats.first_dirty_after, Offset(1), "only key 0 at offset 0 fit");
        }
        other => panic!("a one-key map made no progress: {other:?}"),
    }
}
