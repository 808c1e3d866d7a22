//! A broker serves produce while the group coordinator is still loading `__consumer_offsets`.
//! The load used to run inside the broker's reconciliation with the metadata, so a broker did
//! not become ready, and took no other metadata change (a leadership move, a new topic), until
//! every offsets partition it leads was read to its end: a large one, or one whose reads are
//! tried again at damage, held up every partition of the broker. Now each load runs in a task
//! of its own, and a group is answered COORDINATOR_LOAD_IN_PROGRESS until its partition is
//! loaded.
//!
//! A single node takes one offset commit per batch; once the offsets partition's checkpoint
//! covers them, three of those batches (none of the last two) are damaged on the device, which
//! the load reads ten times each before it passes over them, and the node restarts. Once it has
//! settled, its groups must still be loading while an acks=all produce to another topic is
//! acknowledged, ListGroups must say so (COORDINATOR_LOAD_IN_PROGRESS), and a heartbeat must be
//! answered without error, as Kafka answers it while loading; then the load must
//! finish, ListGroups must list the group without error, and the group's committed offset must
//! be its last commit.

use std::time::Duration;

use bytes::Bytes;
use weir::groups::partition_for;
use weir::topics::OFFSETS_TOPIC;
use weir_scenarios::group::{commit_simple, committed_simple, create_offsets_partition};
use weir_scenarios::log::{damage_batch_at, durable_recovery_point};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use weir_sim::client::{Client, codes};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// Commits, one batch each: offsets 10, 20, … for `data`-0.
const COMMITS: i64 = 8;
/// Commit batches damaged.
const DAMAGED: usize = 3;
/// How long the node may take to checkpoint the offsets partition past the commits.
const CHECKPOINT_BOUND: Duration = Duration::from_secs(180);
/// How long the produce after the restart may take.
const PRODUCE_BOUND: Duration = Duration::from_millis(500);
/// How long the load may take.
const LOAD_BOUND: Duration = Duration::from_secs(30);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let partition = partition_for(&group, OFFSETS_TOPIC_PARTITIONS);
    let addr = c.addr(0);
    create_offsets_partition(&mut c, &[addr], &group, partition)?;
    let mut starts = Vec::new();
    for n in 1..=COMMITS {
        starts.push(c.log_end(0, OFFSETS_TOPIC, partition).ok_or("no offsets partition")?);
        commit_simple(&mut c, addr, &group, &("data".to_owned(), 0), n * 10)?;
    }
    let end = c.log_end(0, OFFSETS_TOPIC, partition).ok_or("no offsets partition")?;
    let dir = format!("{OFFSETS_TOPIC}-{partition}");
    let covered = c.run_until(CHECKPOINT_BOUND, |c| {
        durable_recovery_point(&c.sim, c.nodes[0], &dir).is_some_and(|point| point >= end)
    });
    ensure(covered, || format!("{dir} not checkpointed past {end} in {CHECKPOINT_BOUND:?}"))?;
    // Three of the first six commits, by seed.
    let first = seed as usize % (starts.len() - 2 - DAMAGED + 1);
    for &start in &starts[first..first + DAMAGED] {
        damage_batch_at(&c.sim, c.nodes[0], &dir, start)?;
    }
    c.sim.kill(c.nodes[0]);
    c.sim.start(c.nodes[0]);
    c.settle("the restart")?;
    let loaded = |c: &Cluster| c.broker(0).is_some_and(|b| b.groups.is_loaded(partition));
    ensure(!loaded(&c), || "the groups were loaded before the broker settled".to_owned())?;
    let acked = c
        .client_call(PRODUCE_BOUND, move |env| async move {
            let mut client = Client::new(env, addr, "producer");
            let batch = PartitionBatch {
                partition: 0,
                base_sequence: -1,
                records: vec![(None, Bytes::from_static(b"while loading"))],
            };
            client.produce("data", Acks::All, None, &[batch]).await
        })
        .ok_or_else(|| format!("the produce was not answered within {PRODUCE_BOUND:?}"))?
        .map_err(|e| format!("the produce failed: {e}"))?;
    ensure(
        matches!(&acked, ProduceOutcome::Answered(acks) if acks.iter().all(|a| a.error_code == 0)),
        || format!("the produce was answered {acked:?}"),
    )?;
    ensure(!loaded(&c), || "the groups finished loading before the produce was acked".to_owned())?;
    let list = move |c: &mut Cluster| {
        c.client_call(Duration::from_secs(5), move |env| async move {
            Client::new(env, addr, "lister").list_groups().await
        })
        .ok_or("ListGroups was not answered")?
        .map_err(|e| format!("ListGroups: {e}"))
    };
    let (code, _) = list(&mut c)?;
    ensure(code == codes::COORDINATOR_LOAD_IN_PROGRESS, || {
        format!("ListGroups answered {code} while the groups loaded")
    })?;
    // A heartbeat is answered blindly meanwhile, as Kafka's coordinators answer it.
    let beat = {
        let group = group.clone();
        c.client_call(Duration::from_secs(5), move |env| async move {
            Client::new(env, addr, "member").heartbeat(&group, 1, "a-member").await
        })
        .ok_or("the heartbeat was not answered")?
    };
    ensure(beat.is_ok(), || format!("a heartbeat while the groups loaded: {beat:?}"))?;
    ensure(!loaded(&c), || "the groups finished loading before the heartbeat".to_owned())?;
    ensure(c.run_until(LOAD_BOUND, loaded), || format!("not loaded within {LOAD_BOUND:?}"))?;
    let (code, groups) = list(&mut c)?;
    ensure(code == 0 && groups.contains(&group), || {
        format!("ListGroups answered {code} and {groups:?} once loaded")
    })?;
    let got = committed_simple(&mut c, addr, &group, &("data".to_owned(), 0))?;
    ensure(got == COMMITS * 10, || format!("committed {got}, not {}", COMMITS * 10))?;
    c.watch_verdict()
}

#[test]
fn broker_serves_while_its_groups_load() {
    for_each_seed("broker_serves_while_its_groups_load", 0..6, scenario);
}
