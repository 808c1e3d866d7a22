//! A produce a leader accepted may still be writing when the broker is deposed: the follower
//! it becomes must see that batch before it compares its log with the new leader's, and must
//! never cut it from the log alone.
//!
//! Cluster sweep seed 0x1969 (`--disk-faults`) panicked. A broker was deposed while a produce it
//! had accepted waited for the disk. Its fetcher read the log end before that batch landed,
//! found the log agreeing with the new leader's up to there, and went to forget the epochs begun
//! at that end. That step read the end again outside the append lock, just before the batch
//! landed, and so cut the batch from the log but not from the producer state; the next batch of
//! that producer, replicated from the new leader, tripped the state's order assertion. Had the
//! step come a moment later, the batch, which the new leader never had, would have stayed: a
//! follower holding other records than its leader at the same offsets.
//!
//! `deposed_leader_accepted_produce_lands_before_the_divergence_check`: a partition leads in
//! epoch 5; a produce is accepted and waits for a slow disk; the partition is made a follower of
//! another broker in epoch 6 meanwhile. `settle_leader_appends` (what the fetcher now does
//! first) must return only once the batch has landed, in epoch 5; the divergence check against
//! the new leader (whose epoch 5 ended before it) must cut it, and the new leader's batch of the
//! same producer at that offset must then be taken cleanly.
//!
//! `forgetting_epochs_at_the_end_never_cuts_a_batch_appended_meanwhile`: the epochs begun at the
//! end are forgotten while an append waits for the disk; the appended batch must stay.
//!
//! `a_cut_decided_while_following_never_removes_what_the_new_leader_accepted`: the other way
//! round. A fetcher decides a cut, then waits (for a checkpoint's snapshot, say) while its
//! broker is elected leader and acknowledges a write; the cut must then be refused, or the
//! acknowledged write would go, and so must a restart of the log and forgetting the epochs
//! begun at its end (the new leader's).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weir::io::Instant;
use weir::log::batch;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{LogConfig, split::split_batches};
use weir::model::{LeaderEpoch, Offset};
use weir::partition::replica::{Committed, Transition};
use weir::partition::{Acks, Partition};
use weir::replication::follower::{Divergence, resolve};
use weir::replication::leader::Assignment;
use weir_scenarios::log::{BATCH_RECORDS, log_of_batches, open_partition};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

const ME: i32 = 1;
const OTHER: i32 = 2;
const REPLICAS: [i32; 2] = [ME, OTHER];
const PRODUCER: i64 = 7;
const LIMIT: Duration = Duration::from_secs(60);

/// The producer's batch with base sequence `sequence`, as a client sends it, or (`stored`) as
/// a leader writes it from that offset in that epoch.
fn batch(sequence: i32, value: &str, stored: Option<(Offset, LeaderEpoch)>) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 1_000,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
    };
    let (base_offset, leader_epoch) = stored.map_or((0, 0), |(o, e)| (o.0, e.0));
    let options = BatchOptions {
        base_offset,
        leader_epoch,
        producer_id: PRODUCER,
        producer_epoch: 0,
        base_sequence: sequence,
        ..BatchOptions::default()
    };
    encode_batch(&[record], &options).expect("a valid batch")
}

