//! Fault scenario: a partition's ISR has shrunk to its leader alone (its followers were cut
//! off from it and fell behind), and then the leader dies. With
//! `unclean.leader.election.enable=false` (the default) the partition stays without a leader
//! until that last in-sync replica returns — no out-of-sync replica may take over and lose
//! what it lacks — and the returning replica leads again with every record it held. With the
//! setting `true`, the controller elects a live out-of-sync replica under a new epoch, writes
//! resume, and the old leader, once back, truncates to the new leader's log and converges.

use std::time::Duration;

use weir::controller::records::NO_LEADER;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// `replica.lag.time.max.ms`: the cut-off followers leave the ISR quickly.
const LAG_MS: u64 = 3_000;

fn scenario(seed: u64, unclean: bool) -> Result<(), String> {
    // Five voters: the quorum outlives the dead leader and the cuts.
    let spec = ClusterSpec { replica_lag_ms: LAG_MS, ..ClusterSpec::combined(5) };
    let mut c = Cluster::new_settled(seed, spec)?;
    let setting = if unclean { "true" } else { "false" };
    let configs = [("flush.policy", "ack"), ("unclean.leader.election.enable", setting)];
    // Replicas away from the active controller: the cut-off leader can still shrink the ISR.
    let (t, p) = c.create_topic_away_from_controller("t", 3, &configs)?;
    let t = t.as_str();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let followers: Vec<usize> =
        p.replicas.iter().filter(|&&r| r != p.leader).filter_map(|&r| c.ix_of(r)).collect();
    c.produce_with(leader, t, 0, "replicated", Acks::All).map_err(|e| format!("{e:?}"))?;
    let cut: Vec<_> = followers.iter().map(|&f| c.nodes[f]).collect();
    c.sim.partition(&[c.nodes[leader]], &cut);
    // Writes the followers never get, acknowledged by the leader alone.
    let mut only_on_leader = Vec::new();
    for i in 0..5 {
        let value = format!("leader-only-{i}");
        let offset =
            c.produce_with(leader, t, 0, &value, Acks::Leader).map_err(|e| format!("{e:?}"))?;
        only_on_leader.push((offset, value));
    }
    let alone = c.run_until(Duration::from_millis(LAG_MS + 3_000), |c| {
        c.committed_image()
            .is_some_and(|i| i.topic(t).is_some_and(|t| t.partitions[&0].isr == vec![p.leader]))
    });
    ensure(alone, || "the ISR did not shrink to the leader".to_owned())?;
    c.sim.kill(c.nodes[leader]);
    c.sim.heal_all();
    c.run_for(Duration::from_millis(spec.session_timeout_ms + 4_000));
    let image = c.committed_image().ok_or("no committed image")?;
    let now = image.topic(t).ok_or("topic lost")?.partitions[&0].clone();
    if unclean {
        // A live out-of-sync replica leads under a new epoch (the other may have caught up
        // with it and joined its ISR since); the dead one is out of the ISR.
        let elected = now.leader != NO_LEADER
            && now.leader != p.leader
            && now.leader_epoch > p.leader_epoch
            && !now.isr.contains(&p.leader);
        ensure(elected, || format!("unclean election enabled, but the partition is {now:?}"))?;
        let new_leader = c.ix_of(now.leader).ok_or("no node")?;
        let written = c.produce_with(new_leader, t, 0, "after", Acks::All);
        ensure(written.is_ok(), || format!("a write to the unclean leader answered {written:?}"))?;
    } else {
        ensure(now.leader == NO_LEADER && now.isr == vec![p.leader], || {
            format!("unclean election disabled, but the partition is {now:?}")
        })?;
    }
    c.sim.start(c.nodes[leader]);
    c.settle("the old leader's restart")?;
    let image = c.committed_image().ok_or("no committed image")?;
    let last = image.topic(t).ok_or("topic lost")?.partitions[&0].clone();
    let reader = c.ix_of(last.leader).ok_or("no leader after the restart")?;
    let read = c.read_all(reader, t, 0)?;
    if unclean {
        ensure(last.leader == now.leader, || format!("leadership moved again: {last:?}"))?;
        let full = c.run_until(Duration::from_secs(30), |c| {
            c.committed_image()
                .is_some_and(|i| i.topic(t).is_some_and(|t| t.partitions[&0].isr.len() == 3))
        });
        ensure(full, || "the replicas did not rejoin the unclean leader's ISR".to_owned())?;
        c.replicas_converged(t, 0)?;
    } else {
        ensure(last.leader == p.leader, || {
            format!("not the last in-sync replica leads: {last:?}")
        })?;
        for (offset, value) in &only_on_leader {
            ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
                format!(
                    "t-0@{offset}: held {value:?} on the last in-sync replica, read {:?}",
                    read.get(offset)
                )
            })?;
        }
    }
    c.watch_verdict()
}

#[test]
fn unclean_election_only_when_enabled() {
    for_each_seed("unclean_election_only_when_enabled", 0..8, |seed| {
        scenario(seed, false).map_err(|e| format!("disabled: {e}"))?;
        scenario(seed, true).map_err(|e| format!("enabled: {e}"))
    });
}
