//! Scenario: DescribeQuorum (`kafka-metadata-quorum describe`) on a 3-node cluster, each node a
//! broker and a controller.
//!
//! - Every broker answers for the quorum's leader (it asks the leader, as Kafka's brokers
//!   forward the request to the active controller): the same leader, which is the active
//!   controller, and epoch from each; a high watermark at least the index of the metadata a
//!   client saw committed; the three voters, none past the leader's log end, the leader's own
//!   log at least at the high watermark, all heard from and caught up lately (v1+); and, from
//!   v2, each voter's controller endpoint.
//! - A request for anything but partition 0 of `__cluster_metadata` is
//!   UNKNOWN_TOPIC_OR_PARTITION for each partition it names.
//! - v0 answers too; v1 carries the times.
//! - A follower paused: the leader reports it last heard from and caught up when it stopped,
//!   the other follower current; once back, it is current again.
//! - Once the leader's node is killed, a survivor names another leader in a later epoch, which
//!   reports the dead voter's log end and times unknown (−1), as it has not heard from it
//!   since it took over; with a second voter dead, the survivor answers
//!   NOT_LEADER_OR_FOLLOWER.

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response;
use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// The metadata log's topic.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// DescribeQuorum's newest version (with the voters' endpoints).
const LATEST: i16 = 2;
/// How far behind "now" a voter's last fetch and catch-up may be on a quiet, healthy quorum
/// (the leader sends heartbeats every few hundred ms).
const RECENT_MS: i64 = 3_000;
/// How long after a node stops the messages it sent before may still arrive.
const IN_FLIGHT_MS: i64 = 300;
/// How long a follower is stopped (less than a broker's session, 2 s).
const PAUSE: Duration = Duration::from_millis(1_800);
/// NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// Within how long of the kill a survivor must be the active controller.
const ELECTION_BOUND: Duration = Duration::from_secs(10);

/// DescribeQuorum for `topic`'s `partitions` at node `ix`, in `version`.
fn describe(
    c: &mut Cluster,
    ix: usize,
    (topic, partitions): (&str, &[i32]),
    version: i16,
) -> Result<DescribeQuorumResponse, String> {
    let mut asked = TopicData::default();
    asked.topic_name = TopicName(StrBytes::from_string(topic.to_owned()));
    asked.partitions = partitions
        .iter()
        .map(|&index| {
            let mut p = PartitionData::default();
            p.partition_index = index;
            p
        })
        .collect();
    let mut request = DescribeQuorumRequest::default();
    request.topics = vec![asked];
    let addr = c.addr(ix);
    c.client_call(Duration::from_secs(20), move |env| async move {
        let mut client = Client::new(env, addr, "operator");
        client.call(&request, version, Duration::from_secs(15)).await
    })
    .ok_or("DescribeQuorum got no answer")?
    .map_err(|e| format!("DescribeQuorum failed: {e}"))
}

/// The one partition of a good answer.
fn quorum(
    answer: &DescribeQuorumResponse,
) -> Result<&describe_quorum_response::PartitionData, String> {
    let partition = match answer.topics.as_slice() {
        [topic] if topic.topic_name.0.as_str() == METADATA_TOPIC => {
            match topic.partitions.as_slice() {
                [p] if p.partition_index == 0 => Some(p),
                _ => None,
            }
        }
        _ => None,
    };
    let p = partition.ok_or_else(|| format!("not one metadata partition: {answer:?}"))?;
    ensure(answer.error_code == 0 && p.error_code == 0, || format!("an error: {answer:?}"))?;
    Ok(p)
}

