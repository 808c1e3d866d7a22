//! Fault scenario: an idempotent producer's batch is damaged on its leader's disk (a latent
//! sector error, below the leader's log checkpoint but past its last producer snapshot), and the
//! leader restarts at once, before anyone reads the batch, so it may keep the lead. Rebuilding its producer state on the way up, it
//! passes over the damaged batch: the state never learns that batch's sequence numbers. The
//! producer then retries that batch, as it does when it never got the answer. Taken for new, the
//! retry would be written a second time at the next offset, beside the intact copies the
//! followers hold of the first (found by cluster seed 0x12d7: `idempotent b"i-226" appears at
//! [7, 8]`). The retry must instead be answered with the batch's first offset, by an in-sync
//! replica whose state holds it: the restarted leader refuses such batches as not the leader and
//! hands the partition over.
//!
//! In the second variant the leader is the last replica standing: its only follower is down,
//! and `min.insync.replicas=1` lets it take writes alone. It cannot hand the partition over,
//! and it cannot tell the retry from a new batch, so it refuses such batches (with the
//! retriable NOT_ENOUGH_REPLICAS) until the follower, whose copy and state are intact, is back
//! in sync; then it hands over as before (found by cluster seed 0x1d7a: `idempotent b"i-404"
//! appears at [88, 89]`).

use std::time::Duration;

use bytes::Bytes;
use weir_scenarios::log::{durable_recovery_point, segment_batches};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::admin::ProducerIdentity;
use weir_sim::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Batches the producer writes, one record each; the last is damaged and retried.
const BATCHES: i64 = 8;
/// How long leadership may take to leave the replica with the damaged batch.
const MOVE_BOUND: Duration = Duration::from_secs(10);
/// How long the retry may take to be answered.
const RETRY_BOUND: Duration = Duration::from_secs(60);
/// Between retries of the retry.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How long the last replica standing keeps refusing the retry before its follower returns.
const ALONE_FOR: Duration = Duration::from_secs(10);
/// Kafka's NOT_ENOUGH_REPLICAS.
const NOT_ENOUGH_REPLICAS: i16 = 19;

fn record(i: i64) -> (Option<Bytes>, Bytes) {
    (None, Bytes::from(format!("i-{i}")))
}

/// Sends `batch` for `producer` to node `ix`: the answer's error code and base offset.
fn send(
    c: &mut Cluster,
    ix: usize,
    producer: ProducerIdentity,
    batch: &PartitionBatch,
) -> Result<(i16, i64), String> {
    let (addr, batch) = (c.addr(ix), batch.clone());
    let outcome = c
        .client_call(Duration::from_secs(30), move |env| async move {
            Client::new(env, addr, "producer")
                .produce("t", Acks::All, Some(producer), &[batch])
                .await
        })
        .ok_or("no answer to the produce")?
        .map_err(|e| format!("produce: {e}"))?;
    match outcome {
        ProduceOutcome::Answered(acks) => {
            acks.first().map(|a| (a.error_code, a.base_offset)).ok_or("no partition answer".into())
        }
        ProduceOutcome::Unacknowledged => Err("unacknowledged".to_owned()),
    }
}

/// Waits until node `ix` leads the partition, its role taken.
fn await_leading(c: &mut Cluster, ix: usize, when: &str) -> Result<(), String> {
    let id = weir_sim::workload::cluster::node_id(ix);
    let leads = c.run_until(MOVE_BOUND, |c| {
        let named = c.committed_partition("t", 0).is_some_and(|p| p.leader == id);
        let part = c.broker(ix).and_then(|b| b.catalog.partition("t", 0));
        named && part.is_some_and(|p| p.leads())
    });
    ensure(leads, || format!("node{id} does not lead after {when}"))
}

