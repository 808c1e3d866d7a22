//! An operator's partition reassignments (`kafka-reassign-partitions`, KIP-455), under
//! `acks=all` writes.
//!
//! Five nodes, three of them voters; topic `moving` of two partitions on three replicas,
//! `min.insync.replicas=2`.
//! - Partition 0 moves to the two nodes without a replica of it and one follower it has, so its
//!   leader and another replica are dropped. By seed, while the log is copied, nothing happens,
//!   a node being added is killed and started again, or the leader is killed (leadership moves
//!   among the replicas the move started from) and started again. The move must complete within
//!   a bound: the replicas are the target, none is being added or removed, the ISR is the
//!   target, ListPartitionReassignments lists nothing, the dropped nodes removed their copies
//!   and every replica kept holds the leader's bytes. Then the one replica kept from before is
//!   killed: the two added ones must serve every acknowledged write, and take new ones.
//! - Partition 1 is moved onto a node that is down, so it cannot complete: it is listed with
//!   the replicas being added and removed, and a cancel puts back the replicas it had; a second
//!   cancel answers NO_REASSIGNMENT_IN_PROGRESS.
//! - Refusals change nothing: a target naming an unregistered broker or one twice
//!   (INVALID_REPLICA_ASSIGNMENT), an unknown partition (UNKNOWN_TOPIC_OR_PARTITION), and a
//!   partition named twice in one request (INVALID_REQUEST).

use std::time::Duration;

use weir_scenarios::writes::Writes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::codes;
use weir_sim::client::reassign::{Ongoing, PartitionKey};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// How long a move may take, or a node to be back in an ISR.
const MOVE_BOUND: Duration = Duration::from_secs(60);
/// Rounds of writes before the move, so that the nodes added copy a log of some length.
const ROUNDS_BEFORE: usize = 40;

