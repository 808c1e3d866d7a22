//! librdkafka (the `rdkafka` crate) against an in-process broker over real TCP: keyed produce
//! and ordered consume, every acks setting, idempotent producers (also with requests larger
//! than `queued_max_request_bytes`), a restart that keeps topics and data, LogAppendTime
//! topics, the log sizes DescribeLogDirs reports of what it wrote, and a transactional producer
//! told at once that transactions are not offered.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use std::time::Duration;

use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, ResponseHeader, TopicName,
    describe_log_dirs_request::DescribableLogDirTopic,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use support::TestBroker;
use support::wire::{read_response, request, send_raw};

const WAIT: Duration = Duration::from_secs(20);

async fn create_topic(bootstrap: &str, name: &str, partitions: i32, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let results = admin.create_topics(&[topic], &AdminOptions::new()).await.unwrap();
    for result in results {
        result.unwrap();
    }
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> FutureProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "20000")
        .set("linger.ms", "5");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config.create().unwrap()
}

/// The partition's high watermark, as a consumer sees it.
fn high_watermark(bootstrap: &str, topic: &str, partition: i32) -> i64 {
    let consumer: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    consumer.fetch_watermarks(topic, partition, WAIT).unwrap().1
}

/// A consumer assigned `partition` from its beginning, checking every batch's CRC.
fn reader(bootstrap: &str, topic: &str, partition: i32) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "reader")
        .set("enable.auto.commit", "false")
        .set("check.crcs", "true")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    consumer
}

