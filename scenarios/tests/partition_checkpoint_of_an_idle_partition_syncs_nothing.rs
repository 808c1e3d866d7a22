//! The periodic checkpoint runs for every partition the broker holds, idle ones included. A
//! checkpoint writes the active segment's index, the partition checkpoint and a producer-state
//! snapshot, each synced; on a broker with thousands of partitions, writing them again when
//! nothing changed would be thousands of syncs a minute for nothing, each one a journal commit
//! that a producer's sync on the same disk may wait behind. A checkpoint with nothing new to
//! record must sync nothing; one after any change (an append, a new high watermark) must write
//! it; and what was skipped must not be missed after a power failure. The high-watermark
//! checkpoint, which runs every few seconds, records a moved high watermark alone (fewer syncs
//! than the whole checkpoint: no index), syncs nothing when it did not move, and leaves the
//! next whole checkpoint nothing to write again.

use std::time::Duration;

use weir::log::LogConfig;
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, batch, open_partition};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Bound on each step of simulated time.
const LIMIT: Duration = Duration::from_secs(60);
/// How long producer state is kept (the broker's default: a week).
const PRODUCER_EXPIRATION_MS: i64 = 7 * 24 * 3_600_000;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let config = || LogConfig { retention_ms: -1, ..LogConfig::default() };
    let partition = sim
        .block_on(host, LIMIT, |env| async move {
            let partition = open_partition(env, config()).await?;
            for n in 0..3u8 {
                let at = Offset(i64::from(n) * BATCH_RECORDS);
                partition
                    .append_replicated(&[batch(n, Some((at, LeaderEpoch(0))))])
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(partition)
        })
        .ok_or("opening the partition did not finish")??;
    let hw_checkpoint = |what: &str| -> Result<u64, String> {
        let before = sim.file_syncs(host);
        let p = std::sync::Arc::clone(&partition);
        sim.block_on(host, LIMIT, |_| async move {
            p.log.checkpoint_high_watermark().await.map_err(|e| e.to_string())
        })
        .ok_or(format!("the high-watermark checkpoint {what} did not finish"))??;
        Ok(sim.file_syncs(host) - before)
    };
    let checkpoint = |what: &str| -> Result<u64, String> {
        let before = sim.file_syncs(host);
        let p = std::sync::Arc::clone(&partition);
        sim.block_on(host, LIMIT, |_| async move {
            p.checkpoint(PRODUCER_EXPIRATION_MS).await.map_err(|e| e.to_string())
        })
        .ok_or(format!("the checkpoint {what} did not finish"))??;
        Ok(sim.file_syncs(host) - before)
    };

    let first = checkpoint("after the appends")?;
    ensure(first > 0, || "the first checkpoint synced nothing".to_owned())?;
    for round in 0..3 {
        let idle = checkpoint("of the idle partition")?;
        ensure(idle == 0, || {
            format!("checkpoint {round} of an idle partition synced {idle} times")
        })?;
    }

    partition.log.set_high_watermark(Offset(2 * BATCH_RECORDS));
    let moved = checkpoint("after the high watermark moved")?;
    ensure(moved > 0, || "a new high watermark was not checkpointed".to_owned())?;
    ensure(checkpoint("again")? == 0, || "the same high watermark was written twice".to_owned())?;

    let p = std::sync::Arc::clone(&partition);
    sim.block_on(host, LIMIT, |_| async move {
        let at = Offset(3 * BATCH_RECORDS);
        p.append_replicated(&[batch(3, Some((at, LeaderEpoch(0))))])
            .await
            .map_err(|e| e.to_string())
    })
    .ok_or("the last append did not finish")??;
    let appended = checkpoint("after one more append")?;
    ensure(appended > 0, || "an append since the last checkpoint was not checkpointed".to_owned())?;
    ensure(checkpoint("once more")? == 0, || "an idle partition synced again".to_owned())?;
    ensure(hw_checkpoint("of the idle partition")? == 0, || {
        "a high-watermark checkpoint with nothing moved synced".to_owned()
    })?;

    partition.log.set_high_watermark(Offset(3 * BATCH_RECORDS));
    let recorded = hw_checkpoint("after the high watermark moved")?;
    ensure(recorded > 0 && recorded < moved, || {
        format!("the high-watermark checkpoint synced {recorded} times (the whole one: {moved})")
    })?;
    ensure(hw_checkpoint("again")? == 0, || {
        "the same high watermark was recorded twice".to_owned()
    })?;
    ensure(checkpoint("after the high-watermark checkpoint")? == 0, || {
        "the whole checkpoint wrote again what the high-watermark checkpoint recorded".to_owned()
    })?;

    // Power fails: the partition reopens with every batch, and the recovery from the
    // checkpoint it finds sees the high watermark last recorded.
    drop(partition);
    sim.power_fail(host);
    sim.start(host);
    let (end, hw) = sim
        .block_on(host, LIMIT, |env| async move {
            let p = open_partition(env, config()).await?;
            Ok::<_, String>((p.log.log_end_offset(), p.log.recorded_high_watermark()))
        })
        .ok_or("the reopen did not finish")??;
    ensure(end == Offset(4 * BATCH_RECORDS), || format!("reopened ending at {end:?}, not 12"))?;
    ensure(hw == Offset(3 * BATCH_RECORDS), || {
        format!("reopened with high watermark {hw:?}, not 9")
    })
}

#[test]
fn partition_checkpoint_of_an_idle_partition_syncs_nothing() {
    for_each_seed("partition_checkpoint_of_an_idle_partition_syncs_nothing", 0..16, scenario);
}
