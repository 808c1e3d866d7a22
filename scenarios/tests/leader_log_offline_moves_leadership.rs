//! Fault scenario: the disk under a partition's leader starts failing every sync while
//! `acks=all` writes flow, so the leader's log goes offline (nothing after its last good sync
//! can be vouched for). The broker itself is alive and heartbeating; it reports the offline
//! log with its heartbeats, and the controller moves leadership to another in-sync replica in
//! a new leader epoch and drops the broker from the ISR. Writes are acknowledged again within
//! seconds; none acknowledged is lost. Restarted on a healthy disk, the broker recovers its log
//! and rejoins the ISR byte-identical to the leader.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::DiskFaults;
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::{SteadyProducer, client_time};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Within how long of the fault leadership must have moved.
const MOVE_BOUND: Duration = Duration::from_secs(5);

fn scenario(seed: u64) -> Result<(), String> {
    // Four nodes, three of them voters: a fourth node may lead without voting.
    let spec = ClusterSpec { voters: 3, ..ClusterSpec::combined(4) };
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(500 + seed % 1_000));
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    let lp = c
        .broker(leader)
        .and_then(|b| b.catalog.partition("t", 0))
        .ok_or("the leader lacks the partition")?;
    // Every sync on the leader's disk fails until its partition log is offline.
    let failing = DiskFaults { sync_error: 1.0, ..DiskFaults::default() };
    c.sim.set_disk_faults(c.nodes[leader], failing);
    let offline = c.run_until(Duration::from_secs(5), |_| lp.log.offline().is_some());
    ensure(offline, || "the leader's log never went offline under failing syncs".to_owned())?;
    c.sim.set_disk_faults(c.nodes[leader], DiskFaults::default());
    let fault_at = client_time(&c);
    let moved = c.run_until(MOVE_BOUND, |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.leader != before.leader && p.leader >= 0)
    });
    ensure(moved, || {
        format!(
            "leadership still on node{} {MOVE_BOUND:?} after its log went offline",
            before.leader
        )
    })?;
    let after = c.committed_partition("t", 0).ok_or("no partition")?;
    ensure(
        after.leader_epoch > before.leader_epoch && !after.isr.contains(&before.leader),
        || format!("after the move: {after:?}, before: {before:?}"),
    )?;
    ensure(c.broker(leader).is_some(), || "the broker with the offline log stopped".to_owned())?;
    c.run_for(Duration::from_secs(3));
    let resumed = producer.acked().iter().any(|a| a.at > fault_at);
    ensure(resumed, || "no acks=all write acknowledged after leadership moved".to_owned())?;
    // Restarted, the broker recovers its log from disk and catches up.
    c.sim.kill(c.nodes[leader]);
    c.sim.start(c.nodes[leader]);
    let rejoined = c.run_until(Duration::from_secs(30), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.isr.len() == 3)
    });
    ensure(rejoined, || format!("node{} did not rejoin the ISR after its restart", before.leader))?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let now_leader = c.committed_partition("t", 0).ok_or("no partition")?.leader;
    let read = c.read_all(c.ix_of(now_leader).ok_or("no leader")?, "t", 0)?;
    weir_scenarios::acked_read_back("t-0", &read, &producer.acked())?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn leader_log_offline_moves_leadership() {
    for_each_seed("leader_log_offline_moves_leadership", 0..8, scenario);
}
