//! Helpers for scenarios that drive one partition log: a log whose every batch fills a segment,
//! small keyed batches that tell themselves apart, reading a whole log back, appending beside
//! a slow maintenance task, and a partition (log and producer state) in [`dir`].

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{Log, LogConfig, ReadError};
use weir::model::{LeaderEpoch, Offset, TopicId, TopicPartition};
use weir::partition::Partition;
use weir_sim::{DiskFaults, Host, Sim};

use crate::ensure;

/// Records in a [`batch`].
pub const BATCH_RECORDS: i64 = 3;

/// The log's folder.
pub fn dir() -> PathBuf {
    PathBuf::from("events-0")
}

/// The first segment file of the log in [`dir`].
pub fn first_segment() -> PathBuf {
    dir().join(format!("{:020}.log", 0))
}

/// Writes `batches`, one after another, as the first segment of a new log in [`dir`], synced
/// (a log as its replica's own cleaner left it, say).
pub async fn write_first_segment(env: &Env, batches: &[Bytes]) -> Result<(), String> {
    let file: Vec<u8> = batches.iter().flat_map(|b| b.iter().copied()).collect();
    env.disk.create_dir(&dir()).await.map_err(|e| e.to_string())?;
    let f = env.disk.create(&first_segment()).await.map_err(|e| e.to_string())?;
    f.write_at(0, Bytes::from(file)).await.map_err(|e| e.to_string())?;
    f.sync_data().await.map_err(|e| e.to_string())?;
    env.disk.sync_dir(&dir()).await.map_err(|e| e.to_string())
}

/// Opens (recovering) partition `events-0` in [`dir`] with `config`.
pub async fn open_partition(env: Env, config: LogConfig) -> Result<Arc<Partition>, String> {
    let tp = TopicPartition::new("events", 0);
    let appended = Arc::new(tokio::sync::Notify::new());
    let partition = Partition::open(env, tp, TopicId::ZERO, dir(), config, appended)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(partition))
}

/// A log's settings with no retention: every batch stays.
pub fn kept_forever() -> LogConfig {
    LogConfig { retention_ms: -1, ..LogConfig::default() }
}

/// On `host`, a partition (see [`open_partition`]) kept for any time, holding `batches`
/// batches of [`batch`] appended in leader epoch 0 and checkpointed; with the batches as
/// stored.
pub fn partition_of_batches(
    sim: &Sim,
    host: Host,
    batches: u8,
) -> Result<(Arc<Partition>, Vec<Bytes>), String> {
    let config = kept_forever();
    let partition = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let partition = open_partition(env, config).await?;
            for n in 0..batches {
                let appended = partition.log.append(batch(n, None), LeaderEpoch(0)).await;
                appended.map_err(|e| e.to_string())?;
            }
            partition.checkpoint(i64::MAX).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(partition)
        })
        .ok_or("the appends did not finish")??;
    let stored = (0..batches)
        .map(|n| batch(n, Some((Offset(i64::from(n) * BATCH_RECORDS), LeaderEpoch(0)))))
        .collect();
    Ok((partition, stored))
}

/// A compacted log in small segments (1,500 bytes, an index entry every 200), kept for any
/// time and cleaned whatever its dirty ratio.
pub fn compacted() -> LogConfig {
    LogConfig {
        segment_bytes: 1_500,
        index_interval_bytes: 200,
        retention_ms: -1,
        cleanup_policy: weir::log::CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

/// Settings under which each [`batch`] fills a segment: every append seals the one before.
pub fn segment_per_batch() -> LogConfig {
    LogConfig { segment_bytes: 1_000, ..LogConfig::default() }
}

/// Batch `n` — [`BATCH_RECORDS`] keyed records of 200 bytes of `n` — as a client sends it, or
/// (`stored`) as a log stores it from that offset in that epoch.
pub fn batch(n: u8, stored: Option<(Offset, LeaderEpoch)>) -> Bytes {
    let records: Vec<RecordSpec> = (0..BATCH_RECORDS as i32)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000,
            key: Some(Bytes::from(format!("k{n}-{i}"))),
            value: Some(Bytes::from(vec![n; 200])),
            headers: Vec::new(),
        })
        .collect();
    let options = match stored {
        Some((at, epoch)) => {
            BatchOptions { base_offset: at.0, leader_epoch: epoch.0, ..Default::default() }
        }
        None => BatchOptions::default(),
    };
    encode_batch(&records, &options).expect("a valid batch")
}

