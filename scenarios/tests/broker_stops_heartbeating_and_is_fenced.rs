//! Fault scenario: a broker-only node of a 4-node cluster (3 controllers) stops heartbeating —
//! cut off from the controllers while clients still reach it, or frozen. Within the session
//! timeout the controller fences it and takes away its leadership (replication factor 1: its
//! partition has no leader); the cut-off broker fences itself too and refuses produce with
//! NOT_LEADER_OR_FOLLOWER, and Metadata from any other broker shows the partition leaderless,
//! its replica there offline.
//! Once it can heartbeat again it is unfenced, leads its partition again under a new leader
//! epoch, takes writes, and still holds what it was acknowledged before.

use std::time::Duration;

use weir::controller::records::NO_LEADER;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::codes;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, ProduceFailure, node_id};

/// The broker that goes silent (node4, broker-only).
const SILENT: usize = 3;
/// Beyond the session timeout, how long the controller may take to fence.
const FENCE_SLACK: Duration = Duration::from_secs(3);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { voters: 3, ..ClusterSpec::combined(4) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_topic(0, "fenced", 4).map_err(|e| e.to_string())?;
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("fenced").ok_or("no topic")?;
    let mine = topic
        .partitions
        .values()
        .find(|p| p.leader == node_id(SILENT))
        .ok_or("no partition placed on node4")?
        .clone();
    let before = c
        .produce(0, "fenced", mine.partition, "before", Duration::from_secs(10))
        .ok_or("no write before the fault")?;
    let cut_off = seed.is_multiple_of(2);
    let controllers: Vec<_> = c.nodes[..3].to_vec();
    if cut_off {
        c.sim.partition(&[c.nodes[SILENT]], &controllers);
    } else {
        c.sim.pause(c.nodes[SILENT]);
    }
    c.await_fenced(SILENT, FENCE_SLACK)?;
    let image = c.committed_image().ok_or("no committed image")?;
    let now = image.partition("fenced", mine.partition).ok_or("partition gone")?;
    ensure(now.leader == NO_LEADER && now.leader_epoch > mine.leader_epoch, || {
        format!("fenced broker's partition: leader {} epoch {}", now.leader, now.leader_epoch)
    })?;
    let view = c.view_from(0)?;
    let shown =
        view.topics.get("fenced").and_then(|t| t.get(&mine.partition)).ok_or("not listed")?;
    ensure(shown.leader == -1, || format!("Metadata from node1 shows leader {}", shown.leader))?;
    ensure(shown.offline == [node_id(SILENT)], || {
        format!("Metadata from node1 names offline replicas {:?}", shown.offline)
    })?;
    if cut_off {
        let membership =
            c.broker(SILENT).and_then(|b| b.membership().cloned()).ok_or("no broker")?;
        ensure(membership.is_fenced(), || {
            "the cut-off broker does not consider itself fenced".to_owned()
        })?;
        let refused = c.produce_at(SILENT, "fenced", mine.partition, "while-fenced");
        ensure(refused == Err(ProduceFailure::Code(codes::NOT_LEADER_OR_FOLLOWER)), || {
            format!("produce to the fenced broker: {refused:?}")
        })?;
        c.sim.heal_all();
    } else {
        c.sim.resume(c.nodes[SILENT]);
    }
    c.settle("node4 came back")?;
    let image = c.committed_image().ok_or("no committed image")?;
    let back = image.partition("fenced", mine.partition).ok_or("partition gone")?;
    ensure(back.leader == node_id(SILENT) && back.leader_epoch > now.leader_epoch, || {
        format!("after unfencing: leader {} epoch {}", back.leader, back.leader_epoch)
    })?;
    c.produce(0, "fenced", mine.partition, "after", Duration::from_secs(10))
        .ok_or("no write after")?;
    let view = c.view_from(0)?;
    let shown =
        view.topics.get("fenced").and_then(|t| t.get(&mine.partition)).ok_or("not listed")?;
    ensure(shown.offline.is_empty(), || {
        format!("once unfenced, Metadata names offline replicas {:?}", shown.offline)
    })?;
    let read = c.read_all(SILENT, "fenced", mine.partition)?;
    ensure(read.get(&before).is_some_and(|v| v.as_ref() == b"before"), || {
        format!("the record acknowledged before the fence is gone: {read:?}")
    })?;
    ensure(!read.values().any(|v| v.as_ref() == b"while-fenced"), || {
        "a write refused while fenced is in the log".to_owned()
    })?;
    c.watch_verdict()
}

#[test]
fn broker_stops_heartbeating_and_is_fenced() {
    for_each_seed("broker_stops_heartbeating_and_is_fenced", 0..24, scenario);
}
