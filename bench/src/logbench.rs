//! `weir-bench log`: the partition log alone, on the real disk through the production runtime
//! (`weir::runtime::production_env`, the disk wrapped only to count syncs), beside the
//! baselines measured in the same run. Appends of 1 KiB records in 16 and 64 KiB batches under
//! `flush.policy=ack` (several concurrent appenders, each keeping a few appends in flight as a
//! producer keeps requests in flight, so group commit has something to group) and `interval`,
//! then a read of the whole log back from the page cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{FlushPolicy, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};

use crate::baselines::{self, Baselines, MIB};
use crate::counting::counted_env;
use crate::progress;
use crate::report::{Figure, Report, Target};

mod recovery;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Settings of the log benchmark.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Bytes appended per run (or less, when time runs out).
    pub bytes: u64,
    /// Longest one append run lasts.
    pub max_secs: f64,
    /// Tasks appending concurrently.
    pub appenders: usize,
    /// Appends each appender keeps in flight under `ack`: written and waiting for their sync, as
    /// a Kafka producer keeps up to `max.in.flight.requests.per.connection` (5 by default)
    /// requests in flight and a broker appends the next while the last waits for its sync.
    pub in_flight: usize,
    /// Batch sizes, KiB (records are 1 KiB).
    pub batch_kib: Vec<usize>,
}

impl Settings {
    /// Defaults, or smaller runs for `--quick`.
    pub fn new(quick: bool, appenders: usize, in_flight: usize) -> Settings {
        Settings {
            bytes: if quick { 256 * MIB } else { 1024 * MIB },
            max_secs: if quick { 4.0 } else { 10.0 },
            appenders,
            in_flight: in_flight.max(1),
            batch_kib: if quick { vec![32] } else { vec![16, 64] },
        }
    }
}

/// Record payload bytes.
const RECORD_BYTES: usize = 1024;
/// Bytes per read call when reading the log back.
const READ_BYTES: usize = 1 << 20;
/// Bytes a follower copy appends ([`copy_run`]), prepared in memory before the clock starts.
const COPY_BYTES: u64 = 256 << 20;
/// Bytes in one of the follower copy's fetches: Kafka's `replica.fetch.max.bytes`.
const FETCH_BYTES: usize = 1 << 20;

