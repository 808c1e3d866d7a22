//! Fault scenario: both replicas of a partition (replication factor 2) hold the same batch
//! damaged in place. A consumer's read of it from the leader moves leadership once, to the
//! other replica, whose copy may serve it (it cannot: it is damaged too). The replica now
//! following asks its new leader for a copy to repair its own with; that read finds the damage
//! on the leader, which moves leadership back, once: a replica's read for a repair is named as
//! such (`REPAIR_RACK_ID`), and damage already known on the leader is only noted. So at most two
//! moves: without that, each repair read handed the partition back and the next follower asked
//! again, dozens of times a
//! minute. Writes go on meanwhile. Both replicas report the damage, so leader rebalancing does
//! not move the partition back to its preferred replica either, until DeleteRecords removes the
//! damaged batch: then it must.

use std::time::Duration;

use weir::fetcher::REPAIR_RACK_ID;
use weir_scenarios::admin::rebalancing_cluster;
use weir_scenarios::replicas::{damage_alike, read_once};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;

/// How long leadership is watched after the read.
const WATCH: Duration = Duration::from_secs(60);
/// `leader.imbalance.check.interval.seconds` here.
const REBALANCE_SECS: u64 = 5;

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = rebalancing_cluster(seed, REBALANCE_SECS, 2, "1")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let replicas: Vec<usize> = before.replicas.iter().filter_map(|&r| c.ix_of(r)).collect();
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    let damaged = damage_alike(&mut c, seed, (&replicas, &replicas), leader)?;
    read_once(&mut c, leader, damaged.base)?;
    let mut seen = c.committed_partition("t", 0).map(|p| p.leader_epoch);
    let mut moves = Vec::new();
    let steps = WATCH.as_millis() / 250;
    for _ in 0..steps {
        c.run_for(Duration::from_millis(250));
        let now = c.committed_partition("t", 0);
        if now.as_ref().map(|p| p.leader_epoch) != seen {
            seen = now.as_ref().map(|p| p.leader_epoch);
            moves.push(now.map(|p| p.leader));
        }
    }
    ensure(moves.len() <= 2, || {
        format!(
            "leadership moved {} times after one read (rack {REPAIR_RACK_ID}): {moves:?}",
            moves.len()
        )
    })?;
    let acked_then = producer.acked().len();
    c.run_for(Duration::from_secs(3));
    ensure(producer.acked().len() > acked_then, || "writes stopped".to_owned())?;
    producer.stop();
    // Both report the damage, so rebalancing left the partition where the read put it. Once
    // DeleteRecords has removed the damaged batch, nothing holds the preferred replica back.
    let last = damaged.last;
    let now = c.committed_partition("t", 0).ok_or("no partition")?.leader;
    let addr = c.addr(c.ix_of(now).ok_or("no leader")?);
    c.client_call(Duration::from_secs(30), move |env| async move {
        let mut client = weir_sim::client::Client::new(env, addr, "admin");
        client.delete_records("t", 0, last + 1, Duration::from_secs(10)).await
    })
    .ok_or("no answer to DeleteRecords")?
    .map_err(|e| format!("DeleteRecords: {e}"))?;
    let back = c.run_until(Duration::from_secs(REBALANCE_SECS * 4), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.leader == before.leader)
    });
    ensure(back, || {
        format!("node{} does not lead again once the damaged batch is deleted", before.leader)
    })?;
    c.watch_verdict()
}

#[test]
fn replicas_damaged_alike_keep_their_leader() {
    for_each_seed("replicas_damaged_alike_keep_their_leader", 0..4, scenario);
}
