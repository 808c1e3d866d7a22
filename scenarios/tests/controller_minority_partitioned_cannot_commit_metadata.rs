//! Fault scenario: the active controller of a 3-node cluster is cut off from the other two
//! (clients still reach it). While it is in the minority, nothing may commit through it: a
//! topic created through it must not be acknowledged, and no node may apply it while the
//! partition lasts. The majority elects a new controller and commits a topic of its own. After
//! the heal the old controller follows the majority's log, and the metadata watch proves no two
//! nodes ever held different images at one offset. (A create that timed out may still be
//! committed after the heal, by the majority, when the broker's retry reaches it — Kafka's
//! meaning of REQUEST_TIMED_OUT; one refused outright must never be.)

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::codes;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, SETTLE_BOUND};

/// Within how long the majority must elect a new active controller.
const ELECTION_BOUND: Duration = Duration::from_secs(10);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let old = c.active_controller().ok_or("no active controller")?;
    let majority: Vec<usize> = (0..3).filter(|&ix| ix != old).collect();
    let majority_hosts: Vec<_> = majority.iter().map(|&ix| c.nodes[ix]).collect();
    c.sim.partition(&[c.nodes[old]], &majority_hosts);
    // A create through the isolated controller's node: it must not be acknowledged.
    let minority = c.create_topic(old, "minority", 1);
    let Err(refusal) = minority else {
        return Err("a topic created in the minority was acknowledged".to_owned());
    };
    let refused_outright =
        !refusal.is_indeterminate() && refusal.code() != Some(codes::REQUEST_TIMED_OUT);
    let isolated = c.broker(old).and_then(|b| b.controller.clone()).ok_or("no controller")?;
    for ix in 0..3 {
        let broker = c.broker(ix).ok_or("a node is down")?;
        let controller = broker.controller.as_ref().ok_or("no controller")?;
        let membership = broker.membership().ok_or("no membership")?;
        ensure(
            controller.image().topic("minority").is_none()
                && membership.image().topic("minority").is_none(),
            || format!("node{} applied a topic created in the minority", ix + 1),
        )?;
    }
    ensure(
        c.run_until(ELECTION_BOUND, |c| {
            majority.iter().any(|&ix| c.active_controller() == Some(ix))
        }),
        || format!("the majority elected no controller within {ELECTION_BOUND:?}"),
    )?;
    c.create_topic(majority[seed as usize % 2], "majority", 1).map_err(|e| e.to_string())?;
    ensure(isolated.image().topic("majority").is_none(), || {
        "the isolated controller saw a record while cut off".to_owned()
    })?;
    ensure(!isolated.is_active(), || {
        "the isolated controller still claims to be active".to_owned()
    })?;
    c.sim.heal_all();
    c.settle("the heal")?;
    let committed = c.committed_image().ok_or("no committed image")?;
    ensure(committed.topic("majority").is_some(), || "the majority's topic was lost".to_owned())?;
    ensure(!refused_outright || committed.topic("minority").is_none(), || {
        format!(
            "a create refused outright in the minority ({refusal}) was committed after the heal"
        )
    })?;
    ensure(c.run_until(SETTLE_BOUND, |_| isolated.image().offset >= committed.offset), || {
        "the old controller never caught up with the majority".to_owned()
    })?;
    ensure(isolated.image().topic("majority").is_some(), || {
        "the old controller lacks 'majority'".to_owned()
    })?;
    c.watch_verdict()
}

#[test]
fn controller_minority_partitioned_cannot_commit_metadata() {
    for_each_seed("controller_minority_partitioned_cannot_commit_metadata", 0..24, scenario);
}
