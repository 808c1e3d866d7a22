//! Scenario: ListOffsets answers as Kafka's in the cases a client can meet.
//!
//! - A partition named twice in one request is answered once, with INVALID_REQUEST; others
//!   are answered (here, one the topic does not have).
//! - A special timestamp the request's version does not know (MAX_TIMESTAMP before v7,
//!   EARLIEST_LOCAL before v8, LATEST_TIERED before v9, and any other negative one) is
//!   UNSUPPORTED_VERSION. It used to be answered as a time.
//! - The leader epoch given is that of the batch holding the offset, the partition's own only
//!   for the latest offset. It used to be the partition's own for every answer.
//! - A replica checks the client's leader epoch before its leadership: a follower asked with
//!   an old epoch answers FENCED_LEADER_EPOCH, with a newer one UNKNOWN_LEADER_EPOCH, and
//!   with its own NOT_LEADER_OR_FOLLOWER. It used to answer NOT_LEADER_OR_FOLLOWER to all.
//! - A new leader whose high watermark is below the start of its epoch answers
//!   OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5) for the latest offset, and for a
//!   lookup whose answer it would not give, so a consumer never resets to an offset below one
//!   the old leader gave. The earliest offset and a lookup it can answer are given. Other
//!   replica ids than a consumer's (brokers, tools) are answered up to the log end.
//!
//! In a 5-node cluster, a topic of 3 replicas takes two records with acks=all. The leader's
//! answers to one follower (G) are then held back, and it takes a third record with acks=1
//! that only the other follower (F) copies. F is next after the leader in the assignment, so it
//! is elected when the leader dies. G cannot hear F either, so F's high watermark stays below
//! its epoch's start (the third record) until G catches up.

use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::admin::{EARLIEST, LATEST, LATEST_TIERED, MAX_TIMESTAMP};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

const EARLIEST_LOCAL: i64 = -4;
/// Kafka's error codes.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const LEADER_NOT_AVAILABLE: i16 = 5;
const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_REQUEST: i16 = 42;
const OFFSET_NOT_AVAILABLE: i16 = 78;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
/// A consumer's replica id.
const CONSUMER: i32 = -1;

/// One partition's answer: (error, offset, leader epoch).
type Answer = (i16, i64, i32);

/// ListOffsets at `version` from node `ix` for the `(partition, timestamp)` pairs of `t`, as
/// `replica`: the answers in order.
fn list(
    c: &mut Cluster,
    ix: usize,
    version: i16,
    replica: i32,
    wanted: &[(i32, i64)],
) -> Result<Vec<Answer>, String> {
    list_in_epoch(c, (ix, version), replica, wanted, -1)
}

/// [`list`] naming `current` as the client's leader epoch.
fn list_in_epoch(
    c: &mut Cluster,
    (ix, version): (usize, i16),
    replica: i32,
    wanted: &[(i32, i64)],
    current: i32,
) -> Result<Vec<Answer>, String> {
    let mut topic = ListOffsetsTopic::default();
    topic.name = TopicName(StrBytes::from_static_str("t"));
    topic.partitions = wanted
        .iter()
        .map(|&(partition, timestamp)| {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = partition;
            p.timestamp = timestamp;
            p.current_leader_epoch = current;
            p
        })
        .collect();
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(replica);
    request.topics = vec![topic];
    let addr = c.addr(ix);
    let response: ListOffsetsResponse = c
        .client_call(Duration::from_secs(20), move |env| async move {
            Client::new(env, addr, "lister").call(&request, version, Duration::from_secs(15)).await
        })
        .ok_or("ListOffsets got no answer")?
        .map_err(|e| format!("ListOffsets v{version} failed: {e}"))?;
    let topic = response.topics.into_iter().next().ok_or("no topic answered")?;
    Ok(topic.partitions.iter().map(|p| (p.error_code, p.offset, p.leader_epoch)).collect())
}

