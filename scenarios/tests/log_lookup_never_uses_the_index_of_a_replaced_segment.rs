//! A sealed segment's index files are opened by name when a lookup needs them. A lookup that
//! planned a read on a segment, and whose open of that segment's `.index` was still under way
//! when a clean replaced the segment, must not use what the open returned: by then the name
//! holds the cleaned segment's index, not the one for the file the read walks. The clean
//! retires the old segment's index files before it touches any of its files, and an open that
//! ends after the retirement is thrown away (the read walks its segment instead).
//!
//! The disk holds the lookup's open until the clean has written the new index under the same
//! name, then lets it go, and counts the reads made from the file it returns: there must be
//! none. The read itself must return a batch a read at one of the two moments could.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use weir::io::{BoxFuture, Disk, Env, File};
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{CleanOutcome, CleanupPolicy, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::hooked::{Hooked, Hooks};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches appended, one record each, in a segment each; the first `SHARED` share a key.
const BATCHES: i64 = 10;
const SHARED: i64 = 6;

fn dir() -> PathBuf {
    PathBuf::from("gated-0")
}

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

fn batch(n: i64) -> Bytes {
    let key = if n < SHARED { "shared".to_owned() } else { format!("key-{n}") };
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 1_000 + n,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(vec![n as u8; 120])),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

/// The open a [`GatedDisk`] holds: of which file, whom to tell it arrived, what lets it go.
struct Gate {
    path: PathBuf,
    arrived: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
}

/// `inner`, holding the open its gate names until released; reads from the file that open
/// returns are counted.
struct GatedDisk {
    inner: Arc<dyn Disk>,
    gate: Mutex<Option<Gate>>,
    reads: Arc<AtomicUsize>,
}

/// Counts a file's reads.
struct CountReads(Arc<AtomicUsize>);

impl Hooks for CountReads {
    fn read(&self, _pos: u64, _len: usize) -> Option<io::Error> {
        self.0.fetch_add(1, Ordering::SeqCst);
        None
    }
}

impl Disk for GatedDisk {
    fn create(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        self.inner.create(path)
    }

    fn open(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let path = path.to_owned();
        let gate = {
            let mut gate = self.gate.lock().expect("not poisoned");
            if gate.as_ref().is_some_and(|g| g.path == path) { gate.take() } else { None }
        };
        Box::pin(async move {
            let Some(gate) = gate else { return self.inner.open(&path).await };
            let _ = gate.arrived.send(());
            let _ = gate.release.await;
            let inner = self.inner.open(&path).await?;
            Ok(Hooked::wrap(inner, CountReads(Arc::clone(&self.reads))))
        })
    }

    fn rename(&self, from: &Path, to: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.remove(path)
    }

    fn create_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.create_dir(path)
    }

    fn remove_dir_all(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.remove_dir_all(path)
    }

    fn list(&self, path: &Path) -> BoxFuture<'_, io::Result<Vec<String>>> {
        self.inner.list(path)
    }

    fn sync_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.sync_dir(path)
    }
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    sim.block_on(host, Duration::from_secs(600), move |env| async move {
        let (arrived_tx, arrived) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        let reads = Arc::new(AtomicUsize::new(0));
        let disk = GatedDisk {
            inner: Arc::clone(&env.disk),
            gate: Mutex::new(Some(Gate {
                path: dir().join("00000000000000000001.index"),
                arrived: arrived_tx,
                release: release_rx,
            })),
            reads: Arc::clone(&reads),
        };
        let env = Env { disk: Arc::new(disk), ..env };
        let log = Arc::new(Log::open(env.clone(), dir(), config()).await.map_err(|e| e.to_string())?);
        for n in 0..BATCHES {
            log.append(batch(n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        let end = log.log_end_offset();
        // A read of offset 1, held at the open of its segment's offset index.
        let (answer, answered) = oneshot::channel();
        let reading = Arc::clone(&log);
        env.spawn("read", async move {
            let _ = answer.send(reading.read(Offset(1), 1 << 20, end).await);
        });
        arrived.await.map_err(|_| "the read never opened the segment's index".to_owned())?;
        // The clean replaces segments 0 to 4, writing new index files under their names.
        let outcome = log.clean(env.clock.wall_ms(), end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || format!("{outcome:?}"))?;
        let _ = release.send(());
        let read = answered.await.map_err(|_| "the read never finished".to_owned())?;
        let read = read.map_err(|e| format!("the read failed: {e}"))?;
        let first = weir::log::split::split_batches(&read.records)
            .next()
            .and_then(Result::ok)
            .and_then(|b| weir::log::batch::parse_header(&b).ok())
            .map(|h| h.base_offset());
        // Batch 1 as it was, or the first batch at or after 1 the clean kept.
        ensure(first.is_some_and(|f| (1..SHARED).contains(&f)), || {
            format!("a read of offset 1 across a clean began at {first:?}")
        })?;
        let used = reads.load(Ordering::SeqCst);
        ensure(used == 0, || {
            format!("the read made {used} reads from the index file the clean wrote under its segment's name")
        })
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn log_lookup_never_uses_the_index_of_a_replaced_segment() {
    for_each_seed("log_lookup_never_uses_the_index_of_a_replaced_segment", 0..4, scenario);
}
