//! librdkafka (the `rdkafka` crate) against a broker whose disk holds a damaged batch: a bit of
//! a stored batch flips while the broker is down, as a latent sector error would, in a part of
//! the log its last clean shutdown checkpointed (so recovery does not rescan it). After the
//! restart a consumer reading from the beginning gets every record before the damage, then the
//! fetch error `CORRUPT_MESSAGE` as an error the application sees, never a record of the
//! damaged batch and never a silent skip past it. Seeking past the damaged batch, the consumer
//! reads the records after it: the rest of the log stays readable.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use support::TestBroker;

const WAIT: Duration = Duration::from_secs(20);
const TOPIC: &str = "damaged";
/// Records written, one batch each.
const RECORDS: i64 = 9;
/// The offset of the batch whose bit flips.
const DAMAGED: i64 = 4;
/// RecordBatch v2: base offset (8 bytes), then the length of the rest (4 bytes).
const BATCH_LENGTH_AT: usize = 8;
const BATCH_PREFIX_BYTES: usize = 12;

/// Flips one bit in the last byte (the last record's value, under the CRC) of the batch with
/// base offset `base` in the partition's first segment; returns the file position flipped.
fn flip_a_bit(data: &Path, base: i64) -> u64 {
    let segment = data.join(format!("{TOPIC}-0")).join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&segment).unwrap();
    let mut at = 0;
    while at + BATCH_PREFIX_BYTES <= bytes.len() {
        let offset = i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let length = i32::from_be_bytes(
            bytes[at + BATCH_LENGTH_AT..at + BATCH_PREFIX_BYTES].try_into().unwrap(),
        );
        let end = at + BATCH_PREFIX_BYTES + usize::try_from(length).unwrap();
        if offset == base {
            bytes[end - 1] ^= 0x10;
            std::fs::write(&segment, &bytes).unwrap();
            return (end - 1) as u64;
        }
        at = end;
    }
    panic!("no batch at offset {base} in {}", segment.display());
}

/// A consumer of the partition from `from`; the broker checks every batch it serves, and the
/// client checks CRCs too.
fn reader(bootstrap: &str, from: Offset) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "damage-reader")
        .set("enable.auto.commit", "false")
        .set("check.crcs", "true")
        .set("fetch.error.backoff.ms", "50")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, from).unwrap();
    consumer.assign(&tpl).unwrap();
    consumer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_batch_reaches_the_application_as_corrupt_message() {
    let broker = TestBroker::start().await;
    let bootstrap = broker.bootstrap();
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).create().unwrap();
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1)).set("retention.ms", "-1");
    for result in admin.create_topics(&[topic], &AdminOptions::new()).await.unwrap() {
        result.unwrap();
    }
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("linger.ms", "0")
        .set("message.timeout.ms", "20000")
        .create()
        .unwrap();
    // One record at a time, each acknowledged before the next: one batch each.
    for i in 0..RECORDS {
        let value = format!("record-{i}");
        let delivery =
            producer.send(FutureRecord::to(TOPIC).key("k").payload(&value), WAIT).await.unwrap();
        assert_eq!(delivery.offset, i);
    }
    drop(producer);
    drop(admin);
    let (dir, addr) = broker.stop().await;
    flip_a_bit(&dir, DAMAGED);
    let broker = TestBroker::restart(dir, addr).await;
    let bootstrap = broker.bootstrap();

    // From the beginning: the records before the damage, then the error, and nothing else.
    let consumer = reader(&bootstrap, Offset::Beginning);
    let mut read = Vec::new();
    let mut error = None;
    let deadline = Instant::now() + WAIT;
    while error.is_none() && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                read.push((m.offset(), value));
            }
            Some(Err(e)) => error = Some(e),
            None => {}
        }
    }
    let before: Vec<(i64, String)> = (0..DAMAGED).map(|i| (i, format!("record-{i}"))).collect();
    assert_eq!(read, before, "the records before the damaged batch, in order, and no other");
    assert!(
        matches!(
            error,
            // librdkafka's name for Kafka's error 2, CORRUPT_MESSAGE.
            Some(KafkaError::MessageConsumption(RDKafkaErrorCode::InvalidMessage))
        ),
        "the application is told of the damage: {error:?}"
    );
    // The consumer stays where the damage is: it never hands out a record of it or past it.
    for _ in 0..10 {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            panic!("read offset {} past a fetch that answered CORRUPT_MESSAGE", m.offset());
        }
    }
    drop(consumer);

    // Past the damaged batch, the rest of the log is read as written.
    let consumer = reader(&bootstrap, Offset::Offset(DAMAGED + 1));
    let mut after = Vec::new();
    let deadline = Instant::now() + WAIT;
    while after.len() < (RECORDS - DAMAGED - 1) as usize && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                after.push((m.offset(), value));
            }
            Some(Err(e)) => panic!("reading past the damaged batch: {e}"),
            None => {}
        }
    }
    let want: Vec<(i64, String)> =
        (DAMAGED + 1..RECORDS).map(|i| (i, format!("record-{i}"))).collect();
    assert_eq!(after, want, "the records after the damaged batch");
    let (low, high) = consumer.fetch_watermarks(TOPIC, 0, WAIT).unwrap();
    assert_eq!((low, high), (0, RECORDS), "the log's bounds are as written");
}