fn assign(partition: &Partition, leader: i32, epoch: i32, now: Instant) -> Transition {
    let isr = [leader];
    let committed = Committed {
        leader,
        leader_epoch: LeaderEpoch(epoch),
        assignment: Assignment {
            replicas: &REPLICAS,
            isr: &isr,
            partition_epoch: epoch,
            epoch_start: partition.log.log_end_offset(),
        },
    };
    partition.apply_committed(ME, committed, 1, Duration::from_secs(30), now)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let config = LogConfig { retention_ms: -1, ..LogConfig::default() };
    let partition = sim
        .block_on(host, LIMIT, |env| async move {
            let partition = open_partition(env.clone(), config).await?;
            let took = assign(&partition, ME, 5, env.clock.now());
            ensure(took == Transition::BecameLeader(LeaderEpoch(5)), || format!("{took:?}"))?;
            partition.log.begin_epoch(LeaderEpoch(5)).await.map_err(|e| e.to_string())?;
            let (_, done) = partition
                .produce(batch(0, "first", None), Acks::Leader)
                .await
                .map_err(|e| e.to_string())?;
            done.await.map_err(|e| e.to_string())?;
            Ok::<_, String>(partition)
        })
        .ok_or("the first produce did not finish")??;
    let end_before = partition.log.log_end_offset();
    // Every disk operation from now on is slow: the next produce waits inside its append.
    let slow = Duration::from_millis(20 + seed % 30);
    sim.set_disk_faults(
        host,
        DiskFaults { latency_min: slow, latency_max: slow, ..DiskFaults::default() },
    );
    let answer = Arc::new(Mutex::new(None));
    let (slot, producer) = (Arc::clone(&answer), Arc::clone(&partition));
    let _produce = sim.spawn(host, "produce", move |_| async move {
        let produced =
            producer.produce(batch(1, "accepted by the old leader", None), Acks::Leader).await;
        *slot.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(produced.map(|(p, _)| p.base_offset).map_err(|e| e.to_string()));
    });
    sim.run_for(slow / 4);
    ensure(answer.lock().unwrap_or_else(|p| p.into_inner()).is_none(), || {
        "the produce finished before the disk answered".to_string()
    })?;
    let deposed = Arc::clone(&partition);
    let moved = sim
        .block_on(host, LIMIT, |env| async move { assign(&deposed, OTHER, 6, env.clock.now()) })
        .ok_or("deposing did not finish")?;
    ensure(moved == Transition::BecameFollower { leader: OTHER, epoch: LeaderEpoch(6) }, || {
        format!("deposing gave {moved:?}")
    })?;
    ensure(partition.log.log_end_offset() == end_before, || {
        "the accepted batch was written before the broker was deposed".to_string()
    })?;
    let settled = Arc::clone(&partition);
    let (end, epochs, last) = sim
        .block_on(host, LIMIT, |_| async move {
            settled.settle_leader_appends().await;
            let end = settled.log.log_end_offset();
            let read =
                settled.log.read(end_before, 1 << 20, end).await.map_err(|e| e.to_string())?;
            let last = split_batches(&read.records).last().ok_or("nothing past the first batch")?;
            let header = batch::parse_header(&last.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((end, settled.log.epochs(), header))
        })
        .ok_or("settling did not finish")??;
    let produced = answer.lock().unwrap_or_else(|p| p.into_inner()).clone();
    ensure(produced == Some(Ok(end_before)), || {
        format!("the accepted produce answered {produced:?} once settled")
    })?;
    ensure(end > end_before, || {
        "settling returned before the accepted batch was written".to_string()
    })?;
    ensure(last.partition_leader_epoch() == 5, || {
        format!(
            "the accepted batch was written in epoch {}, not 5, the epoch it was accepted in",
            last.partition_leader_epoch()
        )
    })?;
    ensure(epochs.latest().map(|(e, _)| e) == Some(LeaderEpoch(5)), || {
        format!("the log records epochs {:?}; epoch 6 is the new leader's", epochs.entries())
    })?;
    // The new leader's epoch 5 ended at `end_before`: the batch diverges and is cut.
    let cut = match resolve(&epochs, end, (LeaderEpoch(5), end_before)) {
        Divergence::TruncateTo(cut) => cut,
        other => return Err(format!("the divergence check answered {other:?}")),
    };
    ensure(cut == end_before, || format!("the divergence check cut at {cut}, not {end_before}"))?;
    let follower = Arc::clone(&partition);
    sim.set_disk_faults(host, DiskFaults::default());
    sim.block_on(host, LIMIT, |_| async move {
        follower.truncate_to(cut).await.map_err(|e| e.to_string())?;
        // The new leader took the producer's retry of that batch at the same offset.
        let replicated = batch(1, "written by the new leader", Some((cut, LeaderEpoch(6))));
        follower.append_replicated(&[replicated]).await.map_err(|e| e.to_string())?;
        ensure(follower.log.log_end_offset() == cut.next(), || {
            "the replicated batch was not appended".to_string()
        })
    })
    .ok_or("following did not finish")?
}

#[test]
fn deposed_leader_accepted_produce_lands_before_the_divergence_check() {
    for_each_seed(
        "deposed_leader_accepted_produce_lands_before_the_divergence_check",
        0..8,
        scenario,
    );
}

fn forgetting(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let (log, _) = log_of_batches(&sim, host, 3, false)?;
    let end_before = log.log_end_offset();
    let slow = Duration::from_millis(20 + seed % 30);
    sim.set_disk_faults(
        host,
        DiskFaults { latency_min: slow, latency_max: slow, ..DiskFaults::default() },
    );
    let appender = Arc::clone(&log);
    let _append = sim.spawn(host, "append", move |_| async move {
        let _ = appender.append(weir_scenarios::log::batch(3, None), LeaderEpoch(0)).await;
    });
    sim.run_for(slow / 4);
    ensure(log.log_end_offset() == end_before, || "the append finished at once".to_string())?;
    let forgetter = Arc::clone(&log);
    let end = sim
        .block_on(host, LIMIT, |_| async move {
            forgetter.forget_epochs_at_end().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(forgetter.log_end_offset())
        })
        .ok_or("forgetting did not finish")??;
    sim.set_disk_faults(host, DiskFaults::default());
    ensure(end == Offset(end_before.0 + BATCH_RECORDS), || {
        format!("the log ends at {end} after forgetting, not past the batch appended meanwhile")
    })
}

#[test]
fn forgetting_epochs_at_the_end_never_cuts_a_batch_appended_meanwhile() {
    for_each_seed(
        "forgetting_epochs_at_the_end_never_cuts_a_batch_appended_meanwhile",
        0..8,
        forgetting,
    );
}

fn stale_cut(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let config = LogConfig { retention_ms: -1, ..LogConfig::default() };
    sim.block_on(host, LIMIT, |env| async move {
        let partition = open_partition(env.clone(), config).await?;
        let took = assign(&partition, OTHER, 6, env.clock.now());
        ensure(
            took == Transition::BecameFollower { leader: OTHER, epoch: LeaderEpoch(6) },
            || format!("{took:?}"),
        )?;
        let copied = batch(0, "copied from the old leader", Some((Offset(0), LeaderEpoch(6))));
        partition.append_replicated(&[copied]).await.map_err(|e| e.to_string())?;
        // The old leader dies; this broker is elected and takes a write before its fetcher,
        // which had decided to cut at 0, gets to do so.
        let took = assign(&partition, ME, 7, env.clock.now());
        ensure(took == Transition::BecameLeader(LeaderEpoch(7)), || format!("{took:?}"))?;
        partition.log.begin_epoch(LeaderEpoch(7)).await.map_err(|e| e.to_string())?;
        // Epoch 7 begins at the log end, where nothing is written under it yet.
        let forgot = partition.forget_epochs_at_end().await;
        ensure(matches!(forgot, Err(weir::partition::TruncateError::Leading)), || {
            format!("a follower's forgetting of epochs on the new leader gave {forgot:?}")
        })?;
        let latest = partition.log.epochs().latest().map(|(e, _)| e);
        ensure(latest == Some(LeaderEpoch(7)), || format!("the log's newest epoch is {latest:?}"))?;
        let (produced, done) = partition
            .produce(batch(1, "accepted by the new leader", None), Acks::Leader)
            .await
            .map_err(|e| e.to_string())?;
        done.await.map_err(|e| e.to_string())?;
        let end = partition.log.log_end_offset();
        let cut = partition.truncate_to(Offset(0)).await;
        ensure(matches!(cut, Err(weir::partition::TruncateError::Leading)), || {
            format!("a follower's cut on the new leader gave {cut:?}")
        })?;
        let restarted = partition.restart_at(Offset(100)).await;
        ensure(matches!(restarted, Err(weir::partition::TruncateError::Leading)), || {
            format!("a follower's restart on the new leader gave {restarted:?}")
        })?;
        ensure(partition.log.log_end_offset() == end && produced.base_offset == Offset(1), || {
            format!(
                "the acknowledged write at {} is gone: the log ends at {}",
                produced.base_offset,
                partition.log.log_end_offset()
            )
        })
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn a_cut_decided_while_following_never_removes_what_the_new_leader_accepted() {
    for_each_seed(
        "a_cut_decided_while_following_never_removes_what_the_new_leader_accepted",
        0..4,
        stale_cut,
    );
}
