//! Scenario: `Log::offset_of_max_timestamp` (ListOffsets' MAX_TIMESTAMP) answers the earliest
//! record holding the largest timestamp, as Kafka's does, when several segments hold it: three
//! segments of batches whose records all carry one timestamp answer offset 0, where the last
//! segment's first record was given before. With the log start inside the first batch, the
//! answer is the first record at or past it, never one below it.

use std::path::PathBuf;
use std::time::Duration;

use weir::log::Log;
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{batch, kept_forever};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Segments, each of batches whose records share one timestamp.
const SEGMENTS: u8 = 3;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    sim.block_on(host, Duration::from_secs(60), |env| async move {
        let log = Log::open(env, PathBuf::from("events-0"), kept_forever())
            .await
            .map_err(|e| e.to_string())?;
        for n in 0..SEGMENTS {
            if n > 0 {
                log.roll().await.map_err(|e| e.to_string())?;
            }
            for _ in 0..=(seed % 2) {
                log.append(batch(n, None), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
        }
        let found = log.offset_of_max_timestamp().await.map_err(|e| e.to_string())?;
        let stamp = log.max_timestamp().map(|(t, _)| t).ok_or("no timestamp")?;
        ensure(found == Some((Offset(0), stamp)), || {
            format!("the largest timestamp {stamp} was found at {found:?}, want offset 0")
        })?;
        // The log start inside the first batch: the first record at or past it.
        let end = log.log_end_offset();
        log.delete_records_before(Offset(1), end).await.map_err(|e| e.to_string())?;
        let found = log.offset_of_max_timestamp().await.map_err(|e| e.to_string())?;
        ensure(found == Some((Offset(1), stamp)), || {
            format!("with the log starting at 1, the largest timestamp was found at {found:?}")
        })
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn log_max_timestamp_is_its_earliest_record() {
    for_each_seed("log_max_timestamp_is_its_earliest_record", 0..2, scenario);
}
