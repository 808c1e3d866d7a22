//! Fault scenario: a controller voter comes back on a new, empty disk while another voter,
//! cut off for a while, holds a stale metadata log. Between them they are a majority of the
//! three voters; if the empty voter granted its vote to the stale one, as plain Raft lets a
//! voter do for any candidate whose log is at least as long as its own, the stale voter would
//! lead and the metadata committed without it (a topic) would be lost everywhere. A voter that
//! holds no entry votes only for candidates that hold none either (a cluster's first election):
//! the two wait for the third voter, which holds the committed log, and the topic survives.
//! (A static quorum cannot tell a voter that lost its disk from one that never had data; this
//! guard covers one voter at a time.)

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let active = c.active_controller().ok_or("no active controller")?;
    let stale = (0..3).find(|&ix| ix != active).ok_or("no other voter")?;
    let replaced = (0..3).find(|&ix| ix != active && ix != stale).ok_or("no third voter")?;
    let others: Vec<_> = [active, replaced].iter().map(|&ix| c.nodes[ix]).collect();
    c.sim.partition(&[c.nodes[stale]], &others);
    c.create_topic(active, "committed", 1).map_err(|e| e.to_string())?;
    ensure(c.committed_image().is_some_and(|i| i.topic("committed").is_some()), || {
        "the topic was not committed".to_owned()
    })?;
    // The voter holding the committed log goes away; the replaced one returns empty, and the
    // stale one is reachable again.
    c.sim.kill(c.nodes[active]);
    c.sim.wipe(c.nodes[replaced]);
    c.sim.start(c.nodes[replaced]);
    c.sim.heal_all();
    c.run_for(Duration::from_secs(15));
    if let Some(image) = c.committed_image() {
        ensure(image.topic("committed").is_some(), || {
            format!(
                "node{} leads without the committed topic",
                c.active_controller().map_or(0, |ix| ix + 1)
            )
        })?;
    }
    c.sim.start(c.nodes[active]);
    c.settle("the third voter's return")?;
    let image = c.committed_image().ok_or("no committed image")?;
    ensure(image.topic("committed").is_some(), || "the committed topic is gone".to_owned())?;
    c.watch_verdict()
}

#[test]
fn controller_voter_on_a_new_disk_elects_no_stale_controller() {
    for_each_seed("controller_voter_on_a_new_disk_elects_no_stale_controller", 0..8, scenario);
}
