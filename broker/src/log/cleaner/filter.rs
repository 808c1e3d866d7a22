//! The retention rule for one batch, and the batch that results.
//!
//! A record is kept unless one of these holds (Kafka's `LogCleaner.shouldRetainRecord`):
//! - the offset map holds a later offset for its key (it is superseded);
//! - it is a tombstone (null value) whose batch carries a delete horizon that `now` has reached.
//!
//! Records at or past the end of the map's coverage are kept as they are, tombstones included:
//! their keys were not looked at, so an older record of the same key may still exist below, and
//! dropping the tombstone would bring that record back. Keyless records (which a compacted log
//! refuses, but a log switched from `delete` may hold) are kept: no later record can supersede
//! them. Control batches are kept whole (transactions are not cleaned yet).
//!
//! Tombstones, as Kafka does since KIP-534: the first pass that keeps a tombstone in a batch
//! without a delete horizon rewrites that batch with horizon = now + `delete.retention.ms`,
//! stored in the batch itself (base timestamp plus attribute bit 6, so it survives restarts and
//! uses the broker's clock, never a producer's timestamps). A later pass drops the tombstone
//! once now ≥ horizon. So a tombstone lives at least `delete.retention.ms` after it was first
//! cleaned — time for a consumer that read the older value to see the delete.
//!
//! A rewritten batch keeps its base offset, last offset delta (so the next batch's offset and
//! the producer's last sequence stay), producer id/epoch/base sequence, partition leader epoch,
//! timestamp type and codec; surviving records keep their offsets, timestamps, keys, values and
//! headers. A batch left with no records disappears — unless it ends its cleaned segment (see
//! [`empty_batch`]) or is an idempotent producer's newest ([`Rules::keeps_empty`]).

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::log::batch::{self, BatchError, BatchHeader, TimestampType};
use crate::log::encode::{BatchOptions, RecordSpec, encode_batch};
use crate::log::records::{self, Record};
use crate::model::Offset;

use super::offset_map::OffsetMap;

/// What decides a record's fate in one pass.
#[derive(Clone, Copy)]
pub(super) struct Rules<'a> {
    pub(super) map: &'a OffsetMap,
    /// One past the last offset the map has seen: records here or later are kept.
    pub(super) map_end: Offset,
    pub(super) now_ms: i64,
    pub(super) delete_retention_ms: i64,
    /// Whether expired tombstones may go. Not past damage the pass could not read: an older
    /// record of a tombstone's key may lie in a batch the map missed or a segment left as it
    /// was, and dropping the tombstone would bring that record back once it reads again.
    pub(super) tombstones_may_go: bool,
    /// The last offsets of the producers' newest batches: such a batch is kept, emptied if all
    /// its records go, as Kafka's cleaner keeps it, so that producer state rebuilt from the log
    /// (a new replica, a restart past the snapshots) still knows each producer's last sequence.
    pub(super) producers_last: &'a BTreeSet<Offset>,
}

impl Rules<'_> {
    /// Whether a batch all of whose records go is kept empty: a producer's newest.
    pub(super) fn keeps_empty(&self, header: &BatchHeader) -> bool {
        header.has_producer_id() && self.producers_last.contains(&Offset(header.last_offset()))
    }
}

/// What became of a batch.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Filtered {
    /// Keep the stored bytes as they are.
    Unchanged,
    /// Every record went.
    Dropped,
    /// Keep these bytes instead.
    Rewritten(Bytes),
}

/// Records removed from one batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Removed {
    pub(super) superseded: u64,
    pub(super) tombstones: u64,
}

/// Why a record goes, if it does.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Keep,
    Superseded,
    ExpiredTombstone,
}

impl Rules<'_> {
    fn verdict(&self, record: &Record, horizon: Option<i64>) -> Verdict {
        let offset = Offset(record.offset);
        let Some(key) = record.key.as_deref() else {
            return Verdict::Keep;
        };
        if offset >= self.map_end {
            return Verdict::Keep;
        }
        if self.map.latest(key).is_some_and(|latest| latest > offset) {
            return Verdict::Superseded;
        }
        if record.value.is_none()
            && self.tombstones_may_go
            && horizon.is_some_and(|h| self.now_ms >= h)
        {
            return Verdict::ExpiredTombstone;
        }
        Verdict::Keep
    }
}

