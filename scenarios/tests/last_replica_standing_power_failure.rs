//! Fault scenario: the "last replica standing" (KIP-966). A partition's two followers die, the
//! ISR shrinks to the leader alone, which keeps taking `acks=all` writes (`min.insync.replicas=1`)
//! and then loses power. The followers come back first: they are out of the ISR and lack those
//! writes, so neither may lead (unclean election is off) — the partition waits without a leader
//! rather than lose them. When the last in-sync replica returns from its power failure it leads
//! again, and under the default `flush.policy=ack` its log holds every write it acknowledged
//! (each was synced before the ack); the followers catch up from it and converge.
//!
//!
//! Under `flush.policy=interval` an ack promises only that every in-sync replica *fetched* the
//! record, so a replica that loses power may come back without records the high watermark
//! counted. The second test power-fails an in-sync follower of such a topic (nothing is ever
//! synced) as the two other replicas crash (their page cache survives), and restarts it within
//! its session: it registers as having shut down uncleanly, leaves the ISR, and must not lead —
//! the partition waits for a replica that holds the acknowledged records.

use std::time::Duration;

use weir::controller::records::NO_LEADER;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

fn scenario(seed: u64) -> Result<(), String> {
    // Five voters: the quorum outlives three dark replicas.
    let spec = ClusterSpec::combined(5);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "1")];
    let (t, p) = c.create_topic_away_from_controller("t", 3, &configs)?;
    let t = t.as_str();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let followers: Vec<usize> =
        p.replicas.iter().filter(|&&r| r != p.leader).filter_map(|&r| c.ix_of(r)).collect();
    for &f in &followers {
        c.sim.kill(c.nodes[f]);
    }
    let alone = c.run_until(Duration::from_secs(20), |c| {
        c.committed_partition(t, 0).is_some_and(|q| q.isr == vec![p.leader])
    });
    ensure(alone, || "the ISR did not shrink to the leader".to_owned())?;
    let mut acked = Vec::new();
    for i in 0..10 {
        let value = format!("alone-{i}");
        let offset =
            c.produce_with(leader, t, 0, &value, Acks::All).map_err(|e| format!("{e:?}"))?;
        acked.push((offset, value));
    }
    c.sim.power_fail(c.nodes[leader]);
    for &f in &followers {
        c.sim.start(c.nodes[f]);
    }
    c.run_for(Duration::from_millis(spec.session_timeout_ms + 5_000));
    let waiting = c.committed_partition(t, 0).ok_or("no partition")?;
    ensure(waiting.leader == NO_LEADER && waiting.isr == vec![p.leader], || {
        format!("an out-of-sync replica took over from the last one standing: {waiting:?}")
    })?;
    c.sim.start(c.nodes[leader]);
    c.settle("the last replica's return")?;
    let back = c.committed_partition(t, 0).ok_or("no partition")?;
    ensure(back.leader == p.leader, || format!("not the last in-sync replica leads: {back:?}"))?;
    let read = c.read_all(leader, t, 0)?;
    for (offset, value) in &acked {
        ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
            format!(
                "{t}-0@{offset}: acked {value:?} before the power failure, read {:?}",
                read.get(offset)
            )
        })?;
    }
    c.await_isr_size((t, 0), 3, Duration::from_secs(30))?;
    c.replicas_converged(t, 0)?;
    c.watch_verdict()
}

#[test]
fn last_replica_standing_power_failure() {
    for_each_seed("last_replica_standing_power_failure", 0..8, scenario);
}

fn interval_scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec::combined(5);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [
        ("flush.policy", "interval"),
        ("flush.ms", "3600000"),
        ("flush.messages", "1000000000"),
        ("min.insync.replicas", "2"),
    ];
    let (t, p) = c.create_topic_away_from_controller("t", 3, &configs)?;
    let t = t.as_str();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let followers: Vec<usize> =
        p.replicas.iter().filter(|&&r| r != p.leader).filter_map(|&r| c.ix_of(r)).collect();
    let [lost, kept] = followers[..] else { return Err(format!("replicas {:?}", p.replicas)) };
    let mut acked = Vec::new();
    for i in 0..10 {
        let value = format!("fetched-{i}");
        let offset =
            c.produce_with(leader, t, 0, &value, Acks::All).map_err(|e| format!("{e:?}"))?;
        acked.push((offset, value));
    }
    // The follower loses power and the two others crash at once, so no leader is left to
    // drop the follower from the ISR; it returns within its session, still listed in sync.
    c.sim.power_fail(c.nodes[lost]);
    c.sim.kill(c.nodes[leader]);
    c.sim.kill(c.nodes[kept]);
    c.sim.start(c.nodes[lost]);
    c.run_for(Duration::from_millis(spec.session_timeout_ms + 5_000));
    let waiting = c.committed_partition(t, 0).ok_or("no partition")?;
    let lost_id = weir_sim::workload::cluster::node_id(lost);
    ensure(waiting.leader == NO_LEADER && !waiting.isr.contains(&lost_id), || {
        format!("the replica that lost power is in sync or leads: {waiting:?}")
    })?;
    c.sim.start(c.nodes[leader]);
    c.sim.start(c.nodes[kept]);
    c.settle("the in-sync replicas' return")?;
    let back = c.committed_partition(t, 0).ok_or("no partition")?;
    let new_leader = c.ix_of(back.leader).ok_or("no leader after the return")?;
    ensure(new_leader != lost, || format!("the replica that lost power leads: {back:?}"))?;
    // Consumers read below the high watermark, which moves once two replicas are in sync.
    let two = c.run_until(Duration::from_secs(30), |c| {
        c.committed_partition(t, 0).is_some_and(|q| q.isr.len() >= 2)
    });
    ensure(two, || "no second replica joined the ISR".to_owned())?;
    let read = c.read_all(new_leader, t, 0)?;
    for (offset, value) in &acked {
        ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
            format!("{t}-0@{offset}: acked {value:?}, read {:?}", read.get(offset))
        })?;
    }
    c.watch_verdict()
}

#[test]
fn a_replica_back_from_a_power_failure_does_not_lead_an_interval_topic() {
    for_each_seed("last_replica_standing_power_failure", 0..8, interval_scenario);
}