type Changes = Vec<(&'static str, i32, Option<Vec<i32>>)>;

fn alter(
    c: &mut Cluster,
    via: usize,
    changes: Changes,
) -> Result<std::collections::BTreeMap<PartitionKey, i16>, String> {
    let addr = c.addr(via);
    c.client_call(Duration::from_secs(40), move |env| async move {
        let mut client = Client::new(env, addr, "operator");
        client.alter_reassignments(&changes).await
    })
    .ok_or("AlterPartitionReassignments was not answered")?
    .map_err(|e| format!("AlterPartitionReassignments: {e}"))
}

fn list(
    c: &mut Cluster,
    via: usize,
) -> Result<std::collections::BTreeMap<PartitionKey, Ongoing>, String> {
    let addr = c.addr(via);
    c.client_call(Duration::from_secs(40), move |env| async move {
        let mut client = Client::new(env, addr, "operator");
        client.list_reassignments().await
    })
    .ok_or("ListPartitionReassignments was not answered")?
    .map_err(|e| format!("ListPartitionReassignments: {e}"))
}

fn answered(c: &mut Cluster, via: usize, changes: Changes, code: i16) -> Result<(), String> {
    let keys: Vec<PartitionKey> = changes.iter().map(|(t, p, _)| ((*t).to_owned(), *p)).collect();
    let got = alter(c, via, changes)?;
    for key in keys {
        ensure(got.get(&key) == Some(&code), || format!("{key:?}: answered {got:?}, not {code}"))?;
    }
    Ok(())
}

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { voters: 3, leader_rebalance_secs: None, ..ClusterSpec::combined(5) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, "moving", 2, 3, &[("min.insync.replicas", "2")])
        .map_err(|e| e.to_string())?;
    for p in 0..2 {
        c.await_isr_size(("moving", p), 3, MOVE_BOUND)?;
    }
    let before = c.committed_partition("moving", 0).ok_or("no partition")?;
    let spares: Vec<i32> =
        (0..spec.nodes).map(node_id).filter(|b| !before.replicas.contains(b)).collect();
    let kept = *before.isr.iter().find(|&&r| r != before.leader).ok_or("a lone replica")?;
    let target = vec![spares[0], spares[1], kept];
    let via = c.ix_of(kept).ok_or("no node")?;
    let mut writes = Writes::new("moving", 2, via);
    for round in 0..ROUNDS_BEFORE {
        writes.round(&mut c, &format!("before{round}"))?;
    }

    answered(&mut c, via, vec![("moving", 0, Some(target.clone()))], codes::NONE)?;
    match seed % 3 {
        1 => {
            let added = c.ix_of(spares[(seed / 3 % 2) as usize]).ok_or("no node")?;
            c.run_for(Duration::from_millis(200 + seed % 500));
            c.sim.kill(c.nodes[added]);
            writes.round(&mut c, "added-down")?;
            c.run_for(Duration::from_secs(3));
            c.sim.start(c.nodes[added]);
        }
        2 => {
            let leader = c.ix_of(before.leader).ok_or("no node")?;
            c.run_for(Duration::from_millis(seed % 300));
            c.sim.kill(c.nodes[leader]);
            writes.round(&mut c, "leader-down")?;
            c.run_for(Duration::from_secs(3));
            c.sim.start(c.nodes[leader]);
        }
        _ => {}
    }
    writes.round(&mut c, "moving")?;
    let done = c.run_until(MOVE_BOUND, |c| {
        c.committed_partition("moving", 0).is_some_and(|p| !p.reassigning())
    });
    let after = c.committed_partition("moving", 0).ok_or("no partition")?;
    ensure(done, || format!("the move did not complete within {MOVE_BOUND:?}: {after:?}"))?;
    ensure(after.replicas == target, || format!("moved to {:?}, not {target:?}", after.replicas))?;
    let mut isr = after.isr.clone();
    isr.sort_unstable();
    let mut want = target.clone();
    want.sort_unstable();
    ensure(isr == want, || format!("the ISR is {:?} after the move to {target:?}", after.isr))?;
    ensure(target.contains(&after.leader), || format!("led by {} after the move", after.leader))?;
    // The node asked lists from its own metadata, which follows the controller's.
    let mut listed = list(&mut c, via)?;
    for _ in 0..20 {
        if !listed.contains_key(&("moving".to_owned(), 0)) {
            break;
        }
        c.run_for(Duration::from_millis(250));
        listed = list(&mut c, via)?;
    }
    ensure(!listed.contains_key(&("moving".to_owned(), 0)), || {
        format!("still listed: {listed:?}")
    })?;
    writes.round(&mut c, "moved")?;
    let folder = "moving-0".to_owned();
    for &dropped in before.replicas.iter().filter(|r| !target.contains(r)) {
        let ix = c.ix_of(dropped).ok_or("no node")?;
        let mut gone = false;
        for _ in 0..MOVE_BOUND.as_secs() {
            gone = c.partition_folders(ix).is_some_and(|folders| !folders.contains(&folder));
            if gone {
                break;
            }
            c.run_for(Duration::from_secs(1));
        }
        ensure(gone, || format!("node {dropped}, dropped, still holds {folder}"))?;
    }
    c.replicas_converged("moving", 0)?;
    writes.check_read_back(&mut c)?;

    // The one replica kept from before goes: the two added serve everything acknowledged.
    c.sim.kill(c.nodes[via]);
    let moved = c.run_until(MOVE_BOUND, |c| {
        c.committed_partition("moving", 0).is_some_and(|p| p.leader != kept && p.leader > 0)
    });
    ensure(moved, || "partition 0 found no leader among the replicas added".to_owned())?;
    let other = c.ix_of(spares[0]).ok_or("no node")?;
    let mut more = Writes::new("moving", 2, other);
    more.round(&mut c, "kept-down")?;
    writes.check_read_back(&mut c)?;
    more.check_read_back(&mut c)?;
    c.sim.start(c.nodes[via]);
    c.await_isr_size(("moving", 0), 3, MOVE_BOUND)?;

    // Partition 1 onto a node that is down: it cannot complete, and is cancelled.
    let p1 = c.committed_partition("moving", 1).ok_or("no partition")?;
    let absent = (0..spec.nodes)
        .map(node_id)
        .find(|b| !p1.replicas.contains(b) && *b != node_id(via) && *b != node_id(other))
        .ok_or("no node outside partition 1")?;
    let absent_ix = c.ix_of(absent).ok_or("no node")?;
    c.sim.kill(c.nodes[absent_ix]);
    let mut stuck = p1.replicas.clone();
    stuck[0] = absent;
    answered(&mut c, other, vec![("moving", 1, Some(stuck.clone()))], codes::NONE)?;
    c.run_for(Duration::from_secs(5));
    let listed = list(&mut c, other)?;
    let expected = Ongoing {
        replicas: stuck.iter().copied().chain([p1.replicas[0]]).collect(),
        adding: vec![absent],
        removing: vec![p1.replicas[0]],
    };
    let key = ("moving".to_owned(), 1);
    ensure(listed.get(&key) == Some(&expected), || {
        format!("listed {listed:?}, not {expected:?} for partition 1")
    })?;
    answered(&mut c, other, vec![("moving", 1, None)], codes::NONE)?;
    let back = c.committed_partition("moving", 1).ok_or("no partition")?;
    let mut replicas = back.replicas.clone();
    replicas.sort_unstable();
    let mut original = p1.replicas.clone();
    original.sort_unstable();
    ensure(replicas == original && !back.reassigning(), || {
        format!("after the cancel: {back:?}, not on {original:?}")
    })?;
    answered(&mut c, other, vec![("moving", 1, None)], codes::NO_REASSIGNMENT_IN_PROGRESS)?;
    c.sim.start(c.nodes[absent_ix]);

    // Refusals change nothing.
    let now = c.committed_partition("moving", 1).ok_or("no partition")?;
    let twice = vec![now.replicas[0], now.replicas[0]];
    answered(
        &mut c,
        other,
        vec![("moving", 1, Some(vec![99]))],
        codes::INVALID_REPLICA_ASSIGNMENT,
    )?;
    answered(&mut c, other, vec![("moving", 1, Some(twice))], codes::INVALID_REPLICA_ASSIGNMENT)?;
    answered(&mut c, other, vec![("moving", 7, Some(vec![1]))], codes::UNKNOWN_TOPIC_OR_PARTITION)?;
    let same_twice = vec![("moving", 1, Some(vec![1])), ("moving", 1, Some(vec![2]))];
    answered(&mut c, other, same_twice, codes::INVALID_REQUEST)?;
    let unchanged = c.committed_partition("moving", 1).ok_or("no partition")?;
    ensure(unchanged.replicas == now.replicas && !unchanged.reassigning(), || {
        format!("a refusal changed {now:?} to {unchanged:?}")
    })?;
    writes.round(&mut c, "end")?;
    writes.check_read_back(&mut c)?;
    c.watch_verdict()
}

#[test]
fn operator_reassigns_partitions() {
    for_each_seed("operator_reassigns_partitions", 0..6, scenario);
}
