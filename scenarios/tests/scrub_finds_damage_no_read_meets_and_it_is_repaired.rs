//! Fault scenario: a latent sector error in a batch that nothing reads again. `acks=all` writes
//! flow to a partition on three replicas; once every replica's checkpoint covers some of them, a
//! bit of one stored batch flips on one replica's disk: by seed, the leader's or a follower's.
//! No consumer reads the batch and no follower catches up past it, so before the scrub nothing
//! found the damage until a read needed the batch, perhaps after the intact copies were lost.
//!
//! With the scrub on (a pass every 20 s here), the damaged replica must have found the damage
//! and repaired its copy from an intact one within two minutes: a follower asks its leader for
//! the batch; a leader hands the partition over first, then repairs as a follower. Afterwards
//! its copy of the log must be byte for byte the leader's, and every acknowledged write must
//! read back. Leadership must not move for a damaged follower, and at most twice for a damaged
//! leader (away, and back once repaired). The control, with the scrub off, must leave the damage
//! in place for as long, either replica's: the scenario's damage is found by the scrub and
//! nothing else.

use std::time::Duration;

use weir_scenarios::admin::{cluster_with_topic, rebalancing_spec};
use weir_scenarios::replicas::damage_alike;
use weir_scenarios::{acked_read_back, ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// This file, as the replay command names it.
const TEST: &str = "scrub_finds_damage_no_read_meets_and_it_is_repaired";
/// `log_scrub_interval_ms` here.
const SCRUB_INTERVAL_MS: u64 = 20_000;
/// `log_scrub_bytes_per_sec` here: a pass over the log takes some seconds.
const SCRUB_BYTES_PER_SEC: u64 = 256 << 10;
/// How long finding and repairing the damage may take.
const WATCH: Duration = Duration::from_secs(120);
/// How often the leader is looked at.
const SAMPLE: Duration = Duration::from_millis(250);
/// How long leadership is watched after the repair.
const AFTER: Duration = Duration::from_secs(20);
/// `leader.imbalance.check.interval.seconds` here.
const REBALANCE_SECS: u64 = 5;

/// Which replica's copy is damaged, and whether the scrub runs.
#[derive(Clone, Copy, Debug)]
struct Case {
    leader_damaged: bool,
    scrub: bool,
}

fn scenario(seed: u64, case: Case) -> Result<(), String> {
    let spec = ClusterSpec {
        scrub_interval_ms: if case.scrub { SCRUB_INTERVAL_MS } else { 0 },
        scrub_bytes_per_sec: SCRUB_BYTES_PER_SEC,
        ..rebalancing_spec(REBALANCE_SECS)
    };
    let mut c = cluster_with_topic(seed, spec, 3, "2")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let replicas: Vec<usize> = before.replicas.iter().filter_map(|&r| c.ix_of(r)).collect();
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    let victim = if case.leader_damaged {
        leader
    } else {
        *replicas.iter().find(|&&r| r != leader).ok_or("no follower")?
    };
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    let damaged = damage_alike(&mut c, seed, (&replicas, &[victim]), leader)?;
    // Every leader the partition has, sampled until the repair and for a while after it.
    let mut leaders = vec![before.leader];
    let mut watch = |c: &mut Cluster, steps: u128, until_whole: bool| {
        for _ in 0..steps {
            if until_whole && damaged.whole_on(c, victim) {
                return true;
            }
            c.run_for(SAMPLE);
            let now = c.committed_partition("t", 0).map_or(-1, |p| p.leader);
            if leaders.last() != Some(&now) {
                leaders.push(now);
            }
        }
        damaged.whole_on(c, victim)
    };
    let repaired = watch(&mut c, WATCH.as_millis() / SAMPLE.as_millis(), true);
    if !case.scrub {
        producer.stop();
        return ensure(!repaired, || {
            format!("with no scrub, node{}'s damaged batch was repaired", victim + 1)
        });
    }
    ensure(repaired, || {
        format!(
            "node{} did not find and repair its damaged batch at {} within {WATCH:?}",
            victim + 1,
            damaged.base
        )
    })?;
    watch(&mut c, AFTER.as_millis() / SAMPLE.as_millis(), false);
    // A damaged leader hands over once, and rebalancing may give it the partition back once
    // repaired; nothing else moves leadership.
    let moves = leaders.len() - 1;
    let most = if case.leader_damaged { 2 } else { 0 };
    ensure(moves <= most, || format!("leadership moved {moves} times: {leaders:?}"))?;
    // Writes go on; then the repaired copy is the leader's, byte for byte.
    let acked_then = producer.acked().len();
    c.run_for(Duration::from_secs(3));
    ensure(producer.acked().len() > acked_then, || "writes stopped after the repair".to_owned())?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let now = c.committed_partition("t", 0).ok_or("no partition")?;
    let leader_now = c.ix_of(now.leader).ok_or("no leader")?;
    let read = c.read_all(leader_now, "t", 0)?;
    acked_read_back("t-0", &read, &producer.acked())?;
    let upto = *read.keys().next_back().ok_or("nothing read")? + 1;
    let want = c.replica_bytes(leader_now, "t", 0, 0, upto).ok_or("cannot read the leader")?;
    let got = c.replica_bytes(victim, "t", 0, 0, upto);
    ensure(got.as_ref() == Some(&want), || {
        format!("node{}'s repaired copy is not the leader's: leaders {leaders:?}", victim + 1)
    })?;
    c.watch_verdict()
}

/// Both replicas' cases, with the scrub on or off, each over `seeds`.
fn each_case(scrub: bool, seeds: std::ops::Range<u64>) {
    for leader_damaged in [false, true] {
        let case = Case { leader_damaged, scrub };
        for_each_seed(TEST, seeds.clone(), |seed| {
            scenario(seed, case).map_err(|e| format!("{case:?}: {e}"))
        });
    }
}

#[test]
fn scrub_finds_damage_no_read_meets_and_it_is_repaired() {
    each_case(true, 0..3);
}

#[test]
fn without_a_scrub_the_damage_stays() {
    each_case(false, 0..1);
}
