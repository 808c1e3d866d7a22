//! Scenario: Produce answers as Kafka's does where a client would notice, on a 3-node cluster.
//!
//! - Produce v13 names topics by id. A topic hosted only on another broker is answered
//!   NOT_LEADER_OR_FOLLOWER, an id the cluster does not know UNKNOWN_TOPIC_ID, and the answer
//!   echoes the id either way: a client matches the answer to its batches by it. Before, both
//!   were UNKNOWN_TOPIC_OR_PARTITION under a nil id.
//! - acks=1 is not bounded by the request's `timeout_ms`: with a timeout of 0 under
//!   `flush.policy=ack` the write is acknowledged once synced. Before, the timer fired first and
//!   the client was told REQUEST_TIMED_OUT for a record that was written.
//! - acks=0 gets no answer, so a partition that fails closes the connection, and the client's
//!   next request on it fails. One that succeeds keeps it open.
//! - A transactional batch is refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): transactions are
//!   not supported, and it would be served as committed.
//! - A partition sent without records is INVALID_RECORD, which clients do not retry, not
//!   CORRUPT_MESSAGE, which they do.
//! - A zstd batch in Produce before v7 is UNSUPPORTED_COMPRESSION_TYPE and writes nothing
//!   (KIP-110); from v7 it is written.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use weir::log::batch::Compression;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::admin::LATEST;
use weir_sim::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Produce's version that names topics by id.
const PRODUCE_BY_ID: i16 = 13;
/// Produce's last version that names topics by name.
const PRODUCE_BY_NAME: i16 = 12;
/// NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// UNKNOWN_TOPIC_ID.
const UNKNOWN_TOPIC_ID: i16 = 100;
/// INVALID_RECORD.
const INVALID_RECORD: i16 = 87;
/// UNSUPPORTED_COMPRESSION_TYPE.
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
/// The first Produce version that may carry zstd batches.
const PRODUCE_ZSTD: i16 = 7;

/// One batch of one record, transactional if asked (with a producer id, as Kafka requires).
fn one_record(transactional: bool) -> Bytes {
    one_record_as(transactional, Compression::None)
}

/// [`one_record`], its records compressed with `compression`.
fn one_record_as(transactional: bool, compression: Compression) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 1_000,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Vec::new(),
    };
    let options = if transactional {
        BatchOptions {
            transactional: true,
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: 0,
            ..BatchOptions::default()
        }
    } else {
        BatchOptions::default()
    };
    let options = BatchOptions { compression, ..options };
    encode_batch(&[record], &options).expect("a valid batch")
}

/// Sends Produce (acks=all) of `records` (none: a null record set) to partition 0 of the topic
/// `name` or `id` at node `ix`; the answer.
fn produce_raw(
    c: &mut Cluster,
    ix: usize,
    (name, id): (&str, Uuid),
    version: i16,
    records: Option<Bytes>,
) -> Result<ProduceResponse, String> {
    let mut data = TopicProduceData::default();
    data.name = TopicName(StrBytes::from_string(name.to_owned()));
    data.topic_id = id;
    let mut part = PartitionProduceData::default();
    part.index = 0;
    part.records = records;
    data.partition_data = vec![part];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![data];
    let addr = c.addr(ix);
    c.client_call(Duration::from_secs(20), move |env| async move {
        let mut client = Client::new(env, addr, "writer");
        client.call(&request, version, Duration::from_secs(15)).await
    })
    .ok_or("Produce got no answer")?
    .map_err(|e| format!("Produce failed: {e}"))
}

/// The (topic id, error) of the first partition of the first topic of `response`.
fn first(response: &ProduceResponse) -> Option<(Uuid, i16)> {
    let topic = response.responses.first()?;
    Some((topic.topic_id, topic.partition_responses.first()?.error_code))
}

/// The base offset of the first partition of the first topic of `response`.
fn base_offset(response: &ProduceResponse) -> Option<i64> {
    Some(response.responses.first()?.partition_responses.first()?.base_offset)
}

