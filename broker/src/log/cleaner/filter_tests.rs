//! Tests of the retention rule: which records a pass keeps, the tombstone horizon, and what a
//! rewritten batch preserves.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use bytes::Bytes;

use super::*;
use crate::log::batch::Compression;
use crate::log::encode::{BatchOptions, RecordSpec, encode_batch};

const DELETE_RETENTION_MS: i64 = 1_000;

/// A stored batch at `base` of (key, value) records, one offset each.
fn stored(base: i64, records: &[(&str, Option<&str>)], options: BatchOptions) -> Bytes {
    let specs: Vec<RecordSpec> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| RecordSpec {
            offset_delta: i as i32,
            timestamp: 5_000 + i as i64,
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&specs, &BatchOptions { base_offset: base, leader_epoch: 3, ..options }).unwrap()
}

fn map_of(entries: &[(&str, i64)]) -> OffsetMap {
    let mut map = OffsetMap::new(1 << 20);
    for (key, offset) in entries {
        map.insert(key.as_bytes(), Offset(*offset)).unwrap();
    }
    map
}

fn rules(map: &OffsetMap, map_end: i64, now_ms: i64) -> Rules<'_> {
    Rules {
        map,
        map_end: Offset(map_end),
        now_ms,
        delete_retention_ms: DELETE_RETENTION_MS,
        tombstones_may_go: true,
        producers_last: &NO_PRODUCERS,
    }
}

/// No producer's newest batch to keep.
static NO_PRODUCERS: BTreeSet<Offset> = BTreeSet::new();

fn run(bytes: &Bytes, rules: &Rules<'_>) -> (Filtered, Removed) {
    let header = batch::validate(bytes, usize::MAX).unwrap();
    filter_batch(bytes, &header, rules).unwrap()
}

/// (offset, key, value) of every record.
fn contents(bytes: &Bytes) -> Vec<(i64, String, Option<String>)> {
    records::records(bytes)
        .unwrap()
        .into_iter()
        .map(|r| {
            let text = |b: Bytes| String::from_utf8(b.to_vec()).unwrap();
            (r.offset, text(r.key.unwrap()), r.value.map(text))
        })
        .collect()
}

fn rewritten(filtered: Filtered) -> Bytes {
    match filtered {
        Filtered::Rewritten(bytes) => bytes,
        other => panic!("expected a rewrite, got {other:?}"),
    }
}

#[test]
fn superseded_records_go_and_the_batch_keeps_its_identity() {
    let options = BatchOptions {
        compression: Compression::Lz4,
        producer_id: 77,
        producer_epoch: 2,
        base_sequence: 40,
        ..BatchOptions::default()
    };
    let bytes = stored(10, &[("a", Some("1")), ("b", Some("2")), ("a", Some("3"))], options);
    let map = map_of(&[("a", 12), ("b", 30)]);
    let (filtered, removed) = run(&bytes, &rules(&map, 40, 0));
    assert_eq!(removed, Removed { superseded: 2, tombstones: 0 });
    let out = rewritten(filtered);
    assert_eq!(contents(&out), vec![(12, "a".into(), Some("3".into()))]);
    let header = batch::validate(&out, usize::MAX).unwrap();
    assert_eq!((header.base_offset(), header.last_offset()), (10, 12));
    assert_eq!(header.compression(), Compression::Lz4);
    assert_eq!(
        (header.producer_id(), header.producer_epoch(), header.base_sequence()),
        (77, 2, 40)
    );
    assert_eq!(header.partition_leader_epoch(), 3);
    assert_eq!(header.delete_horizon_ms(), None, "no tombstone, no horizon");
    let ts: Vec<i64> = records::records(&out).unwrap().iter().map(|r| r.timestamp).collect();
    assert_eq!(ts, vec![5_002], "timestamps survive");
}

#[test]
fn a_batch_with_nothing_to_remove_is_kept_byte_for_byte() {
    let bytes = stored(0, &[("a", Some("1")), ("b", Some("2"))], BatchOptions::default());
    let map = map_of(&[("a", 0), ("b", 1)]);
    assert_eq!(run(&bytes, &rules(&map, 2, 0)).0, Filtered::Unchanged);
    let all_gone = map_of(&[("a", 5), ("b", 6)]);
    assert_eq!(run(&bytes, &rules(&all_gone, 7, 0)).0, Filtered::Dropped);
}

