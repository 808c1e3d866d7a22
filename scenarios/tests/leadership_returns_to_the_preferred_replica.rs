//! Leadership moved away by a failover goes back to each partition's preferred replica (the
//! first of its assignment) once that replica is back and in sync, as Kafka's controller does
//! with `auto.leader.rebalance.enable` (on by default, every
//! `leader.imbalance.check.interval.seconds`, 300 s by default). Without it, every partition
//! led by a broker that restarted stays on the survivors for good, and the cluster's load with
//! it.
//!
//! Three nodes with the default settings; a topic of three partitions, replicated three ways,
//! one preferred by each node; `acks=all` writes. The node preferred by one of them is killed
//! (or loses power) and comes back once the partition has moved. Every partition it prefers
//! must then lead there again, within one check interval of its return to the ISR, and every
//! write acknowledged before, during and after the moves (writes go on once a second while the
//! leadership moves back, the old leader alive) must read back at its offset.

use std::time::Duration;

use weir::config::BrokerConfig;
use weir_scenarios::writes::Writes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Partitions of the topic, one preferred by each node.
const PARTITIONS: i32 = 3;
/// How long the restarted node may take to be back in every ISR.
const REJOIN_BOUND: Duration = Duration::from_secs(60);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { replication: 3, ..ClusterSpec::combined(3) };
    let every =
        Duration::from_secs(BrokerConfig::default().leader_imbalance_check_interval_seconds);
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, "spread", PARTITIONS, 3, &[("min.insync.replicas", "2")])
        .map_err(|e| e.to_string())?;
    for p in 0..PARTITIONS {
        c.await_isr_size(("spread", p), 3, REJOIN_BOUND)?;
    }
    let victim = (seed % 3) as usize;
    // Writes go through a node that stays up.
    let via = (victim + 1) % 3;
    let mut writes = Writes::new("spread", PARTITIONS, via);
    writes.round(&mut c, "before")?;
    let preferred = |c: &Cluster| -> Result<Vec<(i32, i32)>, String> {
        (0..PARTITIONS)
            .map(|p| {
                let r = c.committed_partition("spread", p).ok_or("no partition")?;
                Ok((r.replicas[0], r.leader))
            })
            .collect()
    };
    let placed = preferred(&c)?;
    ensure(placed.iter().all(|(first, leader)| first == leader), || {
        format!("a new topic is not led by its preferred replicas: {placed:?}")
    })?;
    let theirs: Vec<i32> =
        (0..PARTITIONS).filter(|&p| placed[p as usize].0 == node_id(victim)).collect();
    ensure(!theirs.is_empty(), || format!("node{} prefers no partition", victim + 1))?;

    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[victim]);
    } else {
        c.sim.power_fail(c.nodes[victim]);
    }
    let moved = c.run_until(REJOIN_BOUND, |c| {
        theirs.iter().all(|&p| {
            c.committed_partition("spread", p).is_some_and(|r| r.leader != node_id(victim))
        })
    });
    ensure(moved, || "the dead node's partitions did not move".to_owned())?;
    writes.round(&mut c, "moved")?;
    c.sim.start(c.nodes[victim]);
    for &p in &theirs {
        c.await_isr_size(("spread", p), 3, REJOIN_BOUND)?;
    }
    let led = |c: &Cluster| {
        theirs.iter().all(|&p| {
            c.committed_partition("spread", p).is_some_and(|r| r.leader == node_id(victim))
        })
    };
    // Writes go on, one round a second, while leadership moves back under them.
    let end = c.sim.now() + every + Duration::from_secs(5);
    let mut round = 0;
    while !led(&c) {
        ensure(c.sim.now() < end, || {
            format!(
                "node{}'s partitions {theirs:?} were not led there again within {every:?} of its \
                 return to their ISRs: {:?}",
                victim + 1,
                preferred(&c).unwrap_or_default()
            )
        })?;
        writes.round(&mut c, &format!("during-{round}"))?;
        round += 1;
        c.run_for(Duration::from_secs(1));
    }
    writes.round(&mut c, "after")?;
    writes.check_read_back(&mut c)?;
    c.watch_verdict()
}

#[test]
fn leadership_returns_to_the_preferred_replica() {
    for_each_seed("leadership_returns_to_the_preferred_replica", 0..6, scenario);
}
