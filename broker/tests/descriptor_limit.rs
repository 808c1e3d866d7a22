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
//!
//! Out of descriptors, a write that needs a new segment (whose files it cannot create) is
//! refused with KAFKA_STORAGE_ERROR, a retriable error, and the partition stays online: once
//! the connections close, the same connection's next write is taken at the next offset.
//! Before, the failed roll took the log offline until the broker restarted.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, CreateTopicsResponse, ProduceRequest,
    ProduceResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
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

/// KAFKA_STORAGE_ERROR.
const KAFKA_STORAGE_ERROR: i16 = 56;
/// The topic written to, in segments of the least size allowed: every write below fills one.
const TOPIC: &str = "rolls";

/// Sends `body` as a request on `stream` and returns the response body.
async fn call<R: kafka_protocol::protocol::Encodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &R,
) -> Bytes {
    stream.write_all(&request(key, version, 7, body)).await.unwrap();
    let mut response = read_response(stream).await.expect("no response");
    ResponseHeader::decode(&mut response, key.response_header_version(version)).unwrap();
    response
}

/// Writes one batch of a record of 700 bytes with acks=all; its error code and base offset.
async fn produce(stream: &mut TcpStream) -> (i16, i64) {
    let record = weir::log::encode::RecordSpec {
        offset_delta: 0,
        timestamp: 1,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from(vec![7u8; 700])),
        headers: Vec::new(),
    };
    let batch = weir::log::encode::encode_batch(&[record], &Default::default()).unwrap();
    let mut partition = PartitionProduceData::default();
    partition.records = Some(batch);
    let mut data = TopicProduceData::default();
    data.name = TopicName(StrBytes::from_static_str(TOPIC));
    data.partition_data = vec![partition];
    let mut body = ProduceRequest::default();
    body.acks = -1;
    body.timeout_ms = 10_000;
    body.topic_data = vec![data];
    let mut response = call(stream, ApiKey::Produce, 9, &body).await;
    let decoded = ProduceResponse::decode(&mut response, 9).unwrap();
    let answer = &decoded.responses[0].partition_responses[0];
    (answer.error_code, answer.base_offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_out_of_descriptors_refuses_writes_that_need_a_segment_and_stays_online() {
    let _turn = TURN.lock().await;
    let (process, addr) = start(&format!("ulimit -n {DESCRIPTORS}")).await;
    let mut writer = TcpStream::connect(addr).await.unwrap();
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    let mut config = CreatableTopicConfig::default();
    config.name = StrBytes::from_static_str("segment.bytes");
    config.value = Some(StrBytes::from_static_str("1024"));
    topic.configs = vec![config];
    let mut create = CreateTopicsRequest::default();
    create.topics = vec![topic];
    create.timeout_ms = 10_000;
    let mut response = call(&mut writer, ApiKey::CreateTopics, 4, &create).await;
    let created = CreateTopicsResponse::decode(&mut response, 4).unwrap();
    assert_eq!(created.topics[0].error_code, 0, "creating the topic");
    assert_eq!(produce(&mut writer).await, (0, 0));
    assert_eq!(produce(&mut writer).await, (0, 1), "the second write rolls a new segment");

    let held = hold(addr).await;
    let start = Instant::now();
    while !log(&process.dir).contains("accept failed") && start.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(log(&process.dir).contains("accept failed"), "the broker never ran out of descriptors");
    for _ in 0..3 {
        assert_eq!(produce(&mut writer).await.0, KAFKA_STORAGE_ERROR, "a write needing a segment");
    }
    assert!(log(&process.dir).contains("cannot start a new segment"));

    drop(held);
    assert!(await_answer(addr).await, "the broker did not serve again once descriptors were free");
    assert_eq!(produce(&mut writer).await, (0, 2), "the partition takes writes again");
    assert!(!log(&process.dir).contains("log offline"), "{}", log(&process.dir));
}