#[test]
fn a_tombstone_gets_a_horizon_first_and_goes_only_once_now_reaches_it() {
    let bytes = stored(0, &[("a", None), ("b", Some("x"))], BatchOptions::default());
    let map = map_of(&[("a", 0), ("b", 1)]);
    // First pass: the tombstone stays, and the batch is stamped with now + delete.retention.ms.
    let (filtered, removed) = run(&bytes, &rules(&map, 2, 50_000));
    assert_eq!(removed, Removed::default());
    let stamped = rewritten(filtered);
    let header = batch::validate(&stamped, usize::MAX).unwrap();
    assert_eq!(header.delete_horizon_ms(), Some(50_000 + DELETE_RETENTION_MS));
    assert_eq!(contents(&stamped), contents(&bytes));
    let ts: Vec<i64> = records::records(&stamped).unwrap().iter().map(|r| r.timestamp).collect();
    assert_eq!(ts, vec![5_000, 5_001], "timestamps survive the horizon in the base timestamp");
    // Before the horizon: unchanged, however old the record's own timestamp.
    let early = rules(&map, 2, 50_000 + DELETE_RETENTION_MS - 1);
    assert_eq!(run(&stamped, &early).0, Filtered::Unchanged);
    // At the horizon: the tombstone goes, the live record stays.
    let (filtered, removed) = run(&stamped, &rules(&map, 2, 50_000 + DELETE_RETENTION_MS));
    assert_eq!(removed, Removed { superseded: 0, tombstones: 1 });
    assert_eq!(contents(&rewritten(filtered)), vec![(1, "b".into(), Some("x".into()))]);
}

#[test]
fn an_expired_tombstone_past_the_map_is_kept() {
    let bytes = stored(0, &[("a", None)], BatchOptions::default());
    let empty = OffsetMap::new(1 << 20);
    let stamped = rewritten(run(&bytes, &rules(&empty, 0, 0)).0);
    // The map ends before the tombstone: an older "a" may still exist, so it must stay.
    assert_eq!(run(&stamped, &rules(&empty, 0, i64::MAX)).0, Filtered::Unchanged);
    // Covered by the map (the clean section's older "a" went when this one was mapped): it goes.
    assert_eq!(run(&stamped, &rules(&empty, 1, i64::MAX)).0, Filtered::Dropped);
}

#[test]
fn an_expired_tombstone_past_damage_is_kept_but_superseded_records_still_go() {
    let horizon = BatchOptions { delete_horizon_ms: Some(0), ..BatchOptions::default() };
    let stamped = stored(0, &[("a", None), ("b", Some("old")), ("b", Some("new"))], horizon);
    let map = map_of(&[("a", 0), ("b", 2)]);
    let past_damage = Rules { tombstones_may_go: false, ..rules(&map, 3, i64::MAX) };
    let (filtered, removed) = run(&stamped, &past_damage);
    assert_eq!(removed, Removed { superseded: 1, tombstones: 0 });
    assert_eq!(
        contents(&rewritten(filtered)),
        vec![(0, "a".into(), None), (2, "b".into(), Some("new".into()))]
    );
    // The same batch where no damage came before it: the tombstone goes too.
    let removed = run(&stamped, &rules(&map, 3, i64::MAX)).1;
    assert_eq!(removed, Removed { superseded: 1, tombstones: 1 });
}

#[test]
fn a_superseded_tombstone_goes_without_waiting() {
    let bytes = stored(0, &[("a", None)], BatchOptions::default());
    let map = map_of(&[("a", 9)]);
    let (filtered, removed) = run(&bytes, &rules(&map, 10, 0));
    assert_eq!((filtered, removed), (Filtered::Dropped, Removed { superseded: 1, tombstones: 0 }));
}

#[test]
fn an_empty_batch_keeps_the_offset_range_and_producer() {
    let options = BatchOptions { producer_id: 5, base_sequence: 9, ..BatchOptions::default() };
    let bytes = stored(100, &[("a", Some("1")), ("b", Some("2"))], options);
    let header = batch::validate(&bytes, usize::MAX).unwrap();
    let empty = empty_batch(&header).unwrap();
    let kept = batch::validate(&empty, usize::MAX).unwrap();
    assert_eq!((kept.base_offset(), kept.last_offset(), kept.record_count()), (100, 101, 0));
    assert_eq!((kept.producer_id(), kept.base_sequence()), (5, 9));
    assert_eq!(kept.partition_leader_epoch(), 3);
}
