//! Fault scenario: a partition with three replicas and `min.insync.replicas=2` takes a steady
//! stream of `acks=all` writes when its leader is killed or loses power mid-stream. The
//! controller fences the leader and elects another in-sync replica under a higher leader
//! epoch; writes resume within seconds; every write acknowledged before, during and after the
//! failover reads back at its offset from the new leader; and once the old leader is back it
//! truncates whatever it had that was never committed, rejoins the ISR, and holds exactly the
//! leader's bytes up to the high watermark.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::{SteadyProducer, client_time, pause_around};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Longest pause of acknowledged writes allowed around the leader's death (fencing takes the
/// session timeout, 6 s, plus the election and the client's retries).
const PAUSE_MAX: Duration = Duration::from_secs(10);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec::combined(3);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(seed as usize % 3, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(1_000 + seed % 2_000));
    let image = c.committed_image().ok_or("no committed image")?;
    let before = image.topic("t").ok_or("no topic")?.partitions[&0].clone();
    let victim = c.ix_of(before.leader).ok_or("no leader")?;
    let killed_at = client_time(&c);
    let acked_before = producer.acked().len();
    ensure(acked_before > 0, || "no write acknowledged before the fault".to_owned())?;
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[victim]);
    } else {
        c.sim.power_fail(c.nodes[victim]);
    }
    c.run_for(Duration::from_secs(15));
    let image = c.committed_image().ok_or("no committed image after the failover")?;
    let after = image.topic("t").ok_or("topic lost")?.partitions[&0].clone();
    ensure(after.leader != before.leader && after.leader_epoch > before.leader_epoch, || {
        format!(
            "leader {} epoch {} → {} epoch {}",
            before.leader, before.leader_epoch, after.leader, after.leader_epoch
        )
    })?;
    ensure(before.isr.contains(&after.leader), || {
        format!("new leader {} was not in the ISR {:?}", after.leader, before.isr)
    })?;
    let acked = producer.acked();
    let pause = pause_around(&acked, killed_at).ok_or("no write acknowledged after the fault")?;
    ensure(pause <= PAUSE_MAX, || format!("writes paused {pause:?}"))?;
    // The old leader comes back, truncates, catches up and rejoins.
    c.restart_and_rejoin(victim, ("t", 0), 3, Duration::from_secs(30))?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let acked = producer.acked();
    let image = c.committed_image().ok_or("no committed image")?;
    let leader =
        c.ix_of(image.topic("t").ok_or("topic lost")?.partitions[&0].leader).ok_or("no leader")?;
    let read = c.read_all(leader, "t", 0)?;
    for a in &acked {
        ensure(read.get(&a.offset).is_some_and(|v| v.as_ref() == a.value.as_bytes()), || {
            format!(
                "t-0@{}: acked {:?}, read {:?} (node{} leads)",
                a.offset,
                a.value,
                read.get(&a.offset),
                node_id(leader)
            )
        })?;
    }
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn leader_killed_while_acks_all_in_flight() {
    for_each_seed("leader_killed_while_acks_all_in_flight", 0..8, scenario);
}