/// Runs the log benchmark (after measuring the baselines) into `report`.
///
/// Each append run is paired with its own baseline measured just before it, on the same disk
/// and with the same number of bytes (buffered writes for `interval`, write+fsync per MiB for
/// `ack`): the disk's speed drifts over a run on a shared machine (writeback of earlier
/// phases, neighbours), and a ratio is only meaningful between measurements taken together.
pub fn run(dir: &Path, settings: &Settings, quick: bool, report: &mut Report) -> Result<()> {
    let base = baselines::measure(dir, baselines::Sizes::new(quick), report)?;
    let runtime = weir::runtime::build_runtime()?;
    let mut interval_runs = Vec::new();
    for &kib in &settings.batch_kib {
        let batch = one_batch(kib)?;
        for policy in [FlushPolicy::Interval, FlushPolicy::Ack] {
            let name = format!("{}-{kib}k", policy_name(policy));
            let paired = paired_baseline(dir, policy, settings)?;
            let outcome = runtime.block_on(append_run(dir, &name, policy, &batch, settings))?;
            figures(report, &base, paired, policy, kib, settings, &outcome);
            if policy == FlushPolicy::Ack && settings.in_flight > 1 {
                // The same appenders, each waiting for its append's sync before the next:
                // what group commit makes of the concurrency alone.
                std::fs::remove_dir_all(dir.join(&name))?;
                let one = Settings { in_flight: 1, ..settings.clone() };
                let paired = paired_baseline(dir, policy, &one)?;
                let outcome = runtime.block_on(append_run(dir, &name, policy, &batch, &one))?;
                one_in_flight_figure(report, paired, kib, &one, &outcome);
            }
            if policy == FlushPolicy::Interval {
                let read = runtime.block_on(read_run(dir, &name))?;
                report.push(
                    Figure::plain(
                        "log",
                        &format!("read {kib} KiB batches"),
                        "MB/s",
                        read.mbs,
                        &format!(
                            "{} MiB log read from offset 0 in {} KiB reads (page cache)",
                            read.bytes / MIB,
                            READ_BYTES >> 10
                        ),
                    )
                    .against(baselines::PAGE_CACHE_READ, base.page_cache_read_mbs)
                    .target(Target::at_least(1000.0, "≥ 1000 MB/s")),
                );
            }
            std::fs::remove_dir_all(dir.join(&name))?;
            if policy == FlushPolicy::Interval {
                copy_figures(&runtime, dir, kib, &batch, report)?;
                interval_runs.push((kib, batch.len(), outcome.mbs()));
            }
        }
    }
    // Measured after every paired run, so that the extra gigabytes they write do not change
    // the state of memory the paired runs were measured in.
    for (kib, batch_len, mbs) in interval_runs {
        let same_size = batch_size_writes(dir, settings, batch_len)?;
        report.push(
            Figure::plain(
                "log",
                &format!("append {kib} KiB batches, interval, beside batch-size writes"),
                "MB/s",
                mbs,
                "the interval run above against buffered write(2)s of one batch's bytes each, \
                 into warmed pages: what writing batch by batch costs the kernel, without the \
                 log's work",
            )
            .against(&format!("buffered write in {batch_len} B writes"), same_size),
        );
        // Both write patterns against 1 MiB writes measured beside them: what writing batch
        // by batch caps any log at, and what gathering batches into fewer calls would lift it to.
        let whole = one_mib_writes(dir, settings)?;
        let gathered = gathered_writes(dir, settings, batch_len)?;
        for (what, mbs, note) in [
            (
                format!("{kib} KiB batches written one per write"),
                same_size,
                "buffered write(2)s of one batch's bytes each (the line above), against 1 MiB \
                 writes measured after them: the cap on any log that writes batch by batch",
            ),
            (
                format!("{kib} KiB batches written {} per writev", baselines::GATHERED_PIECES),
                gathered,
                "the same batch-size pieces handed to the kernel many per call, against the same \
                 1 MiB writes: what a log that gathered appends into one write could reach",
            ),
        ] {
            report.push(
                Figure::plain("log", &what, "MB/s", mbs, note)
                    .against(&format!("{} (beside)", baselines::BUFFERED_WRITE), whole),
            );
        }
    }
    recovery::figures(&runtime, dir, quick, report)?;
    report.notes.push(format!(
        "log: 1 KiB records; {} concurrent appenders per run, under ack each with up to {} appends \
         in flight; each run appends up to {} MiB or {} s; append ratios are to a baseline of the \
         same size measured just before the run",
        settings.appenders,
        settings.in_flight,
        settings.bytes / MIB,
        settings.max_secs
    ));
    Ok(())
}

/// Buffered `write(2)`s of `chunk` bytes each, as many bytes as an append run: the write
/// pattern of a log appending `chunk`-byte batches one at a time, without the log.
fn batch_size_writes(dir: &Path, settings: &Settings, chunk: usize) -> Result<f64> {
    let file = dir.join("batch-size-baseline.dat");
    let mbs = baselines::buffered_write_in(&file, settings.bytes, chunk)?;
    std::fs::remove_file(&file)?;
    Ok(mbs)
}

/// Buffered writes of 1 MiB each, measured beside the write patterns.
fn one_mib_writes(dir: &Path, settings: &Settings) -> Result<f64> {
    let file = dir.join("one-mib-baseline.dat");
    let mbs = baselines::buffered_write(&file, settings.bytes)?;
    std::fs::remove_file(&file)?;
    Ok(mbs)
}

/// Buffered writes of `chunk`-byte pieces, many per `writev(2)`.
fn gathered_writes(dir: &Path, settings: &Settings, chunk: usize) -> Result<f64> {
    let file = dir.join("gathered-baseline.dat");
    let mbs = baselines::gathered_write_in(&file, settings.bytes, chunk)?;
    std::fs::remove_file(&file)?;
    Ok(mbs)
}

/// The baseline an append run is judged against, measured just before it.
fn paired_baseline(dir: &Path, policy: FlushPolicy, settings: &Settings) -> Result<f64> {
    // What the last run left dirty is written back first, untimed, so that neither the
    // baseline nor the run after it pays for it.
    baselines::settle_disk()?;
    let file = dir.join("paired-baseline.dat");
    let mbs = match policy {
        FlushPolicy::Interval => baselines::buffered_write(&file, settings.bytes)?,
        FlushPolicy::Ack => baselines::fsync_per_mib(&file, settings.bytes, settings.max_secs)?,
    };
    std::fs::remove_file(&file)?;
    Ok(mbs)
}

