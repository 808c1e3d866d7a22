//! Fault scenario: a follower cuts its log while a group-commit sync of the old tail is still
//! under way on a slow disk, and appends its leader's batches over the cut before that sync
//! ends. The old sync covered the old batches, not the new ones at the same offsets (the
//! simulated disk, like a real one, does not promise that a sync carries writes made while it
//! runs): when it ends it must not mark the log durable up to the old end, or whoever waits on
//! the new batches would be told they are durable when no sync has covered them. Then a power
//! failure: everything below the offset the log called durable must come back, exactly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weir::log::Log;
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, all_batches, batch, dir, segment_per_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// How long each sync takes once the disk turns slow.
const SYNC: Duration = Duration::from_secs(2);
/// Records per batch.
const RECORDS: i64 = BATCH_RECORDS;
/// Batches past the first when the old sync starts (each in a segment of its own, so that the
/// old sync has many files to go through and is still under way after the cut).
const OLD_TAIL: u8 = 12;
/// Batches appended over the cut: more than were cut, so the new end passes the old one.
const NEW_TAIL: u8 = 14;
/// The log epoch every batch carries.
const EPOCH: i32 = 1;

/// Batch `n` as the log stores it from offset `at`.
fn stored(n: u8, at: Offset) -> Bytes {
    batch(n, Some((at, LeaderEpoch(EPOCH))))
}

/// One past the last offset of a stored batch.
fn stored_end(batch: &Bytes) -> Offset {
    let header = weir::log::batch::parse_header(batch).expect("a stored batch");
    Offset(header.last_offset() + 1)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("follower");
    let log = sim
        .block_on(host, Duration::from_secs(60), |env| async move {
            let log =
                Log::open(env, dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
            log.append(batch(0, None), LeaderEpoch(EPOCH)).await.map_err(|e| e.to_string())?;
            for n in 1..=OLD_TAIL {
                let appended = log.append_unsynced(batch(n, None), LeaderEpoch(EPOCH)).await;
                appended.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Arc::new(log))
        })
        .ok_or("the appends did not finish")??;
    let kept = Offset(RECORDS);
    ensure(log.durable_offset() == kept, || format!("durable to {}", log.durable_offset()))?;
    sim.set_disk_faults(host, DiskFaults { sync_latency: SYNC, ..DiskFaults::default() });
    // The old sync.
    let old_sync = Arc::new(Mutex::new(None));
    let _old = {
        let (log, old_sync) = (Arc::clone(&log), Arc::clone(&old_sync));
        sim.spawn(host, "old-sync", move |_| async move {
            let flushed = log.flush().await.map_err(|e| e.to_string());
            *old_sync.lock().unwrap_or_else(|p| p.into_inner()) = Some(flushed);
        })
    };
    let old_done = || old_sync.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    sim.run_for(Duration::from_millis(100));
    ensure(!old_done(), || "the old sync ended at once on a slow disk".into())?;
    // The cut, and the new tail over it.
    let cut_log = Arc::clone(&log);
    let new_end = sim
        .block_on(host, Duration::from_secs(600), move |_| async move {
            let end = cut_log.truncate_to(kept).await.map_err(|e| e.to_string())?;
            if end != kept {
                return Err(format!("the cut ended the log at {end}, not {kept}"));
            }
            for n in 0..NEW_TAIL {
                let appended = cut_log.append_unsynced(batch(100 + n, None), LeaderEpoch(EPOCH));
                appended.await.map_err(|e| e.to_string())?;
            }
            Ok(cut_log.log_end_offset())
        })
        .ok_or("the cut and the new appends did not finish")??;
    ensure(new_end == Offset(RECORDS * (1 + i64::from(NEW_TAIL))), || {
        format!("the new tail ends at {new_end}")
    })?;
    // Without this the scenario would not test the race it is about.
    sim.run_until(Duration::from_secs(600), old_done);
    let old = old_sync.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let old = old.ok_or("the old sync never ended")?;
    old.map_err(|e| format!("the old sync failed: {e}"))?;
    // The old sync's task waited for the old end: it is covered only if a sync begun after
    // the cut carried the new batches there. Nothing else has synced.
    let durable = log.durable_offset();
    ensure(durable >= Offset(RECORDS * (1 + i64::from(OLD_TAIL))), || {
        format!("the old sync's task returned with the log durable only to {durable}")
    })?;
    drop(log);
    sim.power_fail(host);
    sim.set_disk_faults(host, DiskFaults::default());
    sim.start(host);
    let batches = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log =
                Log::open(env, dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
            all_batches(&log).await
        })
        .ok_or("the reopen did not finish")??;
    let mut expected = vec![stored(0, Offset(0))];
    expected.extend((0..NEW_TAIL).map(|n| stored(100 + n, Offset(RECORDS * (1 + i64::from(n))))));
    // Every batch below the durable offset survives, and nothing but what was appended.
    let must_keep = expected.iter().take_while(|b| stored_end(b) <= durable).count();
    ensure(batches.len() >= must_keep, || {
        format!(
            "{} batches survived the power failure, but the log was durable to {durable} \
             ({must_keep} batches)",
            batches.len()
        )
    })?;
    for (i, got) in batches.iter().enumerate() {
        ensure(expected.get(i) == Some(got), || format!("batch {i} is not what was appended"))?;
    }
    Ok(())
}

#[test]
fn log_truncation_during_sync_keeps_new_tail_unsynced() {
    for_each_seed("log_truncation_during_sync_keeps_new_tail_unsynced", 0..16, scenario);
}
