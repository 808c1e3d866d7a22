//! Scenario: DescribeProducers (`kafka-transactions describe-producers`) lists the idempotent
//! producers a partition's replica knows: each one's id, epoch, the sequence of its newest
//! record and that batch's timestamp, with no coordinator epoch and no open transaction (−1:
//! Weir has no transactions). A producer without an id is not listed. A follower answers as
//! the leader does (the tool's `--broker-id`); a partition named twice is answered once, and
//! one the topic does not have is UNKNOWN_TOPIC_OR_PARTITION.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::admin::ProducerIdentity;
use weir_sim::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// A batch of `records` records at `sequence` from `producer` (or none) to `t`-0 at node
/// `ix`: its error code.
fn write(
    c: &mut Cluster,
    ix: usize,
    producer: Option<ProducerIdentity>,
    (sequence, records): (i32, usize),
) -> Result<i16, String> {
    let addr = c.addr(ix);
    let outcome = c
        .client_call(Duration::from_secs(30), move |env| async move {
            let batch = PartitionBatch {
                partition: 0,
                base_sequence: sequence,
                records: vec![(None, Bytes::from_static(b"v")); records],
            };
            Client::new(env, addr, "producer").produce("t", Acks::All, producer, &[batch]).await
        })
        .ok_or("the produce got no answer")?
        .map_err(|e| e.to_string())?;
    match outcome {
        ProduceOutcome::Answered(acks) => acks.first().map(|a| a.error_code).ok_or("no ack".into()),
        ProduceOutcome::Unacknowledged => Err("unacknowledged".into()),
    }
}

/// One partition's answer: (error, producers as (id, epoch, last sequence, last timestamp,
/// coordinator epoch, transaction start)).
type Answer = (i16, Vec<(i64, i32, i32, i64, i32, i64)>);

/// DescribeProducers of `t`'s `partitions` at node `ix`.
fn describe(c: &mut Cluster, ix: usize, partitions: Vec<i32>) -> Result<Vec<Answer>, String> {
    let mut topic = TopicRequest::default();
    topic.name = TopicName(StrBytes::from_static_str("t"));
    topic.partition_indexes = partitions;
    let mut request = DescribeProducersRequest::default();
    request.topics = vec![topic];
    let addr = c.addr(ix);
    let response: DescribeProducersResponse = c
        .client_call(Duration::from_secs(20), move |env| async move {
            Client::new(env, addr, "admin").call(&request, 0, Duration::from_secs(15)).await
        })
        .ok_or("DescribeProducers got no answer")?
        .map_err(|e| format!("DescribeProducers failed: {e}"))?;
    let topic = response.topics.into_iter().next().ok_or("no topic answered")?;
    Ok(topic
        .partitions
        .iter()
        .map(|p| {
            let mut producers: Vec<_> = p
                .active_producers
                .iter()
                .map(|s| {
                    let id = s.producer_id.0;
                    let txn = s.current_txn_start_offset;
                    (
                        id,
                        s.producer_epoch,
                        s.last_sequence,
                        s.last_timestamp,
                        s.coordinator_epoch,
                        txn,
                    )
                })
                .collect();
            producers.sort();
            (p.error_code, producers)
        })
        .collect())
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_replicated_topic(0, "t", 1, 3, &[]).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(2));
    let p = c.committed_partition("t", 0).ok_or("no partition t-0")?;
    let leader = c.ix_of(p.leader).ok_or("no leader node")?;
    let follower = p.replicas.iter().find(|&&r| r != p.leader).and_then(|&r| c.ix_of(r));
    let follower = follower.ok_or("no follower")?;

    let mut producers = Vec::new();
    for _ in 0..2 {
        let addr = c.addr(leader);
        let producer = c
            .client_call(Duration::from_secs(30), move |env| async move {
                Client::new(env, addr, "producer").init_producer_id(None).await
            })
            .ok_or("no producer id")?
            .map_err(|e| e.to_string())?;
        producers.push(producer);
    }
    let before = c.sim.env(c.client).clock.wall_ms();
    for (producer, batch) in
        [(producers[0], (0, 2)), (producers[0], (2, 2)), (producers[1], (0, 3))]
    {
        let code = write(&mut c, leader, Some(producer), batch)?;
        ensure(code == 0, || format!("{producer:?} at {batch:?}: {code}"))?;
    }
    let plain = write(&mut c, leader, None, (-1, 1))?;
    ensure(plain == 0, || format!("the plain batch: {plain}"))?;
    let after = c.sim.env(c.client).clock.wall_ms();

    let got = describe(&mut c, leader, vec![0, 9, 0])?;
    ensure(got.len() == 2, || format!("answers: {got:?}"))?;
    let (error, listed) = &got[0];
    ensure(*error == 0, || format!("the leader answered {error}"))?;
    let mut want: Vec<(i64, i32, i32, i32, i64)> = vec![
        (producers[0].id, i32::from(producers[0].epoch), 3, -1, -1),
        (producers[1].id, i32::from(producers[1].epoch), 2, -1, -1),
    ];
    want.sort();
    let without_time: Vec<_> =
        listed.iter().map(|&(id, e, s, _, ce, t)| (id, e, s, ce, t)).collect();
    ensure(without_time == want, || format!("the leader listed {listed:?}, want {want:?}"))?;
    ensure(listed.iter().all(|&(_, _, _, at, _, _)| (before..=after).contains(&at)), || {
        format!("timestamps outside {before}..={after}: {listed:?}")
    })?;
    ensure(got[1] == (UNKNOWN_TOPIC_OR_PARTITION, Vec::new()), || {
        format!("partition 9: {:?}", got[1])
    })?;

    let at_follower = describe(&mut c, follower, vec![0])?;
    ensure(at_follower.first() == got.first() && at_follower.len() == 1, || {
        format!("the follower answered {at_follower:?}, the leader {got:?}")
    })?;
    c.watch_verdict()
}

#[test]
fn describe_producers_lists_idempotent_producers() {
    for_each_seed("describe_producers_lists_idempotent_producers", 0..2, scenario);
}
