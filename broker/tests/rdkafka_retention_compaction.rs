//! Retention and compaction as a client sees them: the earliest offset advances once a topic
//! is over `retention.bytes` or after librdkafka's DeleteRecords, and a compacted topic keeps
//! only the latest value of each key (in its cleaned segments), at the offsets they were
//! written.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use support::TestBroker;

const WAIT: Duration = Duration::from_secs(30);

fn config(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn produce(bootstrap: &str, topic: &str, records: &[(String, String)]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .create()
        .unwrap();
    for (key, value) in records {
        producer.send(FutureRecord::to(topic).key(key).payload(value), WAIT).await.unwrap();
    }
}

fn read_all(bootstrap: &str, topic: &str) -> Vec<(i64, String, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let (low, high) = consumer.fetch_watermarks(topic, 0, WAIT).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    while out.last().is_none_or(|(o, _, _): &(i64, String, String)| *o + 1 < high)
        && Instant::now() < deadline
    {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            out.push((m.offset(), key, value));
        }
    }
    assert!(out.first().is_none_or(|r| r.0 >= low));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_earliest_offset() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    broker.broker.create_topic("trimmed", 1, 1, &[], false).await.unwrap();
    let records: Vec<(String, String)> =
        (0..10).map(|i| (format!("k{i}"), format!("v{i}"))).collect();
    produce(&bootstrap, "trimmed", &records).await;
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).create().unwrap();
    let mut below = TopicPartitionList::new();
    below.add_partition_offset("trimmed", 0, Offset::Offset(7)).unwrap();
    let options = AdminOptions::new().operation_timeout(Some(WAIT));
    let answer = admin.delete_records(&below, &options).await.unwrap();
    let element = answer.find_partition("trimmed", 0).unwrap();
    assert!(element.error().is_ok(), "DeleteRecords failed: {:?}", element.error());
    assert_eq!(element.offset(), Offset::Offset(7), "the low watermark answered");
    let read = read_all(&bootstrap, "trimmed");
    let offsets: Vec<i64> = read.iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![7, 8, 9], "reading from the beginning starts at the deleted offset");
    // Past the high watermark is refused, and changes nothing.
    let mut past = TopicPartitionList::new();
    past.add_partition_offset("trimmed", 0, Offset::Offset(11)).unwrap();
    let answer = admin.delete_records(&past, &options).await.unwrap();
    let element = answer.find_partition("trimmed", 0).unwrap();
    assert!(element.error().is_err(), "deleting below offset 11 of 10 succeeded");
    let consumer: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).create().unwrap();
    assert_eq!(consumer.fetch_watermarks("trimmed", 0, WAIT).unwrap(), (7, 10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_size_advances_the_earliest_offset() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    let configs =
        config(&[("segment.bytes", "1024"), ("retention.bytes", "2048"), ("retention.ms", "-1")]);
    broker.broker.create_topic("bounded", 1, 1, &configs, false).await.unwrap();
    let records: Vec<(String, String)> =
        (0..60).map(|i| (format!("k{i}"), format!("{i:0>200}"))).collect();
    produce(&bootstrap, "bounded", &records).await;
    let consumer: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).create().unwrap();
    let deadline = Instant::now() + WAIT;
    let low = loop {
        let (low, high) = consumer.fetch_watermarks("bounded", 0, WAIT).unwrap();
        assert_eq!(high, 60);
        if low > 0 {
            break low;
        }
        assert!(Instant::now() < deadline, "retention never deleted a segment");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let read = read_all(&bootstrap, "bounded");
    assert_eq!(
        read.first().map(|r| r.0),
        Some(low),
        "reading from the beginning starts at the new earliest offset"
    );
    assert_eq!(read.last().map(|r| r.0), Some(59));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_the_latest_value_of_each_key() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    let configs = config(&[
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1024"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", "0"),
    ]);
    broker.broker.create_topic("latest", 1, 1, &configs, false).await.unwrap();
    let mut records = Vec::new();
    for round in 0..8 {
        for key in 0..5 {
            records.push((format!("key-{key}"), format!("round-{round}-{:0>100}", key)));
        }
    }
    produce(&bootstrap, "latest", &records).await;
    let latest: BTreeMap<String, (i64, String)> =
        records.iter().enumerate().map(|(i, (k, v))| (k.clone(), (i as i64, v.clone()))).collect();
    let deadline = Instant::now() + WAIT;
    loop {
        let read = read_all(&bootstrap, "latest");
        // Every key's latest value is always there, at the offset it was written.
        for (key, (offset, value)) in &latest {
            assert!(
                read.iter().any(|r| r.0 == *offset && &r.1 == key && &r.2 == value),
                "{key} lost its latest value"
            );
        }
        // Everything returned is a record that was written, at its own offset.
        for (offset, key, value) in &read {
            assert_eq!(records[*offset as usize], (key.clone(), value.clone()));
        }
        if read.len() < records.len() {
            break;
        }
        assert!(Instant::now() < deadline, "the cleaner never compacted the topic");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
