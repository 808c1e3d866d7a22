//! Three real `weir` processes started from `examples/cluster/node{1,2,3}.toml` (each in the
//! same scratch working folder, so their relative data folders land there) form a cluster.
//! - librdkafka creates a 6-partition topic, sees its partitions led by all three brokers,
//!   produces to every partition and reads everything back in order.
//! - A topic with replication factor 3 and `min.insync.replicas=2` takes `acks=all` writes
//!   from an idempotent producer while its leader's process is killed with SIGKILL: producing
//!   continues after a pause, and every acknowledged record is read back, in order. The killed
//!   broker then comes back on a new, empty disk (its data folder removed), rejoins the ISR
//!   once it has copied the log, and the next leader is killed: every acknowledged record is
//!   still read back, in order.
//!
//! Each cluster listens on free ports picked when it starts (the example configurations' ports,
//! rewritten), so the tests run beside any other server on the machine; they take turns, as
//! six processes on two cores are enough at a time.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

const WAIT: Duration = Duration::from_secs(60);
/// One cluster at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const PARTITIONS: i32 = 6;
const RECORDS: usize = 120;

/// The three processes, killed (and their scratch folder removed) on drop.
struct Cluster {
    children: Vec<Child>,
    dir: PathBuf,
    /// The three client listeners, as `bootstrap.servers`.
    bootstrap: String,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            for i in 1..=3 {
                let log = std::fs::read_to_string(self.dir.join(format!("node{i}.log")));
                eprintln!("--- node{i} log ---\n{}", log.unwrap_or_default());
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start(name: &str) -> Cluster {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
    let dir = std::env::temp_dir().join(format!("weir-cluster-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Client listeners 1909i and controller listeners 1919i in the examples, i = 2, 3, 4.
    let ports = free_ports(6);
    let rewrite = |text: String| {
        (0..3).fold(text, |text, k| {
            text.replace(&format!("127.0.0.1:{}", 19092 + k), &format!("127.0.0.1:{}", ports[k]))
                .replace(
                    &format!("127.0.0.1:{}", 19192 + k),
                    &format!("127.0.0.1:{}", ports[3 + k]),
                )
        })
    };
    let mut children = Vec::new();
    for i in 1..=3 {
        let config = format!("node{i}.toml");
        let example = std::fs::read_to_string(examples.join(&config)).unwrap();
        let text = rewrite(example.clone());
        assert!(text.contains(&format!("listener = \"127.0.0.1:{}\"", ports[i - 1])), "{text}");
        assert!(!text.contains("127.0.0.1:19"), "a port of {config} was not rewritten: {text}");
        std::fs::write(dir.join(&config), text).unwrap();
        children.push(spawn(&dir, i));
    }
    let bootstrap =
        ports[..3].iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
    Cluster { children, dir, bootstrap }
}

/// `n` distinct loopback ports free at the time of the call (each bound to port 0 by the
/// kernel, all held until every one is chosen, then released for the brokers to take).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// Starts node `i` from its configuration in `dir`, its log appended to `node{i}.log`.
fn spawn(dir: &Path, i: usize) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("node{i}.log")))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--config", &format!("node{i}.toml")])
        .current_dir(dir)
        .env("WEIR_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// The `directory.id` line of node `i`'s `meta.properties` (its data folder's identity).
fn directory_id(dir: &Path, i: usize) -> String {
    let text = std::fs::read_to_string(dir.join(format!("node{i}-data/meta.properties"))).unwrap();
    assert!(text.contains(&format!("node.id={i}\n")), "{text}");
    text.lines().find(|l| l.starts_with("directory.id=")).unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_spread_a_topic_and_serve_it() {
    let _turn = TURN.lock().await;
    let cluster = start("spread");
    let bootstrap = cluster.bootstrap.as_str();
    let probe = joined(bootstrap).await;

    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let topic = NewTopic::new("spread", PARTITIONS, TopicReplication::Fixed(1));
    for result in admin.create_topics(&[topic], &AdminOptions::new()).await.unwrap() {
        result.unwrap();
    }
    let deadline = Instant::now() + WAIT;
    let leaders: BTreeSet<i32> = loop {
        let md = probe.fetch_metadata(Some("spread"), Duration::from_secs(2)).unwrap();
        let t = &md.topics()[0];
        let leaders: BTreeSet<i32> = t.partitions().iter().map(|p| p.leader()).collect();
        if t.partitions().len() == PARTITIONS as usize && !leaders.contains(&-1) {
            break leaders;
        }
        assert!(Instant::now() < deadline, "the topic's partitions never all had leaders");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(leaders, BTreeSet::from([1, 2, 3]), "partitions are led by every broker");

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", "60000")
        .create()
        .unwrap();
    let mut sent: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for i in 0..RECORDS {
        let partition = (i % PARTITIONS as usize) as i32;
        let value = format!("value-{i}");
        producer
            .send(FutureRecord::to("spread").partition(partition).key("k").payload(&value), WAIT)
            .await
            .unwrap();
        sent.entry(partition).or_default().push(value);
    }

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cluster-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset("spread", p, Offset::Beginning).unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut got: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while got.values().map(Vec::len).sum::<usize>() < RECORDS {
        assert!(
            Instant::now() < deadline,
            "read {:?} of {RECORDS}",
            got.values().map(Vec::len).sum::<usize>()
        );
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            got.entry(m.partition()).or_default().push(value);
        }
    }
    assert_eq!(got, sent, "every partition reads back exactly what was written, in order");

    // The group's offsets, for partitions led by all three brokers, go to its one coordinator.
    let mut positions = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        let count = sent.get(&p).map_or(0, Vec::len) as i64;
        positions.add_partition_offset("spread", p, Offset::Offset(count)).unwrap();
    }
    // The group's coordinator may still be loading its offsets partition (a retriable answer
    // librdkafka hands to the application): commit again until it takes the offsets.
    let deadline = Instant::now() + WAIT;
    loop {
        match consumer.commit(&positions, CommitMode::Sync) {
            Ok(()) => break,
            Err(KafkaError::ConsumerCommit(
                RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::CoordinatorNotAvailable,
            )) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("committing the group's offsets: {e}"),
        }
    }
    drop(consumer);

    // A member that joins the group through the group protocol resumes at those offsets: it
    // reads exactly the records written after the commit, one per partition.
    let member: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cluster-reader")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    let committed = member.committed_offsets(positions.clone(), WAIT).unwrap();
    assert_eq!(committed.to_topic_map(), positions.to_topic_map(), "committed offsets read back");
    member.subscribe(&["spread"]).unwrap();
    let mut later: BTreeMap<i32, String> = BTreeMap::new();
    for p in 0..PARTITIONS {
        let value = format!("after-commit-{p}");
        producer
            .send(FutureRecord::to("spread").partition(p).key("k").payload(&value), WAIT)
            .await
            .unwrap();
        later.insert(p, value);
    }
    let mut resumed: BTreeMap<i32, String> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while resumed.len() < PARTITIONS as usize {
        assert!(Instant::now() < deadline, "the group member read only {resumed:?}");
        if let Some(Ok(m)) = member.poll(Duration::from_millis(200)) {
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            assert!(resumed.insert(m.partition(), value).is_none(), "a partition read twice");
        }
    }
    assert_eq!(resumed, later, "the member resumed exactly at the committed offsets");
    drop(cluster);
}

/// A metadata client, once every broker has joined and shows up in Metadata.
async fn joined(bootstrap: &str) -> BaseConsumer {
    let probe: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(md) = probe.fetch_metadata(None, Duration::from_secs(2))
            && md.brokers().len() == 3
        {
            return probe;
        }
        assert!(Instant::now() < deadline, "the three brokers never all joined");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The leader of `topic` partition 0 with every replica in sync, once there is one.
async fn leader_with_full_isr(probe: &BaseConsumer, topic: &str) -> i32 {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(md) = probe.fetch_metadata(Some(topic), Duration::from_secs(2))
            && let Some(p) = md.topics().first().and_then(|t| t.partitions().first())
            && p.leader() > 0
            && p.isr().len() == 3
        {
            return p.leader();
        }
        assert!(Instant::now() < deadline, "{topic} never had a leader with three in sync");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Records the producer writes before the kill, and in all.
const BEFORE_KILL: usize = 100;
const TOTAL: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_leader_loses_no_acknowledged_record() {
    let _turn = TURN.lock().await;
    let mut cluster = start("failover");
    let bootstrap = cluster.bootstrap.clone();
    let bootstrap = bootstrap.as_str();
    let probe = joined(bootstrap).await;
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let topic =
        NewTopic::new("durable", 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    for result in admin.create_topics(&[topic], &AdminOptions::new()).await.unwrap() {
        result.unwrap();
    }
    let leader = leader_with_full_isr(&probe, "durable").await;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .set("retry.backoff.ms", "100")
        .create()
        .unwrap();
    let mut acked: Vec<(i64, String)> = Vec::new();
    let mut longest_pause = Duration::ZERO;
    for i in 0..TOTAL {
        if i == BEFORE_KILL {
            let child = &mut cluster.children[(leader - 1) as usize];
            child.kill().unwrap();
            child.wait().unwrap();
        }
        let value = format!("record-{i}");
        let started = Instant::now();
        let delivery = producer
            .send(FutureRecord::to("durable").partition(0).key("k").payload(&value), WAIT)
            .await
            .unwrap_or_else(|(e, _)| panic!("record {i} was not acknowledged: {e}"));
        longest_pause = longest_pause.max(started.elapsed());
        assert_eq!(delivery.partition, 0);
        acked.push((delivery.offset, value));
    }
    eprintln!("longest wait for one acknowledgement across the kill: {longest_pause:?}");
    let after = probe.fetch_metadata(Some("durable"), Duration::from_secs(5)).unwrap();
    let new_leader = after.topics()[0].partitions()[0].leader();
    assert!(new_leader > 0 && new_leader != leader, "leader {leader} → {new_leader}");

    read_back_exactly(bootstrap, &acked);

    // The killed broker comes back on a new, empty disk (its data folder removed): a new
    // directory id, out of every ISR (and, as a controller voter, voting for no one) until it
    // has copied the logs again. Then the leader is killed too: whichever replica leads next,
    // the one on the new disk included, holds every acknowledged record.
    let killed = leader as usize;
    let before = directory_id(&cluster.dir, killed);
    std::fs::remove_dir_all(cluster.dir.join(format!("node{killed}-data"))).unwrap();
    cluster.children[killed - 1] = spawn(&cluster.dir, killed);
    let second = leader_with_full_isr(&probe, "durable").await;
    assert_ne!(directory_id(&cluster.dir, killed), before, "the new disk kept the old identity");
    let child = &mut cluster.children[(second - 1) as usize];
    child.kill().unwrap();
    child.wait().unwrap();
    for i in TOTAL..TOTAL + AFTER_REPLACEMENT {
        let value = format!("record-{i}");
        let delivery = producer
            .send(FutureRecord::to("durable").partition(0).key("k").payload(&value), WAIT)
            .await
            .unwrap_or_else(|(e, _)| panic!("record {i} was not acknowledged: {e}"));
        acked.push((delivery.offset, value));
    }
    read_back_exactly(bootstrap, &acked);
    drop(cluster);
}

/// Records written after a broker's disk was replaced and the next leader killed.
const AFTER_REPLACEMENT: usize = 20;

/// Reads partition 0 of `durable` from the start up to the last acknowledged offset, with a
/// fresh consumer, and checks it holds exactly the acknowledged records, in order.
fn read_back_exactly(bootstrap: &str, acked: &[(i64, String)]) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "failover-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("durable", 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let last = acked.last().map_or(0, |(o, _)| *o);
    let mut read: BTreeMap<i64, String> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while read.keys().next_back().is_none_or(|&o| o < last) {
        assert!(Instant::now() < deadline, "read up to {:?} of {last}", read.keys().next_back());
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            read.insert(m.offset(), value);
        }
    }
    for (offset, value) in acked {
        assert_eq!(read.get(offset), Some(value), "acknowledged record at offset {offset}");
    }
    let order: Vec<&String> = read.values().collect();
    let sent: Vec<&String> = acked.iter().map(|(_, v)| v).collect();
    assert_eq!(order, sent, "the log holds exactly the acknowledged records, in order");
}
