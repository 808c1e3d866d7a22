//! A `weir` process that runs out of file descriptors keeps its listener: the connections it
//! cannot accept wait in the kernel's backlog, and once descriptors are free again it accepts
//! and serves new connections.
//!
//! The process runs with a limit of 64 open files (`ulimit -n`); the test opens 150
//! connections to it and holds them, so its accepts fail with "too many open files" (its log
//! says so, or the test fails: it must have tested something). Then the test closes them all,
//! and a new connection must get ApiVersions answered. Before failed accepts were retried, the
//! first failure ended the listener (and the process) for good, and that answer never came.
//!
//! A process started with a low soft limit and a higher hard one raises the soft limit to the
//! hard one, so the same 150 connections are all accepted and served.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use support::wire::{read_response, request};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The process's limit of open files.
const DESCRIPTORS: u32 = 64;
/// Connections opened and held: well past the limit. Those the broker cannot accept wait in
/// the listener's backlog (tokio asks for 1,024, the kernel caps it at `somaxconn`); if it is
/// full, the rest are not opened, which changes nothing for the first test.
const HELD: usize = 150;
/// One test at a time: each holds up to [`HELD`] sockets of this process.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// How long one connect may take before the backlog counts as full.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long the broker may take to start, or to serve again.
const WAIT: Duration = Duration::from_secs(60);

/// The broker process, killed (and its folder removed) on drop.
struct Process {
    child: Child,
    dir: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- broker log ---\n{}", log(&self.dir));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("weir.log")).unwrap_or_default()
}

/// Whether a new connection to `addr` gets ApiVersions answered.
async fn answers(addr: std::net::SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr).await else { return false };
    let frame = request(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default());
    if stream.write_all(&frame).await.is_err() {
        return false;
    }
    read_response(&mut stream).await.is_some()
}

/// Polls until `addr` answers, for at most [`WAIT`].
async fn await_answer(addr: std::net::SocketAddr) -> bool {
    let start = Instant::now();
    while start.elapsed() < WAIT {
        if answers(addr).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// Starts `weir serve` after the shell command `limit` (a `ulimit`), and waits until it
/// answers.
async fn start(limit: &str) -> (Process, std::net::SocketAddr) {
    let dir = support::scratch();
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let stderr = std::fs::File::create(dir.join("weir.log")).unwrap();
    let child = Command::new("sh")
        .args(["-c", &format!("{limit} && exec \"$0\" \"$@\"")])
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listener", &addr.to_string(), "--data-dir"])
        .arg(dir.join("data"))
        .env("WEIR_LOG", "info")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let process = Process { child, dir };
    assert!(await_answer(addr).await, "the broker did not start");
    (process, addr)
}

/// Opens up to [`HELD`] connections to `addr` and holds them. A connect that the kernel's
/// backlog has no room for hangs; it ends the opening. Any other failure fails the test.
async fn hold(addr: std::net::SocketAddr) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..HELD {
        match tokio::time::timeout(CONNECT_WAIT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => held.push(stream),
            Ok(Err(e)) => panic!("connection {} failed: {e}", held.len() + 1),
            Err(_) => break,
        }
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_out_of_descriptors_serves_again_once_they_are_free() {
    let _turn = TURN.lock().await;
    // Soft and hard limit alike: the broker cannot raise it.
    let (process, addr) = start(&format!("ulimit -n {DESCRIPTORS}")).await;
    let held = hold(addr).await;
    // The broker accepts what its descriptors allow, then fails the rest.
    let start = Instant::now();
    while !log(&process.dir).contains("accept failed") && start.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        log(&process.dir).contains("accept failed"),
        "{HELD} connections never ran the broker out of descriptors"
    );
    drop(held);
    assert!(await_answer(addr).await, "the broker did not serve again once descriptors were free");
    assert!(log(&process.dir).contains("accepting again after failed accepts"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_raises_its_soft_limit_of_open_files_to_the_hard_one() {
    let _turn = TURN.lock().await;
    let (process, addr) = start(&format!("ulimit -S -n {DESCRIPTORS}")).await;
    assert!(
        log(&process.dir).contains(&format!("raised the limit of open files was={DESCRIPTORS}")),
        "the limit was not raised"
    );
    let held = hold(addr).await;
    assert_eq!(held.len(), HELD);
    // Every held connection is served: each gets ApiVersions answered.
    let frame = request(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default());
    for mut stream in held {
        stream.write_all(&frame).await.unwrap();
        assert!(read_response(&mut stream).await.is_some(), "a held connection was not served");
    }
    assert!(!log(&process.dir).contains("accept failed"));
}
