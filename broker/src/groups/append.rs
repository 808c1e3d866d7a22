//! Writing group records to `__consumer_offsets`: each offsets partition's records of a write
//! as the batches to append, with acks=all, and what their completions' errors mean to the
//! coordinator.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::Topic;
use crate::coordinator::{GroupId, PersistError, Record};
use crate::io::Env;
use crate::log::AppendError;
use crate::log::batch::BatchError;
use crate::log::encode::{BatchOptions, RecordSpec, encode_batch};
use crate::partition::{Acks, Completion, CompletionError, Partition, ProduceError};

use super::partition_for;

/// The share of an offsets partition's `max.message.bytes` that a batch of tombstones alone is
/// cut to (see [`batches_of`]).
const TOMBSTONE_BATCH_SHARE: usize = 2;
/// The most a record takes in a batch beyond its key and value (its length, attributes,
/// deltas, key and value lengths and header count, as varints).
const RECORD_OVERHEAD_BYTES_MAX: usize = 32;

pub(super) fn persist_error(e: CompletionError) -> PersistError {
    match e {
        CompletionError::NotLeader => PersistError::NotLeader,
        CompletionError::NotEnoughReplicasAfterAppend => PersistError::NotEnoughReplicas,
        CompletionError::Offline(_) => PersistError::Storage,
    }
}

/// Appends `records` to their partitions of the offsets topic, in the batches
/// [`batches_of`] makes of each partition's; what then tells when each batch's replicas hold
/// it.
pub(super) async fn append(
    env: &Env,
    offsets: &Topic,
    records: &[Record],
) -> Result<Vec<Completion>, PersistError> {
    let mut by_partition: BTreeMap<i32, Vec<(GroupId, RecordSpec)>> = BTreeMap::new();
    let now = env.clock.wall_ms();
    for record in records {
        let key = record.encode_key().map_err(|_| PersistError::Storage)?;
        let value = record.encode_value().map_err(|_| PersistError::Storage)?;
        let specs = by_partition
            .entry(partition_for(record.group().as_str(), offsets.partition_count()))
            .or_default();
        let delta = specs.len() as i32;
        let spec = RecordSpec {
            offset_delta: delta,
            timestamp: now,
            key: Some(key),
            value,
            headers: Vec::new(),
        };
        specs.push((record.group().clone(), spec));
    }
    let mut completions = Vec::with_capacity(by_partition.len());
    for (index, specs) in by_partition {
        let partition = offsets.partition(index).ok_or(PersistError::NotLeader)?;
        let budget = partition.log.config().max_message_bytes / TOMBSTONE_BATCH_SHARE;
        for specs in batches_of(specs, budget) {
            completions.push(append_batch(&partition, &specs).await?);
        }
    }
    Ok(completions)
}

/// `records`, one partition's records of a write with their groups, as the batches to append:
/// one batch, which lands whole or not at all, as a client's commit must; but a write of
/// tombstones alone (a deleted topic's offsets in every group, expired offsets, a deleted
/// group) in batches of at most `budget` bytes, so that however many there are, none is too
/// large for the offsets topic, where one batch of them all would be refused at every try.
///
/// A group's records stay in one batch, in their order, unless they alone are more than the
/// budget: a write that fails after some of its batches were appended is reported failed and
/// its records are not replayed into memory, so that memory and the log then disagree only
/// about whole groups. Where one group's are cut, the batches go to one log in order, and a
/// later one durable means the earlier ones are: a deleted group's tombstone, written after
/// its offsets', never lands without them. Each batch's offset deltas start at 0.
fn batches_of(records: Vec<(GroupId, RecordSpec)>, budget: usize) -> Vec<Vec<RecordSpec>> {
    if records.iter().any(|(_, s)| s.value.is_some()) {
        return vec![records.into_iter().map(|(_, s)| s).collect()];
    }
    // Each group's records, in order, the groups in the order they first appear.
    let mut runs: Vec<Vec<RecordSpec>> = Vec::new();
    let mut run_of: BTreeMap<GroupId, usize> = BTreeMap::new();
    for (group, spec) in records {
        let at = *run_of.entry(group).or_insert_with(|| {
            runs.push(Vec::new());
            runs.len() - 1
        });
        runs[at].push(spec);
    }
    let size = |s: &RecordSpec| s.key.as_ref().map_or(0, |k| k.len()) + RECORD_OVERHEAD_BYTES_MAX;
    let mut batches: Vec<Vec<RecordSpec>> = Vec::new();
    let mut current: Vec<RecordSpec> = Vec::new();
    let mut bytes = crate::log::batch::BATCH_HEADER_BYTES;
    for run in runs {
        let run_bytes: usize = run.iter().map(size).sum();
        if !current.is_empty() && bytes + run_bytes > budget {
            batches.push(std::mem::take(&mut current));
            bytes = crate::log::batch::BATCH_HEADER_BYTES;
        }
        for spec in run {
            if !current.is_empty() && bytes + size(&spec) > budget {
                batches.push(std::mem::take(&mut current));
                bytes = crate::log::batch::BATCH_HEADER_BYTES;
            }
            bytes += size(&spec);
            current.push(spec);
        }
    }
    if !current.is_empty() {
        batches.push(current);
    }
    for batch in &mut batches {
        for (delta, spec) in batch.iter_mut().enumerate() {
            spec.offset_delta = delta as i32;
        }
    }
    batches
}

