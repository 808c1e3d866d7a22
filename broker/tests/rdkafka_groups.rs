//! Consumer groups with librdkafka: three members share a topic and rebalance as members join
//! and leave, never two owning one partition; a replacement for a killed consumer resumes at
//! the last committed offset; committed offsets survive a broker restart.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use support::TestBroker;

const WAIT: Duration = Duration::from_secs(30);

fn member(bootstrap: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("partition.assignment.strategy", "range")
        .create()
        .unwrap()
}

async fn produce(bootstrap: &str, topic: &str, count: usize) {
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    for i in 0..count {
        let value = format!("m{i}");
        let key = format!("k{}", i % 12);
        producer.send(FutureRecord::to(topic).key(&key).payload(&value), WAIT).await.unwrap();
    }
}

fn owned(consumer: &BaseConsumer) -> BTreeSet<i32> {
    consumer
        .assignment()
        .map(|tpl| tpl.elements().iter().map(|e| e.partition()).collect())
        .unwrap_or_default()
}

/// Polls every member until their assignments are disjoint and cover `partitions`, checking
/// at every step that no partition is owned twice.
fn settle(members: &[&BaseConsumer], partitions: i32) -> Vec<BTreeSet<i32>> {
    let deadline = Instant::now() + WAIT;
    loop {
        for m in members {
            let _ = m.poll(Duration::from_millis(50));
        }
        let sets: Vec<BTreeSet<i32>> = members.iter().map(|m| owned(m)).collect();
        let total: usize = sets.iter().map(BTreeSet::len).sum();
        let union: BTreeSet<i32> = sets.iter().flatten().copied().collect();
        assert_eq!(total, union.len(), "a partition is owned by two members at once: {sets:?}");
        if union.len() == partitions as usize && sets.iter().all(|s| !s.is_empty()) {
            return sets;
        }
        assert!(Instant::now() < deadline, "the group never settled: {sets:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_rebalance_without_sharing_partitions() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    broker.broker.create_topic("shared", 6, 1, &[], false).await.unwrap();
    let a = member(&bootstrap, "trio");
    a.subscribe(&["shared"]).unwrap();
    assert_eq!(settle(&[&a], 6)[0].len(), 6);
    let b = member(&bootstrap, "trio");
    b.subscribe(&["shared"]).unwrap();
    settle(&[&a, &b], 6);
    let c = member(&bootstrap, "trio");
    c.subscribe(&["shared"]).unwrap();
    let sets = settle(&[&a, &b, &c], 6);
    assert!(sets.iter().all(|s| s.len() == 2), "range assignment of 6 over 3: {sets:?}");
    drop(c); // leaves the group
    let sets = settle(&[&a, &b], 6);
    assert!(sets.iter().all(|s| s.len() == 3), "{sets:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacement_resumes_at_the_last_committed_offset() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    broker.broker.create_topic("work", 1, 1, &[], false).await.unwrap();
    produce(&bootstrap, "work", 50).await;
    let first = member(&bootstrap, "workers");
    first.subscribe(&["work"]).unwrap();
    let mut seen = 0;
    let deadline = Instant::now() + WAIT;
    while seen < 30 && Instant::now() < deadline {
        if let Some(Ok(m)) = first.poll(Duration::from_millis(100)) {
            seen += 1;
            if seen == 20 {
                // Processed 20 records: commit the position after the 20th.
                let mut tpl = rdkafka::TopicPartitionList::new();
                tpl.add_partition_offset("work", 0, rdkafka::Offset::Offset(m.offset() + 1))
                    .unwrap();
                first.commit(&tpl, CommitMode::Sync).unwrap();
            }
        }
    }
    assert_eq!(seen, 30);
    // Killed mid-batch: records 20..30 were read but never committed.
    drop(first);
    let second = member(&bootstrap, "workers");
    second.subscribe(&["work"]).unwrap();
    let deadline = Instant::now() + WAIT;
    let first_offset = loop {
        if let Some(Ok(m)) = second.poll(Duration::from_millis(100)) {
            break m.offset();
        }
        assert!(Instant::now() < deadline, "the replacement read nothing");
    };
    assert_eq!(first_offset, 20, "the replacement must resume at the committed offset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_survive_a_broker_restart() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    broker.broker.create_topic("kept", 1, 1, &[], false).await.unwrap();
    produce(&bootstrap, "kept", 10).await;
    {
        let consumer = member(&bootstrap, "keepers");
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset("kept", 0, rdkafka::Offset::Offset(7)).unwrap();
        consumer.commit(&tpl, CommitMode::Sync).unwrap();
    }
    let (dir, addr) = broker.crash();
    let broker = TestBroker::restart(dir, addr).await;
    let consumer = member(&broker.bootstrap(), "keepers");
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition("kept", 0);
    let committed = consumer.committed_offsets(tpl, WAIT).unwrap();
    assert_eq!(committed.elements()[0].offset(), rdkafka::Offset::Offset(7));
}