/// Reads `count` messages from `partition` starting at the beginning, as (key, value, offset).
fn consume(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    count: usize,
) -> Vec<(String, String, i64)> {
    let consumer = reader(bootstrap, topic, partition);
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while out.len() < count && std::time::Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            out.push((key, value, m.offset()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_records_are_consumed_in_order_per_partition() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "orders", 3, &[]).await;
    let producer = producer(&bootstrap, &[]);
    for i in 0..60 {
        let key = format!("customer-{}", i % 6);
        let value = format!("order-{i}");
        producer.send(FutureRecord::to("orders").key(&key).payload(&value), WAIT).await.unwrap();
    }
    let mut seen = 0;
    for partition in 0..3 {
        let count = high_watermark(&bootstrap, "orders", partition) as usize;
        let all = consume(&bootstrap, "orders", partition, count);
        assert_eq!(all.len(), count);
        let offsets: Vec<i64> = all.iter().map(|r| r.2).collect();
        assert_eq!(offsets, (0..all.len() as i64).collect::<Vec<_>>(), "offsets are dense from 0");
        // Each key lives in one partition, its orders in send order.
        for key in all.iter().map(|r| r.0.clone()).collect::<std::collections::BTreeSet<_>>() {
            let values: Vec<u32> = all
                .iter()
                .filter(|r| r.0 == key)
                .map(|r| r.1.trim_start_matches("order-").parse().unwrap())
                .collect();
            assert!(values.windows(2).all(|w| w[0] < w[1]), "{key} out of order: {values:?}");
        }
        seen += all.len();
    }
    assert_eq!(seen, 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acks_setting_delivers() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "acks", 1, &[]).await;
    for acks in ["0", "1", "all"] {
        let producer = producer(&bootstrap, &[("acks", acks)]);
        for i in 0..10 {
            let value = format!("{acks}-{i}");
            producer.send(FutureRecord::<(), _>::to("acks").payload(&value), WAIT).await.unwrap();
        }
        producer.flush(WAIT).unwrap();
    }
    let records = consume(&bootstrap, "acks", 0, 30);
    let values: Vec<String> = records.into_iter().map(|r| r.1).collect();
    for acks in ["0", "1", "all"] {
        let mine: Vec<&String> =
            values.iter().filter(|v| v.starts_with(&format!("{acks}-"))).collect();
        assert_eq!(mine.len(), 10, "acks={acks}: {values:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_writes_each_record_once() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "exactly", 1, &[]).await;
    let producer = producer(
        &bootstrap,
        &[("enable.idempotence", "true"), ("max.in.flight.requests.per.connection", "5")],
    );
    // Enqueue everything first so up to five requests are in flight at once.
    let values: Vec<String> = (0..200).map(|i| format!("v{i}")).collect();
    let deliveries: Vec<_> = values
        .iter()
        .map(|value| {
            producer
                .send_result(FutureRecord::<(), _>::to("exactly").payload(value))
                .map_err(|(e, _)| e)
                .unwrap()
        })
        .collect();
    for delivery in deliveries {
        delivery.await.unwrap().map_err(|(e, _)| e).unwrap();
    }
    let records = consume(&bootstrap, "exactly", 0, 200);
    let values: Vec<String> = records.iter().map(|r| r.1.clone()).collect();
    assert_eq!(values, (0..200).map(|i| format!("v{i}")).collect::<Vec<_>>());
}

/// Under a `queued_max_request_bytes` of 64 KiB, four idempotent producers with five requests
/// in flight each, whose requests (up to 256 KiB) are mostly larger than the whole budget,
/// each taking all of it in turn: every record is delivered once and in order, and once all
/// are acknowledged the broker holds no request bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_whose_requests_exceed_the_request_memory_all_deliver() {
    const PRODUCERS: usize = 4;
    const RECORDS: usize = 150;
    let config = support::config(support::scratch());
    let broker = TestBroker::start_with(weir::config::BrokerConfig {
        queued_max_request_bytes: 64 << 10,
        ..config
    })
    .await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "bounded", 1, &[]).await;
    let sends: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let producer = producer(
                &bootstrap,
                &[
                    ("enable.idempotence", "true"),
                    ("max.in.flight.requests.per.connection", "5"),
                    ("batch.size", "262144"),
                    ("linger.ms", "20"),
                ],
            );
            tokio::spawn(async move {
                let values: Vec<String> =
                    (0..RECORDS).map(|i| format!("p{p}-{i:04}-{}", "x".repeat(4000))).collect();
                let deliveries: Vec<_> = values
                    .iter()
                    .map(|value| {
                        producer
                            .send_result(FutureRecord::<(), _>::to("bounded").payload(value))
                            .map_err(|(e, _)| e)
                            .unwrap()
                    })
                    .collect();
                for delivery in deliveries {
                    delivery.await.unwrap().map_err(|(e, _)| e).unwrap();
                }
            })
        })
        .collect();
    for send in sends {
        send.await.unwrap();
    }
    // The produces gave theirs back before they were answered; the clients' other requests
    // (metadata) hold some only while they are decoded.
    let deadline = std::time::Instant::now() + WAIT;
    while broker.broker.request_bytes_in_use() != 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(broker.broker.request_bytes_in_use(), 0, "request bytes held once all were acked");
    println!("{} request frames waited for request memory", broker.broker.request_memory_waits());
    let records = consume(&bootstrap, "bounded", 0, PRODUCERS * RECORDS);
    assert_eq!(records.len(), PRODUCERS * RECORDS);
    for p in 0..PRODUCERS {
        let mine: Vec<String> = records
            .iter()
            .filter(|r| r.1.starts_with(&format!("p{p}-")))
            .map(|r| r.1[..format!("p{p}-0000").len()].to_owned())
            .collect();
        let sent: Vec<String> = (0..RECORDS).map(|i| format!("p{p}-{i:04}")).collect();
        assert_eq!(mine, sent, "producer {p}'s records, once each and in order");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_topics_and_data() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "durable", 2, &[("retention.ms", "-1")]).await;
    let producer = producer(&bootstrap, &[]);
    for i in 0..20 {
        let value = format!("r{i}");
        producer.send(FutureRecord::to("durable").key("k").payload(&value), WAIT).await.unwrap();
    }
    drop(producer);
    let (dir, addr) = broker.crash();
    let broker = TestBroker::restart(dir, addr).await;
    let bootstrap = broker.bootstrap();
    let total: usize = (0..2).map(|p| consume(&bootstrap, "durable", p, 20).len()).sum();
    assert_eq!(total, 20);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).create().unwrap();
    let metadata = admin.inner().fetch_metadata(Some("durable"), WAIT).unwrap();
    assert_eq!(metadata.topics()[0].partitions().len(), 2);
}

/// On a `message.timestamp.type=LogAppendTime` topic every record carries the broker's time of
/// append, whatever the producer set, under a CRC the consumer checks; compressed batches too
/// (the broker rewrites the header only, in front of the records as sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_append_time_topics_carry_the_brokers_time() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "stamped", 1, &[("message.timestamp.type", "LogAppendTime")]).await;
    let wall_ms = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        since.as_millis() as i64
    };
    let before = wall_ms();
    let created = 1_000_000_000_000i64;
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    for codec in codecs {
        let producer = producer(&bootstrap, &[("compression.type", codec)]);
        for i in 0..5 {
            let value = format!("{codec}-{i}");
            let record = FutureRecord::<(), _>::to("stamped").payload(&value).timestamp(created);
            producer.send(record, WAIT).await.unwrap();
        }
    }
    let consumer = reader(&bootstrap, "stamped", 0);
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while seen.len() < 5 * codecs.len() && std::time::Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.unwrap();
            let value = String::from_utf8_lossy(message.payload().unwrap()).into_owned();
            seen.push((value, message.timestamp()));
        }
    }
    let after = wall_ms();
    assert_eq!(seen.len(), 5 * codecs.len(), "{seen:?}");
    for (value, timestamp) in &seen {
        match timestamp {
            rdkafka::Timestamp::LogAppendTime(t) => {
                assert!((before..=after).contains(t), "{value}: {t} not in {before}..={after}")
            }
            other => panic!("{value} carries {other:?}, not the broker's time"),
        }
    }
    let values: Vec<&str> = seen.iter().map(|(v, _)| v.as_str()).collect();
    let sent: Vec<String> =
        codecs.iter().flat_map(|c| (0..5).map(move |i| format!("{c}-{i}"))).collect();
    assert_eq!(values, sent);
}