/// A write with acks=0 to `topic` at node `ix`, then a ListOffsets on the same connection:
/// whether that second request was answered.
fn answered_after_acks_0(c: &mut Cluster, ix: usize, topic: &str) -> Result<bool, String> {
    let (addr, topic) = (c.addr(ix), topic.to_owned());
    c.client_call(Duration::from_secs(30), move |env| async move {
        let mut client = Client::new(env, addr, "writer");
        // Opens the connection the acks=0 write then goes over.
        client.list_offsets("t", &[0], LATEST).await.map_err(|e| e.to_string())?;
        let batch = PartitionBatch {
            partition: 0,
            base_sequence: 0,
            records: vec![(None, Bytes::from_static(b"v"))],
        };
        let sent = client.produce(&topic, Acks::None, None, &[batch]).await;
        ensure(sent == Ok(ProduceOutcome::Unacknowledged), || format!("acks=0: {sent:?}"))?;
        Ok(client.list_offsets("t", &[0], LATEST).await.is_ok())
    })
    .ok_or("no outcome")?
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_replicated_topic(0, "t", 1, 1, &[("flush.policy", "ack")])
        .map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(2));
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("t").ok_or("no topic")?;
    let (id, leader) = (Uuid::from_bytes(topic.id.0), topic.partitions[&0].leader);
    let leader = c.ix_of(leader).ok_or("no leader")?;
    let other = (leader + 1) % 3;

    // v13: by id, at a broker that does not host the topic, then an id nobody knows.
    let answer = produce_raw(&mut c, other, ("", id), PRODUCE_BY_ID, Some(one_record(false)))?;
    ensure(first(&answer) == Some((id, NOT_LEADER_OR_FOLLOWER)), || {
        format!("v13 to a broker not hosting the topic: {answer:?}")
    })?;
    let unknown = Uuid::from_bytes([7; 16]);
    let answer =
        produce_raw(&mut c, leader, ("", unknown), PRODUCE_BY_ID, Some(one_record(false)))?;
    ensure(first(&answer) == Some((unknown, UNKNOWN_TOPIC_ID)), || {
        format!("v13 with an unknown topic id: {answer:?}")
    })?;
    let answer = produce_raw(&mut c, leader, ("", id), PRODUCE_BY_ID, Some(one_record(false)))?;
    ensure(first(&answer) == Some((id, 0)), || format!("v13 to the leader: {answer:?}"))?;
    let written = base_offset(&answer).ok_or("no base offset")?;

    // zstd before v7, then at v7: the refused batch took no offset.
    let zstd = one_record_as(false, Compression::Zstd);
    let by_name = ("t", Uuid::nil());
    let answer = produce_raw(&mut c, leader, by_name, PRODUCE_ZSTD - 1, Some(zstd.clone()))?;
    ensure(first(&answer).map(|(_, e)| e) == Some(UNSUPPORTED_COMPRESSION_TYPE), || {
        format!("zstd in Produce v6: {answer:?}")
    })?;
    // As Kafka, the records are judged before the leadership: a broker not hosting the
    // partition refuses the same.
    let answer = produce_raw(&mut c, other, by_name, PRODUCE_ZSTD - 1, Some(zstd.clone()))?;
    ensure(first(&answer).map(|(_, e)| e) == Some(UNSUPPORTED_COMPRESSION_TYPE), || {
        format!("zstd in Produce v6 to a broker not hosting it: {answer:?}")
    })?;
    let answer = produce_raw(&mut c, leader, by_name, PRODUCE_ZSTD, Some(zstd))?;
    ensure(first(&answer).map(|(_, e)| e) == Some(0), || format!("zstd in v7: {answer:?}"))?;
    ensure(base_offset(&answer) == Some(written + 1), || {
        format!("zstd in v7 after one at {written}: {answer:?}")
    })?;

    // A transactional batch.
    let answer =
        produce_raw(&mut c, leader, ("t", Uuid::nil()), PRODUCE_BY_NAME, Some(one_record(true)))?;
    ensure(first(&answer).map(|(_, e)| e) == Some(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), || {
        format!("a transactional batch: {answer:?}")
    })?;

    // No records at all: not retriable.
    let answer = produce_raw(&mut c, leader, ("t", Uuid::nil()), PRODUCE_BY_NAME, None)?;
    ensure(first(&answer).map(|(_, e)| e) == Some(INVALID_RECORD), || {
        format!("a partition without records: {answer:?}")
    })?;

    // acks=1 with a timeout of 0.
    let addr = c.addr(leader);
    let outcome = c
        .client_call(Duration::from_secs(20), move |env| async move {
            let batch = PartitionBatch {
                partition: 0,
                base_sequence: 0,
                records: vec![(None, Bytes::from_static(b"v"))],
            };
            let mut client = Client::new(env, addr, "writer");
            let wait = Duration::from_secs(10);
            client.produce_timed("t", Acks::Leader, None, &[batch], Duration::ZERO, wait).await
        })
        .ok_or("acks=1 got no answer")?;
    let acked = matches!(&outcome, Ok(ProduceOutcome::Answered(acks))
        if acks.iter().all(|a| a.error_code == 0 && a.base_offset >= 0));
    ensure(acked, || format!("acks=1 with timeout_ms 0: {outcome:?}"))?;

    // acks=0: a failed write closes the connection; a good one does not.
    ensure(answered_after_acks_0(&mut c, leader, "t")?, || {
        "the connection was closed after a good acks=0 write".to_string()
    })?;
    ensure(!answered_after_acks_0(&mut c, leader, "no-such-topic")?, || {
        "the connection stayed open after an acks=0 write to an unknown topic".to_string()
    })?;
    c.watch_verdict()
}

#[test]
fn produce_answers_as_kafka() {
    for_each_seed("produce_answers_as_kafka", 0..3, scenario);
}
