//! Fault scenario: a broker of a 3-node cluster is killed or loses power, stays down past its
//! session (it is fenced and its partitions lose their leader), and restarts over the disk it
//! had. It must register again under a new incarnation, be unfenced, keep exactly the
//! partitions it was assigned (no reassignment, no data moved), lead them again under a higher
//! leader epoch, and serve every record it acknowledged before the crash.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Partitions of the test topic (two per broker).
const PARTITIONS: i32 = 6;

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec::combined(3);
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_topic(0, "kept", PARTITIONS).map_err(|e| e.to_string())?;
    let mut acked: BTreeMap<(i32, i64), String> = BTreeMap::new();
    for round in 0..3 {
        for p in 0..PARTITIONS {
            let value = format!("r{round}-p{p}");
            let offset =
                c.produce(0, "kept", p, &value, Duration::from_secs(10)).ok_or("no write")?;
            acked.insert((p, offset), value);
        }
    }
    let victim = (seed % 3) as usize;
    let image = c.committed_image().ok_or("no committed image")?;
    let before = image.topic("kept").ok_or("no topic")?.clone();
    let incarnation =
        image.brokers.get(&node_id(victim)).ok_or("victim unknown")?.registration.incarnation;
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[victim]);
    } else {
        c.sim.power_fail(c.nodes[victim]);
    }
    let down_for = Duration::from_millis(spec.session_timeout_ms) + Duration::from_secs(4);
    c.run_for(down_for);
    // The survivors still have an active controller (two of three voters), which fenced it.
    let image = c.committed_image().ok_or("no active controller while one node is down")?;
    ensure(image.brokers.get(&node_id(victim)).is_some_and(|b| b.fenced), || {
        format!("node{} not fenced after {down_for:?} down", victim + 1)
    })?;
    c.sim.start(c.nodes[victim]);
    c.settle("the restart")?;
    let image = c.committed_image().ok_or("no committed image")?;
    let rejoined = image.brokers.get(&node_id(victim)).ok_or("victim unknown")?;
    ensure(rejoined.registration.incarnation != incarnation && !rejoined.fenced, || {
        "the restarted broker did not register anew, or is still fenced".to_owned()
    })?;
    let after = image.topic("kept").ok_or("topic lost")?;
    for (p, old) in &before.partitions {
        let new = after.partitions.get(p).ok_or("partition lost")?;
        ensure(new.replicas == old.replicas && new.leader == old.leader, || {
            format!(
                "kept-{p}: replicas {:?}→{:?}, leader {}→{}",
                old.replicas, new.replicas, old.leader, new.leader
            )
        })?;
        ensure(old.leader != node_id(victim) || new.leader_epoch > old.leader_epoch, || {
            format!("kept-{p}: leader epoch {} not above {}", new.leader_epoch, old.leader_epoch)
        })?;
    }
    let expected = c.expected_folders(victim).ok_or("no image")?;
    let folders = c.partition_folders(victim).ok_or("cannot list the disk")?;
    ensure(folders == expected, || format!("folders {folders:?}, expected {expected:?}"))?;
    for p in 0..PARTITIONS {
        let leader = after.partitions.get(&p).ok_or("partition lost")?.leader;
        let ix = c.ix_of(leader).ok_or("leader is no node")?;
        let read = c.read_all(ix, "kept", p)?;
        for ((_, offset), value) in acked.range((p, 0)..(p + 1, 0)) {
            ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
                format!("kept-{p}@{offset}: acked {value:?}, read {:?}", read.get(offset))
            })?;
        }
        c.produce(0, "kept", p, "after", Duration::from_secs(10)).ok_or("no write after")?;
    }
    c.watch_verdict()
}

#[test]
fn broker_restarts_and_rejoins_with_same_partitions() {
    for_each_seed("broker_restarts_and_rejoins_with_same_partitions", 0..24, scenario);
}
