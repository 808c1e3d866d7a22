//! The log-durability workload: writers append with `flush.policy=ack` while the host is killed
//! or power-failed at random instants and its disk misbehaves, and a checkpointer records the
//! recovery point beside them as the broker's maintenance does; a reader checks what is durable
//! as it goes. After the faults stop, every acknowledged batch must be in the log at its offset with
//! its exact bytes, nothing corrupt may ever have been returned, and no offset may ever have
//! shown two different batches.
//!
//! A faulty disk also gets latent sector errors: a bit of an acknowledged batch below the last
//! durable checkpoint flips in place, for good. That batch may then fail every read (it must
//! never be returned), but nothing else may suffer: every other acknowledged batch, the ones in
//! the same segment and index interval included, must still read back exactly. (Damage past the
//! last checkpoint's recovery point is not injected: recovery cannot tell it from a torn tail,
//! and cuts the log there, as Kafka does.)

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::log::batch::{self, Compression};
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{AppendError, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};

use crate::disk::DiskFaults;
use crate::node::{Boot, NodeStatus, boot};
use crate::sim::Sim;
use crate::world::lock;

/// Concurrent appenders (so group commit has something to group).
pub const WRITERS: usize = 3;
/// Longest pause of a writer between appends.
pub const WRITER_PAUSE_MS_MAX: u64 = 50;
/// Longest pause of the reader between reads.
pub const READER_PAUSE_MS_MAX: u64 = 50;
/// Longest pause of the checkpointer between checkpoints.
pub const CHECKPOINT_PAUSE_MS_MAX: u64 = 200;
/// Latent sector errors injected at most per seed.
pub const DAMAGED_BATCHES_MAX: usize = 3;

/// What the writers and the reader saw.
#[derive(Debug, Default)]
pub struct History {
    /// Acknowledged batches by base offset, as stored (stamped).
    pub acked: BTreeMap<i64, Bytes>,
    /// CRC of every batch a read returned, by base offset.
    pub observed: BTreeMap<i64, u32>,
    /// Appends that failed (indeterminate).
    pub failed_appends: u64,
    /// Every batch wholly below this offset lies below the recovery point of a durable
    /// checkpoint (a crash recovers it without walking it).
    pub checkpointed_below: i64,
    /// Batches damaged in place (latent sector errors): base offset to last offset.
    pub damaged: BTreeMap<i64, i64>,
    /// Reads that returned data.
    pub reads: u64,
    /// Property violations.
    pub violations: Vec<String>,
}

fn config(seed: u64) -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10 << (seed % 3),
        index_interval_bytes: 1 << 10,
        ..LogConfig::default()
    }
}

fn log_dir() -> PathBuf {
    PathBuf::from("events-0")
}

/// The host's boot: open (recover) the log, then run the writers and the reader.
pub fn host(seed: u64, history: Arc<Mutex<History>>, stop: Arc<AtomicBool>) -> Boot {
    boot(move |env: Env| {
        let (history, stop) = (Arc::clone(&history), Arc::clone(&stop));
        async move {
            let log = match Log::open(env.clone(), log_dir(), config(seed)).await {
                Ok(log) => Arc::new(log),
                Err(e) => {
                    tracing::debug!("open failed: {e}");
                    return;
                }
            };
            for w in 0..WRITERS {
                let (log, history, stop, env2) =
                    (Arc::clone(&log), Arc::clone(&history), Arc::clone(&stop), env.clone());
                env.spawn("writer", async move { writer(env2, log, w, history, stop).await });
            }
            let (checkpointed, env2, stop2) = (Arc::clone(&log), env.clone(), Arc::clone(&stop));
            let history2 = Arc::clone(&history);
            env.spawn("checkpointer", async move {
                checkpointer(env2, checkpointed, history2, stop2).await
            });
            reader(env, log, history, stop).await;
        }
    })
}

/// Checkpoints the log now and then, beside the appends (it does not hold them up), so that
/// crashes land during checkpoints too and recovery starts from what they recorded.
async fn checkpointer(
    env: Env,
    log: Arc<Log>,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let pause = 1 + env.entropy.below(CHECKPOINT_PAUSE_MS_MAX);
        env.clock.sleep(Duration::from_millis(pause)).await;
        // A checkpoint records the durable offset as it is written (no less than now): once it
        // is durable, recovery trusts everything below this one.
        let durable = log.durable_offset();
        match log.checkpoint().await {
            Ok(()) => {
                let mut h = lock(&history);
                h.checkpointed_below = h.checkpointed_below.max(durable.0);
            }
            Err(e) => tracing::debug!("checkpoint failed: {e}"),
        }
    }
}

