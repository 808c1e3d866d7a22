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
//! - Once the leader's node is killed, a survivor names another leader in a later epoch, and
//!   the dead voter as last heard from no later than the kill.

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
/// How long after the kill messages the killed node sent before it may still arrive.
const IN_FLIGHT_MS: i64 = 1_000;
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
        // v0 has no endpoints.
        let old = describe(&mut c, ix, (METADATA_TOPIC, &[0]), 0)?;
        ensure(quorum(&old)?.leader_id == p.leader_id && old.nodes.is_empty(), || {
            format!("v0: {old:?}")
        })?;
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

    // The leader dies.
    let (old_leader, old_epoch) = *named.first().ok_or("no leader named")?;
    let survivor = (active + 1) % 3;
    let killed_at = wall_ms(&c, survivor)?;
    c.sim.kill(c.nodes[active]);
    ensure(
        c.run_until(ELECTION_BOUND, |c| c.active_controller().is_some_and(|ix| ix != active)),
        || format!("no new active controller within {ELECTION_BOUND:?}"),
    )?;
    let mut heard = Vec::new();
    for _ in 0..2 {
        let answer = describe(&mut c, survivor, (METADATA_TOPIC, &[0]), LATEST)?;
        let p = quorum(&answer)?;
        ensure(p.leader_id.0 != old_leader && p.leader_epoch > old_epoch, || {
            format!(
                "after the kill: leader {} epoch {} (was {old_leader} in {old_epoch})",
                p.leader_id.0, p.leader_epoch
            )
        })?;
        let dead = p.current_voters.iter().find(|v| v.replica_id.0 == old_leader);
        heard.push(dead.ok_or("the dead voter is not listed")?.last_fetch_timestamp);
        c.run_for(Duration::from_secs(3));
    }
    // Messages it sent just before it died may still arrive: then no more.
    ensure(heard[0] == heard[1] && heard[0] <= killed_at + IN_FLIGHT_MS, || {
        format!("the dead voter last heard from at {heard:?}, killed at {killed_at}")
    })?;
    c.watch_verdict()
}

#[test]
fn describe_quorum_reports_the_metadata_quorum() {
    for_each_seed("describe_quorum_reports_the_metadata_quorum", 0..6, scenario);
}
