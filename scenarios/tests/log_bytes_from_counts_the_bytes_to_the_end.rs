//! Scenario: `Log::bytes_from`, the estimate of how far a reader is behind in bytes, is exact at
//! batch boundaries of equal batches and at segment boundaries, counts whole segments after
//! the one holding the offset, and is zero at or past the end and the whole log before its start.

use std::path::PathBuf;
use std::time::Duration;

use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches per segment.
const PER_SEGMENT: i64 = 4;
/// Segments.
const SEGMENTS: i64 = 3;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    sim.block_on(host, Duration::from_secs(60), |env| async move {
        let log = Log::open(env, PathBuf::from("events-0"), LogConfig::default())
            .await
            .map_err(|e| e.to_string())?;
        let one = batch(7, None).len() as u64;
        for segment in 0..SEGMENTS {
            if segment > 0 {
                log.roll().await.map_err(|e| e.to_string())?;
            }
            for _ in 0..PER_SEGMENT {
                log.append(batch(7, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
        }
        let batches = SEGMENTS * PER_SEGMENT;
        let end = log.log_end_offset();
        ensure(end == Offset(batches * BATCH_RECORDS), || format!("the log ends at {end:?}"))?;
        for n in 0..=batches {
            let at = Offset(n * BATCH_RECORDS);
            let want = (batches - n) as u64 * one;
            let got = log.bytes_from(at);
            ensure(got == want, || format!("{got} bytes from batch {n} ({at:?}), want {want}"))?;
        }
        // Inside a batch: between the counts of its two ends.
        let inside = log.bytes_from(Offset(BATCH_RECORDS / 2));
        ensure(inside < batches as u64 * one && inside > (batches - 1) as u64 * one, || {
            format!("{inside} bytes from the middle of the first batch")
        })?;
        ensure(log.bytes_from(Offset(end.0 + 5)) == 0, || "bytes past the end".to_string())?;
        log.delete_records_before(Offset(BATCH_RECORDS * PER_SEGMENT), end)
            .await
            .map_err(|e| e.to_string())?;
        let whole = log.size_bytes();
        ensure(log.bytes_from(Offset(0)) == whole, || {
            format!(
                "{} bytes from below the start, the log holds {whole}",
                log.bytes_from(Offset(0))
            )
        })
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn log_bytes_from_counts_the_bytes_to_the_end() {
    for_each_seed("log_bytes_from_counts_the_bytes_to_the_end", 0..2, scenario);
}
