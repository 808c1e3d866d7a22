//! Fault scenario: one follower of a three-replica partition is cut off from its leader (but
//! not from the rest of the cluster) while `acks=all` writes flow. After
//! `replica.lag.time.max.ms` the leader asks the controller to drop it from the ISR (a new
//! partition epoch), and writes keep being acknowledged by the two replicas left. When the
//! link heals the follower catches up, the leader asks for it back (another partition epoch),
//! and it ends byte-identical to the leader.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::{SteadyProducer, client_time};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// `replica.lag.time.max.ms` in this scenario: shorter than the broker session, so the lag
/// rule, not fencing, drops the follower.
const LAG_MS: u64 = 3_000;

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { replica_lag_ms: LAG_MS, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(500 + seed % 1_000));
    let image = c.committed_image().ok_or("no committed image")?;
    let p = image.topic("t").ok_or("no topic")?.partitions[&0].clone();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    // Not the active controller: the leader must still reach it to shrink the ISR.
    let controller = c.active_controller().map(node_id);
    let follower_id = p
        .replicas
        .iter()
        .copied()
        .find(|&r| r != p.leader && Some(r) != controller)
        .ok_or("no follower")?;
    let follower = c.ix_of(follower_id).ok_or("no follower node")?;
    c.sim.partition(&[c.nodes[leader]], &[c.nodes[follower]]);
    let dropped = c.run_until(Duration::from_millis(LAG_MS + 2_000), |c| {
        c.committed_image().is_some_and(|i| {
            i.topic("t").is_some_and(|t| !t.partitions[&0].isr.contains(&follower_id))
        })
    });
    ensure(dropped, || {
        format!("node{follower_id} still in the ISR {} ms after the cut", LAG_MS + 2_000)
    })?;
    let shrunk =
        c.committed_image().ok_or("no image")?.topic("t").ok_or("no topic")?.partitions[&0].clone();
    ensure(shrunk.partition_epoch > p.partition_epoch && shrunk.leader == p.leader, || {
        format!("after the shrink: {shrunk:?}, before: {p:?}")
    })?;
    c.run_for(Duration::from_secs(3));
    let dropped_at = client_time(&c) - Duration::from_secs(3);
    let during = producer.acked().iter().filter(|a| a.at > dropped_at).count();
    ensure(during > 0, || {
        "no acks=all write acknowledged with the follower out of the ISR".to_owned()
    })?;
    c.sim.heal_all();
    let rejoined = c.run_until(Duration::from_secs(30), |c| {
        c.committed_image()
            .is_some_and(|i| i.topic("t").is_some_and(|t| t.partitions[&0].isr.len() == 3))
    });
    ensure(rejoined, || format!("node{follower_id} did not rejoin within 30 s of the heal"))?;
    let back =
        c.committed_image().ok_or("no image")?.topic("t").ok_or("no topic")?.partitions[&0].clone();
    ensure(back.partition_epoch > shrunk.partition_epoch, || {
        format!("rejoin did not bump the partition epoch: {back:?}")
    })?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let read = c.read_all(leader, "t", 0)?;
    weir_scenarios::acked_read_back("t-0", &read, &producer.acked())?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn follower_lags_and_is_dropped_from_isr_then_rejoins() {
    for_each_seed("follower_lags_and_is_dropped_from_isr_then_rejoins", 0..8, scenario);
}
