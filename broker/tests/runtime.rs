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
