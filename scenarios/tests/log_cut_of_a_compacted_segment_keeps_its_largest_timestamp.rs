//! A cut of a compacted segment must keep the largest timestamp of what it keeps. A cut walks
//! from the index entry before the last one below the cut, and takes the largest timestamp
//! below that entry from the time index: every offset entry comes with a time entry whenever the
//! largest timestamp grew. The entries a segment gets on either side of a gap in offsets (so
//! that reads walk past damage there) must keep that promise too: without a time entry beside
//! the one before a gap, a segment whose timestamps go back (CreateTime is the client's clock)
//! forgot its largest one, and a lookup by a timestamp between the two skipped the segment.
//!
//! Batches of one record each, with timestamps 100, 500, 200, 210 and 600; the fourth is
//! superseded by a later record of its key, so compaction leaves a gap before the fifth. The
//! log is cut at the fifth: the segment's largest timestamp must still be 500, and a lookup of
//! 400 must find offset 1.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{CleanOutcome, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

fn dir() -> PathBuf {
    PathBuf::from("compact-0")
}

/// One segment for the batches below, sealed by the padding after them; an index entry only
/// every 4 KiB.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        index_interval_bytes: 4_096,
        retention_ms: -1,
        cleanup_policy: weir::log::CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

fn batch(key: &str, timestamp: i64) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp,
        key: Some(Bytes::from(key.to_owned())),
        value: Some(Bytes::from_static(b"value")),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    sim.block_on(host, Duration::from_secs(600), move |env| async move {
        let log = Log::open(env.clone(), dir(), config()).await.map_err(|e| e.to_string())?;
        let batches = [("a", 100), ("b", 500), ("c", 200), ("dup", 210), ("d", 600)];
        for (key, timestamp) in batches {
            log.append(batch(key, timestamp), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        // The later "dup", then padding until the first segment is sealed.
        log.append(batch("dup", 620), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        let mut n = 0;
        while log.segment_count() < 3 {
            let pad = format!("pad-{n}");
            log.append(batch(&pad, 700 + n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            n += 1;
        }
        let end = log.log_end_offset();
        let outcome = log.clean(env.clock.wall_ms(), end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || format!("{outcome:?}"))?;
        ensure(
            log.read(Offset(3), 1 << 20, end).await.is_ok_and(|r| {
                weir::log::split::split_batches(&r.records)
                    .flatten()
                    .next()
                    .and_then(|b| weir::log::batch::parse_header(&b).ok())
                    .is_some_and(|h| h.base_offset() == 4)
            }),
            || "offset 3 was not compacted away".to_owned(),
        )?;
        log.truncate_to(Offset(4)).await.map_err(|e| e.to_string())?;
        let max = log.max_timestamp().map(|(t, _)| t);
        ensure(max == Some(500), || format!("the largest timestamp after the cut is {max:?}"))?;
        let found = log.offset_for_timestamp(400).await.map_err(|e| e.to_string())?;
        ensure(found.is_some_and(|(offset, _)| offset == Offset(1)), || {
            format!("a lookup of 400 after the cut found {found:?}")
        })
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn log_cut_of_a_compacted_segment_keeps_its_largest_timestamp() {
    for_each_seed("log_cut_of_a_compacted_segment_keeps_its_largest_timestamp", 0..2, scenario);
}
