//! The end of a seed: one more crash of the broker (a kill or a power failure), a restart, a
//! liveness check (every partition takes an acks=all write within [`RECOVERY_BOUND`]), and the
//! final read of every partition from the start and of the group's committed offsets, by a
//! fresh client.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;

use super::setup::LIVENESS_PRODUCER;
use super::{FINAL_READ_LIMIT, GROUP, RECOVERY_BOUND, Shared};
use crate::checker::History;
use crate::checker::history::{OffsetRead, Outcome, Tp};
use crate::checker::values;
use crate::client::admin::LATEST;
use crate::client::fetch::FetchWant;
use crate::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use crate::client::{Client, codes};
use crate::sim::{Host, Sim};
use crate::trace::mix;

/// Pause between attempts in the final phase.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// How long one fetch of the final read waits for records.
const FINAL_FETCH_WAIT: Duration = Duration::from_millis(100);

/// Crashes the broker one last time (kill or power failure, by the seed) and starts it.
pub(crate) fn crash_and_restart(sim: &Sim, broker: Host, shared: &Shared, seed: u64) {
    if mix(seed ^ 0xf1_4a1e).is_multiple_of(2) {
        shared.with_history(History::power_failure);
        sim.power_fail(broker);
    } else {
        sim.kill(broker);
    }
    sim.start(broker);
}

/// Every partition must take one acks=all write within [`RECOVERY_BOUND`] of the restart.
pub(crate) fn liveness(sim: &Sim, host: Host, shared: &Shared) -> Vec<String> {
    let shared2 = shared.clone();
    let done = sim.block_on(host, RECOVERY_BOUND, move |env: Env| async move {
        let mut client = Client::new(env.clone(), shared2.broker, "liveness");
        for (number, tp) in shared2.partitions().into_iter().enumerate() {
            let batch = PartitionBatch {
                partition: tp.1,
                base_sequence: -1,
                records: vec![(None, values::encode(LIVENESS_PRODUCER, number as u64))],
            };
            loop {
                let index = shared2.with_history(|h| {
                    h.start_produce(LIVENESS_PRODUCER, tp.clone(), -1, vec![number as u64])
                });
                let result =
                    client.produce(&tp.0, Acks::All, None, std::slice::from_ref(&batch)).await;
                let acked = match &result {
                    Ok(ProduceOutcome::Answered(a)) => {
                        a.first().filter(|a| a.error_code == 0).map(|a| a.base_offset)
                    }
                    _ => None,
                };
                shared2.with_history(|h| {
                    h.finish_produce(index, |at| match acked {
                        Some(offset) => Outcome::Ok(at, offset),
                        None => Outcome::Lost(at),
                    })
                });
                if acked.is_some() {
                    break;
                }
                env.clock.sleep(RETRY_PAUSE).await;
            }
        }
    });
    match done {
        Some(()) => Vec::new(),
        None => vec![format!(
            "liveness: not every partition took a write within {RECOVERY_BOUND:?} of the restart"
        )],
    }
}

/// Reads every partition from the start to its high watermark into the history.
pub(crate) fn final_read(sim: &Sim, host: Host, shared: &Shared) -> Vec<String> {
    let shared2 = shared.clone();
    let read = sim.block_on(host, FINAL_READ_LIMIT, move |env: Env| async move {
        let mut client = Client::new(env.clone(), shared2.broker, "final-read");
        shared2.with_history(|h| h.final_read_at = Some(h.tick()));
        let mut log = BTreeMap::new();
        for tp in shared2.partitions() {
            log.insert(tp.clone(), read_partition(&env, &shared2, &mut client, &tp).await);
        }
        log
    });
    match read {
        Some(log) => {
            shared.with_history(|h| h.final_log = log);
            Vec::new()
        }
        None => vec![format!("final read did not finish within {FINAL_READ_LIMIT:?}")],
    }
}

