//! Fault scenario: a latent sector error in a coordinator's `__consumer_offsets` partition. A
//! single node takes offset commits for two groups that share one offsets partition, one batch
//! per commit; once the partition's checkpoint covers them, a bit of one of those batches flips
//! on the device (which one, by seed), and the node restarts. The coordinator must load the
//! partition's groups past the damaged batch and serve them: each group's committed offset is
//! its newest commit outside the damaged batch (an older one where the newest was in it, none
//! where it had no other). Before, the load failed on the damage for good and every group of
//! that partition was answered COORDINATOR_LOAD_IN_PROGRESS forever.

use std::time::Duration;

use weir::groups::partition_for;
use weir::topics::OFFSETS_TOPIC;
use weir_scenarios::group::{commit_simple, committed_simple, create_offsets_partition};
use weir_scenarios::log::{damage_batch_at, durable_recovery_point};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// The commits, in order: the group (0 or 1) and the offset committed for `data`-0.
const COMMITS: [(usize, i64); 4] = [(0, 10), (0, 20), (1, 5), (0, 30)];
/// How long the node may take to checkpoint the offsets partition past the commits.
const CHECKPOINT_BOUND: Duration = Duration::from_secs(180);
/// Between looks at the checkpoint.
const CHECKPOINT_POLL: Duration = Duration::from_secs(1);

/// Two group names (from `seed`) whose records share one offsets partition, and that partition.
fn groups(seed: u64) -> ([String; 2], i32) {
    let first = format!("group-{seed}-0");
    let partition = partition_for(&first, OFFSETS_TOPIC_PARTITIONS);
    let second = (1..)
        .map(|i| format!("group-{seed}-{i}"))
        .find(|g| partition_for(g, OFFSETS_TOPIC_PARTITIONS) == partition)
        .unwrap_or_default();
    ([first, second], partition)
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
    let (names, partition) = groups(seed);
    let addr = c.addr(0);
    create_offsets_partition(&mut c, &[addr], &names[0], partition)?;
    // Each commit's first offset in the offsets partition.
    let mut starts = Vec::new();
    for &(group, offset) in &COMMITS {
        starts.push(c.log_end(0, OFFSETS_TOPIC, partition).ok_or("no offsets partition")?);
        commit_simple(&mut c, addr, &names[group], &("data".to_owned(), 0), offset)?;
    }
    let end = c.log_end(0, OFFSETS_TOPIC, partition).ok_or("no offsets partition")?;
    let dir = format!("{OFFSETS_TOPIC}-{partition}");
    let covered = c.run_until(CHECKPOINT_BOUND, |c| {
        durable_recovery_point(&c.sim, c.nodes[0], &dir).is_some_and(|point| point >= end)
    });
    ensure(covered, || format!("{dir} not checkpointed past {end} in {CHECKPOINT_BOUND:?}"))?;
    let damaged = (seed % COMMITS.len() as u64) as usize;
    damage_batch_at(&c.sim, c.nodes[0], &dir, starts[damaged])?;
    c.sim.kill(c.nodes[0]);
    c.sim.start(c.nodes[0]);
    c.settle("the restart")?;
    for (group, name) in names.iter().enumerate() {
        let want = COMMITS
            .iter()
            .enumerate()
            .filter(|&(i, &(g, _))| g == group && i != damaged)
            .map(|(_, &(_, offset))| offset)
            .next_back()
            .unwrap_or(-1);
        let got = committed_simple(&mut c, addr, name, &("data".to_owned(), 0))
            .map_err(|e| format!("{name} (commit {damaged} damaged): {e}"))?;
        ensure(got == want, || {
            format!("{name} committed {got}, not {want} (commit {damaged} damaged)")
        })?;
    }
    c.sim.run_for(CHECKPOINT_POLL);
    c.watch_verdict()
}

#[test]
fn coordinator_loads_its_groups_past_a_damaged_batch() {
    for_each_seed("coordinator_loads_its_groups_past_a_damaged_batch", 0..12, scenario);
}