fn policy_name(policy: FlushPolicy) -> &'static str {
    match policy {
        FlushPolicy::Ack => "ack",
        FlushPolicy::Interval => "interval",
    }
}

fn figures(
    report: &mut Report,
    base: &Baselines,
    paired: f64,
    policy: FlushPolicy,
    kib: usize,
    settings: &Settings,
    outcome: &AppendOutcome,
) {
    let name = format!("append {kib} KiB batches, flush.policy={}", policy_name(policy));
    let per_sync = outcome.per_sync();
    let whole_run = match policy {
        FlushPolicy::Interval => base.buffered_write_mbs,
        FlushPolicy::Ack => base.fsync_per_mib_mbs,
    };
    let note = format!(
        "{}; the run's first baseline was {whole_run:.0} MB/s",
        run_note(policy, settings, outcome)
    );
    let figure = Figure::plain("log", &name, "MB/s", outcome.mbs(), &note);
    let figure = match policy {
        FlushPolicy::Interval => figure
            .against(&format!("{} (paired)", baselines::BUFFERED_WRITE), paired)
            .target(Target::ratio_at_least(0.70, "≥ 0.70× buffered write")),
        FlushPolicy::Ack => figure
            .against(&format!("{} (paired)", baselines::FSYNC_PER_MIB), paired)
            .target(Target::ratio_at_least(0.50, "≥ 0.50× write+fsync/MiB")),
    };
    report.push(figure);
    if policy == FlushPolicy::Ack {
        report.push(Figure::plain(
            "log",
            &format!("appends per fdatasync, {kib} KiB batches, ack"),
            "appends",
            per_sync,
            "group commit: appends completed / file syncs issued (counted at the Disk trait)",
        ));
    }
}

/// What an append run did, for a figure's note.
fn run_note(policy: FlushPolicy, settings: &Settings, outcome: &AppendOutcome) -> String {
    format!(
        "{} appenders ({} in flight each), {} MiB in {:.1} s; {} appends, {} fdatasyncs ({:.1} appends/sync, {:.0}% of wall time in sync)",
        settings.appenders,
        in_flight(policy, settings),
        outcome.bytes / MIB,
        outcome.secs,
        outcome.appends,
        outcome.syncs,
        outcome.per_sync(),
        100.0 * outcome.sync_secs / outcome.secs.max(1e-9),
    )
}

/// Appends each appender keeps in flight: under `interval` an append is done once written.
fn in_flight(policy: FlushPolicy, settings: &Settings) -> usize {
    if policy == FlushPolicy::Ack { settings.in_flight } else { 1 }
}

/// The unjudged `ack` run with one append in flight per appender, beside its own baseline.
fn one_in_flight_figure(
    report: &mut Report,
    paired: f64,
    kib: usize,
    settings: &Settings,
    outcome: &AppendOutcome,
) {
    report.push(
        Figure::plain(
            "log",
            &format!("append {kib} KiB batches, ack, one in flight per appender"),
            "MB/s",
            outcome.mbs(),
            &run_note(FlushPolicy::Ack, settings, outcome),
        )
        .against(&format!("{} (paired)", baselines::FSYNC_PER_MIB), paired),
    );
}

/// One batch of `kib` 1 KiB records, as a producer would send it.
pub fn one_batch(kib: usize) -> Result<Bytes> {
    let value = Bytes::from(baselines::pattern(RECORD_BYTES));
    let records: Vec<RecordSpec> = (0..kib)
        .map(|i| RecordSpec {
            offset_delta: i as i32,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(value.clone()),
            headers: Vec::new(),
        })
        .collect();
    Ok(encode_batch(&records, &BatchOptions::default())?)
}

/// How a follower copies a fetch into its log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Copying {
    /// Every batch of a fetch with its own append (and write).
    OneByOne,
    /// A fetch's batches with one `Log::append_replicated_all`.
    Fetch,
}