/// Reads the group's committed offsets for every partition into the history.
pub(crate) fn final_offsets(sim: &Sim, host: Host, shared: &Shared) -> Vec<String> {
    let shared2 = shared.clone();
    let read = sim.block_on(host, RECOVERY_BOUND, move |env: Env| async move {
        let mut client = Client::new(env.clone(), shared2.broker, "final-offsets");
        let partitions = shared2.partitions();
        loop {
            let sent = shared2.with_history(|h| h.tick());
            match client.offset_fetch(GROUP, &partitions).await {
                Ok(offsets) => {
                    shared2.with_history(|h| {
                        let received = h.tick();
                        for (tp, offset) in offsets {
                            let read =
                                OffsetRead { group: GROUP.to_owned(), tp, offset, sent, received };
                            h.offset_reads.push(read);
                        }
                    });
                    return;
                }
                Err(e) => tracing::debug!("final OffsetFetch: {e}"),
            }
            env.clock.sleep(RETRY_PAUSE).await;
        }
    });
    match read {
        Some(()) => Vec::new(),
        None => vec![format!("liveness: committed offsets not readable within {RECOVERY_BOUND:?}")],
    }
}

/// Reads one partition from offset 0 up to the high watermark it has when the read starts.
async fn read_partition(
    env: &Env,
    shared: &Shared,
    client: &mut Client,
    tp: &Tp,
) -> Vec<(i64, Option<Bytes>)> {
    let end = loop {
        match client.list_offsets(&tp.0, &[tp.1], LATEST).await {
            Ok(offsets) => {
                if let Some(Ok(end)) = offsets.get(&tp.1) {
                    break *end;
                }
            }
            Err(e) => tracing::debug!("final read: ListOffsets {tp:?}: {e}"),
        }
        env.clock.sleep(RETRY_PAUSE).await;
    };
    let mut records = Vec::new();
    let mut position = 0;
    while position < end {
        let want = FetchWant { topic: tp.0.clone(), partition: tp.1, offset: position };
        match client.fetch(&[want], FINAL_FETCH_WAIT).await {
            Ok(parts) => {
                // A damaged batch: seek past it, one offset at a time, as an application
                // would (the checkers say whether it was one the workload damaged).
                if parts.iter().any(|p| p.error_code == codes::CORRUPT_MESSAGE) {
                    position += 1;
                    continue;
                }
                for part in parts.into_iter().filter(|p| p.error_code == 0) {
                    if let Some(why) = &part.corrupt {
                        shared.corrupt_batch(format!("final read: corrupt batch in {tp:?}: {why}"));
                    }
                    for r in part.records {
                        position = r.offset + 1;
                        records.push((r.offset, r.value));
                    }
                }
            }
            Err(e) => tracing::debug!("final read: fetch {tp:?}: {e}"),
        }
        env.clock.sleep(Duration::from_millis(1)).await;
    }
    records
}

/// The summary line's counts.
/// Records whose produce was acknowledged.
pub(crate) fn acked_records(h: &History) -> usize {
    h.produces
        .iter()
        .filter(|p| matches!(p.outcome, Outcome::Ok(..)))
        .map(|p| p.numbers.len())
        .sum()
}

pub(crate) fn counts(h: &History) -> String {
    let acked = h.produces.iter().filter(|p| matches!(p.outcome, Outcome::Ok(..))).count();
    let unknown = h
        .produces
        .iter()
        .filter(|p| matches!(p.outcome, Outcome::Lost(_) | Outcome::Failed(..) | Outcome::Pending))
        .count();
    let records: usize = h.final_log.values().map(Vec::len).sum();
    let fetched: usize = h.fetches.iter().map(|f| f.records.len()).sum();
    let commits = h.commits.iter().filter(|c| matches!(c.outcome, Outcome::Ok(..))).count();
    let generations: std::collections::BTreeSet<i32> =
        h.assignments.iter().map(|a| a.generation).collect();
    let damaged: usize = h.damaged.values().map(BTreeMap::len).sum();
    format!(
        "{acked} produces acked, {unknown} indeterminate, {records} records in the final log, \
         {fetched} records fetched, {commits} commits acked, {} generations, {} power failures, \
         {} corrupt batches caught, {damaged} batches damaged, {} group records damaged",
        generations.len(),
        h.power_failures.len(),
        h.corruption_caught,
        h.damaged_group_records.len()
    )
}