/// One answer of a consumer's ListOffsets of `t`-0 at `timestamp`.
fn one(c: &mut Cluster, ix: usize, version: i16, timestamp: i64) -> Result<Answer, String> {
    let answers = list(c, ix, version, CONSUMER, &[(0, timestamp)])?;
    answers.first().copied().ok_or_else(|| "no partition answered".to_owned())
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut spec = ClusterSpec::combined(5);
    spec.leader_rebalance_secs = None;
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(seed as usize % 5, "t", 1, 3, &[]).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(2));
    for n in 0..2 {
        let offset = c
            .produce(0, "t", 0, &format!("committed-{n}"), Duration::from_secs(10))
            .ok_or("no acks=all write")?;
        ensure(offset == n, || format!("write {n} landed at {offset}"))?;
    }
    let p = c.committed_partition("t", 0).ok_or("no partition t-0")?;
    let (old_epoch, leader_id) = (p.leader_epoch, p.leader);
    let leader = c.ix_of(leader_id).ok_or("no leader node")?;

    // Duplicates and versions, at the leader.
    let got = list(&mut c, leader, 10, CONSUMER, &[(0, LATEST), (7, LATEST), (0, EARLIEST)])?;
    let codes: Vec<i16> = got.iter().map(|a| a.0).collect();
    let want = [INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION];
    ensure(codes == want, || format!("duplicates: {got:?}"))?;
    for (version, timestamp, want) in [
        (6, MAX_TIMESTAMP, UNSUPPORTED_VERSION),
        (7, MAX_TIMESTAMP, 0),
        (7, EARLIEST_LOCAL, UNSUPPORTED_VERSION),
        (8, EARLIEST_LOCAL, 0),
        (8, LATEST_TIERED, UNSUPPORTED_VERSION),
        (9, LATEST_TIERED, 0),
        (10, -6, UNSUPPORTED_VERSION),
        (10, -100, UNSUPPORTED_VERSION),
    ] {
        let got = one(&mut c, leader, version, timestamp)?;
        ensure(got.0 == want, || format!("v{version} at {timestamp}: {got:?}, want error {want}"))?;
    }

    // The window: F copies a record G does not get, and F leads next.
    let after = p.replicas.iter().position(|&r| r == leader_id).ok_or("leader not a replica")?;
    let next = |k: usize| p.replicas[(after + k) % p.replicas.len()];
    let (f, g) = (c.ix_of(next(1)).ok_or("no F")?, c.ix_of(next(2)).ok_or("no G")?);
    c.sim.clog(c.nodes[leader], c.nodes[g]);
    let pending = c
        .produce_with(leader, "t", 0, "pending", Acks::Leader)
        .map_err(|e| format!("the acks=1 write failed: {e:?}"))?;
    ensure(pending == 2, || format!("the acks=1 write landed at {pending}"))?;
    let copied = c.run_until(Duration::from_secs(10), |c| {
        c.broker(f)
            .and_then(|b| b.catalog.partition("t", 0))
            .is_some_and(|p| p.log.log_end_offset().0 == 3)
    });
    ensure(copied, || "F did not copy the acks=1 write".to_owned())?;
    c.sim.clog(c.nodes[f], c.nodes[g]);
    c.sim.kill(c.nodes[leader]);
    let elected = c.run_until(Duration::from_secs(60), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.leader == next(1))
            && c.broker(f)
                .and_then(|b| b.catalog.partition("t", 0))
                .is_some_and(|p| p.leads() && p.high_watermark().0 == 2)
    });
    ensure(elected, || format!("F (node {}) did not lead with its high watermark at 2", next(1)))?;
    let new_epoch = c.committed_partition("t", 0).ok_or("no partition t-0")?.leader_epoch;
    ensure(new_epoch > old_epoch, || format!("epoch {new_epoch} after {old_epoch}"))?;

    for (version, timestamp, want) in [
        (10, LATEST, (OFFSET_NOT_AVAILABLE, -1, -1)),
        (5, LATEST, (OFFSET_NOT_AVAILABLE, -1, -1)),
        (4, LATEST, (LEADER_NOT_AVAILABLE, -1, -1)),
        (10, MAX_TIMESTAMP, (OFFSET_NOT_AVAILABLE, -1, -1)),
        (10, EARLIEST, (0, 0, old_epoch)),
        (10, 0, (0, 0, old_epoch)),
        (10, LATEST_TIERED, (0, -1, -1)),
        // Before v4 there is no leader epoch to give.
        (3, EARLIEST, (0, 0, -1)),
    ] {
        let got = one(&mut c, f, version, timestamp)?;
        ensure(got == want, || {
            format!("new leader, v{version} at {timestamp}: {got:?}, want {want:?}")
        })?;
    }
    for replica in [1, -2] {
        let got = list(&mut c, f, 10, replica, &[(0, LATEST)])?;
        ensure(got == [(0, 3, new_epoch)], || format!("replica {replica}'s LATEST: {got:?}"))?;
        let got = list(&mut c, f, 10, replica, &[(0, MAX_TIMESTAMP)])?;
        ensure(got == [(0, 2, old_epoch)], || {
            format!("replica {replica}'s MAX_TIMESTAMP: {got:?}")
        })?;
    }

    c.sim.heal_all();
    let caught_up = c.run_until(Duration::from_secs(30), |c| {
        c.broker(f)
            .and_then(|b| b.catalog.partition("t", 0))
            .is_some_and(|p| p.high_watermark().0 == 3)
    });
    ensure(caught_up, || "F's high watermark did not reach 3".to_owned())?;
    for (timestamp, want) in [
        (LATEST, (0, 3, new_epoch)),
        (MAX_TIMESTAMP, (0, 2, old_epoch)),
        (EARLIEST, (0, 0, old_epoch)),
    ] {
        let got = one(&mut c, f, 10, timestamp)?;
        ensure(got == want, || format!("settled, at {timestamp}: {got:?}, want {want:?}"))?;
    }
    // At the follower G, the client's epoch is checked before leadership, as in Kafka.
    for (current, want) in [
        (old_epoch, FENCED_LEADER_EPOCH),
        (new_epoch + 1, UNKNOWN_LEADER_EPOCH),
        (new_epoch, NOT_LEADER_OR_FOLLOWER),
        (-1, NOT_LEADER_OR_FOLLOWER),
    ] {
        let got = list_in_epoch(&mut c, (g, 10), CONSUMER, &[(0, LATEST)], current)?;
        ensure(got == [(want, -1, -1)], || {
            format!("at the follower, epoch {current}: {got:?}, want error {want}")
        })?;
    }
    c.watch_verdict()
}

#[test]
fn list_offsets_answers_as_kafka() {
    for_each_seed("list_offsets_answers_as_kafka", 0..3, scenario);
}
