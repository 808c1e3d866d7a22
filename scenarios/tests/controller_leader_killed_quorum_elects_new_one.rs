//! Fault scenario: the active controller of a 3-node cluster is killed (or loses power). The
//! two survivors must elect a new active controller within a bound, keep every committed
//! record, and commit new metadata (a topic created through a survivor, usable at once); the
//! old controller, restarted, must catch up to the same image. The metadata watch checks every
//! step: no two nodes ever hold different images at one offset.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, SETTLE_BOUND};

/// Within how long of the kill a survivor must be the active controller (election timeouts
/// are 1–2 s; the bound leaves room for a split vote or two).
const ELECTION_BOUND: Duration = Duration::from_secs(10);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_topic(0, "before", 3).map_err(|e| e.to_string())?;
    let before = c.committed_image().ok_or("no committed image")?;
    let old = c.active_controller().ok_or("no active controller")?;
    let old_term_offset = before.offset;
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[old]);
    } else {
        c.sim.power_fail(c.nodes[old]);
    }
    let killed_at = c.sim.now();
    ensure(
        c.run_until(ELECTION_BOUND, |c| c.active_controller().is_some_and(|ix| ix != old)),
        || format!("no new active controller within {ELECTION_BOUND:?} of killing node{}", old + 1),
    )?;
    let elected_after = c.sim.now() - killed_at;
    println!(
        "seed {seed:#x}: node{} active {elected_after:?} after node{} died",
        c.active_controller().map_or(0, |ix| ix + 1),
        old + 1
    );
    let new = c.active_controller().ok_or("the new controller vanished")?;
    let image = c.committed_image().ok_or("no committed image")?;
    ensure(image.offset >= old_term_offset && image.topic("before").is_some(), || {
        format!(
            "the new controller lost committed metadata: offset {} < {old_term_offset}",
            image.offset
        )
    })?;
    // New metadata commits through a survivor that is not the controller (or is, by chance).
    let via = (0..3).find(|&ix| ix != old && ix != new).unwrap_or(new);
    c.create_topic(via, "after", 2).map_err(|e| e.to_string())?;
    let image = c.committed_image().ok_or("no committed image")?;
    ensure(image.topic("after").is_some(), || "'after' is not committed".to_owned())?;
    for p in 0..2 {
        let leader = image.partition("after", p).ok_or("no partition")?.leader;
        // A partition placed on the dead node has no leader until it returns; the others work.
        if c.ix_of(leader).is_some_and(|ix| ix != old) {
            c.produce(via, "after", p, "x", Duration::from_secs(10))
                .ok_or_else(|| format!("after-{p} took no write"))?;
        }
    }
    c.sim.start(c.nodes[old]);
    c.settle("the restart")?;
    let committed = c.committed_image().ok_or("no committed image")?;
    let rejoined =
        c.broker(old).and_then(|b| b.controller.clone()).ok_or("old node has no controller")?;
    ensure(c.run_until(SETTLE_BOUND, |_| rejoined.image().offset >= committed.offset), || {
        "the restarted controller never caught up".to_owned()
    })?;
    ensure(rejoined.image().topic("after").is_some(), || {
        "the restarted controller lacks 'after'".to_owned()
    })?;
    c.watch_verdict()?;
    ensure(elected_after <= ELECTION_BOUND, || format!("elected after {elected_after:?}"))
}

#[test]
fn controller_leader_killed_quorum_elects_new_one() {
    for_each_seed("controller_leader_killed_quorum_elects_new_one", 0..24, scenario);
}
