//! Fault scenario: DeleteRecords advances a log's start, but the checkpoint that records the
//! new start fails (every sync fails meanwhile). The log keeps the new start in memory and
//! refuses reads below it, yet a power failure would reopen it at the old one, so that start
//! must not be reported as deleted: the log's durable start stays where it was. A second
//! DeleteRecords to the same offset, once the disk works again, writes the checkpoint again
//! (before the fix it found nothing to advance and wrote nothing, and the leader answered it),
//! and after a power failure the log reopens at the new start.

use std::sync::Arc;
use std::time::Duration;

use weir::log::Log;
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{batch, dir, segment_per_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Batches appended (each fills a segment of [`segment_per_batch`]).
const BATCHES: u8 = 6;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    let (log, end) = sim
        .block_on(host, limit, |env| async move {
            let log =
                Log::open(env, dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
            for n in 0..BATCHES {
                log.append(batch(n, None), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
            }
            log.flush().await.map_err(|e| e.to_string())?;
            log.checkpoint().await.map_err(|e| e.to_string())?;
            let end = log.log_end_offset();
            Ok::<_, String>((Arc::new(log), end))
        })
        .ok_or("the appends did not finish")??;
    // Inside a batch in odd seeds, at a batch boundary in even ones.
    let cut = Offset(end.0 / 2 + (seed % 2) as i64);

    // Every sync fails while the first DeleteRecords runs.
    sim.set_disk_faults(host, DiskFaults { sync_error: 1.0, ..DiskFaults::default() });
    let deleting = Arc::clone(&log);
    let first = sim
        .block_on(host, limit, move |_| async move {
            deleting.delete_records_before(cut, end).await.map_err(|e| e.to_string())
        })
        .ok_or("the first DeleteRecords did not finish")?;
    let (memory, durable) = (log.log_start_offset(), log.durable_log_start_offset());
    ensure(first.is_err(), || {
        format!("DeleteRecords succeeded with every sync failing: {first:?}")
    })?;
    ensure(durable < cut, || {
        format!("the durable start is {durable} (in memory {memory}) after a failed checkpoint")
    })?;

    // The disk works again: the same DeleteRecords makes the start durable.
    sim.set_disk_faults(host, DiskFaults::default());
    let deleting = Arc::clone(&log);
    let second = sim
        .block_on(host, limit, move |_| async move {
            deleting.delete_records_before(cut, end).await.map_err(|e| e.to_string())
        })
        .ok_or("the second DeleteRecords did not finish")??;
    ensure(second == cut && log.durable_log_start_offset() == cut, || {
        format!(
            "the second DeleteRecords gave {second}, with the durable start at {}",
            log.durable_log_start_offset()
        )
    })?;
    drop(log);
    sim.power_fail(host);
    sim.start(host);
    let reopened = sim
        .block_on(host, limit, |env| async move {
            let log =
                Log::open(env, dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(log.log_start_offset())
        })
        .ok_or("the reopen did not finish")??;
    ensure(reopened == cut, || {
        format!("after the power failure the log starts at {reopened}, not at the deleted {cut}")
    })
}

#[test]
fn log_delete_records_after_failed_checkpoint() {
    for_each_seed("log_delete_records_after_failed_checkpoint", 0..8, scenario);
}
