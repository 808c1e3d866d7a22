//! Fault scenario: a broker's disk is replaced (every file gone, synced or not) and the broker
//! comes back at once under the same node id, within its session, so the controller never
//! fenced it and it was never dropped from an ISR. It still holds no record, so it must not
//! stay in sync or lead on the strength of what its old disk held: its new data folder has a
//! new directory id, and the controller takes it out of every ISR when it registers with it.
//!
//! - Even seeds replace the leader's disk: the next in-sync replica leads, every acknowledged
//!   write is read back from it, and the returning broker catches up and rejoins.
//! - Odd seeds replace a follower's disk, hold it from fetching, and then stop the two other
//!   replicas: the partition must wait without a leader (the empty replica is not eligible)
//!   rather than let the empty log lead and the others truncate to it.
//! - Another replaces the disk of the last in-sync replica: no replica holds the acknowledged
//!   writes any more, so the partition stays without a leader until an operator allows an
//!   unclean election, which then serves it again at once.
//! - The last holds back a leader's request to add a caught-up follower to the ISR until the
//!   follower is back on a new disk: the request names the follower's previous run, and the
//!   controller refuses it (KIP-903).
//!
//! Disks are replaced on broker-only nodes here; a controller voter's replaced disk is
//! `controller_voter_on_a_new_disk_elects_no_stale_controller`.

use std::time::Duration;

use weir::controller::records::{NO_LEADER, PartitionRecord};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Five nodes: three voters, and two broker-only nodes whose disks may be replaced.
fn spec() -> ClusterSpec {
    ClusterSpec { voters: 3, ..ClusterSpec::combined(5) }
}

/// Whether node `ix` votes in the metadata quorum.
fn voter(ix: usize) -> bool {
    ix < spec().voters
}

/// Creates one-partition, three-replica topics until `wanted` (given the leader's node index
/// and the other replicas') accepts one; its name and committed partition.
fn create_topic_where(
    c: &mut Cluster,
    configs: &[(&str, &str)],
    wanted: impl Fn(usize, &[usize]) -> bool,
) -> Result<(String, PartitionRecord), String> {
    const TRIES: usize = 24;
    for n in 0..TRIES {
        let name = format!("t{n}");
        c.create_replicated_topic(0, &name, 1, 3, configs).map_err(|e| e.to_string())?;
        let p = c.committed_partition(&name, 0).ok_or("no partition")?;
        let leader = c.ix_of(p.leader).ok_or("no leader")?;
        let others: Vec<usize> =
            p.replicas.iter().filter(|&&r| r != p.leader).filter_map(|&r| c.ix_of(r)).collect();
        if wanted(leader, &others) {
            return Ok((name, p));
        }
    }
    Err(format!("none of {TRIES} topics had the replicas wanted"))
}

/// Produces `count` records with acks=all at node `ix`: their offsets and values.
fn produce_acked(
    c: &mut Cluster,
    ix: usize,
    t: &str,
    count: usize,
) -> Result<Vec<(i64, String)>, String> {
    let mut acked = Vec::new();
    for i in 0..count {
        let value = format!("acked-{i}");
        let offset = c.produce_with(ix, t, 0, &value, Acks::All).map_err(|e| format!("{e:?}"))?;
        acked.push((offset, value));
    }
    Ok(acked)
}