/// Applies `rules` to one verified batch.
pub(super) fn filter_batch(
    bytes: &Bytes,
    header: &BatchHeader,
    rules: &Rules<'_>,
) -> Result<(Filtered, Removed), BatchError> {
    let mut removed = Removed::default();
    if header.is_control() {
        return Ok((Filtered::Unchanged, removed));
    }
    // An emptied batch a pass kept (a producer's newest, or its cleaned segment's last) goes
    // once nothing keeps it, as in Kafka: else each would stay for ever.
    if header.record_count() == 0 {
        return Ok((Filtered::Dropped, removed));
    }
    let horizon = header.delete_horizon_ms();
    let mut kept = Vec::new();
    let mut keeps_tombstone = false;
    for record in records::record_iter(bytes)? {
        let record = record?;
        match rules.verdict(&record, horizon) {
            Verdict::Keep => {
                keeps_tombstone |= record.key.is_some() && record.value.is_none();
                kept.push(record);
            }
            Verdict::Superseded => removed.superseded += 1,
            Verdict::ExpiredTombstone => removed.tombstones += 1,
        }
    }
    let needs_horizon = keeps_tombstone && horizon.is_none();
    if removed == Removed::default() && !needs_horizon {
        return Ok((Filtered::Unchanged, removed));
    }
    if kept.is_empty() {
        return Ok((Filtered::Dropped, removed));
    }
    let horizon = match horizon {
        Some(h) => Some(h),
        None if needs_horizon => Some(rules.now_ms.saturating_add(rules.delete_retention_ms)),
        None => None,
    };
    Ok((reencode(bytes, header, kept, horizon), removed))
}

/// The batch's fields with no records: what is kept of the last batch of a cleaned segment when
/// all its records went, or of a producer's newest. It keeps the segment's offset range (its
/// next offset is the next segment's base), which is how recovery of an interrupted swap knows
/// which segments the cleaned one replaced, and its max timestamp; Kafka likewise keeps empty
/// batches to carry producer state.
pub(super) fn empty_batch(header: &BatchHeader) -> Result<Bytes, BatchError> {
    let options = options(header, None);
    let bytes = encode_batch(&[], &options)
        .map_err(|_| BatchError::Corrupt("an empty batch could not be encoded"))?;
    check_rewrite(header, &bytes).map(|_| bytes)
}

/// Re-encodes the kept records, or keeps the original if that fails: keeping more than the
/// rules require is always correct, writing a doubtful batch never is.
fn reencode(
    bytes: &Bytes,
    header: &BatchHeader,
    kept: Vec<Record>,
    horizon: Option<i64>,
) -> Filtered {
    let base = header.base_offset();
    let specs: Option<Vec<RecordSpec>> = kept
        .into_iter()
        .map(|r| {
            Some(RecordSpec {
                offset_delta: i32::try_from(r.offset.checked_sub(base)?).ok()?,
                timestamp: r.timestamp,
                key: r.key,
                value: r.value,
                headers: r.headers,
            })
        })
        .collect();
    let encoded = specs
        .ok_or("an offset delta does not fit")
        .and_then(|specs| {
            encode_batch(&specs, &options(header, horizon)).map_err(|_| "encoding failed")
        })
        .and_then(|out| check_rewrite(header, &out).map(|_| out).map_err(|_| "invalid result"));
    match encoded {
        Ok(out) => Filtered::Rewritten(out),
        Err(why) => {
            tracing::warn!(
                offset = base,
                bytes = bytes.len(),
                "cleaner keeps a batch whole: {why}"
            );
            Filtered::Unchanged
        }
    }
}

fn options(header: &BatchHeader, horizon: Option<i64>) -> BatchOptions {
    let log_append = header.timestamp_type() == TimestampType::LogAppend;
    BatchOptions {
        base_offset: header.base_offset(),
        leader_epoch: header.partition_leader_epoch(),
        compression: header.compression(),
        log_append_time: log_append.then_some(header.max_timestamp()),
        producer_id: header.producer_id(),
        producer_epoch: header.producer_epoch(),
        base_sequence: header.base_sequence(),
        transactional: header.is_transactional(),
        control: false,
        last_offset_delta: Some(header.last_offset_delta()),
        delete_horizon_ms: horizon,
        empty_timestamp_ms: Some(header.max_timestamp()),
    }
}

/// Asserts what a rewrite must preserve (on in release: a wrong batch would be written to disk).
fn check_rewrite(original: &BatchHeader, rewritten: &Bytes) -> Result<BatchHeader, BatchError> {
    let new = batch::validate(rewritten, usize::MAX)?;
    let same = new.base_offset() == original.base_offset()
        && new.last_offset() == original.last_offset()
        && new.partition_leader_epoch() == original.partition_leader_epoch()
        && new.producer_id() == original.producer_id()
        && new.producer_epoch() == original.producer_epoch()
        && new.base_sequence() == original.base_sequence()
        && new.timestamp_type() == original.timestamp_type();
    if same { Ok(new) } else { Err(BatchError::Corrupt("a rewrite changed the batch's identity")) }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
