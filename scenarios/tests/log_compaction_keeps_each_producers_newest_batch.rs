//! Compaction keeps each idempotent producer's newest batch, emptied if all its records were
//! superseded, with its timestamp, as Kafka's cleaner does, so that producer state rebuilt from
//! the log (a replica that starts again past its snapshots, a follower's cut, a new replica)
//! still knows the producer's last sequence, and does not take it for expired. Before, such a
//! batch was dropped: the rebuilt state knew the producer only up to an older batch, and its
//! next batch was refused as out of order, which a Kafka producer gives up on. Once the
//! producer has written a newer batch, the next pass drops the emptied one, as Kafka's does.

use std::time::Duration;

use bytes::Bytes;
use weir::log::batch::parse_header;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::producers::{Decision, PRODUCER_ID_EXPIRATION_MS_DEFAULT};
use weir::log::{CleanOutcome, CleanupPolicy, LogConfig};
use weir::model::Offset;
use weir::partition::producers;
use weir_scenarios::log::{all_batches, open_partition};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// The idempotent producer whose newest batch is all superseded.
const PRODUCER: i64 = 7;
/// Another producer, which supersedes it.
const OTHER: i64 = 8;
/// Batches of other keys after, so that the first lie in sealed segments.
const FILLERS: i64 = 6;

/// A batch of one record `key`=`value` at `offset`, from `producer` at `sequence` (epoch 0);
/// producer -1 for none.
fn batch(offset: i64, key: &str, value: &str, producer: i64, sequence: i32) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 1_000,
        key: Some(Bytes::from(key.to_owned())),
        value: Some(Bytes::from(value.to_owned())),
        headers: Vec::new(),
    };
    let idempotent = producer >= 0;
    let options = BatchOptions {
        base_offset: offset,
        leader_epoch: 0,
        producer_id: producer,
        producer_epoch: if idempotent { 0 } else { -1 },
        base_sequence: if idempotent { sequence } else { -1 },
        ..BatchOptions::default()
    };
    encode_batch(&[record], &options).unwrap_or_default()
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    sim.block_on(host, Duration::from_secs(60), |env| async move {
        let config = LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            // About five batches a segment: the producer's newest is not the last of its
            // cleaned group, which is kept anyway.
            segment_bytes: 400,
            min_cleanable_dirty_ratio: 0.0,
            retention_ms: -1,
            ..LogConfig::default()
        };
        let partition = open_partition(env.clone(), config).await?;
        // The producer writes `a` (kept) and then `b`, which the other producer writes again:
        // the producer's newest batch holds only a superseded record.
        let mut written = vec![
            batch(0, "a", "1", PRODUCER, 0),
            batch(1, "b", "1", PRODUCER, 1),
            batch(2, "b", "2", OTHER, 0),
        ];
        written.extend((0..FILLERS).map(|n| batch(3 + n, &format!("f{n}"), "x", -1, -1)));
        // By seed, written in one call or batch by batch.
        if seed.is_multiple_of(2) {
            partition.append_replicated(&written).await.map_err(|e| e.to_string())?;
        } else {
            for b in &written {
                partition
                    .append_replicated(std::slice::from_ref(b))
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        partition.log.roll().await.map_err(|e| e.to_string())?;
        // The producer's newest batch is not the last of its segment (which is kept anyway).
        let segments = partition.log.describe_segments();
        let holding = segments.iter().find(|(base, _, next, _)| base.0 <= 1 && next.0 > 1);
        ensure(holding.is_some_and(|(_, _, next, _)| next.0 > 2), || {
            format!("offset 1 ends its segment: {segments:?}")
        })?;
        let end = partition.log.log_end_offset();
        let outcome = partition.clean(1_000, end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || {
            format!("not cleaned: {outcome:?}")
        })?;
        // The producer's newest batch is there, with no records; its older one keeps `a`.
        let stored = all_batches(&partition.log).await?;
        let headers: Vec<_> = stored.iter().filter_map(|b| parse_header(b).ok()).collect();
        let newest = headers.iter().find(|h| h.producer_id() == PRODUCER && h.last_offset() == 1);
        let emptied = newest.is_some_and(|h| {
            h.record_count() == 0 && h.base_sequence() == 1 && h.max_timestamp() == 1_000
        });
        ensure(emptied, || format!("the producer's newest batch after the clean: {newest:?}"))?;
        ensure(
            headers.iter().any(|h| h.producer_id() == PRODUCER && h.last_offset() == 0),
            || "the producer's batch of `a` is gone".to_owned(),
        )?;
        // Rebuilt from the log alone, the producer state takes the producer's next batch.
        let mut rebuilt =
            producers::recover(&partition.log, &*env.disk).await.map_err(|e| e.to_string())?;
        // A checkpoint expires producers idle too long, by their batches' timestamps.
        rebuilt.expire(2_000, PRODUCER_ID_EXPIRATION_MS_DEFAULT);
        let next = batch(end.0, "c", "1", PRODUCER, 2);
        let header = parse_header(&next).map_err(|e| e.to_string())?;
        let decision = rebuilt.check(&header);
        ensure(matches!(decision, Ok(Decision::Append)), || {
            format!(
                "the producer's next batch, against the state rebuilt from the log: {decision:?}"
            )
        })?;
        ensure(partition.log.log_end_offset() == end && end == Offset(3 + FILLERS), || {
            format!("the log ends at {}", partition.log.log_end_offset())
        })?;
        // The producer writes on; the next pass drops the emptied batch nothing keeps now.
        let more = [batch(end.0, "c", "1", PRODUCER, 2), batch(end.0 + 1, "c", "2", OTHER, 1)];
        partition.append_replicated(&more).await.map_err(|e| e.to_string())?;
        partition.log.roll().await.map_err(|e| e.to_string())?;
        let upper = partition.log.log_end_offset();
        partition.clean(1_000, upper).await.map_err(|e| e.to_string())?;
        let stored = all_batches(&partition.log).await?;
        let headers: Vec<_> = stored.iter().filter_map(|b| parse_header(b).ok()).collect();
        let stale = headers.iter().find(|h| h.record_count() == 0 && h.last_offset() == 1);
        ensure(stale.is_none(), || format!("an emptied batch stayed: {stale:?}"))
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn log_compaction_keeps_each_producers_newest_batch() {
    for_each_seed("log_compaction_keeps_each_producers_newest_batch", 0..4, scenario);
}
