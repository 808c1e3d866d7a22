//! An operator's ElectLeaders naming more partitions than one metadata entry of elections holds
//! (`PREFERRED_ELECTIONS_MAX`): the broker sends them to the controller in several entries, and
//! every partition is answered, those of the last entry included.
//!
//! Three nodes, automatic rebalancing off; a topic of `PREFERRED_ELECTIONS_MAX + 5` partitions
//! replicated twice. One node dies and comes back, so that the partitions it prefers are led by
//! their other replica, some of them among the last five. A preferred election naming every
//! partition must give each of those back to it (no error) and answer every other
//! ELECTION_NOT_NEEDED.

use std::time::Duration;

use weir::controller::logic::PREFERRED_ELECTIONS_MAX;
use weir_scenarios::admin::elect;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::codes;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Partitions of the topic: five more than one entry holds.
const PARTITIONS: i32 = PREFERRED_ELECTIONS_MAX as i32 + 5;
/// How long a node may take to be fenced, or to be back in an ISR.
const MOVE_BOUND: Duration = Duration::from_secs(120);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { leader_rebalance_secs: None, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, "many", PARTITIONS, 2, &[]).map_err(|e| e.to_string())?;
    let all_in_sync = |c: &Cluster| {
        (0..PARTITIONS).all(|p| c.committed_partition("many", p).is_some_and(|r| r.isr.len() == 2))
    };
    ensure(c.run_until(MOVE_BOUND, all_in_sync), || "the topic's ISRs never filled".to_owned())?;
    let victim = (seed % 3) as usize;
    let preferred = |p: i32, c: &Cluster| {
        c.committed_partition("many", p).is_some_and(|r| r.replicas[0] == node_id(victim))
    };
    let theirs: Vec<i32> = (0..PARTITIONS).filter(|&p| preferred(p, &c)).collect();
    let last_entry = PREFERRED_ELECTIONS_MAX as i32;
    ensure(theirs.iter().any(|&p| p >= last_entry), || {
        format!("node{} prefers none of the partitions past {last_entry}", victim + 1)
    })?;
    c.sim.kill(c.nodes[victim]);
    let moved = c.run_until(MOVE_BOUND, |c| {
        theirs
            .iter()
            .all(|&p| c.committed_partition("many", p).is_some_and(|r| r.leader != node_id(victim)))
    });
    ensure(moved, || "the dead node's partitions did not move".to_owned())?;
    c.sim.start(c.nodes[victim]);
    ensure(c.run_until(MOVE_BOUND, all_in_sync), || "the node did not rejoin".to_owned())?;
    let via = (victim + 1) % spec.nodes;
    let named = (0..PARTITIONS).map(|p| ("many", p)).collect();
    let answered = elect(&mut c, via, false, Some(named))?;
    ensure(answered.len() == PARTITIONS as usize, || {
        format!("{} of {PARTITIONS} partitions answered", answered.len())
    })?;
    for ((_, p), code) in &answered {
        let want = if theirs.contains(p) { codes::NONE } else { codes::ELECTION_NOT_NEEDED };
        ensure(*code == want, || format!("many-{p} answered {code}, not {want}"))?;
    }
    let led_back = theirs
        .iter()
        .all(|&p| c.committed_partition("many", p).is_some_and(|r| r.leader == node_id(victim)));
    ensure(led_back, || format!("node{} does not lead all it prefers", victim + 1))?;
    c.watch_verdict()
}

#[test]
fn operator_elects_more_leaders_than_one_entry_holds() {
    for_each_seed("operator_elects_more_leaders_than_one_entry_holds", 0..3, scenario);
}