/// Every acknowledged record is read back from node `ix`.
fn read_back(c: &mut Cluster, ix: usize, t: &str, acked: &[(i64, String)]) -> Result<(), String> {
    let read = c.read_all(ix, t, 0)?;
    for (offset, value) in acked {
        ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
            format!(
                "{t}-0@{offset}: acked {value:?}, read {:?} from node{}",
                read.get(offset),
                ix + 1
            )
        })?;
    }
    Ok(())
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, spec())?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    let leader_replaced = seed.is_multiple_of(2);
    let (t, p) = create_topic_where(&mut c, &configs, |leader, others| {
        // With a follower replaced, the leader is the other broker-only node, so that the
        // replicas stopped later leave two voters running.
        !voter(leader) && (leader_replaced || others.iter().any(|&f| !voter(f)))
    })?;
    let t = t.as_str();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let acked = produce_acked(&mut c, leader, t, 10)?;
    if leader_replaced {
        c.sim.wipe(c.nodes[leader]);
        c.sim.start(c.nodes[leader]);
        c.settle("the leader's return on a new disk")?;
        let now = c.committed_partition(t, 0).ok_or("no partition")?;
        let new_leader = c.ix_of(now.leader).ok_or("no leader")?;
        ensure(new_leader != leader, || format!("the empty replica leads: {now:?}"))?;
        read_back(&mut c, new_leader, t, &acked)?;
        c.await_isr_size((t, 0), 3, Duration::from_secs(30))?;
        c.replicas_converged(t, 0)?;
    } else {
        let replaced = p
            .replicas
            .iter()
            .filter_map(|&r| c.ix_of(r))
            .find(|&ix| ix != leader && !voter(ix))
            .ok_or("no broker-only follower")?;
        let other = p
            .replicas
            .iter()
            .filter_map(|&r| c.ix_of(r))
            .find(|&ix| ix != leader && ix != replaced);
        let other = other.ok_or("no third replica")?;
        c.sim.wipe(c.nodes[replaced]);
        // Its fetches do not reach the leader: it stays empty.
        c.sim.partition(&[c.nodes[replaced]], &[c.nodes[leader]]);
        c.sim.start(c.nodes[replaced]);
        let back = c.run_until(Duration::from_secs(20), |c| {
            c.broker(replaced).is_some_and(|b| b.membership().is_some_and(|m| m.caught_up()))
        });
        ensure(back, || "the replaced broker did not register".to_owned())?;
        c.sim.kill(c.nodes[leader]);
        c.sim.kill(c.nodes[other]);
        c.run_for(Duration::from_millis(spec().session_timeout_ms + 5_000));
        let waiting = c.committed_partition(t, 0).ok_or("no partition")?;
        let replaced_id = node_id(replaced);
        ensure(waiting.leader == NO_LEADER && !waiting.isr.contains(&replaced_id), || {
            format!("the replica on a new disk is in sync or leads: {waiting:?}")
        })?;
        c.sim.heal_all();
        c.sim.start(c.nodes[leader]);
        c.sim.start(c.nodes[other]);
        c.settle("the in-sync replicas' return")?;
        let now = c.committed_partition(t, 0).ok_or("no partition")?;
        let new_leader = c.ix_of(now.leader).ok_or("no leader")?;
        ensure(new_leader != replaced, || format!("the replica on a new disk leads: {now:?}"))?;
        c.await_isr_size((t, 0), 3, Duration::from_secs(30))?;
        read_back(&mut c, new_leader, t, &acked)?;
        c.replicas_converged(t, 0)?;
    }
    c.watch_verdict()
}

#[test]
fn broker_disk_replaced_never_leads_from_an_empty_log() {
    for_each_seed("broker_disk_replaced_never_leads_from_an_empty_log", 0..8, scenario);
}

fn last_replica_scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, spec())?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "1")];
    let (t, p) = create_topic_where(&mut c, &configs, |leader, _| !voter(leader))?;
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
    produce_acked(&mut c, leader, t, 10)?;
    c.sim.wipe(c.nodes[leader]);
    c.sim.start(c.nodes[leader]);
    for &f in &followers {
        c.sim.start(c.nodes[f]);
    }
    c.run_for(Duration::from_millis(spec().session_timeout_ms + 5_000));
    let waiting = c.committed_partition(t, 0).ok_or("no partition")?;
    ensure(waiting.leader == NO_LEADER && !waiting.isr.contains(&p.leader), || {
        format!("a replica without the acknowledged writes leads or is in sync: {waiting:?}")
    })?;
    // The operator accepts the loss: allowing an unclean election serves the partition again.
    let (addr, topic) = (c.addr(0), t.to_owned());
    let allowed = c.client_call(Duration::from_secs(30), move |env| async move {
        let mut client = weir_sim::client::Client::new(env, addr, "operator");
        let setting = ("unclean.leader.election.enable", "true");
        client.set_topic_config(&topic, setting, Duration::from_secs(30)).await
    });
    ensure(matches!(allowed, Some(Ok(()))), || format!("enabling unclean election: {allowed:?}"))?;
    c.settle("the unclean election")?;
    let now = c.committed_partition(t, 0).ok_or("no partition")?;
    let leader = c.ix_of(now.leader).ok_or("no leader")?;
    ensure(now.isr == vec![now.leader], || format!("after the unclean election: {now:?}"))?;
    produce_acked(&mut c, leader, t, 1)?;
    c.watch_verdict()
}

