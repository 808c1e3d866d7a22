//! Fault scenario (KIP-101 and KIP-279): two failovers in a row leave three replicas with
//! different tails at the same offsets, and both returning replicas must cut exactly their
//! uncommitted tails — found by asking the leader where their epochs end, never by trusting a
//! stale high watermark.
//!
//! Replicas A (leader), B, C, `min.insync.replicas=1`. A is cut off from B and C, takes
//! `acks=1` writes only it holds, and loses power. B or C (say B) is elected in a new epoch and
//! takes `acks=all` writes that both B and C hold — at the offsets of A's tail. Then B is cut
//! off from C, takes `acks=1` writes only it holds, and is killed; C is elected in a third
//! epoch and takes more `acks=all` writes. When A and B return they truncate to C's log: every
//! `acks=all` write reads back at its offset, the lone `acks=1` tails are gone, and the three
//! replicas end byte-identical.

use std::time::Duration;

use weir::controller::records::NO_LEADER;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Writes per step.
const WRITES: usize = 3;

/// Writes `WRITES` records with `acks` through node `ix`: (offset, value) of each.
fn write(
    c: &mut Cluster,
    ix: usize,
    t: &str,
    label: &str,
    acks: Acks,
) -> Result<Vec<(i64, String)>, String> {
    (0..WRITES)
        .map(|i| {
            let value = format!("{label}-{i}");
            let offset =
                c.produce_with(ix, t, 0, &value, acks).map_err(|e| format!("{label}: {e:?}"))?;
            Ok((offset, value))
        })
        .collect()
}

/// Runs until the committed leader of `t`-0 is a live node other than `old`; its index.
fn next_leader(c: &mut Cluster, t: &str, old: i32) -> Result<usize, String> {
    let elected = c.run_until(Duration::from_secs(20), |c| {
        c.committed_partition(t, 0).is_some_and(|p| p.leader != old && p.leader != NO_LEADER)
    });
    ensure(elected, || format!("no new leader after node{old}"))?;
    let p = c.committed_partition(t, 0).ok_or("no partition")?;
    c.ix_of(p.leader).ok_or_else(|| "leader is no node".to_owned())
}

fn scenario(seed: u64) -> Result<(), String> {
    // Five voters: the quorum outlives two dead replicas; replicas away from the controller.
    let spec = ClusterSpec::combined(5);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "1")];
    let (t, p) = c.create_topic_away_from_controller("t", 3, &configs)?;
    let t = t.as_str();
    let a = c.ix_of(p.leader).ok_or("no leader")?;
    let mut committed = write(&mut c, a, t, "first", Acks::All)?;
    let others: Vec<usize> =
        p.replicas.iter().filter(|&&r| r != p.leader).filter_map(|&r| c.ix_of(r)).collect();
    let others_hosts: Vec<_> = others.iter().map(|&o| c.nodes[o]).collect();
    c.sim.partition(&[c.nodes[a]], &others_hosts);
    let a_tail = write(&mut c, a, t, "a-only", Acks::Leader)?;
    c.sim.power_fail(c.nodes[a]);
    c.sim.heal_all();
    let b = next_leader(&mut c, t, p.leader)?;
    let second = c.committed_partition(t, 0).ok_or("no partition")?;
    committed.extend(write(&mut c, b, t, "second", Acks::All)?);
    let cc = *others.iter().find(|&&o| o != b).ok_or("no third replica")?;
    c.sim.partition(&[c.nodes[b]], &[c.nodes[cc]]);
    let b_tail = write(&mut c, b, t, "b-only", Acks::Leader)?;
    c.sim.kill(c.nodes[b]);
    c.sim.heal_all();
    let now = next_leader(&mut c, t, second.leader)?;
    ensure(now == cc, || format!("node{} leads, expected node{}", now + 1, cc + 1))?;
    let third = c.committed_partition(t, 0).ok_or("no partition")?;
    ensure(
        third.leader_epoch > second.leader_epoch && second.leader_epoch > p.leader_epoch,
        || format!("epochs {} → {} → {}", p.leader_epoch, second.leader_epoch, third.leader_epoch),
    )?;
    committed.extend(write(&mut c, cc, t, "third", Acks::All)?);
    c.sim.start(c.nodes[a]);
    c.sim.start(c.nodes[b]);
    c.settle("the returns")?;
    let rejoined = c.run_until(Duration::from_secs(30), |c| {
        c.committed_partition(t, 0).is_some_and(|p| p.isr.len() == 3)
    });
    ensure(rejoined, || "the returning replicas did not rejoin the ISR".to_owned())?;
    let leader =
        c.ix_of(c.committed_partition(t, 0).ok_or("no partition")?.leader).ok_or("no leader")?;
    let read = c.read_all(leader, t, 0)?;
    for (offset, value) in &committed {
        ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
            format!("{t}-0@{offset}: acked {value:?} by all, read {:?}", read.get(offset))
        })?;
    }
    for (offset, value) in a_tail.iter().chain(&b_tail) {
        ensure(read.get(offset).is_none_or(|v| v.as_ref() != value.as_bytes()), || {
            format!("{t}-0@{offset}: the uncommitted {value:?} survived")
        })?;
    }
    c.replicas_converged(t, 0)?;
    c.watch_verdict()
}

#[test]
fn double_failover_divergent_logs_truncate() {
    for_each_seed("double_failover_divergent_logs_truncate", 0..8, scenario);
}
