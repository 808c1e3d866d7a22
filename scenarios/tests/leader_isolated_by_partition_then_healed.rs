//! Fault scenario: a partition leader is cut off from every other node — but not from the
//! clients — while `acks=all` writes flow. The clients may keep reaching it, yet it must not
//! acknowledge a write its followers cannot fetch; the majority fences it and elects an
//! in-sync follower within seconds, and the old leader, once it notices it lost its session,
//! refuses writes. When the cut heals the old leader truncates whatever it wrote alone, follows
//! the new leader back into the ISR, and ends byte-identical to it; every acknowledged write
//! reads back.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::{SteadyProducer, client_time, pause_around};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Longest pause of acknowledged writes allowed around the cut.
const PAUSE_MAX: Duration = Duration::from_secs(12);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec::combined(3);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(800 + seed % 1_500));
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let old = c.ix_of(before.leader).ok_or("no leader")?;
    let others: Vec<_> = (0..3).filter(|&ix| ix != old).map(|ix| c.nodes[ix]).collect();
    c.sim.partition(&[c.nodes[old]], &others);
    let cut_at = client_time(&c);
    c.run_for(Duration::from_secs(15));
    let during = c.committed_partition("t", 0).ok_or("no partition during the cut")?;
    ensure(during.leader != before.leader && during.leader_epoch > before.leader_epoch, || {
        format!("no failover during the cut: {during:?}")
    })?;
    let pause =
        pause_around(&producer.acked(), cut_at).ok_or("no write acknowledged after the cut")?;
    ensure(pause <= PAUSE_MAX, || format!("writes paused {pause:?}"))?;
    c.sim.heal_all();
    let rejoined = c.run_until(Duration::from_secs(30), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.isr.len() == 3)
    });
    ensure(rejoined, || {
        "the old leader did not rejoin the ISR within 30 s of the heal".to_owned()
    })?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let leader =
        c.ix_of(c.committed_partition("t", 0).ok_or("no partition")?.leader).ok_or("no leader")?;
    let read = c.read_all(leader, "t", 0)?;
    weir_scenarios::acked_read_back("t-0", &read, &producer.acked())?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn leader_isolated_by_partition_then_healed() {
    for_each_seed("leader_isolated_by_partition_then_healed", 0..8, scenario);
}
