//! The periodic checkpoint writes the active segment's index and the partition checkpoint, each
//! synced, which on a slow disk takes several sync latencies. Appends to the log must go on
//! meanwhile: a producer to that partition must not wait for the checkpoint's syncs. And what
//! the checkpoint records must still hold: after a power failure during the appends, the log
//! reopens with every synced batch.

use std::sync::Arc;
use std::time::Duration;

use weir::log::{Log, LogConfig};
use weir::model::LeaderEpoch;
use weir_scenarios::log::{all_batches, appends_beside, batch, dir};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// How long each sync takes on the slow disk.
const SYNC: Duration = Duration::from_millis(20);
/// Batches appended while the checkpoint runs.
const APPENDS: u8 = 8;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    let log = sim
        .block_on(host, Duration::from_secs(60), |env| async move {
            let log =
                Log::open(env, dir(), LogConfig::default()).await.map_err(|e| e.to_string())?;
            for n in 0..4 {
                log.append(batch(n, None), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Arc::new(log))
        })
        .ok_or("the log did not open")??;
    let synced = log.log_end_offset();
    appends_beside(&sim, host, &log, "checkpoint", SYNC, 4, APPENDS, |log| async move {
        let _ = log.checkpoint().await;
    })?;
    // Power fails before the new batches are synced: the log comes back with the synced ones.
    drop(log);
    sim.power_fail(host);
    sim.set_disk_faults(host, DiskFaults::default());
    sim.start(host);
    let (batches, end) = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log =
                Log::open(env, dir(), LogConfig::default()).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((all_batches(&log).await?.len(), log.log_end_offset()))
        })
        .ok_or("the reopen did not finish")??;
    ensure(end >= synced && batches >= 4, || {
        format!("the log reopened with {batches} batches, ending at {end} (synced: 4, to {synced})")
    })
}

#[test]
fn log_checkpoint_does_not_hold_up_appends() {
    for_each_seed("log_checkpoint_does_not_hold_up_appends", 0..16, scenario);
}