/// DescribeLogDirs in `version` for `topics` (`None`: all): each topic's partitions listed, as
/// (topic, partition, bytes).
async fn log_dirs(
    broker: &TestBroker,
    version: i16,
    topics: Option<&[(&str, &[i32])]>,
) -> (String, Vec<(String, i32, i64)>) {
    let mut asked = DescribeLogDirsRequest::default();
    asked.topics = topics.map(|topics| {
        let topic = |(name, partitions): &(&str, &[i32])| {
            let mut topic = DescribableLogDirTopic::default();
            topic.topic = TopicName(StrBytes::from_string((*name).to_owned()));
            topic.partitions = partitions.to_vec();
            topic
        };
        topics.iter().map(topic).collect()
    });
    let bytes = request(ApiKey::DescribeLogDirs, version, 5, &asked);
    let mut stream = send_raw(broker, &bytes).await;
    let mut response = read_response(&mut stream).await.expect("no answer");
    let header_version = ApiKey::DescribeLogDirs.response_header_version(version);
    ResponseHeader::decode(&mut response, header_version).unwrap();
    let answer = DescribeLogDirsResponse::decode(&mut response, version).unwrap();
    assert_eq!(answer.error_code, 0);
    let [dir] = &answer.results[..] else { panic!("one data folder: {answer:?}") };
    assert_eq!(dir.error_code, 0);
    assert_eq!((dir.total_bytes, dir.usable_bytes), (-1, -1), "the volume is not measured");
    for p in dir.topics.iter().flat_map(|t| &t.partitions) {
        assert_eq!((p.offset_lag, p.is_future_key), (0, false), "{p:?}");
    }
    let listed = dir.topics.iter().flat_map(|t| {
        t.partitions.iter().map(|p| (t.name.0.to_string(), p.partition_index, p.partition_size))
    });
    (dir.log_dir.to_string(), listed.collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_dirs_list_each_partition_held_with_its_size() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "sized", 2, &[]).await;
    create_topic(&bootstrap, "other", 1, &[]).await;
    let producer = producer(&bootstrap, &[]);
    let value = vec![b'x'; 1000];
    for i in 0..100 {
        let key = format!("k{i}");
        let record = FutureRecord::to("sized").partition(0).key(&key).payload(&value);
        producer.send(record, WAIT).await.unwrap();
    }
    let (dir, all) = log_dirs(&broker, 4, None).await;
    assert_eq!(dir, broker.dir.display().to_string());
    let size = |listed: &[(String, i32, i64)], topic: &str, partition: i32| {
        listed.iter().find(|(t, p, _)| t == topic && *p == partition).map(|(_, _, bytes)| *bytes)
    };
    let written = size(&all, "sized", 0).expect("sized-0 not listed");
    assert!(written >= 100 * 1000, "100 records of 1000 bytes in {written} bytes");
    assert_eq!(size(&all, "sized", 1), Some(0));
    assert_eq!(size(&all, "other", 0), Some(0));
    // Only what is named, and held here; in the first version too.
    let named: &[(&str, &[i32])] = &[("sized", &[0, 7]), ("missing", &[0])];
    let (_, some) = log_dirs(&broker, 1, Some(named)).await;
    assert_eq!(some, vec![("sized".to_owned(), 0, written)]);
    let (_, none) = log_dirs(&broker, 4, Some(&[])).await;
    assert!(none.is_empty(), "{none:?}");
}

/// Transactions are not offered: a transactional producer's `init_transactions` fails with
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a fatal error, rather than retrying until its
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_producer_is_refused_at_once() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    let producer = producer(&bootstrap, &[("transactional.id", "tx-1")]);
    let refused =
        tokio::task::spawn_blocking(move || producer.init_transactions(WAIT)).await.unwrap();
    let error = refused.err().and_then(|e| e.rdkafka_error_code());
    assert_eq!(error, Some(rdkafka::types::RDKafkaErrorCode::TransactionalIdAuthorizationFailed));
}