/// `alone`: the leader's only follower is down from before the damage until the retry has
/// been refused for [`ALONE_FOR`].
fn scenario(seed: u64, alone: bool) -> Result<(), String> {
    let spec = ClusterSpec { voters: 3, ..ClusterSpec::combined(4) };
    let mut c = Cluster::new_settled(seed, spec)?;
    let (replication, min_insync) = if alone { (2, "1") } else { (3, "2") };
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", min_insync)];
    c.create_replicated_topic(0, "t", 1, replication, &configs).map_err(|e| e.to_string())?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    let addr = c.addr(leader);
    let producer = c
        .client_call(Duration::from_secs(30), move |env| async move {
            Client::new(env, addr, "producer").init_producer_id(None).await
        })
        .ok_or("no answer to InitProducerId")?
        .map_err(|e| format!("InitProducerId: {e}"))?;
    let batch = |i: i64| PartitionBatch {
        partition: 0,
        base_sequence: i32::try_from(i).unwrap_or(i32::MAX),
        records: vec![record(i)],
    };
    for i in 0..BATCHES {
        let (code, offset) = send(&mut c, leader, producer, &batch(i))?;
        ensure(code == 0 && offset == i, || format!("batch {i}: error {code}, offset {offset}"))?;
    }
    let follower = before.replicas.iter().find(|&&r| r != before.leader).copied();
    let follower = c.ix_of(follower.ok_or("no follower")?).ok_or("no follower node")?;
    if alone {
        c.sim.kill(c.nodes[follower]);
        c.await_isr_size(("t", 0), 1, RETRY_BOUND)?;
    }
    let restarted = |c: &mut Cluster, when: &str| {
        if alone { await_leading(c, leader, when) } else { c.settle(when) }
    };
    // The leader restarts: its log's checkpoint now covers every batch (a log checkpoints as it
    // opens), while its producer state has no snapshot since (those come with the periodic
    // checkpoint, which does not run here).
    c.sim.kill(c.nodes[leader]);
    c.sim.start(c.nodes[leader]);
    restarted(&mut c, "the leader's first restart")?;
    let dir = "t-0";
    let covered = durable_recovery_point(&c.sim, c.nodes[leader], dir).unwrap_or(0);
    ensure(covered >= BATCHES, || format!("the reopened log's checkpoint is at {covered}"))?;
    let segment = std::path::Path::new(dir).join(format!("{:020}.log", 0));
    let bytes = c.sim.durable_contents(c.nodes[leader], &segment).map_err(|e| e.to_string())?;
    let last = BATCHES - 1;
    let (at, len, _, _) = segment_batches(&bytes)
        .into_iter()
        .find(|&(_, _, base, _)| base == last)
        .ok_or(format!("no batch at {last} on the leader"))?;
    c.sim
        .corrupt_durable_file(c.nodes[leader], &segment, (at + len - 1) as u64)
        .map_err(|e| format!("damaging the leader's batch at {last}: {e}"))?;
    // Down and up again at once: its session has not expired, so it may still lead; its
    // producer state is rebuilt from the whole log, past the damaged batch.
    c.sim.kill(c.nodes[leader]);
    c.sim.start(c.nodes[leader]);
    restarted(&mut c, "the leader's second restart")?;
    if alone {
        // Nothing may take the retry: the leader's state may have lost it, and no other copy is
        // in sync.
        let end = c.sim.now() + ALONE_FOR;
        let mut codes = Vec::new();
        while c.sim.now() < end {
            let (code, offset) = send(&mut c, leader, producer, &batch(last))?;
            ensure(code != 0, || {
                format!("the last replica standing took the retry of the damaged batch: {offset}")
            })?;
            codes.push(code);
            c.run_for(RETRY_PAUSE);
        }
        ensure(codes.contains(&NOT_ENOUGH_REPLICAS), || {
            format!("the retry was never refused as NOT_ENOUGH_REPLICAS: {codes:?}")
        })?;
        c.sim.start(c.nodes[follower]);
    }
    // The producer never got its answer: it sends the last batch again, to whoever leads.
    let mut answer = None;
    let mut refusals = Vec::new();
    let deadline = c.sim.now() + RETRY_BOUND;
    while c.sim.now() < deadline {
        let now = c.committed_partition("t", 0).ok_or("no partition")?;
        if let Some(ix) = c.ix_of(now.leader) {
            match send(&mut c, ix, producer, &batch(last))? {
                (0, offset) => {
                    answer = Some((now.leader, offset));
                    break;
                }
                (code, _) => refusals.push((now.leader, code)),
            }
        }
        c.run_for(RETRY_PAUSE);
    }
    let (by, offset) = answer.ok_or(format!(
        "the retry was not answered within {RETRY_BOUND:?}; refused (node, error): {refusals:?}"
    ))?;
    ensure(offset == last, || {
        format!(
            "node{by} took the retry of the damaged batch at {last} for new: written again at \
             {offset} (the leader before the restart was node{})",
            before.leader
        )
    })?;
    // Read from an intact copy: the damaged one hands the lead over.
    let moved = c.run_until(MOVE_BOUND, |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.leader >= 0 && p.leader != before.leader)
    });
    ensure(moved, || format!("node{} still leads with a damaged batch", before.leader))?;
    let now = c.committed_partition("t", 0).ok_or("no partition")?;
    let read = c.read_all(c.ix_of(now.leader).ok_or("no leader")?, "t", 0)?;
    let want: Vec<(i64, String)> = (0..BATCHES).map(|i| (i, format!("i-{i}"))).collect();
    let got: Vec<(i64, String)> =
        read.iter().map(|(o, v)| (*o, String::from_utf8_lossy(v).into_owned())).collect();
    ensure(got == want, || format!("read {got:?}, not each batch once"))?;
    c.watch_verdict()
}

#[test]
fn retry_of_a_batch_damaged_under_its_leader_is_written_once() {
    for_each_seed("retry_of_a_batch_damaged_under_its_leader_is_written_once", 0..12, |seed| {
        scenario(seed, false)
    });
}

#[test]
fn retry_of_a_batch_damaged_under_the_last_replica_standing_is_written_once() {
    let name = "retry_of_a_batch_damaged_under_the_last_replica_standing_is_written_once";
    for_each_seed(name, 0..12, |seed| scenario(seed, true));
}
