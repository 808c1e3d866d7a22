//! Recovery must not take a legitimate gap for a hole. A follower's cut can remove a batch that
//! straddles the log start: the log then ends below its start, and continues at the start in a
//! segment of its own, so one segment ends short of the next one's base by design. Here that
//! layout meets a partition checkpoint that can no longer be read (a latent sector error):
//! recovery no longer knows the log start, so it must not cut the log at the gap — that would
//! delete the acknowledged batches after it.

use std::time::Duration;

use weir::log::{Log, LogConfig};

use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, batch, dir};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

const EPOCH: LeaderEpoch = LeaderEpoch(1);

/// One segment for all the batches, and no retention by time (their timestamps are old).
fn config() -> LogConfig {
    LogConfig { retention_ms: -1, ..LogConfig::default() }
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("follower");
    // Batches 0, 1, 2 hold offsets 0-2, 3-5, 6-8 in one segment; the log start moves into
    // batch 1, and the cut at the start removes batches 1 and 2: the segment ends at 3, and the
    // log continues at 4 in a new one.
    let start = Offset(BATCH_RECORDS + 1);
    let after = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            for n in 0..3 {
                log.append(batch(n, None), EPOCH).await.map_err(|e| e.to_string())?;
            }
            let end = log.log_end_offset();
            log.delete_records_before(start, end).await.map_err(|e| e.to_string())?;
            let cut = log.truncate_to(start).await.map_err(|e| e.to_string())?;
            if cut != start {
                return Err(format!("the cut ended the log at {cut}, not at its start {start}"));
            }
            let after = log.append(batch(9, None), EPOCH).await.map_err(|e| e.to_string())?;
            log.checkpoint().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(after.base_offset)
        })
        .ok_or("the appends did not finish")??;
    ensure(after == start, || format!("the batch after the cut went to {after}, not {start}"))?;
    sim.corrupt_file(host, dir().join("partition.checkpoint"), 12)
        .map_err(|e| format!("corrupting the checkpoint: {e}"))?;
    sim.restart(host);
    let (end, stored) = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            let end = log.log_end_offset();
            let read = log.read(start, 1 << 20, end).await.map_err(|e| e.to_string())?;
            let stored: Vec<_> = weir::log::split::split_batches(&read.records)
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((end, stored))
        })
        .ok_or("the reopen did not finish")??;
    let expected_end = Offset(start.0 + BATCH_RECORDS);
    ensure(end == expected_end, || {
        format!("the log reopened ending at {end}: the acknowledged batch at {start} is gone")
    })?;
    ensure(stored.first() == Some(&batch(9, Some((start, EPOCH)))), || {
        format!("{} batches read at {start}, not the acknowledged one", stored.len())
    })
}

#[test]
fn log_recovery_keeps_data_past_a_cut_below_the_start() {
    for_each_seed("log_recovery_keeps_data_past_a_cut_below_the_start", 0..8, scenario);
}
