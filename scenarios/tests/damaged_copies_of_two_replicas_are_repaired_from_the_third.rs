//! Fault scenario: of a partition's three replicas, the preferred leader and another hold the
//! same batch damaged in place; the third holds it intact. A consumer's read of the batch moves
//! leadership off the preferred leader, maybe to the other damaged replica, which does not know
//! yet that its copy is damaged. The replicas following ask their leader for the batch to
//! repair their copies with: a repair read that finds the leader's copy damaged for the first
//! time moves leadership too, and the controller then picks the replica not known to be
//! damaged. Within a minute and a half both damaged copies must have been repaired from the
//! intact one. (When repair reads only noted the damage, both copies stayed damaged for good
//! on every seed.)

use std::time::Duration;

use weir_scenarios::admin::rebalancing_cluster;
use weir_scenarios::replicas::{damage_alike, read_once};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;

/// How long the repairs may take.
const WATCH: Duration = Duration::from_secs(90);
/// `leader.imbalance.check.interval.seconds` here.
const REBALANCE_SECS: u64 = 5;

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = rebalancing_cluster(seed, REBALANCE_SECS, 3, "2")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let replicas: Vec<usize> = before.replicas.iter().filter_map(|&r| c.ix_of(r)).collect();
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    ensure(replicas.first() == Some(&leader), || "the leader is not the preferred replica".into())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    let damaged = damage_alike(&mut c, seed, (&replicas, &replicas[..2]), leader)?;
    read_once(&mut c, leader, damaged.base)?;
    let mut leaders = Vec::new();
    let mut seen = None;
    for _ in 0..WATCH.as_millis() / 250 {
        c.run_for(Duration::from_millis(250));
        let now = c.committed_partition("t", 0).map(|p| (p.leader_epoch, p.leader));
        if now != seen {
            seen = now;
            leaders.push(now);
        }
    }
    let state: Vec<(usize, bool)> =
        replicas.iter().map(|&r| (r + 1, damaged.whole_on(&c, r))).collect();
    producer.stop();
    ensure(state.iter().all(|&(_, whole)| whole), || {
        format!(
            "damaged copies stay damaged while node{} holds it intact: leaders {leaders:?}, {state:?}",
            replicas[2] + 1
        )
    })
}

#[test]
fn damaged_copies_of_two_replicas_are_repaired_from_the_third() {
    for_each_seed("damaged_copies_of_two_replicas_are_repaired_from_the_third", 0..3, scenario);
}