#[test]
fn last_in_sync_replica_on_a_new_disk_leaves_the_partition_without_a_leader() {
    for_each_seed(
        "broker_disk_replaced_never_leads_from_an_empty_log",
        0..8,
        last_replica_scenario,
    );
}

/// The race KIP-903 closes: the leader asks for a caught-up follower to rejoin the ISR, the
/// request is held on its way to the controller, and meanwhile the follower's disk is replaced
/// and it registers again (it was out of the ISR, so its registration changes no partition).
/// The held request, based on the current partition epoch, must still be refused: it names the
/// follower's previous run, whose log is gone.
fn stale_join_scenario(seed: u64) -> Result<(), String> {
    // A long session, so that holding the leader's heartbeats does not fence it; a short lag
    // bound, so that the cut follower leaves the ISR soon.
    let spec = ClusterSpec { session_timeout_ms: 20_000, replica_lag_ms: 3_000, ..spec() };
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    let (t, p) = create_topic_where(&mut c, &configs, |leader, others| {
        !voter(leader) && others.iter().any(|&f| !voter(f))
    })?;
    let t = t.as_str();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let replicas: Vec<usize> = p.replicas.iter().filter_map(|&r| c.ix_of(r)).collect();
    let replaced = *replicas.iter().find(|&&ix| ix != leader && !voter(ix)).ok_or("no follower")?;
    let (l, f) = (c.nodes[leader], c.nodes[replaced]);
    let mut acked = produce_acked(&mut c, leader, t, 5)?;
    c.sim.clog(l, f);
    c.sim.clog(f, l);
    let replaced_id = node_id(replaced);
    let out = c.run_until(Duration::from_secs(10), |c| {
        c.committed_partition(t, 0).is_some_and(|q| !q.isr.contains(&replaced_id))
    });
    ensure(out, || "the cut follower did not leave the ISR".to_owned())?;
    for (offset, value) in produce_acked(&mut c, leader, t, 5)? {
        acked.push((offset, value));
    }
    let controller = c.active_controller().ok_or("no active controller")?;
    c.sim.clog(l, c.nodes[controller]);
    c.sim.unclog(l, f);
    c.sim.unclog(f, l);
    let caught_up = c.run_until(Duration::from_secs(5), |c| {
        c.log_end(replaced, t, 0).is_some() && c.log_end(replaced, t, 0) == c.log_end(leader, t, 0)
    });
    ensure(caught_up, || "the follower did not catch up".to_owned())?;
    // A few rounds of the leader's ISR checks: its request to add the follower is held.
    c.sim.run_for(Duration::from_secs(1));
    c.sim.wipe(f);
    // Back on its new disk, it copies nothing yet.
    c.sim.clog(l, f);
    c.sim.start(f);
    let back = c.run_until(Duration::from_secs(10), |c| {
        c.broker(replaced).is_some_and(|b| b.membership().is_some_and(|m| m.caught_up()))
    });
    ensure(back, || "the replaced broker did not register".to_owned())?;
    c.sim.unclog(l, c.nodes[controller]);
    c.run_for(Duration::from_millis(500));
    let now = c.committed_partition(t, 0).ok_or("no partition")?;
    let empty = c.log_end(replaced, t, 0).unwrap_or(0) < c.log_end(leader, t, 0).unwrap_or(0);
    ensure(!(empty && now.isr.contains(&replaced_id)), || {
        format!("the follower on a new disk joined the ISR before catching up: {now:?}")
    })?;
    c.sim.unclog(l, f);
    c.settle("the held request's delivery")?;
    c.await_isr_size((t, 0), 3, Duration::from_secs(30))?;
    let now = c.committed_partition(t, 0).ok_or("no partition")?;
    let new_leader = c.ix_of(now.leader).ok_or("no leader")?;
    read_back(&mut c, new_leader, t, &acked)?;
    c.replicas_converged(t, 0)?;
    c.watch_verdict()
}

#[test]
fn a_join_asked_for_a_follower_before_its_disk_was_replaced_is_refused() {
    for_each_seed("broker_disk_replaced_never_leads_from_an_empty_log", 0..8, stale_join_scenario);
}
