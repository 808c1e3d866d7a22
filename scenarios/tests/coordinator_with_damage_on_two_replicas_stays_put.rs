//! Fault scenario: latent sector errors in two replicas of a group's `__consumer_offsets`
//! partition, in different batches. A replica whose producer-state rebuild passed over a
//! damaged batch handed the lead over to another in-sync replica for ten minutes after it
//! opened, since an idempotent producer's retry of that batch could come, and only an intact
//! replica could tell it from a new batch. But only the coordinator writes `__consumer_offsets`,
//! without producer ids: no retry can come. The two damaged replicas handed the partition to
//! each other twice a second, every move reloading the groups elsewhere, so the group could not
//! be served at all (cluster sweep seed 0x56d).
//!
//! Three nodes take one offset commit per batch for a group; once all three replicas'
//! checkpoints cover them, one batch is damaged on the partition's leader and another on a
//! follower (which, by seed), with the producer-state snapshots of both (so that their rebuild
//! reads the damaged batch), and every node restarts. Once the cluster has settled, the
//! partition's leadership must stay put for 20 seconds, and the group must be served its last
//! commit (neither damaged batch holds it).

use std::time::Duration;

use weir::groups::partition_for;
use weir::topics::OFFSETS_TOPIC;
use weir_scenarios::group::{commit_simple, committed_simple, create_offsets_partition, find};
use weir_scenarios::log::{damage_batch_at, durable_recovery_point};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// Commits, one batch each: offsets 10, 20, … for `data`-0.
const COMMITS: i64 = 6;
/// How long the replicas may take to checkpoint the offsets partition past the commits.
const CHECKPOINT_BOUND: Duration = Duration::from_secs(180);
/// How long leadership must stay put after the restart.
const WATCH: Duration = Duration::from_secs(20);

fn scenario(seed: u64) -> Result<(), String> {
    // Three replicas of every partition, `__consumer_offsets` included.
    let spec = ClusterSpec { replication: 3, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let partition = partition_for(&group, OFFSETS_TOPIC_PARTITIONS);
    let addrs: Vec<_> = (0..3).map(|ix| c.addr(ix)).collect();
    create_offsets_partition(&mut c, &addrs, &group, partition)?;
    let mut starts = Vec::new();
    for n in 1..=COMMITS {
        let leader = c.committed_partition(OFFSETS_TOPIC, partition).ok_or("no partition")?;
        let ix = c.ix_of(leader.leader).ok_or("no leader")?;
        starts.push(c.log_end(ix, OFFSETS_TOPIC, partition).ok_or("no offsets partition")?);
        let addr = c.addr(ix);
        commit_simple(&mut c, addr, &group, &("data".to_owned(), 0), n * 10)?;
    }
    let before = c.committed_partition(OFFSETS_TOPIC, partition).ok_or("no partition")?;
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    let end = c.log_end(leader, OFFSETS_TOPIC, partition).ok_or("no offsets partition")?;
    let dir = format!("{OFFSETS_TOPIC}-{partition}");
    let covered = c.run_until(CHECKPOINT_BOUND, |c| {
        (0..3).all(|ix| durable_recovery_point(&c.sim, c.nodes[ix], &dir).is_some_and(|p| p >= end))
    });
    ensure(covered, || format!("{dir} not checkpointed past {end} everywhere"))?;
    let follower = (leader + 1 + seed as usize % 2) % 3;
    // Two different commits of the first four, by seed, each in its last byte (a record's).
    let first = seed as usize % 2;
    for (ix, start) in [(leader, starts[first]), (follower, starts[first + 2])] {
        damage_batch_at(&c.sim, c.nodes[ix], &dir, start)?;
        // Its producer-state snapshots too, so that the rebuild on restart reads the log from
        // its start, past the damaged batch.
        let names = c.sim.durable_names(c.nodes[ix], &dir).map_err(|e| e.to_string())?;
        for name in names.iter().filter(|n| n.ends_with(".snapshot")) {
            let file = std::path::Path::new(&dir).join(name);
            let len = c.sim.durable_contents(c.nodes[ix], &file).map_err(|e| e.to_string())?.len();
            if len > 0 {
                c.sim
                    .corrupt_durable_file(c.nodes[ix], &file, len as u64 - 1)
                    .map_err(|e| format!("damaging {}: {e}", file.display()))?;
            }
        }
    }
    for ix in 0..3 {
        c.sim.kill(c.nodes[ix]);
        c.sim.start(c.nodes[ix]);
    }
    c.settle("the restarts")?;
    let epoch =
        |c: &Cluster| c.committed_partition(OFFSETS_TOPIC, partition).map(|p| p.leader_epoch);
    // The leadership the restarts settled on, once every replica is back in the ISR.
    let whole = c.run_until(Duration::from_secs(30), |c| {
        c.committed_partition(OFFSETS_TOPIC, partition).is_some_and(|p| p.isr.len() == 3)
    });
    ensure(whole, || "the offsets partition's ISR is not whole again".to_owned())?;
    let settled = epoch(&c);
    let moved = c.run_until(WATCH, |c| epoch(c) != settled);
    ensure(!moved, || {
        format!(
            "{dir}'s leadership moved from epoch {settled:?} to {:?} within {WATCH:?}",
            epoch(&c)
        )
    })?;
    let (name, at) = (group.clone(), addrs.clone());
    let coordinator = c
        .client_call(
            Duration::from_secs(60),
            move |env| async move { find(&env, &at, &name).await },
        )
        .ok_or("finding the coordinator did not finish")??;
    let addr = addrs[usize::try_from(coordinator - 1).map_err(|e| e.to_string())?];
    let got = committed_simple(&mut c, addr, &group, &("data".to_owned(), 0))?;
    ensure(got == COMMITS * 10, || format!("committed {got}, not {}", COMMITS * 10))?;
    c.watch_verdict()
}

#[test]
fn coordinator_with_damage_on_two_replicas_stays_put() {
    for_each_seed("coordinator_with_damage_on_two_replicas_stays_put", 0..6, scenario);
}