/// The node's own wall clock, in ms.
fn wall_ms(c: &Cluster, ix: usize) -> Result<i64, String> {
    Ok(c.broker(ix).ok_or("no broker")?.env.clock.wall_ms())
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_topic(0, "t", 2).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(2));
    let committed = c.committed_image().ok_or("no committed image")?.offset;
    let active = c.active_controller().ok_or("no active controller")?;
    let voters: BTreeSet<i32> = (0..3).map(node_id).collect();

    let mut named = BTreeSet::new();
    for ix in 0..3 {
        let answer = describe(&mut c, ix, (METADATA_TOPIC, &[0]), LATEST)?;
        let p = quorum(&answer)?;
        named.insert((p.leader_id.0, p.leader_epoch));
        ensure(p.leader_id.0 == node_id(active) && p.leader_epoch > 0, || {
            format!("node{} names leader {} epoch {}", ix + 1, p.leader_id.0, p.leader_epoch)
        })?;
        ensure(p.high_watermark >= committed as i64, || {
            format!("high watermark {} below committed index {committed}", p.high_watermark)
        })?;
        let ids: BTreeSet<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
        ensure(ids == voters && p.current_voters.len() == 3, || {
            format!("voters {:?}", p.current_voters)
        })?;
        let leader = p
            .current_voters
            .iter()
            .find(|v| v.replica_id == p.leader_id)
            .ok_or("the leader is not among the voters")?;
        ensure(leader.log_end_offset >= p.high_watermark, || {
            format!("the leader's log ends at {} below {}", leader.log_end_offset, p.high_watermark)
        })?;
        let now = wall_ms(&c, active)?;
        for v in &p.current_voters {
            let recent = |ts: i64| ts <= now && now - ts <= RECENT_MS;
            ensure(
                v.log_end_offset <= leader.log_end_offset
                    && recent(v.last_fetch_timestamp)
                    && recent(v.last_caught_up_timestamp),
                || format!("voter {v:?} on a quiet quorum at {now} ms (leader {leader:?})"),
            )?;
        }
        ensure(p.observers.is_empty(), || format!("observers {:?}", p.observers))?;
        let endpoints: BTreeSet<(i32, u16)> = answer
            .nodes
            .iter()
            .flat_map(|n| n.listeners.iter().map(move |l| (n.node_id.0, l.port)))
            .collect();
        ensure(
            endpoints.len() == 3 && endpoints.iter().all(|(id, _)| voters.contains(id)),
            || format!("v2 endpoints {:?}", answer.nodes),
        )?;
        // v0 (which has no fields for times) and v1, which carries them.
        let v0 = describe(&mut c, ix, (METADATA_TOPIC, &[0]), 0)?;
        ensure(quorum(&v0)?.leader_id == p.leader_id, || format!("v0: {v0:?}"))?;
        let v1 = describe(&mut c, ix, (METADATA_TOPIC, &[0]), 1)?;
        let now = wall_ms(&c, active)?;
        let timed = quorum(&v1)?
            .current_voters
            .iter()
            .all(|v| v.last_fetch_timestamp <= now && now - v.last_fetch_timestamp <= RECENT_MS);
        ensure(timed, || format!("v1 at {now} ms: {v1:?}"))?;
    }
    ensure(named.len() == 1, || format!("the brokers disagree: {named:?}"))?;

    // Anything but partition 0 of the metadata log, alone.
    for (topic, partitions) in
        [(METADATA_TOPIC, &[1][..]), ("t", &[0][..]), (METADATA_TOPIC, &[0, 1][..])]
    {
        let answer = describe(&mut c, 0, (topic, partitions), LATEST)?;
        let codes: Vec<(i32, i16)> = answer
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code)))
            .collect();
        let expected: Vec<(i32, i16)> =
            partitions.iter().map(|&p| (p, UNKNOWN_TOPIC_OR_PARTITION)).collect();
        ensure(codes == expected, || format!("{topic} {partitions:?}: {answer:?}"))?;
    }

    // A follower stops: the leader stops hearing from it and stops seeing it caught up,
    // while the other follower stays current; once back, it is current again.
    let follower = (active + 1) % 3;
    let stopped_at = wall_ms(&c, active)?;
    c.sim.pause(c.nodes[follower]);
    c.run_for(PAUSE);
    let answer = describe(&mut c, active, (METADATA_TOPIC, &[0]), LATEST)?;
    let now = wall_ms(&c, active)?;
    let listed = quorum(&answer)?.current_voters.len();
    ensure(listed == 3, || format!("{listed} voters listed while one is paused: {answer:?}"))?;
    for v in &quorum(&answer)?.current_voters {
        let (fetched, caught_up) = (v.last_fetch_timestamp, v.last_caught_up_timestamp);
        // Heard from and caught up until it stopped, and not since.
        let stopped = |ts: i64| ts <= stopped_at + IN_FLIGHT_MS && stopped_at - ts <= RECENT_MS;
        let fine = if v.replica_id.0 == node_id(follower) {
            stopped(fetched) && stopped(caught_up)
        } else {
            now - fetched <= RECENT_MS && now - caught_up <= RECENT_MS
        };
        ensure(fine, || {
            format!("node{} paused at {stopped_at} ms, asked at {now}: {v:?}", follower + 1)
        })?;
    }
    c.sim.resume(c.nodes[follower]);
    c.settle("the paused follower is back")?;
    let answer = describe(&mut c, 0, (METADATA_TOPIC, &[0]), LATEST)?;
    let leader_ix = c.ix_of(quorum(&answer)?.leader_id.0).ok_or("no leader named")?;
    let now = wall_ms(&c, leader_ix)?;
    let current = quorum(&answer)?.current_voters.iter().all(|v| {
        now - v.last_fetch_timestamp <= RECENT_MS && now - v.last_caught_up_timestamp <= RECENT_MS
    });
    ensure(current, || format!("after the pause, at {now} ms: {answer:?}"))?;

    // The leader dies: a survivor names another leader in a later epoch, which has not heard
    // from the dead voter since it took over, nor knows its log end.
    let (old_leader, old_epoch) = (quorum(&answer)?.leader_id.0, quorum(&answer)?.leader_epoch);
    c.sim.kill(c.nodes[leader_ix]);
    ensure(
        c.run_until(ELECTION_BOUND, |c| c.active_controller().is_some_and(|ix| ix != leader_ix)),
        || format!("no new active controller within {ELECTION_BOUND:?}"),
    )?;
    let survivor = (leader_ix + 1) % 3;
    let answer = describe(&mut c, survivor, (METADATA_TOPIC, &[0]), LATEST)?;
    let p = quorum(&answer)?;
    ensure(p.leader_id.0 != old_leader && p.leader_epoch > old_epoch, || {
        format!(
            "after the kill: leader {} epoch {} (was {old_leader} in {old_epoch})",
            p.leader_id.0, p.leader_epoch
        )
    })?;
    let dead = p.current_voters.iter().find(|v| v.replica_id.0 == old_leader);
    let dead = dead.ok_or("the dead voter is not listed")?;
    ensure(
        dead.log_end_offset == -1
            && dead.last_fetch_timestamp == -1
            && dead.last_caught_up_timestamp == -1,
        || format!("the dead voter: {dead:?}"),
    )?;

    // A second voter dies: no leader, and the survivor says so (retriable).
    let other = (0..3).find(|&ix| ix != leader_ix && ix != survivor).ok_or("no third node")?;
    c.sim.kill(c.nodes[other]);
    c.run_for(Duration::from_secs(5));
    let answer = describe(&mut c, survivor, (METADATA_TOPIC, &[0]), LATEST)?;
    let refused = answer.topics.first().and_then(|t| t.partitions.first());
    ensure(
        refused.is_some_and(|p| p.error_code == NOT_LEADER_OR_FOLLOWER) && answer.nodes.is_empty(),
        || format!("with one voter of three left: {answer:?}"),
    )?;
    c.watch_verdict()
}

#[test]
fn describe_quorum_reports_the_metadata_quorum() {
    for_each_seed("describe_quorum_reports_the_metadata_quorum", 0..6, scenario);
}