fn random_batch(env: &Env) -> Bytes {
    let count = 1 + env.entropy.below(12) as usize;
    let records: Vec<RecordSpec> = (0..count)
        .map(|i| {
            let mut value = vec![0u8; env.entropy.below(300) as usize];
            env.entropy.fill(&mut value);
            RecordSpec {
                offset_delta: i as i32,
                timestamp: env.clock.wall_ms(),
                key: Some(Bytes::from(format!("k{}", env.entropy.below(50)))),
                value: Some(Bytes::from(value)),
                headers: Vec::new(),
            }
        })
        .collect();
    let compression = match env.entropy.below(16) {
        0 => Compression::Gzip,
        1 => Compression::Snappy,
        2 => Compression::Lz4,
        3 => Compression::Zstd,
        _ => Compression::None,
    };
    let options = BatchOptions { compression, ..BatchOptions::default() };
    encode_batch(&records, &options).unwrap_or_default()
}

async fn writer(
    env: Env,
    log: Arc<Log>,
    _id: usize,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let batch = random_batch(&env);
        match log.append(batch.clone(), LeaderEpoch(0)).await {
            Ok(info) => {
                let mut stored = batch.to_vec();
                if batch::stamp(&mut stored, info.base_offset.0, 0).is_err() {
                    continue;
                }
                let mut h = lock(&history);
                if let Some(previous) = h.acked.insert(info.base_offset.0, Bytes::from(stored)) {
                    let _ = previous;
                    h.violations.push(format!("offset {} acknowledged twice", info.base_offset));
                }
            }
            Err(AppendError::Offline(_)) => {
                lock(&history).failed_appends += 1;
                return;
            }
            Err(e) => {
                let mut h = lock(&history);
                h.failed_appends += 1;
                if !matches!(e, AppendError::DiskFull) {
                    h.violations.push(format!("a valid batch was refused: {e}"));
                }
            }
        }
        env.clock.sleep(Duration::from_millis(env.entropy.below(WRITER_PAUSE_MS_MAX))).await;
    }
}

async fn reader(env: Env, log: Arc<Log>, history: Arc<Mutex<History>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        env.clock.sleep(Duration::from_millis(1 + env.entropy.below(READER_PAUSE_MS_MAX))).await;
        let (start, durable) = (log.log_start_offset(), log.durable_offset());
        if durable <= start {
            continue;
        }
        let from = Offset(start.0 + env.entropy.below(durable.distance_from(start)) as i64);
        match log.read(from, 1 + env.entropy.below(64 << 10) as usize, durable).await {
            Ok(result) => {
                let before = lock(&history).violations.len();
                check_read(&history, from, &result.records);
                if lock(&history).violations.len() > before && std::env::var("LOG_DEBUG").is_ok() {
                    eprintln!(
                        "read from {from} durable {durable} start {start}: segments {:?}",
                        log.describe_segments()
                    );
                }
            }
            Err(weir::log::ReadError::Offline(_)) => return,
            Err(e) => tracing::debug!("read failed: {e}"),
        }
    }
}

/// Checks returned batches: valid, starting at or before `from`, dense, and consistent with
/// every earlier observation and acknowledgement.
fn check_read(history: &Mutex<History>, from: Offset, records: &Bytes) {
    let mut h = lock(history);
    h.reads += 1;
    let mut expected_next: Option<i64> = None;
    for (i, batch) in split_batches(records).enumerate() {
        let header =
            match batch.as_ref().map_err(|e| *e).and_then(|b| batch::validate(b, usize::MAX)) {
                Ok(header) => header,
                Err(e) => {
                    h.violations.push(format!("read from {from} returned an invalid batch: {e}"));
                    return;
                }
            };
        let Ok(bytes) = batch else { return };
        if i == 0 && !(header.base_offset() <= from.0 && from.0 <= header.last_offset()) {
            h.violations.push(format!(
                "read from {from} started at batch {}..={}",
                header.base_offset(),
                header.last_offset()
            ));
        }
        if expected_next.is_some_and(|n| n != header.base_offset()) {
            h.violations
                .push(format!("read from {from}: gap or overlap at {}", header.base_offset()));
        }
        expected_next = Some(header.last_offset() + 1);
        if let Some(acked) = h.acked.get(&header.base_offset())
            && acked != &bytes
        {
            h.violations.push(format!(
                "offset {} reads differently from what was acknowledged",
                header.base_offset()
            ));
        }
        if let Some(&crc) = h.observed.get(&header.base_offset())
            && crc != header.crc()
        {
            h.violations
                .push(format!("offset {} showed two different batches", header.base_offset()));
        }
        h.observed.insert(header.base_offset(), header.crc());
    }
}

