//! Fault scenario: the task leading a group-commit sync is dropped while the sync is under way
//! (its produce request timed out on a slow disk, or its connection went). The next task that
//! needs durability must lead a new sync instead of waiting for one that will never end, and
//! that sync must also cover what the dropped one had taken on: here the file of a segment
//! sealed just before, which a power failure would otherwise take with it.

use std::sync::Arc;
use std::time::Duration;

use weir::io::timeout;
use weir::log::Log;
use weir::model::LeaderEpoch;
use weir_scenarios::log::{all_batches, batch, dir, segment_per_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// How long each sync takes once the disk turns slow.
const SYNC: Duration = Duration::from_secs(2);
/// How long the first waiter waits before it gives up (and is dropped).
const GIVE_UP: Duration = Duration::from_millis(500);

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    let log = sim
        .block_on(host, Duration::from_secs(60), |env| async move {
            let log =
                Log::open(env, dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
            for n in 0..2 {
                log.append_unsynced(batch(n, None), LeaderEpoch(1))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Arc::new(log))
        })
        .ok_or("the appends did not finish")??;
    let end = log.log_end_offset();
    sim.set_disk_faults(host, DiskFaults { sync_latency: SYNC, ..DiskFaults::default() });
    let first = Arc::clone(&log);
    let gave_up = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            timeout(&*env.clock, GIVE_UP, first.wait_durable(end)).await.is_err()
        })
        .ok_or("the first waiter did not return")?;
    ensure(gave_up, || "the first waiter's sync finished within its patience".into())?;
    let second = Arc::clone(&log);
    let synced = sim
        .block_on(host, Duration::from_secs(60), move |_| async move {
            second.wait_durable(end).await.map_err(|e| e.to_string())
        })
        .ok_or("the next waiter never became durable: the dropped sync kept its leadership")?;
    synced?;
    ensure(log.durable_offset() == end, || format!("durable to {}", log.durable_offset()))?;
    drop(log);
    sim.power_fail(host);
    sim.set_disk_faults(host, DiskFaults::default());
    sim.start(host);
    let batches = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log =
                Log::open(env, dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
            let batches = all_batches(&log).await?;
            Ok::<_, String>(batches.len())
        })
        .ok_or("the reopen did not finish")??;
    ensure(batches == 2, || format!("{batches} of the 2 synced batches survived the power failure"))
}

#[test]
fn log_sync_leader_dropped_mid_sync_hands_over() {
    for_each_seed("log_sync_leader_dropped_mid_sync_hands_over", 0..16, scenario);
}