/// A follower's copy of [`COPY_BYTES`] of `batch`es under `flush.policy=interval`, in fetches
/// of [`FETCH_BYTES`], appended one by one and then a fetch at a time, each into a new log.
fn copy_figures(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    kib: usize,
    batch: &Bytes,
    report: &mut Report,
) -> Result<()> {
    let fetches = stamped_fetches(batch)?;
    // In the order A B B A, each figure the mean of its two runs, so that neither copy
    // always writes into the pages the other has just freed.
    let (mut one_by_one, mut fetched) = (0.0, 0.0);
    for copying in [Copying::OneByOne, Copying::Fetch, Copying::Fetch, Copying::OneByOne] {
        baselines::settle_disk()?;
        let name = format!("copy-{kib}k");
        let mbs = runtime.block_on(copy_run(dir, &name, &fetches, copying))? / 2.0;
        std::fs::remove_dir_all(dir.join(&name))?;
        match copying {
            Copying::OneByOne => one_by_one += mbs,
            Copying::Fetch => fetched += mbs,
        }
    }
    report.push(
        Figure::plain(
            "log",
            &format!("follower copy of {kib} KiB batches, a fetch at a time"),
            "MB/s",
            fetched,
            &format!(
                "{} MiB in fetches of {} KiB, each appended with one call (one write per run \
                 of batches in one segment), against the same fetches appended batch by batch; \
                 two runs of each, in the order A B B A; flush.policy=interval",
                COPY_BYTES / MIB,
                FETCH_BYTES >> 10
            ),
        )
        .against("batch by batch", one_by_one),
    );
    Ok(())
}

/// [`COPY_BYTES`] of `batch` in fetches of [`FETCH_BYTES`], stamped with consecutive offsets
/// from 0 in leader epoch 0, as a leader's log would send them.
fn stamped_fetches(batch: &Bytes) -> Result<Vec<Vec<Bytes>>> {
    let records = i64::from(weir::log::batch::parse_header(batch)?.record_count());
    let per_fetch = (FETCH_BYTES / batch.len()).max(1);
    let batches = usize::try_from(COPY_BYTES / batch.len() as u64)?;
    let mut fetches = Vec::new();
    let mut fetch = Vec::with_capacity(per_fetch);
    for n in 0..batches {
        let mut stamped = bytes::BytesMut::from(&batch[..]);
        weir::log::batch::stamp(&mut stamped, n as i64 * records, 0)?;
        fetch.push(stamped.freeze());
        if fetch.len() == per_fetch {
            fetches.push(std::mem::replace(&mut fetch, Vec::with_capacity(per_fetch)));
        }
    }
    if !fetch.is_empty() {
        fetches.push(fetch);
    }
    Ok(fetches)
}

/// Appends `fetches` to a new log as a follower does; returns MB/s.
async fn copy_run(dir: &Path, name: &str, fetches: &[Vec<Bytes>], copying: Copying) -> Result<f64> {
    let (env, _counters) = counted_env(dir.to_path_buf());
    let config = LogConfig { flush_policy: FlushPolicy::Interval, ..LogConfig::default() };
    let log = Log::open(env, PathBuf::from(name), config).await?;
    let start = Instant::now();
    let mut bytes = 0u64;
    for fetch in fetches {
        match copying {
            Copying::OneByOne => {
                for batch in fetch {
                    log.append_replicated(batch.clone()).await?;
                }
            }
            Copying::Fetch => {
                if let Some(e) = log.append_replicated_all(fetch).await.stopped {
                    return Err(e.into());
                }
            }
        }
        bytes += fetch.iter().map(|b| b.len() as u64).sum::<u64>();
    }
    let secs = start.elapsed().as_secs_f64();
    log.close().await?;
    Ok(bytes as f64 / 1e6 / secs)
}

/// What an append run did.
#[derive(Clone, Copy, Debug, Default)]
pub struct AppendOutcome {
    /// Batch bytes appended.
    pub bytes: u64,
    /// Appends completed.
    pub appends: u64,
    /// Seconds from the first append to the last completion.
    pub secs: f64,
    /// File syncs issued meanwhile.
    pub syncs: u64,
    /// Seconds spent in them.
    pub sync_secs: f64,
}

impl AppendOutcome {
    /// Append bandwidth in MB/s.
    pub fn mbs(&self) -> f64 {
        self.bytes as f64 / self.secs.max(1e-9) / 1e6
    }

