//! An operator's ElectLeaders (`kafka-leader-election`), with automatic rebalancing off so that
//! only the operator moves leadership.
//!
//! Five nodes. Preferred elections, on a topic of three partitions replicated three ways:
//! - with every partition led by its preferred replica, a request for all partitions elects
//!   nothing and answers none, one naming a partition answers ELECTION_NOT_NEEDED, and one
//!   naming an unknown partition UNKNOWN_TOPIC_OR_PARTITION;
//! - while the preferred replica of a partition is down (its leadership moved), a request for
//!   it answers PREFERRED_LEADER_NOT_AVAILABLE and moves nothing;
//! - once it is back in the ISR, a request for all partitions elects it (answered with no
//!   error), and every acknowledged write still reads back.
//!
//! Unclean elections, on a topic of one partition replicated twice: its follower dies and
//! leaves the ISR, then its leader dies, the last in-sync replica, so the partition has no
//! leader; the follower comes back, and with `unclean.leader.election.enable` off it stays
//! without one. An unclean election then makes the follower leader (the whole ISR), and a
//! second answers ELECTION_NOT_NEEDED.

use std::time::Duration;

use weir::controller::records::NO_LEADER;
use weir_scenarios::admin::{answers, elect};
use weir_scenarios::writes::Writes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::codes;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Partitions of the preferred-election topic, one preferred by each node.
const PARTITIONS: i32 = 3;
/// How long a node may take to be fenced, or to be back in an ISR.
const MOVE_BOUND: Duration = Duration::from_secs(60);

fn scenario(seed: u64) -> Result<(), String> {
    // Five voters: the unclean part has two nodes down at once.
    let spec = ClusterSpec { leader_rebalance_secs: None, ..ClusterSpec::combined(5) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, "spread", PARTITIONS, 3, &[("min.insync.replicas", "2")])
        .map_err(|e| e.to_string())?;
    for p in 0..PARTITIONS {
        c.await_isr_size(("spread", p), 3, MOVE_BOUND)?;
    }
    let theirs = (seed % 3) as i32;
    let preferred = c.committed_partition("spread", theirs).ok_or("no partition")?.replicas[0];
    let victim = c.ix_of(preferred).ok_or("no such node")?;
    let via = (victim + 1) % spec.nodes;
    let mut writes = Writes::new("spread", PARTITIONS, via);
    writes.round(&mut c, "before")?;

    let all = elect(&mut c, via, false, None)?;
    ensure(all.is_empty(), || format!("nothing to elect, yet answered {all:?}"))?;
    let named = elect(&mut c, via, false, Some(vec![("spread", theirs), ("nope", 0)]))?;
    let expected = answers(&[
        ("spread", theirs, codes::ELECTION_NOT_NEEDED),
        ("nope", 0, codes::UNKNOWN_TOPIC_OR_PARTITION),
    ]);
    ensure(named == expected, || format!("answered {named:?}, not {expected:?}"))?;

    c.sim.kill(c.nodes[victim]);
    let moved = c.run_until(MOVE_BOUND, |c| {
        c.committed_partition("spread", theirs).is_some_and(|r| r.leader != node_id(victim))
    });
    ensure(moved, || "the dead node's partition did not move".to_owned())?;
    writes.round(&mut c, "moved")?;
    let leader = c.committed_partition("spread", theirs).ok_or("no partition")?.leader;
    let down = elect(&mut c, via, false, Some(vec![("spread", theirs)]))?;
    let expected = answers(&[("spread", theirs, codes::PREFERRED_LEADER_NOT_AVAILABLE)]);
    ensure(down == expected, || format!("with the preferred replica down: {down:?}"))?;
    let now = c.committed_partition("spread", theirs).ok_or("no partition")?.leader;
    ensure(now == leader, || format!("leader {leader} became {now} with nothing to elect"))?;

    c.sim.start(c.nodes[victim]);
    c.await_isr_size(("spread", theirs), 3, MOVE_BOUND)?;
    let back = elect(&mut c, via, false, None)?;
    let expected = answers(&[("spread", theirs, codes::NONE)]);
    ensure(back == expected, || format!("with the preferred replica back: {back:?}"))?;
    let led = c.committed_partition("spread", theirs).ok_or("no partition")?.leader;
    ensure(led == node_id(victim), || format!("spread-{theirs} is led by {led}"))?;
    writes.round(&mut c, "after")?;
    writes.check_read_back(&mut c)?;

    // Unclean: a partition whose only in-sync replica is down, its other replica back.
    c.create_replicated_topic(via, "lonely", 1, 2, &[]).map_err(|e| e.to_string())?;
    c.await_isr_size(("lonely", 0), 2, MOVE_BOUND)?;
    let record = c.committed_partition("lonely", 0).ok_or("no partition")?;
    let (leader, follower) = (
        record.leader,
        record.replicas.iter().copied().find(|&r| r != record.leader).ok_or("one replica")?,
    );
    let (leader_ix, follower_ix) =
        (c.ix_of(leader).ok_or("no node")?, c.ix_of(follower).ok_or("no node")?);
    let third =
        (0..spec.nodes).find(|&ix| ix != leader_ix && ix != follower_ix).ok_or("two nodes")?;
    c.sim.kill(c.nodes[follower_ix]);
    c.await_isr_size(("lonely", 0), 1, MOVE_BOUND)?;
    c.sim.kill(c.nodes[leader_ix]);
    let leaderless = c.run_until(MOVE_BOUND, |c| {
        c.committed_partition("lonely", 0).is_some_and(|r| r.leader == NO_LEADER)
    });
    ensure(leaderless, || "the partition kept a leader with its ISR down".to_owned())?;
    c.sim.start(c.nodes[follower_ix]);
    let live = |c: &Cluster| c.committed_image().is_some_and(|i| i.is_live(follower));
    ensure(c.run_until(MOVE_BOUND, live), || "the follower did not come back".to_owned())?;
    c.run_for(Duration::from_secs(5));
    let record = c.committed_partition("lonely", 0).ok_or("no partition")?;
    ensure(record.leader == NO_LEADER && record.isr == vec![leader], || {
        format!("without unclean election allowed: {record:?}")
    })?;
    let unclean = elect(&mut c, third, true, Some(vec![("lonely", 0)]))?;
    let expected = answers(&[("lonely", 0, codes::NONE)]);
    ensure(unclean == expected, || format!("the unclean election answered {unclean:?}"))?;
    let record = c.committed_partition("lonely", 0).ok_or("no partition")?;
    ensure(record.leader == follower && record.isr == vec![follower], || {
        format!("after the unclean election: {record:?}")
    })?;
    let again = elect(&mut c, third, true, Some(vec![("lonely", 0)]))?;
    let expected = answers(&[("lonely", 0, codes::ELECTION_NOT_NEEDED)]);
    ensure(again == expected, || format!("a second unclean election answered {again:?}"))?;
    c.watch_verdict()
}

#[test]
fn operator_elects_leaders() {
    for_each_seed("operator_elects_leaders", 0..6, scenario);
}