/// Appends one batch of `specs` to `partition` of the offsets topic, with acks=all.
async fn append_batch(
    partition: &Arc<Partition>,
    specs: &[RecordSpec],
) -> Result<Completion, PersistError> {
    let batch = encode_batch(specs, &BatchOptions::default()).map_err(|_| PersistError::Storage)?;
    let (_, completion) = partition.produce(batch, Acks::All).await.map_err(|e| match e {
        ProduceError::NotLeader => PersistError::NotLeader,
        ProduceError::NotEnoughReplicas(_) => PersistError::NotEnoughReplicas,
        // Not a failure of this coordinator: NOT_COORDINATOR would send the client to
        // find it again, and back, for ever.
        ProduceError::Append(AppendError::Invalid(
            BatchError::TooLarge { .. } | BatchError::DecompressedTooLarge { .. },
        )) => PersistError::TooLarge,
        other => {
            tracing::warn!("appending group records failed: {other}");
            PersistError::Storage
        }
    })?;
    Ok(completion)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn spec(key: &str, value: Option<&str>, delta: i32) -> RecordSpec {
        RecordSpec {
            offset_delta: delta,
            timestamp: 1,
            key: Some(Bytes::from(key.to_owned())),
            value: value.map(|v| Bytes::from(v.to_owned())),
            headers: Vec::new(),
        }
    }

    #[test]
    fn tombstones_alone_are_cut_into_batches_within_the_budget_whole_groups_and_commits_not() {
        let budget = 1_000;
        // Twelve groups of four tombstones of ~120 bytes each (two groups do not fit in one
        // batch), interleaved; then one group of twenty, more than a batch alone.
        let key = |g: usize, n: usize| format!("g{g:02}-{n:02}-{}", "k".repeat(80));
        let mut records: Vec<(GroupId, RecordSpec)> = Vec::new();
        for n in 0..4 {
            for g in 0..12 {
                records
                    .push((GroupId::from(format!("g{g:02}").as_str()), spec(&key(g, n), None, 0)));
            }
        }
        for n in 0..20 {
            records.push((GroupId::from("big"), spec(&key(99, n), None, 0)));
        }
        let batches = batches_of(records.clone(), budget);
        assert!(batches.len() > 12, "{} batches", batches.len());
        let group_of = |s: &RecordSpec| {
            let k = s.key.clone().unwrap_or_default();
            String::from_utf8_lossy(&k[..3]).into_owned()
        };
        for batch in &batches {
            let deltas: Vec<i32> = batch.iter().map(|s| s.offset_delta).collect();
            assert_eq!(deltas, (0..batch.len() as i32).collect::<Vec<_>>());
            let encoded = encode_batch(batch, &BatchOptions::default()).unwrap_or_default();
            assert!(!encoded.is_empty() && encoded.len() <= budget, "{} bytes", encoded.len());
        }
        // Each small group in one batch, its records in order; every record kept.
        for g in 0..12 {
            let name = format!("g{g:02}");
            let holding: Vec<_> =
                batches.iter().filter(|b| b.iter().any(|s| group_of(s) == name)).collect();
            assert_eq!(holding.len(), 1, "group {name} cut across batches");
            let keys: Vec<_> = holding[0].iter().filter(|s| group_of(s) == name).collect();
            let wanted: Vec<_> = (0..4).map(|n| Some(Bytes::from(key(g, n)))).collect();
            assert_eq!(keys.iter().map(|s| s.key.clone()).collect::<Vec<_>>(), wanted);
        }
        let big: Vec<_> = batches.iter().flatten().filter(|s| group_of(s) == "g99").collect();
        let wanted: Vec<_> = (0..20).map(|n| Some(Bytes::from(key(99, n)))).collect();
        assert_eq!(big.iter().map(|s| s.key.clone()).collect::<Vec<_>>(), wanted);
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), records.len());
        // One record with a value: the write lands whole, in one batch, as it was.
        let mut commit = records;
        commit.push((GroupId::from("g00"), spec("commit", Some("1"), 0)));
        for (n, (_, s)) in commit.iter_mut().enumerate() {
            s.offset_delta = n as i32;
        }
        let whole = batches_of(commit.clone(), budget);
        assert_eq!(whole, vec![commit.into_iter().map(|(_, s)| s).collect::<Vec<_>>()]);
    }
}
