//! The production `Env`: real files under a temporary folder, real TCP on loopback, real timers.
//! These check that the tokio/std implementation honours the same contract as the simulated one.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::Env;
use weir::runtime::production_env;

fn scratch() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("weir-runtime-test-{}-{n}", std::process::id()))
}

async fn with_env<F, Fut>(f: F)
where
    F: FnOnce(Env) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let env = production_env(scratch());
    env.disk.create_dir(Path::new("")).await.unwrap();
    f(env.clone()).await;
    env.disk.remove_dir_all(Path::new("")).await.unwrap();
}

#[tokio::test]
async fn files_append_read_truncate_rename_and_list() {
    with_env(|env| async move {
        let disk = &env.disk;
        disk.create_dir(Path::new("p-0")).await.unwrap();
        let file = disk.create(Path::new("p-0/a.log")).await.unwrap();
        assert_eq!(file.append(Bytes::from_static(b"hello ")).await.unwrap(), 0);
        assert_eq!(file.append(Bytes::from_static(b"world")).await.unwrap(), 6);
        assert_eq!(file.len(), 11);
        file.sync_data().await.unwrap();
        assert_eq!(&file.read_at(6, 100).await.unwrap()[..], b"world");
        assert!(file.read_at(11, 10).await.unwrap().is_empty());
        file.write_at(13, Bytes::from_static(b"!")).await.unwrap();
        assert_eq!(&file.read_at(10, 10).await.unwrap()[..], b"d\0\0!");
        file.truncate(5).await.unwrap();
        assert_eq!(file.len(), 5);
        disk.rename(Path::new("p-0/a.log"), Path::new("p-0/b.log")).await.unwrap();
        disk.sync_dir(Path::new("p-0")).await.unwrap();
        assert_eq!(disk.list(Path::new("p-0")).await.unwrap(), vec!["b.log".to_owned()]);
        let reopened = disk.open(Path::new("p-0/b.log")).await.unwrap();
        assert_eq!(&reopened.read_at(0, 64).await.unwrap()[..], b"hello");
        let missing = disk.open(Path::new("p-0/a.log")).await.err().unwrap();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        let escape = disk.open(Path::new("../etc/passwd")).await.err().unwrap();
        assert_eq!(escape.kind(), std::io::ErrorKind::InvalidInput);
        disk.remove(Path::new("p-0/b.log")).await.unwrap();
        assert!(disk.list(Path::new("p-0")).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn tcp_round_trip_on_loopback() {
    with_env(|env| async move {
        let listener = env.net.bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let addr = listener.local_addr();
        assert_ne!(addr.port(), 0);
        env.spawn("echo", async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4];
            conn.read_exact(&mut buf).await.unwrap();
            conn.write_all(&buf).await.unwrap();
        });
        let mut conn = env.net.connect(addr).await.unwrap();
        conn.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn clock_sleeps_follow_the_runtime_timer() {
    // tokio's paused clock advances virtually, so this checks the wiring, not real durations.
    let env = production_env(scratch());
    let start = env.clock.now();
    env.clock.sleep(Duration::from_secs(30)).await;
    assert!(
        env.clock.now() - start >= Duration::from_secs(30),
        "monotonic time did not follow the timer"
    );
    assert!(env.clock.wall_ms() > 1_600_000_000_000, "wall clock is not Unix milliseconds");
    let timed_out = weir::io::timeout(
        &*env.clock,
        Duration::from_secs(1),
        env.clock.sleep(Duration::from_secs(5)),
    )
    .await;
    assert_eq!(timed_out, Err(weir::io::TimedOut));
}

#[tokio::test]
async fn entropy_streams_differ_between_processes_seeds() {
    let (a, b) = (production_env(scratch()), production_env(scratch()));
    let xs: Vec<u64> = (0..4).map(|_| a.entropy.next_u64()).collect();
    let ys: Vec<u64> = (0..4).map(|_| b.entropy.next_u64()).collect();
    assert_ne!(xs, ys, "two production entropy sources produced the same stream");
}

/// The files this process holds open under `dir`, by extension.
#[allow(clippy::disallowed_methods)]
fn open_under(dir: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut open = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        if target.starts_with(dir) {
            let ext = target.extension().map(|e| e.to_string_lossy().into_owned());
            *open.entry(ext.unwrap_or_default()).or_insert(0) += 1;
        }
    }
    open
}

/// Through the production disk, a log holds one descriptor per segment, its `.log`: sealed
/// segments' index files are opened by lookups, and at most `OPEN_INDEX_FILES` stay open.
#[tokio::test]
async fn sealed_segments_hold_only_their_log_file_open() {
    use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
    use weir::log::{Log, LogConfig, OPEN_INDEX_FILES};
    use weir::model::{LeaderEpoch, Offset};
    let root = scratch();
    let env = production_env(root.clone());
    env.disk.create_dir(Path::new("")).await.unwrap();
    let config = LogConfig { segment_bytes: 100, ..LogConfig::default() };
    let log = Log::open(env.clone(), PathBuf::from("t-0"), config).await.unwrap();
    let batches = 30i64;
    for n in 0..batches {
        let record = RecordSpec {
            offset_delta: 0,
            timestamp: 1_000 + n,
            key: None,
            value: Some(Bytes::from(vec![n as u8; 120])),
            headers: Vec::new(),
        };
        let batch = encode_batch(&[record], &BatchOptions::default()).unwrap();
        log.append(batch, LeaderEpoch(0)).await.unwrap();
    }
    #[allow(clippy::disallowed_methods)]
    let dir = std::fs::canonicalize(&root).unwrap();
    let segments = log.segment_count();
    assert_eq!(segments, batches as usize);
    let open = open_under(&dir);
    assert_eq!(open.get("log"), Some(&segments), "{open:?}");
    assert_eq!(open.get("index").copied().unwrap_or(0), 0, "{open:?}");
    assert_eq!(open.get("timeindex").copied().unwrap_or(0), 0, "{open:?}");
    for n in 0..batches {
        let read = log.read(Offset(n), 1 << 20, log.log_end_offset()).await.unwrap();
        assert_eq!(i64::from_be_bytes(read.records[..8].try_into().unwrap()), n);
        let found = log.offset_for_timestamp(1_000 + n).await.unwrap();
        assert_eq!(found, Some((Offset(n), 1_000 + n)));
        let open = open_under(&dir);
        let indexes = open.get("index").unwrap_or(&0) + open.get("timeindex").unwrap_or(&0);
        assert!(indexes <= OPEN_INDEX_FILES, "{open:?}");
        assert!(n == batches - 1 || indexes > 0, "no lookup opened an index file: {open:?}");
    }
    log.close().await.unwrap();
    let open = open_under(&dir);
    assert_eq!(open.get("log"), Some(&segments), "{open:?}");
    assert_eq!(open.len(), 1, "{open:?}");
    drop(log);
    assert!(open_under(&dir).is_empty());
    env.disk.remove_dir_all(Path::new("")).await.unwrap();
}
