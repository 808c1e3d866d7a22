//! Scenario: DeleteRecords on a 3-node cluster answers as Kafka's does.
//!
//! - One request naming every partition a broker leads (about fifty, three replicas each,
//!   nothing else written) is answered within its timeout of 2 s, each partition with its new
//!   low watermark: the broker advances every start before it waits for any follower, so the
//!   followers catch up on all of them at once (in half a second here). Waiting for each in
//!   turn, a follower's fetch round each (about 100 ms here), ran past the timeout.
//! - A topic whose `cleanup.policy` is `compact` alone refuses (POLICY_VIOLATION) and keeps
//!   its records: a compacted topic keeps the newest value of each key for ever. One that is
//!   `compact,delete` deletes them.
//! - `__consumer_offsets` refuses (INVALID_TOPIC_EXCEPTION): the groups' committed offsets
//!   would go with its records.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::admin::EARLIEST;
use weir_sim::client::codes;
use weir_sim::client::produce::Acks;
use weir_sim::client::{Client, ClientError};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Partitions of the plain topic, about a third of them led by each node.
const PARTITIONS: i32 = 150;
/// The timeout the one DeleteRecords over one node's partitions is given.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Keyed records written to each compacted topic.
const KEYED: i64 = 3;

/// The node leading `topic`/`partition` in the committed metadata.
fn leader_of(c: &Cluster, topic: &str, partition: i32) -> Result<usize, String> {
    let image = c.committed_image().ok_or("no committed image")?;
    let t = image.topic(topic).ok_or_else(|| format!("no topic {topic}"))?;
    let p = t.partitions.get(&partition).ok_or_else(|| format!("no {topic}-{partition}"))?;
    c.ix_of(p.leader).ok_or_else(|| format!("{topic}-{partition} has no leader"))
}

/// DeleteRecords of `topic` below each `(partition, offset)`, sent to node `ix`.
fn delete_records(
    c: &mut Cluster,
    ix: usize,
    topic: &str,
    below: Vec<(i32, i64)>,
) -> Result<BTreeMap<i32, Result<i64, i16>>, String> {
    let (addr, name) = (c.addr(ix), topic.to_owned());
    c.client_call(DELETE_TIMEOUT + Duration::from_secs(2), move |env| async move {
        Client::new(env, addr, "admin").delete_records_of(&name, &below, DELETE_TIMEOUT).await
    })
    .ok_or_else(|| format!("DeleteRecords of {topic} got no answer"))?
    .map_err(|e| format!("DeleteRecords of {topic} failed: {e}"))
}

/// The log start node `ix` gives for `topic`-0 (ListOffsets, earliest).
fn earliest(c: &mut Cluster, ix: usize, topic: &str) -> Result<i64, String> {
    let (addr, name) = (c.addr(ix), topic.to_owned());
    let answer = c
        .client_call(Duration::from_secs(10), move |env| async move {
            Client::new(env, addr, "admin").list_offsets(&name, &[0], EARLIEST).await
        })
        .ok_or("ListOffsets got no answer")?
        .map_err(|e| format!("ListOffsets failed: {e}"))?;
    match answer.get(&0) {
        Some(Ok(offset)) => Ok(*offset),
        other => Err(format!("ListOffsets of {topic}-0 answered {other:?}")),
    }
}

/// Writes [`KEYED`] keyed records to `topic`-0 at its leader, acks=all.
fn produce_keyed(c: &mut Cluster, topic: &str) -> Result<(), String> {
    let ix = leader_of(c, topic, 0)?;
    let records = (0..KEYED)
        .map(|k| (Some(Bytes::from(format!("k{k}"))), Bytes::from_static(b"v")))
        .collect();
    c.produce_records(ix, (topic, 0), records, Acks::All)
        .map(|_| ())
        .map_err(|e| format!("keyed write to {topic} failed: {e:?}"))
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let via = seed as usize % 3;
    let err = |e: ClientError| e.to_string();
    c.create_replicated_topic(via, "plain", PARTITIONS, 3, &[]).map_err(err)?;
    c.create_replicated_topic(via, "compacted", 1, 3, &[("cleanup.policy", "compact")])
        .map_err(err)?;
    c.create_replicated_topic(via, "both", 1, 3, &[("cleanup.policy", "compact,delete")])
        .map_err(err)?;
    c.run_for(Duration::from_secs(2));

    // One request over every partition one node leads.
    let ix = leader_of(&c, "plain", 0)?;
    let mine: Vec<i32> =
        (0..PARTITIONS).filter(|&p| leader_of(&c, "plain", p).is_ok_and(|l| l == ix)).collect();
    ensure(mine.len() >= 30, || format!("node{} leads only {mine:?}", node_id(ix)))?;
    for &p in &mine {
        c.produce(ix, "plain", p, "v", Duration::from_secs(10))
            .ok_or_else(|| format!("no write to plain-{p}"))?;
    }
    c.run_for(Duration::from_secs(1));
    let answers = delete_records(&mut c, ix, "plain", mine.iter().map(|&p| (p, -1)).collect())?;
    for &p in &mine {
        let answer = answers.get(&p);
        ensure(answer == Some(&Ok(1)), || {
            format!(
                "DeleteRecords of {} partitions within {DELETE_TIMEOUT:?}: plain-{p} answered \
                 {answer:?}, want low watermark 1 (7 is REQUEST_TIMED_OUT)",
                mine.len()
            )
        })?;
    }

    // A compacted topic keeps its records; compact,delete gives them up.
    for (topic, want) in [("compacted", Err(codes::POLICY_VIOLATION)), ("both", Ok(KEYED))] {
        produce_keyed(&mut c, topic)?;
        let leader = leader_of(&c, topic, 0)?;
        let answers = delete_records(&mut c, leader, topic, vec![(0, -1)])?;
        ensure(answers.get(&0) == Some(&want), || {
            format!("DeleteRecords of {topic}-0 answered {:?}, want {want:?}", answers.get(&0))
        })?;
        let start = earliest(&mut c, leader, topic)?;
        let kept = if want.is_ok() { KEYED } else { 0 };
        ensure(start == kept, || format!("{topic}-0 starts at {start}, want {kept}"))?;
    }

    // The offsets topic, made by the first FindCoordinator.
    let addr = c.addr(via);
    c.client_call(Duration::from_secs(5), move |env| async move {
        Client::new(env, addr, "admin").find_coordinator("g").await
    });
    let made = c.run_until(Duration::from_secs(20), |c| {
        c.committed_image().is_some_and(|i| i.topic("__consumer_offsets").is_some())
    });
    ensure(made, || "no __consumer_offsets within 20 s of FindCoordinator".to_string())?;
    c.run_for(Duration::from_secs(2));
    let leader = leader_of(&c, "__consumer_offsets", 0)?;
    let answers = delete_records(&mut c, leader, "__consumer_offsets", vec![(0, -1)])?;
    let want = Err(codes::INVALID_TOPIC_EXCEPTION);
    ensure(answers.get(&0) == Some(&want), || {
        format!("DeleteRecords of __consumer_offsets-0 answered {:?}", answers.get(&0))
    })?;
    c.watch_verdict()
}

#[test]
fn delete_records_answers_as_kafka() {
    for_each_seed("delete_records_answers_as_kafka", 0..3, scenario);
}