    /// Appends made durable per file sync.
    pub fn per_sync(&self) -> f64 {
        if self.syncs > 0 { self.appends as f64 / self.syncs as f64 } else { f64::INFINITY }
    }
}

async fn append_run(
    dir: &Path,
    name: &str,
    policy: FlushPolicy,
    batch: &Bytes,
    settings: &Settings,
) -> Result<AppendOutcome> {
    let (env, counters) = counted_env(dir.to_path_buf());
    let config = LogConfig { flush_policy: policy, ..LogConfig::default() };
    let log = Arc::new(Log::open(env, PathBuf::from(name), config).await?);
    let appended = Arc::new(AtomicU64::new(0));
    let bar = progress::bar(&format!("log: append {name}"), settings.bytes / MIB, "MiB");
    let deadline = Instant::now() + Duration::from_secs_f64(settings.max_secs);
    let before = counters.snapshot();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..settings.appenders.max(1) {
        let (log, appended, batch) = (Arc::clone(&log), Arc::clone(&appended), batch.clone());
        let (total, len) = (settings.bytes, batch.len() as u64);
        let in_flight = in_flight(policy, settings);
        tasks.spawn(async move {
            let mut appends = 0u64;
            // Ends of the appends written and not yet known durable, oldest first.
            let mut pending = std::collections::VecDeque::with_capacity(in_flight);
            while appended.fetch_add(len, Ordering::Relaxed) + len <= total
                && Instant::now() < deadline
            {
                // The log writes a stamped copy of the header in front of the records and
                // leaves the caller's bytes alone, so every append can hand it the same buffer,
                // as a broker hands it the buffer a request was read into.
                if policy == FlushPolicy::Ack {
                    let info = log.append_unsynced(batch.clone(), LeaderEpoch(0)).await?;
                    pending.push_back(info.last_offset.next());
                    if pending.len() == in_flight
                        && let Some(end) = pending.pop_front()
                    {
                        log.wait_durable(end).await?;
                        appends += 1;
                    }
                } else {
                    log.append(batch.clone(), LeaderEpoch(0)).await?;
                    appends += 1;
                }
            }
            while let Some(end) = pending.pop_front() {
                log.wait_durable(end).await?;
                appends += 1;
            }
            Ok::<u64, weir::log::AppendError>(appends)
        });
    }
    let ticker = {
        let (appended, bar) = (Arc::clone(&appended), bar.clone());
        tokio::spawn(async move {
            loop {
                bar.set_position(appended.load(Ordering::Relaxed) / MIB);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut appends = 0;
    while let Some(joined) = tasks.join_next().await {
        appends += joined??;
    }
    let secs = start.elapsed().as_secs_f64();
    ticker.abort();
    bar.finish_and_clear();
    let used = counters.snapshot().since(&before);
    log.close().await?;
    Ok(AppendOutcome {
        bytes: appends * batch.len() as u64,
        appends,
        secs,
        syncs: used.syncs,
        sync_secs: used.sync_secs,
    })
}

/// What a read run did.
struct ReadOutcome {
    bytes: u64,
    mbs: f64,
}

async fn read_run(dir: &Path, name: &str) -> Result<ReadOutcome> {
    let (env, _) = counted_env(dir.to_path_buf());
    let log = Log::open(env, PathBuf::from(name), LogConfig::default()).await?;
    let end = log.log_end_offset();
    let size = log.size_bytes();
    let bar = progress::bar(&format!("log: read {name}"), 2 * size / MIB, "MiB");
    let mut best = 0.0f64;
    let mut bytes = 0;
    // Two passes: the first brings anything evicted back into the page cache.
    for pass in 0..2u64 {
        let start = Instant::now();
        let (mut offset, mut read) = (Offset(0), 0u64);
        while offset < end {
            let got = log.read(offset, READ_BYTES, end).await?;
            if got.next_offset <= offset {
                return Err(format!("read made no progress at offset {}", offset.0).into());
            }
            read += got.records.len() as u64;
            offset = got.next_offset;
            bar.set_position((pass * size + read) / MIB);
        }
        best = best.max(read as f64 / start.elapsed().as_secs_f64().max(1e-9) / 1e6);
        bytes = read;
    }
    bar.finish_and_clear();
    log.close().await?;
    Ok(ReadOutcome { bytes, mbs: best })
}
