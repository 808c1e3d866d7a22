//! Fault scenario: a leader restarted while its ISR is below `min.insync.replicas` serves up
//! to the high watermark it recorded, so how often it records it bounds what consumers miss.
//!
//! A topic with three replicas and `min.insync.replicas=2` loses one follower; the leader and
//! the other follower take `acks=all` writes. Some seconds later that follower crashes too, the
//! ISR shrinks to the leader, and the leader loses power. It comes back alone and leads again.
//! Its high watermark cannot move while it is the only in-sync replica (KIP-966), so consumers
//! see only what its checkpoint recorded before the power failure. With the high watermark
//! recorded every few seconds (`replica.high.watermark.checkpoint.interval.ms`, 5 s by
//! default, as Kafka's) every write acknowledged before the last such checkpoint is readable at
//! once. The control runs the same steps with that checkpoint left to the minute-long log
//! checkpoint (here an hour) and must find none of them readable: without it the scenario would
//! prove nothing. In both, the records come back into view once a follower rejoins.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Far longer than the scenario: the checkpoint that does not run in it.
const NEVER_MS: i64 = 3_600_000;
/// Writes acknowledged while two replicas are in sync.
const WRITES: usize = 10;
/// How long the writes stand before the second follower crashes: past one high-watermark
/// checkpoint (5 s, on a tick of 1 s).
const STANDING: Duration = Duration::from_secs(8);
/// How long an ISR change or a return to leadership may take.
const CHANGE_BOUND: Duration = Duration::from_secs(20);

/// Runs the steps; returns the acknowledged writes the restarted leader serves alone, and
/// checks that a rejoining follower brings every one of them into view.
fn run(seed: u64, hw_checkpoint_ms: i64) -> Result<usize, String> {
    let spec =
        ClusterSpec { checkpoint_ms: NEVER_MS, hw_checkpoint_ms, ..ClusterSpec::combined(5) };
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    let (t, p) = c.create_topic_away_from_controller("t", 3, &configs)?;
    let t = t.as_str();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let followers: Vec<usize> =
        p.replicas.iter().filter(|&&r| r != p.leader).filter_map(|&r| c.ix_of(r)).collect();
    let [second, first] = followers[..] else { return Err(format!("replicas {:?}", p.replicas)) };
    c.sim.kill(c.nodes[first]);
    let two = c
        .run_until(CHANGE_BOUND, |c| c.committed_partition(t, 0).is_some_and(|q| q.isr.len() == 2));
    ensure(two, || format!("the ISR did not drop node{}", first + 1))?;
    let mut acked = Vec::new();
    for i in 0..WRITES {
        let value = format!("acked-{i}");
        let offset =
            c.produce_with(leader, t, 0, &value, Acks::All).map_err(|e| format!("{e:?}"))?;
        acked.push((offset, value));
    }
    c.run_for(STANDING);
    c.sim.kill(c.nodes[second]);
    let alone = c.run_until(CHANGE_BOUND, |c| {
        c.committed_partition(t, 0).is_some_and(|q| q.isr == vec![p.leader])
    });
    ensure(alone, || "the ISR did not shrink to the leader".to_owned())?;
    c.sim.power_fail(c.nodes[leader]);
    c.sim.start(c.nodes[leader]);
    let leads = c.run_until(CHANGE_BOUND, |c| {
        c.committed_partition(t, 0).is_some_and(|q| q.leader == p.leader)
            && c.broker(leader)
                .and_then(|b| b.catalog.partition(t, 0))
                .is_some_and(|part| part.leads())
    });
    ensure(leads, || "the last in-sync replica did not lead again".to_owned())?;
    let alone_read = c.read_all(leader, t, 0)?;
    for (offset, value) in &acked {
        ensure(alone_read.get(offset).is_none_or(|v| v.as_ref() == value.as_bytes()), || {
            format!("{t}-0@{offset}: acked {value:?}, read {:?}", alone_read.get(offset))
        })?;
    }
    let served = acked.iter().filter(|(offset, _)| alone_read.contains_key(offset)).count();
    // A follower back in the ISR lets the high watermark move again.
    c.sim.start(c.nodes[second]);
    let rejoined = c.run_until(CHANGE_BOUND, |c| {
        c.committed_partition(t, 0).is_some_and(|q| q.isr.contains(&node_id(second)))
    });
    ensure(rejoined, || format!("node{} did not rejoin the ISR", second + 1))?;
    let read = c.read_all(leader, t, 0)?;
    for (offset, value) in &acked {
        ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
            format!("{t}-0@{offset}: acked {value:?}, read {:?} after a rejoin", read.get(offset))
        })?;
    }
    c.watch_verdict()?;
    Ok(served)
}

fn recorded_every_few_seconds(seed: u64) -> Result<(), String> {
    let defaults = ClusterSpec::combined(5);
    let served = run(seed, defaults.hw_checkpoint_ms)?;
    ensure(served == WRITES, || {
        format!(
            "the restarted leader serves {served} of {WRITES} writes acknowledged {STANDING:?} before"
        )
    })
}

fn recorded_only_with_the_log_checkpoint(seed: u64) -> Result<(), String> {
    let served = run(seed, NEVER_MS)?;
    ensure(served == 0, || {
        format!("{served} of {WRITES} writes served with no high-watermark checkpoint since them")
    })
}

#[test]
fn restarted_leader_below_min_insync_serves_what_it_recorded() {
    for_each_seed(
        "restarted_leader_below_min_insync_serves_what_it_recorded",
        0..8,
        recorded_every_few_seconds,
    );
}

#[test]
fn restarted_leader_below_min_insync_without_the_checkpoint_serves_none() {
    for_each_seed(
        "restarted_leader_below_min_insync_serves_what_it_recorded",
        0..4,
        recorded_only_with_the_log_checkpoint,
    );
}
