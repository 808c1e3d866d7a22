//! A sealed segment holds one file open, its `.log`: its `.index` and `.timeindex` are opened
//! by the lookups that need them, and a log keeps at most `OPEN_INDEX_FILES` of those open
//! afterwards. A broker's descriptors therefore grow with its segments once, not three times.
//! When segments leave the log (a clean replaces them, retention deletes them, a truncation
//! cuts them, the log closes), the index files it held open for them are closed at once; so
//! are those no lookup used between two checkpoints.
//!
//! Every file handle the log opens is counted while it lives. Forty batches of one record
//! each, every one in a segment of its own; the first six share a key, so a clean removes five.
//! Reads and timestamp lookups of every batch must find it throughout, and also while index
//! files cannot be opened (an index is only a hint: a lookup without it walks its segment).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::io::disk::WrapFiles;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{CleanOutcome, CleanupPolicy, Log, LogConfig, OPEN_INDEX_FILES};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::hooked::{Hooked, Hooks};
use weir_scenarios::refusing::{Refuse, RefusingDisk};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches appended, one record each (batch `n` is offset `n`).
const BATCHES: i64 = 40;
/// Batches at the start whose records share a key: all but the last are cleaned away.
const SHARED_KEY: i64 = 6;

fn dir() -> PathBuf {
    PathBuf::from("sealed-0")
}

/// A segment per batch, an offset entry per batch, compacted whatever the dirty ratio.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 100,
        index_interval_bytes: 1,
        retention_ms: -1,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

fn timestamp(n: i64) -> i64 {
    1_000 + 10 * n
}

fn batch(n: i64) -> Bytes {
    let key = if n < SHARED_KEY { "shared".to_owned() } else { format!("key-{n}") };
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: timestamp(n),
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(vec![n as u8; 120])),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

/// Counts a file among the live handles until it is dropped.
struct Live(Arc<AtomicUsize>);

impl Hooks for Live {
    fn dropped(&self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The log under test and the count of its live file handles.
struct Counting {
    log: Log,
    live: Arc<AtomicUsize>,
}

impl Counting {
    fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// A read from offset `n` must begin with batch `n`, and the record found at its timestamp
    /// must be `n` too; where a clean removed `n`, the first record kept after it, `found`.
    async fn look_up(&self, n: i64, found: i64) -> Result<(), String> {
        let log = &self.log;
        let end = log.log_end_offset();
        let read = log.read(Offset(n), 1 << 20, end).await.map_err(|e| format!("read {n}: {e}"))?;
        let first = weir::log::split::split_batches(&read.records)
            .next()
            .and_then(Result::ok)
            .and_then(|b| weir::log::batch::parse_header(&b).ok())
            .map(|h| h.base_offset());
        // A batch a clean emptied stays, with no records, to hold its offset.
        ensure(first.is_some_and(|f| n <= f && f <= found), || {
            format!("a read from {n} began at batch {first:?}")
        })?;
        for wanted in [timestamp(n), timestamp(n) - 5] {
            let at = log.offset_for_timestamp(wanted).await.map_err(|e| e.to_string())?;
            let expected = Some((Offset(found), timestamp(found)));
            ensure(at == expected, || format!("a lookup of time {wanted} found {at:?}"))?;
        }
        Ok(())
    }

    /// The log holds one file per segment, and at most `OPEN_INDEX_FILES` index files more.
    fn check_bound(&self, when: &str) -> Result<(), String> {
        let (live, segments) = (self.live(), self.log.segment_count());
        ensure(live <= segments + OPEN_INDEX_FILES, || {
            format!("{when}: {live} files open for {segments} segments")
        })
    }

    /// The log holds exactly one file per segment: no index file.
    fn check_no_index_open(&self, when: &str) -> Result<(), String> {
        let (live, segments) = (self.live(), self.log.segment_count());
        ensure(live == segments, || format!("{when}: {live} files open for {segments} segments"))
    }
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    sim.block_on(host, Duration::from_secs(600), move |env| async move {
        let live = Arc::new(AtomicUsize::new(0));
        let counting = Arc::clone(&live);
        let disk = WrapFiles::new(Arc::clone(&env.disk), move |_path, inner| {
            counting.fetch_add(1, Ordering::SeqCst);
            Hooked::wrap(inner, Live(Arc::clone(&counting)))
        });
        let (disk, failing) = RefusingDisk::new(Arc::new(disk), Refuse::IndexOpens);
        let env = Env { disk: Arc::new(disk), ..env };
        let log = Log::open(env.clone(), dir(), config()).await.map_err(|e| e.to_string())?;
        let t = Counting { log, live };
        for n in 0..BATCHES {
            t.log.append(batch(n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        let segments = t.log.segment_count();
        ensure(segments == BATCHES as usize, || format!("{segments} segments"))?;
        t.check_no_index_open("after the appends")?;

        // Index files that cannot be opened (the process out of descriptors): lookups walk
        // their segments instead, and find every batch all the same.
        failing.store(true, Ordering::SeqCst);
        for n in 0..BATCHES {
            t.look_up(n, n).await?;
        }
        t.check_no_index_open("while index files could not be opened")?;
        failing.store(false, Ordering::SeqCst);

        // Lookups in every sealed segment; the last ones in segments a clean replaces.
        for n in (0..BATCHES).rev() {
            t.look_up(n, n).await?;
            t.check_bound("during lookups")?;
        }
        ensure(t.live() > segments, || "no lookup used an index file".to_owned())?;

        // A clean replaces the first six segments: the index files held for them are closed.
        let end = t.log.log_end_offset();
        let outcome = t.log.clean(env.clock.wall_ms(), end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || format!("{outcome:?}"))?;
        t.check_no_index_open("after the clean")?;
        for n in 0..BATCHES {
            t.look_up(n, n.max(SHARED_KEY - 1)).await?;
            t.check_bound("after the clean")?;
        }

        // Retention below 20, after lookups there.
        for n in [19, 18] {
            t.look_up(n, n).await?;
        }
        t.log.delete_records_before(Offset(20), end).await.map_err(|e| e.to_string())?;
        t.check_no_index_open("after retention")?;

        // A cut at 30, after lookups above it.
        for n in [33, 32] {
            t.look_up(n, n).await?;
        }
        t.log.truncate_to(Offset(30)).await.map_err(|e| e.to_string())?;
        t.check_no_index_open("after the cut")?;
        for n in 20..30 {
            t.look_up(n, n).await?;
            t.check_bound("after the cut")?;
        }

        // Index files no lookup used between two checkpoints are closed.
        ensure(t.live() > t.log.segment_count(), || "no index file open after lookups".into())?;
        t.log.checkpoint().await.map_err(|e| e.to_string())?;
        ensure(t.live() > t.log.segment_count(), || {
            "a checkpoint closed index files used since the one before".to_owned()
        })?;
        t.log.checkpoint().await.map_err(|e| e.to_string())?;
        t.check_no_index_open("after two checkpoints with no lookup between them")?;
        for n in [27, 26] {
            t.look_up(n, n).await?;
        }

        // Closed, the log lets go of its index files; dropped, of everything.
        t.log.close().await.map_err(|e| e.to_string())?;
        t.check_no_index_open("after the close")?;
        let Counting { log, live } = t;
        drop(log);
        let left = live.load(Ordering::SeqCst);
        ensure(left == 0, || format!("{left} files open after the log was dropped"))
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn log_sealed_segments_hold_one_descriptor_each() {
    for_each_seed("log_sealed_segments_hold_one_descriptor_each", 0..4, scenario);
}
