//! Fault scenario: a power failure keeps a later segment's unsynced batches but not all of an
//! earlier one's (the kernel writes files back independently). The recovered log must end at
//! the hole, as at a torn batch: a log whose offsets jump from one segment to the next would
//! serve nothing at the missing offsets, so a consumer reading from there would never move
//! on, and the batches after the hole were never acknowledged anyway.

use std::path::PathBuf;
use std::time::Duration;

use weir::log::Log;
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{BATCH_RECORDS, all_batches, batch, dir, segment_per_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Records per batch.
const RECORDS: i64 = BATCH_RECORDS;
/// Batches appended after the synced first one, each in a segment of its own.
const UNSYNCED: u8 = 4;
/// Which of them loses its bytes (its segment file comes back empty).
const LOST: u8 = 2;

fn segment_file(base: Offset) -> PathBuf {
    dir().join(format!("{:020}.log", base.0))
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    sim.block_on(host, Duration::from_secs(60), |env| async move {
        let log =
            Log::open(env.clone(), dir(), segment_per_batch()).await.map_err(|e| e.to_string())?;
        log.append(batch(0, None), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
        for n in 1..=UNSYNCED {
            log.append_unsynced(batch(n, None), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
        }
        drop(log);
        // What the power failure left: the lost batch's segment holds nothing, the later
        // ones hold theirs.
        let lost = env
            .disk
            .open(&segment_file(Offset(RECORDS * i64::from(LOST))))
            .await
            .map_err(|e| e.to_string())?;
        lost.truncate(0).await.map_err(|e| e.to_string())
    })
    .ok_or("the appends did not finish")??;
    sim.restart(host);
    let hole = Offset(RECORDS * i64::from(LOST));
    let (end, read, appended) = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env.clone(), dir(), segment_per_batch())
                .await
                .map_err(|e| e.to_string())?;
            let end = log.log_end_offset();
            let batches = all_batches(&log).await?;
            let appended =
                log.append(batch(9, None), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((end, batches.len(), appended.base_offset))
        })
        .ok_or("the reopen did not finish")??;
    ensure(end == hole, || format!("the recovered log ends at {end}, not at the hole at {hole}"))?;
    ensure(read == usize::from(LOST), || format!("{read} batches read before the hole"))?;
    ensure(appended == hole, || format!("the next append went to {appended}, not {hole}"))?;
    // The segments past the hole are gone, so a later restart cannot bring them back.
    let later = Offset(RECORDS * i64::from(LOST + 1));
    let listed = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            env.disk.list(&dir()).await.map_err(|e| e.to_string())
        })
        .ok_or("the listing did not finish")??;
    let name = format!("{:020}.log", later.0);
    ensure(!listed.contains(&name), || format!("{name} is still there: {listed:?}"))
}

#[test]
fn log_recovery_ends_at_a_hole_between_segments() {
    for_each_seed("log_recovery_ends_at_a_hole_between_segments", 0..8, scenario);
}
