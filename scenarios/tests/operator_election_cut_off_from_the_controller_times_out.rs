//! An operator's ElectLeaders through a node cut off from every other node (so from the active
//! controller or, where it is the active controller, from the quorum it needs) answers
//! REQUEST_TIMED_OUT for each partition named, within the request's timeout (the client waits
//! one second longer), even where no election is needed: a controller that may have been
//! deposed cannot vouch for "not needed". Once the cut heals, the same request is answered.
//!
//! Three nodes, a topic of two partitions replicated three ways, automatic rebalancing off.

use std::time::Duration;

use weir_scenarios::admin::{answers, elect};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::codes;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// The timeout the simulated client gives ElectLeaders.
const ELECTION_TIMEOUT: Duration = weir_sim::client::REQUEST_TIMEOUT;
/// How long the ISR may take to fill, and the cluster to heal.
const BOUND: Duration = Duration::from_secs(60);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { leader_rebalance_secs: None, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, "t", 2, 3, &[]).map_err(|e| e.to_string())?;
    for p in 0..2 {
        c.await_isr_size(("t", p), 3, BOUND)?;
    }
    // By seed, the active controller itself (cut off from its quorum, it cannot prove that
    // "not needed" still holds) or another node.
    let active = c.active_controller().ok_or("no active controller")?;
    let via =
        if seed.is_multiple_of(2) { active } else { (active + 1 + (seed / 2 % 2) as usize) % 3 };
    let others: Vec<_> = (0..3).filter(|&ix| ix != via).map(|ix| c.nodes[ix]).collect();
    c.sim.partition(&[c.nodes[via]], &others);
    let asked = Some(vec![("t", 0), ("t", 1)]);
    let sent_at = c.sim.now();
    let cut = elect(&mut c, via, false, asked.clone())?;
    let took = c.sim.now() - sent_at;
    // The request's timeout (the client gives 5 s), plus delivery.
    ensure(took <= ELECTION_TIMEOUT + Duration::from_millis(500), || {
        format!("answered after {took:?}")
    })?;
    let expected =
        answers(&[("t", 0, codes::REQUEST_TIMED_OUT), ("t", 1, codes::REQUEST_TIMED_OUT)]);
    ensure(cut == expected, || format!("cut off from the controller: {cut:?}"))?;

    c.sim.heal_all();
    let mut answered = None;
    let until = c.sim.now() + BOUND;
    while c.sim.now() < until {
        let again = elect(&mut c, via, false, asked.clone())?;
        if again.values().all(|&code| code != codes::REQUEST_TIMED_OUT) {
            answered = Some(again);
            break;
        }
        c.run_for(Duration::from_secs(1));
    }
    let settled = [codes::NONE, codes::ELECTION_NOT_NEEDED, codes::PREFERRED_LEADER_NOT_AVAILABLE];
    ensure(
        answered.as_ref().is_some_and(|a| a.len() == 2 && a.values().all(|c| settled.contains(c))),
        || format!("after the heal: {answered:?}"),
    )?;
    c.watch_verdict()
}

#[test]
fn operator_election_cut_off_from_the_controller_times_out() {
    for_each_seed("operator_election_cut_off_from_the_controller_times_out", 0..9, scenario);
}
