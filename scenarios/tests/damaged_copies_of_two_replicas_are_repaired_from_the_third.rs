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
use weir_scenarios::log::{durable_recovery_point, segment_batches};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::fetch::FetchWant;
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;

/// Records every replica's checkpoint must cover before the batch is damaged.
const COVERED: i64 = 40;
/// How long the checkpoints may take to cover them.
const CHECKPOINT_BOUND: Duration = Duration::from_secs(180);
/// How long the repairs may take.
const WATCH: Duration = Duration::from_secs(90);
/// `leader.imbalance.check.interval.seconds` here.
const REBALANCE_SECS: u64 = 5;

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = rebalancing_cluster(seed, REBALANCE_SECS, 3, "2")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let replicas: Vec<usize> = before.replicas.iter().filter_map(|&r| c.ix_of(r)).collect();
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    ensure(replicas[0] == leader, || "leader is not the preferred replica".to_owned())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    let dir = "t-0";
    let covered = c.run_until(CHECKPOINT_BOUND, |c| {
        let point = |r: usize| durable_recovery_point(&c.sim, c.nodes[r], dir);
        replicas.iter().all(|&r| point(r).is_some_and(|p| p >= COVERED))
    });
    ensure(covered, || "checkpoints".to_owned())?;
    let segment = std::path::Path::new(dir).join(format!("{:020}.log", 0));
    let bytes = c.sim.durable_contents(c.nodes[leader], &segment).map_err(|e| e.to_string())?;
    let batches = segment_batches(&bytes);
    let (at, len, base, _last) = *batches.get(1 + seed as usize % 3).ok_or("too few batches")?;
    let original = bytes[at..at + len].to_vec();
    for &r in &replicas[..2] {
        c.sim
            .corrupt_durable_file(c.nodes[r], &segment, (at + len - 1) as u64)
            .map_err(|e| format!("damaging node{}: {e}", r + 1))?;
    }
    let addr = c.addr(leader);
    c.client_call(Duration::from_secs(10), move |env| async move {
        let mut client = weir_sim::client::Client::new(env, addr, "reader");
        let want = FetchWant { topic: "t".into(), partition: 0, offset: base };
        client.fetch(&[want], Duration::ZERO).await
    })
    .ok_or("no answer to the fetch")?
    .map_err(|e| format!("fetch: {e}"))?;
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
    let whole = |r: usize| {
        c.sim
            .durable_contents(c.nodes[r], &segment)
            .is_ok_and(|now| now.get(at..at + len) == Some(&original[..]))
    };
    let state: Vec<(usize, bool)> = replicas.iter().map(|&r| (r + 1, whole(r))).collect();
    producer.stop();
    ensure(whole(replicas[0]) && whole(replicas[1]), || {
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
