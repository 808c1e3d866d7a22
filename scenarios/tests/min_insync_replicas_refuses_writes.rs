//! Fault scenario: a partition with three replicas and `min.insync.replicas=2` loses both
//! followers (killed, or powered off). Once the controller has fenced them and shrunk the ISR
//! to the leader alone, `acks=all` writes are refused with NOT_ENOUGH_REPLICAS and leave
//! nothing in the log, while `acks=1` writes are still taken. When one follower comes back and
//! catches up it rejoins the ISR, and `acks=all` writes are acknowledged again.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, ProduceFailure};

/// Kafka's NOT_ENOUGH_REPLICAS.
const NOT_ENOUGH_REPLICAS: i16 = 19;

fn scenario(seed: u64) -> Result<(), String> {
    // Five voters, so the metadata quorum outlives two dead nodes.
    let spec = ClusterSpec::combined(5);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let image = c.committed_image().ok_or("no committed image")?;
    let p = image.topic("t").ok_or("no topic")?.partitions[&0].clone();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    c.produce_with(leader, "t", 0, "before", Acks::All).map_err(|e| format!("{e:?}"))?;
    let followers: Vec<usize> =
        p.replicas.iter().filter(|&&r| r != p.leader).filter_map(|&r| c.ix_of(r)).collect();
    for &f in &followers {
        if seed.is_multiple_of(2) {
            c.sim.kill(c.nodes[f]);
        } else {
            c.sim.power_fail(c.nodes[f]);
        }
    }
    let shrunk = c.run_until(Duration::from_secs(20), |c| {
        c.committed_image()
            .is_some_and(|i| i.topic("t").is_some_and(|t| t.partitions[&0].isr == vec![p.leader]))
    });
    ensure(shrunk, || "the ISR did not shrink to the leader within 20 s".to_owned())?;
    c.run_for(Duration::from_millis(500));
    let end_before = c.log_end(leader, "t", 0).ok_or("leader lacks the partition")?;
    let refused = c.produce_with(leader, "t", 0, "refused", Acks::All);
    ensure(refused == Err(ProduceFailure::Code(NOT_ENOUGH_REPLICAS)), || {
        format!("acks=all with the ISR at one answered {refused:?}")
    })?;
    let end_after = c.log_end(leader, "t", 0).ok_or("leader lacks the partition")?;
    ensure(end_after == end_before, || {
        format!("a refused write moved the log end {end_before} → {end_after}")
    })?;
    let taken = c.produce_with(leader, "t", 0, "one", Acks::Leader);
    ensure(taken.is_ok(), || format!("acks=1 with the ISR at one answered {taken:?}"))?;
    // One follower back: it catches up, rejoins, and acks=all works again.
    c.sim.start(c.nodes[followers[0]]);
    let rejoined = c.run_until(Duration::from_secs(30), |c| {
        c.committed_image()
            .is_some_and(|i| i.topic("t").is_some_and(|t| t.partitions[&0].isr.len() == 2))
    });
    ensure(rejoined, || "the follower did not rejoin the ISR within 30 s".to_owned())?;
    let back = c.produce_with(leader, "t", 0, "after", Acks::All);
    ensure(back.is_ok(), || format!("acks=all after the rejoin answered {back:?}"))?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn min_insync_replicas_refuses_writes() {
    for_each_seed("min_insync_replicas_refuses_writes", 0..8, scenario);
}