/// A log in [`dir`] (no retention) holding batches `0..count` from offset 0, in its first
/// segment, which is sealed (one more batch starts the next) if `sealed`; with the batches as
/// stored there.
pub fn log_of_batches(
    sim: &Sim,
    host: Host,
    count: u8,
    sealed: bool,
) -> Result<(Arc<Log>, Vec<Bytes>), String> {
    let config = kept_forever();
    let log = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env, dir(), config).await.map_err(|e| e.to_string())?;
            for n in 0..count {
                log.append(batch(n, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            if sealed {
                log.roll().await.map_err(|e| e.to_string())?;
                log.append(batch(count, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Arc::new(log))
        })
        .ok_or("the appends did not finish")??;
    let stored = (0..count)
        .map(|n| batch(n, Some((Offset(i64::from(n) * BATCH_RECORDS), LeaderEpoch(0)))))
        .collect();
    Ok((log, stored))
}

/// Turns the first segment file of the partition in folder `partition` of `host`'s disk into a
/// folder of the same name (as a damaged file system can leave it): no open of that log can
/// succeed until [`repair_segment`]. Done on the running host, durably.
pub fn break_segment(sim: &Sim, host: Host, partition: &str) -> Result<(), String> {
    let folder = PathBuf::from(partition);
    let segment = folder.join(format!("{:020}.log", 0));
    sim.block_on(host, Duration::from_secs(10), move |env| async move {
        env.disk.remove(&segment).await?;
        env.disk.create_dir(&segment).await?;
        env.disk.sync_dir(&folder).await
    })
    .ok_or_else(|| format!("breaking {partition} did not finish"))?
    .map_err(|e| format!("breaking {partition}: {e}"))
}

/// Removes the folder [`break_segment`] left in place of the partition's first segment file.
pub fn repair_segment(sim: &Sim, host: Host, partition: &str) -> Result<(), String> {
    let segment = PathBuf::from(partition).join(format!("{:020}.log", 0));
    sim.block_on(host, Duration::from_secs(10), move |env| async move {
        env.disk.remove_dir_all(&segment).await
    })
    .ok_or_else(|| format!("repairing {partition} did not finish"))?
    .map_err(|e| format!("repairing {partition}: {e}"))
}

/// Batch `n` of a run that `seed` varies: 1 to `most_records` keyed records (`k{n}-{i}`),
/// timestamped `1_000 + n`, each with a value of `value_bytes.0` bytes and up to
/// `value_bytes.1 - 1` more.
pub fn varied_batch(
    seed: u64,
    n: usize,
    most_records: usize,
    value_bytes: (usize, usize),
) -> Bytes {
    let (least, spread) = value_bytes;
    let records: Vec<RecordSpec> = (0..1 + (seed as usize + n) % most_records)
        .map(|i| RecordSpec {
            offset_delta: i as i32,
            timestamp: 1_000 + n as i64,
            key: Some(Bytes::from(format!("k{n}-{i}"))),
            value: Some(Bytes::from(vec![
                (n + i) as u8;
                least + (seed as usize * 7 + n * 13) % spread
            ])),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&records, &BatchOptions::default()).expect("a valid batch")
}

/// Every batch of the log, in order, read from its start to its end.
pub async fn all_batches(log: &Log) -> Result<Vec<Bytes>, String> {
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    let mut batches = Vec::new();
    while at < end {
        let read = log.read(at, 1 << 20, end).await.map_err(|e| e.to_string())?;
        if read.next_offset <= at {
            return Err(format!("a read at {at} made no progress (log end {end})"));
        }
        for b in split_batches(&read.records) {
            batches.push(b.map_err(|e| e.to_string())?);
        }
        at = read.next_offset;
    }
    Ok(batches)
}

/// The batches read from `from` up to `to`, each read continuing where the last ended.
pub async fn read_range(log: &Log, from: Offset, to: Offset) -> Result<Vec<Bytes>, String> {
    let mut batches = Vec::new();
    let mut at = from;
    while at < to {
        let read = log.read(at, 1 << 20, to).await.map_err(|e| format!("reading {at}: {e}"))?;
        ensure(read.next_offset > at, || format!("a read at {at} made no progress"))?;
        for b in split_batches(&read.records) {
            batches.push(b.map_err(|e| e.to_string())?);
        }
        at = read.next_offset;
    }
    Ok(batches)
}

/// A latent sector error: flips a bit of byte `within` of batch `n` of the first segment,
/// whose batches are `stored`, in place and for good.
pub fn damage_batch(
    sim: &Sim,
    host: Host,
    stored: &[Bytes],
    n: usize,
    within: usize,
) -> Result<(), String> {
    let at: usize = stored.get(..n).ok_or("no such batch")?.iter().map(Bytes::len).sum();
    sim.corrupt_file(host, dir().join(format!("{:020}.log", 0)), (at + within) as u64)
        .map_err(|e| format!("damaging batch {n}: {e}"))
}

/// Makes `host`'s syncs take `sync`, starts `work` (maintenance on `log`, called `what` in
/// messages) and, once it has begun, appends batches `first..first + count` unsynced beside it.
/// Fails unless the appends finish within one sync while `work` is still under way, and `work`
/// then ends.
#[allow(clippy::too_many_arguments)]
pub fn appends_beside<F, Fut>(
    sim: &Sim,
    host: Host,
    log: &Arc<Log>,
    what: &str,
    sync: Duration,
    first: u8,
    count: u8,
    work: F,
) -> Result<(), String>
where
    F: FnOnce(Arc<Log>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    sim.set_disk_faults(host, DiskFaults { sync_latency: sync, ..DiskFaults::default() });
    let running = Arc::new(AtomicBool::new(true));
    let (done, work) = (Arc::clone(&running), work(Arc::clone(log)));
    sim.spawn(host, what, move |_| async move {
        work.await;
        done.store(false, Ordering::SeqCst);
    });
    // The work has begun writing when the appends start.
    sim.run_for(sync / 4);
    ensure(running.load(Ordering::SeqCst), || format!("the {what} ended within a sync"))?;
    let appender = Arc::clone(log);
    let took = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let start = env.clock.now();
            for n in 0..count {
                appender
                    .append_unsynced(batch(first + n, None), LeaderEpoch(1))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(env.clock.now() - start)
        })
        .ok_or("the appends did not finish")??;
    ensure(took < sync, || {
        format!("{count} appends took {took:?} while the {what} ran (a sync takes {sync:?})")
    })?;
    ensure(running.load(Ordering::SeqCst), || {
        format!("the {what} had already ended: the appends did not run beside it")
    })?;
    sim.run_until(Duration::from_secs(60), || !running.load(Ordering::SeqCst));
    ensure(!running.load(Ordering::SeqCst), || format!("the {what} never ended"))
}

/// The recovery point of the checkpoint in partition folder `dir` on `host`, as the device
/// holds it (what a power failure now would leave).
pub fn durable_recovery_point(sim: &Sim, host: Host, dir: &str) -> Option<i64> {
    let path = std::path::Path::new(dir).join(weir::log::PARTITION_CHECKPOINT);
    let bytes = sim.durable_contents(host, path).ok()?;
    Some(weir::log::PartitionCheckpoint::decode_file(&Bytes::from(bytes))?.recovery.offset.0)
}

/// The batches of a segment's bytes, walked by their headers from the start: each one's byte
/// position, length, base offset and last offset.
pub fn segment_batches(segment: &[u8]) -> Vec<(usize, usize, i64, i64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(Ok(header)) = segment.get(at..).map(weir::log::batch::parse_header) {
        let len = header.total_bytes();
        out.push((at, len, header.base_offset(), header.last_offset()));
        at += len;
    }
    out
}

/// Flips a bit in the last byte (a record's, inside the CRC) of the batch that starts at offset
/// `base` in the first segment file of partition folder `dir` on `host`, in place and for good.
pub fn damage_batch_at(sim: &Sim, host: Host, dir: &str, base: i64) -> Result<(), String> {
    let segment = std::path::Path::new(dir).join(format!("{:020}.log", 0));
    let bytes = sim.durable_contents(host, &segment).map_err(|e| e.to_string())?;
    let (at, len, _, _) = segment_batches(&bytes)
        .into_iter()
        .find(|b| b.2 == base)
        .ok_or_else(|| format!("no batch at offset {base} in {dir}"))?;
    sim.corrupt_durable_file(host, &segment, (at + len - 1) as u64)
        .map_err(|e| format!("damaging the batch at {base} in {dir}: {e}"))
}

/// Reads every offset of `log`'s first `stored.len()` batches of [`BATCH_RECORDS`] records, of
/// which batches `damaged` are damaged: a read of a damaged batch's offsets must fail as
/// corrupt, and any other read must return exactly the stored batches from the one holding the
/// offset on, stopping before the next damaged one.
pub async fn check_reads_around_damage(
    log: &Log,
    stored: &[Bytes],
    damaged: &[u8],
) -> Result<(), String> {
    let batches = stored.len();
    let upper = Offset(batches as i64 * BATCH_RECORDS);
    for from in 0..upper.0 {
        let holder = (from / BATCH_RECORDS) as u8;
        let read = log.read(Offset(from), 1 << 20, upper).await;
        if damaged.contains(&holder) {
            ensure(matches!(read, Err(ReadError::Corrupt { .. })), || {
                format!("reading {from} in damaged batch {holder} gave {read:?}")
            })?;
            continue;
        }
        let read = read.map_err(|e| {
            format!("reading {from} (batch {holder}; batches {damaged:?} are damaged): {e}")
        })?;
        let got: Vec<Bytes> = split_batches(&read.records)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("reading {from}: {e}"))?;
        let last = damaged.iter().map(|&n| usize::from(n)).find(|&n| n > usize::from(holder));
        let last = last.unwrap_or(batches);
        let want = &stored[usize::from(holder)..last];
        ensure(got[..] == want[..], || {
            format!(
                "reading {from} returned {} batches, not batches {holder}..{last} as stored",
                got.len()
            )
        })?;
    }
    Ok(())
}
