//! Compaction honours `min.compaction.lag.ms` and `max.compaction.lag.ms`, as Kafka's cleaner
//! does (Kafka Streams' versioned stores set the first; the second bounds how long a
//! superseded record may still be read):
//!
//! - With a minimum lag, no segment holding a record newer than it is cleaned, nor any after
//!   it; once the records are old enough, they are.
//! - With a maximum lag, a log whose oldest dirty records have waited past it is cleaned
//!   whatever its dirty ratio (here 1.0, which by itself never cleans), wherever those records
//!   lie among the dirty segments; before then it is not.
//! - A compacted log rolls its active segment once it is as old as the maximum lag, since the
//!   cleaner never touches the active segment; a log that is not compacted keeps `segment.ms`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{CleanOutcome, CleanupPolicy, Log, LogConfig};
use weir::model::LeaderEpoch;
use weir_scenarios::log::all_batches;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

const MINUTE_MS: i64 = 60_000;

fn dir(name: &str) -> PathBuf {
    PathBuf::from(format!("{name}-0"))
}

/// A compacted log in small segments, kept for any time.
fn compacted(min_ratio: f64) -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        retention_ms: -1,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: min_ratio,
        ..LogConfig::default()
    }
}

/// One record of `key` at `timestamp`, about 120 bytes as a batch (three fill a segment).
fn batch(key: &str, timestamp: i64) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp,
        key: Some(Bytes::from(key.to_owned())),
        value: Some(Bytes::from(vec![b'v'; 40])),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

/// How many records of each key the log holds.
async fn key_counts(log: &Log) -> Result<BTreeMap<String, usize>, String> {
    let mut counts = BTreeMap::new();
    for stored in all_batches(log).await? {
        for record in weir::log::records::records(&stored).map_err(|e| e.to_string())? {
            let key = record.key.map(|k| String::from_utf8_lossy(&k).into_owned());
            *counts.entry(key.unwrap_or_default()).or_insert(0) += 1;
        }
    }
    Ok(counts)
}

async fn append_all(log: &Log, batches: &[(&str, i64)]) -> Result<(), String> {
    for &(key, timestamp) in batches {
        log.append(batch(key, timestamp), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Appends padding until the log has `segments` segments, sealing the ones before.
async fn seal(log: &Log, segments: usize, timestamp: i64) -> Result<(), String> {
    let mut n = 0;
    while log.segment_count() < segments {
        append_all(log, &[(&format!("pad-{n}"), timestamp)]).await?;
        n += 1;
    }
    Ok(())
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    sim.block_on(host, Duration::from_secs(600), move |env| async move {
        let now = env.clock.wall_ms();

        // Minimum lag: "old" was superseded ten minutes ago, "new" a moment ago.
        let config = LogConfig { min_compaction_lag_ms: 5 * MINUTE_MS, ..compacted(0.0) };
        let log = Log::open(env.clone(), dir("min"), config).await.map_err(|e| e.to_string())?;
        let old = now - 10 * MINUTE_MS;
        append_all(&log, &[("old", old), ("old", old), ("old", old)]).await?;
        append_all(&log, &[("new", now), ("new", now), ("new", now)]).await?;
        seal(&log, 4, old).await?;
        let end = log.log_end_offset();
        let outcome = log.clean(now, end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || format!("{outcome:?}"))?;
        let counts = key_counts(&log).await?;
        ensure(counts.get("old") == Some(&1) && counts.get("new") == Some(&3), || {
            format!("within the minimum lag, after a pass: {counts:?}")
        })?;
        let later = now + 6 * MINUTE_MS;
        let outcome = log.clean(later, end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || format!("{outcome:?}"))?;
        let counts = key_counts(&log).await?;
        ensure(counts.get("new") == Some(&1), || {
            format!("past the minimum lag, after a pass: {counts:?}")
        })?;

        // Maximum lag, with a dirty ratio that never cleans by itself.
        let config = LogConfig { max_compaction_lag_ms: 5 * MINUTE_MS, ..compacted(1.0) };
        let log = Log::open(env.clone(), dir("max"), config).await.map_err(|e| e.to_string())?;
        append_all(&log, &[("k", now), ("k", now), ("k", now)]).await?;
        seal(&log, 3, now).await?;
        let end = log.log_end_offset();
        let outcome = log.clean(now + MINUTE_MS, end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::BelowDirtyRatio(_)), || {
            format!("within the maximum lag: {outcome:?}")
        })?;
        ensure(key_counts(&log).await?.get("k") == Some(&3), || "cleaned early".to_owned())?;
        let outcome = log.clean(now + 6 * MINUTE_MS, end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || {
            format!("past the maximum lag: {outcome:?}")
        })?;
        let counts = key_counts(&log).await?;
        ensure(counts.get("k") == Some(&1), || format!("past the maximum lag: {counts:?}"))?;

        // Maximum lag, with the old records in a later dirty segment than fresh ones (a
        // producer backfilling, or one whose clock runs behind): still overdue.
        let config = LogConfig { max_compaction_lag_ms: 5 * MINUTE_MS, ..compacted(1.0) };
        let log = Log::open(env.clone(), dir("late"), config).await.map_err(|e| e.to_string())?;
        let old = now - 10 * MINUTE_MS;
        append_all(&log, &[("k", now), ("k", now), ("k", now)]).await?;
        append_all(&log, &[("j", old), ("j", old), ("j", old)]).await?;
        seal(&log, 4, now).await?;
        let end = log.log_end_offset();
        let outcome = log.clean(now + MINUTE_MS, end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || {
            format!("old records past the maximum lag in a later segment: {outcome:?}")
        })?;

        // Rolling at the maximum lag: compacted, and not.
        for (name, policy, rolls) in
            [("roll", CleanupPolicy::Compact, true), ("keep", CleanupPolicy::Delete, false)]
        {
            let config = LogConfig {
                segment_bytes: 1 << 20,
                cleanup_policy: policy,
                max_compaction_lag_ms: 1_000,
                ..LogConfig::default()
            };
            let log = Log::open(env.clone(), dir(name), config).await.map_err(|e| e.to_string())?;
            append_all(&log, &[("a", now)]).await?;
            env.clock.sleep(Duration::from_secs(2)).await;
            append_all(&log, &[("a", now)]).await?;
            let segments = log.segment_count();
            ensure(segments == if rolls { 2 } else { 1 }, || {
                format!("{policy:?}: {segments} segments two seconds after the first append")
            })?;
        }
        Ok(())
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn log_compaction_honours_its_lags() {
    for_each_seed("log_compaction_honours_its_lags", 0..2, scenario);
}