/// The outcome of one seed.
#[derive(Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The trace hash at the end.
    pub trace_hash: u64,
    /// Acknowledged batches checked.
    pub acked: usize,
    /// Crashes injected.
    pub crashes: u32,
    /// Batches damaged in place (latent sector errors).
    pub damaged: usize,
    /// Violations (empty: passed).
    pub violations: Vec<String>,
}

/// Runs one seed: appends under random kills, power failures and disk faults for
/// `fault_phase`, then a clean restart and a full check of the log.
pub fn run(seed: u64, fault_phase: Duration) -> Report {
    let sim = Sim::new(seed);
    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let host = sim.add_host("broker", host(seed, Arc::clone(&history), Arc::clone(&stop)));
    let mut rng = crate::trace::mix(seed ^ 0x10c);
    let mut next = || {
        rng = crate::trace::mix(rng);
        rng
    };
    let faulty_disk = next() % 2 == 0 && std::env::var("NO_DISK_FAULTS").is_err();
    let mut crashes = 0;
    let end = sim.now() + fault_phase;
    while sim.now() < end {
        sim.run_for(Duration::from_millis(next() % 1_500));
        match next() % 4 {
            0 => sim.kill(host),
            1 => sim.power_fail(host),
            2 if faulty_disk
                && next() % 4 == 0
                && lock(&history).damaged.len() < DAMAGED_BATCHES_MAX =>
            {
                damage_one(&sim, host, &history, next());
                continue;
            }
            _ => {
                let faults = if faulty_disk && next() % 2 == 0 {
                    noisy_disk()
                } else {
                    DiskFaults::default()
                };
                sim.set_disk_faults(host, faults);
                continue;
            }
        }
        crashes += 1;
        sim.set_disk_faults(host, DiskFaults::default());
        sim.start(host);
    }
    sim.set_disk_faults(host, DiskFaults::default());
    if next() % 2 == 0 {
        sim.power_fail(host);
    } else {
        sim.kill(host);
    }
    stop.store(true, Ordering::Relaxed);
    sim.start(host);
    sim.run_for(Duration::from_secs(1));
    let mut violations = final_check(&sim, host, &history);
    violations.extend(lock(&history).violations.iter().cloned());
    assert_ne!(sim.status(host), NodeStatus::Down);
    let (acked, damaged) = {
        let h = lock(&history);
        (h.acked.len(), h.damaged.len())
    };
    Report { seed, trace_hash: sim.trace_hash(), acked, crashes, damaged, violations }
}

/// Flips one bit, in place and for good, of an acknowledged batch (chosen by `pick`) wholly
/// below the last durable checkpoint. Does nothing if there is no such batch or it cannot be
/// found on the disk now.
fn damage_one(sim: &Sim, host: crate::sim::Host, history: &Arc<Mutex<History>>, pick: u64) {
    let chosen = {
        let h = lock(history);
        let candidates: Vec<(i64, &Bytes)> = h
            .acked
            .iter()
            .filter(|(base, bytes)| {
                batch::parse_header(bytes).is_ok_and(|hd| hd.last_offset() < h.checkpointed_below)
                    && !h.damaged.contains_key(base)
            })
            .map(|(base, bytes)| (*base, bytes))
            .collect();
        if candidates.is_empty() {
            return;
        }
        let (base, bytes) = candidates[(pick % candidates.len() as u64) as usize];
        (base, bytes.clone())
    };
    let (base, bytes) = chosen;
    let len = bytes.len() as u64;
    let Ok(last) = batch::parse_header(&bytes).map(|hd| hd.last_offset()) else { return };
    let found = sim.block_on(host, Duration::from_secs(10), move |env| async move {
        // Only where the bytes found are exactly the batch (a read the disk corrupted finds
        // nothing).
        let (path, position, found) = locate(env, log_dir(), base).await?;
        (found == bytes).then_some((path, position))
    });
    let Some(Some((path, position))) = found else { return };
    if sim.corrupt_file(host, &path, position + (pick >> 32) % len).is_ok() {
        tracing::debug!("damaged the batch at {base} ({path:?} byte {position})");
        lock(history).damaged.insert(base, last);
    }
}

