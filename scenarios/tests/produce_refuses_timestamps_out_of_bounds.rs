//! Scenario: a topic bounds its records' CreateTime timestamps around the broker's clock, as
//! Kafka's do (KIP-937): `message.timestamp.after.max.ms` (an hour by default, as since Kafka
//! 4.0) and `message.timestamp.before.max.ms` (no bound by default).
//!
//! - A batch holding a record an hour and more ahead is refused whole: INVALID_TIMESTAMP, with
//!   the record named in `record_errors` (Produce v8+) and nothing written. Half an hour ahead
//!   is taken.
//! - With `message.timestamp.before.max.ms` set, a record older than it is refused; one
//!   without a timestamp (-1) is never out of range.
//! - Under LogAppendTime the producer's timestamps are replaced, so they are not bounded.
//! - Produce v7, which has no `record_errors`, gets the same error and an answer it can read.
//! - A topic whose `min.compaction.lag.ms` exceeds its `max.compaction.lag.ms` is refused
//!   (INVALID_CONFIG), as Kafka refuses it.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::{Client, ClientError};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// INVALID_TIMESTAMP.
const INVALID_TIMESTAMP: i16 = 32;
/// INVALID_CONFIG.
const INVALID_CONFIG: i16 = 40;
/// The first Produce version with `record_errors`.
const WITH_RECORD_ERRORS: i16 = 8;
/// The last Produce version without them.
const WITHOUT_RECORD_ERRORS: i16 = 7;
const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

/// Where each record's timestamp lies: this far from the client's clock, or none (-1).
#[derive(Clone, Copy)]
enum At {
    From(i64),
    None,
}

/// Produces (acks=all, Produce `version`) one batch to partition 0 of `topic` at node 0, one
/// record per entry of `at`; the partition's answer.
fn produce_at(
    c: &mut Cluster,
    topic: &str,
    version: i16,
    at: &[At],
) -> Result<PartitionProduceResponse, String> {
    let (addr, topic, at) = (c.addr(0), topic.to_owned(), at.to_vec());
    let answer: Result<ProduceResponse, String> = c
        .client_call(Duration::from_secs(20), move |env| async move {
            let now = env.clock.wall_ms();
            let records: Vec<RecordSpec> = (0i32..)
                .zip(&at)
                .map(|(i, at)| RecordSpec {
                    offset_delta: i,
                    timestamp: match at {
                        At::From(delta) => now + delta,
                        At::None => -1,
                    },
                    key: None,
                    value: Some(Bytes::from_static(b"v")),
                    headers: Vec::new(),
                })
                .collect();
            let batch =
                encode_batch(&records, &BatchOptions::default()).map_err(|e| e.to_string())?;
            let mut part = PartitionProduceData::default();
            part.index = 0;
            part.records = Some(batch);
            let mut data = TopicProduceData::default();
            data.name = TopicName(StrBytes::from_string(topic));
            data.partition_data = vec![part];
            let mut request = ProduceRequest::default();
            request.acks = -1;
            request.timeout_ms = 10_000;
            request.topic_data = vec![data];
            let mut client = Client::new(env, addr, "writer");
            let answer = client.call(&request, version, Duration::from_secs(15)).await;
            answer.map_err(|e| format!("Produce failed: {e}"))
        })
        .ok_or("Produce got no answer")?;
    answer?
        .responses
        .into_iter()
        .next()
        .and_then(|t| t.partition_responses.into_iter().next())
        .ok_or_else(|| "an answer without the partition".to_owned())
}

/// The positions `record_errors` names.
fn named(answer: &PartitionProduceResponse) -> Vec<i32> {
    answer.record_errors.iter().map(|r| r.batch_index).collect()
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    let topics: [(&str, &[(&str, &str)]); 3] = [
        ("t", &[]),
        ("strict", &[("message.timestamp.before.max.ms", "60000")]),
        (
            "appended",
            &[
                ("message.timestamp.type", "LogAppendTime"),
                ("message.timestamp.before.max.ms", "60000"),
                ("message.timestamp.after.max.ms", "0"),
            ],
        ),
    ];
    for (name, configs) in topics {
        c.create_replicated_topic(0, name, 1, 1, configs).map_err(|e| e.to_string())?;
    }
    c.run_for(Duration::from_secs(2));
    let end = |c: &Cluster, topic: &str| c.log_end(0, topic, 0).ok_or("no log");

    // The default bound ahead: an hour.
    let before = end(&c, "t")?;
    let far = [At::From(0), At::From(HOUR_MS + MINUTE_MS), At::From(-10 * 24 * HOUR_MS)];
    let answer = produce_at(&mut c, "t", WITH_RECORD_ERRORS, &far)?;
    ensure(answer.error_code == INVALID_TIMESTAMP && named(&answer) == [1], || {
        format!("a record an hour ahead: {answer:?}")
    })?;
    ensure(answer.error_message.is_some() && answer.base_offset == -1, || {
        format!("a refusal without its message, or with an offset: {answer:?}")
    })?;
    ensure(end(&c, "t")? == before, || "a refused batch was written".to_owned())?;
    let near = [At::From(0), At::From(30 * MINUTE_MS), At::From(-10 * 24 * HOUR_MS)];
    let answer = produce_at(&mut c, "t", WITH_RECORD_ERRORS, &near)?;
    ensure(answer.error_code == 0 && answer.base_offset == before, || {
        format!("records within the bounds: {answer:?}")
    })?;

    // A bound behind, and records without a timestamp.
    let old = [At::None, At::From(-2 * MINUTE_MS), At::From(0), At::From(-3 * MINUTE_MS)];
    let answer = produce_at(&mut c, "strict", WITH_RECORD_ERRORS, &old)?;
    ensure(answer.error_code == INVALID_TIMESTAMP && named(&answer) == [1, 3], || {
        format!("records older than message.timestamp.before.max.ms: {answer:?}")
    })?;
    ensure(end(&c, "strict")? == 0, || "a refused batch was written".to_owned())?;
    let answer = produce_at(&mut c, "strict", WITH_RECORD_ERRORS, &[At::None, At::From(0)])?;
    ensure(answer.error_code == 0, || format!("a record without a timestamp: {answer:?}"))?;

    // LogAppendTime: the broker's clock stamps every record.
    let answer = produce_at(&mut c, "appended", WITH_RECORD_ERRORS, &far)?;
    ensure(answer.error_code == 0 && answer.log_append_time_ms > 0, || {
        format!("LogAppendTime bounded the producer's timestamps: {answer:?}")
    })?;

    // A version without record_errors.
    let answer = produce_at(&mut c, "t", WITHOUT_RECORD_ERRORS, &far)?;
    ensure(answer.error_code == INVALID_TIMESTAMP, || format!("Produce v7: {answer:?}"))?;

    // Lags that contradict each other.
    let lags = [("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")];
    let created = c.create_replicated_topic(0, "lags", 1, 1, &lags);
    ensure(matches!(created, Err(ClientError::Kafka(INVALID_CONFIG))), || {
        format!("min.compaction.lag.ms above max.compaction.lag.ms: {created:?}")
    })?;
    c.watch_verdict()
}

#[test]
fn produce_refuses_timestamps_out_of_bounds() {
    for_each_seed("produce_refuses_timestamps_out_of_bounds", 0..2, scenario);
}
