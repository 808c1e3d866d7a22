//! Fault scenario: every node of a three-node cluster loses power at once while `acks=all`
//! writes flow to a partition with three replicas (`flush.policy=ack`, the default promise:
//! an ack means every in-sync replica has synced the batch). The power returns to the two
//! followers first; the old leader stays dark past its session, so the controller fences it
//! and elects a follower — whose synced copy must hold every acknowledged write. Then the old
//! leader returns, truncates what was never committed, and the replicas converge.

use std::time::Duration;

use weir::controller::records::NO_LEADER;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec::combined(3);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let image = c.committed_image().ok_or("no committed image")?;
    let before = image.topic("t").ok_or("no topic")?.partitions[&0].clone();
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(1_000 + seed % 1_500));
    for ix in 0..3 {
        c.sim.power_fail(c.nodes[ix]);
    }
    let acked = producer.acked();
    ensure(!acked.is_empty(), || "no write acknowledged before the power failure".to_owned())?;
    producer.stop();
    c.run_for(Duration::from_millis(500 + seed % 3_000));
    let old_leader = before.leader;
    for ix in (0..3).filter(|&ix| node_id(ix) != old_leader) {
        c.sim.start(c.nodes[ix]);
    }
    let elected = c.run_until(Duration::from_secs(30), |c| {
        c.committed_image().is_some_and(|i| {
            i.topic("t").is_some_and(|t| {
                let p = &t.partitions[&0];
                p.leader != old_leader && p.leader != NO_LEADER
            })
        })
    });
    ensure(elected, || "no follower was elected while the old leader was dark".to_owned())?;
    let image = c.committed_image().ok_or("no committed image")?;
    let p = image.topic("t").ok_or("topic lost")?.partitions[&0].clone();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let read = c.read_all(leader, "t", 0)?;
    for a in &acked {
        ensure(read.get(&a.offset).is_some_and(|v| v.as_ref() == a.value.as_bytes()), || {
            format!(
                "t-0@{}: acked {:?}, the elected follower has {:?}",
                a.offset,
                a.value,
                read.get(&a.offset)
            )
        })?;
    }
    let old = c.ix_of(old_leader).ok_or("no node")?;
    c.sim.start(c.nodes[old]);
    c.settle("the old leader's return")?;
    c.produce(leader, "t", 0, "after", Duration::from_secs(20))
        .ok_or("no write after the restart")?;
    let read = c.read_all(leader, "t", 0)?;
    weir_scenarios::acked_read_back("t-0", &read, &acked)?;
    let full = c.run_until(Duration::from_secs(30), |c| {
        c.committed_image()
            .is_some_and(|i| i.topic("t").is_some_and(|t| t.partitions[&0].isr.len() == 3))
    });
    ensure(full, || "the ISR did not return to three replicas".to_owned())?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn whole_cluster_power_failure_keeps_acked_writes() {
    for_each_seed("whole_cluster_power_failure_keeps_acked_writes", 0..16, scenario);
}