/// The segment file of the log in `dir` holding the batch at `base`, its byte position there and
/// its bytes as read, found by walking the file's batch frames (for a test to damage it).
pub async fn locate(env: Env, dir: PathBuf, base: i64) -> Option<(PathBuf, u64, Bytes)> {
    let names = env.disk.list(&dir).await.ok()?;
    let segment = names
        .iter()
        .filter_map(|name| name.strip_suffix(".log"))
        .filter(|stem| stem.len() == 20)
        .filter_map(|stem| stem.parse::<i64>().ok())
        .filter(|&b| b <= base)
        .max()?;
    let path = dir.join(format!("{segment:020}.log"));
    let file = env.disk.open(&path).await.ok()?;
    let contents = file.read_at(0, file.len() as usize).await.ok()?;
    let mut at = 0usize;
    while at < contents.len() {
        let header = batch::parse_header(contents.get(at..)?).ok()?;
        let end = at.checked_add(header.total_bytes())?;
        if header.base_offset() == base {
            return Some((path, at as u64, contents.slice(at..end)));
        }
        at = end;
    }
    None
}

fn noisy_disk() -> DiskFaults {
    DiskFaults {
        read_error: 0.01,
        write_error: 0.005,
        sync_error: 0.01,
        read_corruption: 0.02,
        latency_max: Duration::from_millis(5),
        ..DiskFaults::default()
    }
}

/// Reads the whole log after recovery and compares it with the history.
fn final_check(sim: &Sim, host: crate::sim::Host, history: &Arc<Mutex<History>>) -> Vec<String> {
    let damaged = lock(history).damaged.clone();
    let contents = sim.block_on(host, Duration::from_secs(60), |env| async move {
        let log = Log::open(env, log_dir(), config(0)).await.map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        let mut from = log.log_start_offset();
        while from < log.log_end_offset() {
            let result = match log.read(from, 1 << 20, log.log_end_offset()).await {
                Ok(result) => result,
                // A damaged batch fails its own reads only: go on after it.
                Err(weir::log::ReadError::Corrupt { .. })
                    if let Some((_, &last)) = damaged.range(..=from.0).next_back()
                        && from.0 <= last =>
                {
                    from = Offset(last + 1);
                    continue;
                }
                Err(e) => return Err(format!("reading {from}: {e}")),
            };
            if result.records.is_empty() {
                return Err(format!("read from {from} returned nothing before the log end"));
            }
            for batch in split_batches(&result.records) {
                let batch = batch.map_err(|e| e.to_string())?;
                let header = batch::validate(&batch, usize::MAX).map_err(|e| e.to_string())?;
                out.insert(header.base_offset(), batch);
            }
            from = result.next_offset;
        }
        Ok(out)
    });
    let contents = match contents {
        Some(Ok(contents)) => contents,
        other => return vec![format!("the log could not be read back: {other:?}")],
    };
    let h = lock(history);
    let mut violations = Vec::new();
    for (offset, bytes) in &h.acked {
        if h.damaged.contains_key(offset) {
            if contents.contains_key(offset) {
                violations.push(format!("the damaged batch at {offset} was read back"));
            }
            continue;
        }
        match contents.get(offset) {
            Some(found) if found == bytes => {}
            Some(_) => violations.push(format!("acknowledged batch at {offset} changed")),
            None => violations.push(format!("acknowledged batch at {offset} is lost")),
        }
    }
    for (offset, crc) in &h.observed {
        if h.damaged.contains_key(offset) {
            continue;
        }
        match contents.get(offset) {
            Some(found) if batch::parse_header(found).map(|hd| hd.crc()).ok() == Some(*crc) => {}
            Some(_) => violations
                .push(format!("offset {offset} was read as one batch and now holds another")),
            // Reads only go up to the durable offset, so what they saw must survive.
            None => violations.push(format!("batch at {offset} was read as durable and is lost")),
        }
    }
    violations.truncate(10);
    violations
}
