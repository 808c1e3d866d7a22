//! A follower's cut of its log leaves no producer snapshot past the cut, even when removing one
//! fails. A snapshot left there would be loaded once the log grew past it again, and describe a
//! producer's batches that are no longer in the log: its next batch would be taken for a
//! duplicate, acknowledged and not written. Before, the snapshots were removed after the cut,
//! and a removal that failed left the log cut, the follower going on from its new end (no cut
//! asked again) and the snapshot in place.
//!
//! A producer writes three batches, a checkpoint snapshots its state at their end, and the
//! follower cuts its log after the first batch while snapshot removals fail. It then does what
//! the replica fetcher does: asks again where the logs diverge (cutting again if its log still
//! goes past the point, or just forgetting the epochs begun at its end), and copies the new
//! leader's batches of another producer, past the old snapshot's offset. Reopened, the
//! partition's producer state must take the first producer's second batch as a new one.
//!
//! Seeds 4..12 leave a snapshot past the end another way (as a cut of a compacted log can, one
//! in a gap below the cut's target whose removal after the cut failed): the cut succeeds, and
//! the old snapshot is put back before the fetcher's next step, which must remove it. Seeds
//! 8..12 cut the whole log, so that no epoch is left to ask about.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::log::batch::parse_header;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::producers::Decision;
use weir::model::Offset;
use weir::partition::producers;
use weir_scenarios::log::{kept_forever, open_partition};
use weir_scenarios::refusing::{Refuse, RefusingDisk};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// The producer whose batches the cut removes.
const PRODUCER: i64 = 7;
/// The new leader's producer, whose batches follow the cut.
const OTHER: i64 = 8;
/// How long producer state is kept (the broker's default: a week).
const PRODUCER_EXPIRATION_MS: i64 = 7 * 24 * 3_600_000;
/// Where the follower's log diverges from its new leader's: after the producer's first batch.
const CUT: i64 = 1;
/// The snapshot the checkpoint writes, at the end of the producer's three batches.
const SNAPSHOT: &str = "00000000000000000003.snapshot";

/// A batch of one record at `offset` in leader epoch `epoch`, from `producer` at `sequence`,
/// stamped `now` (a checkpoint expires producers by their batches' timestamps).
fn batch(offset: i64, epoch: i32, producer: i64, sequence: i32, now: i64) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: now,
        key: Some(Bytes::from(format!("k{offset}"))),
        value: Some(Bytes::from(format!("v{offset}"))),
        headers: Vec::new(),
    };
    let options = BatchOptions {
        base_offset: offset,
        leader_epoch: epoch,
        producer_id: producer,
        producer_epoch: 0,
        base_sequence: sequence,
        ..BatchOptions::default()
    };
    encode_batch(&[record], &options).unwrap_or_default()
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let env = sim.env(host);
    let (disk, refusing) = RefusingDisk::new(Arc::clone(&env.disk), Refuse::SnapshotRemovals);
    let env = Env { disk: Arc::new(disk), ..env };
    // By seed, the new leader's batches reach two or four offsets past the old snapshot.
    let copied = 4 + 2 * (seed % 2) as i64;
    let put_back = seed >= 4;
    let cut = if seed >= 8 { 0 } else { CUT };
    sim.block_on(host, Duration::from_secs(60), move |_| async move {
        let now = env.clock.wall_ms();
        let batch =
            |offset, epoch, producer, sequence| batch(offset, epoch, producer, sequence, now);
        let partition = open_partition(env.clone(), kept_forever()).await?;
        let first: Vec<Bytes> = (0..3).map(|n| batch(n, 0, PRODUCER, n as i32)).collect();
        partition.append_replicated(&first).await.map_err(|e| e.to_string())?;
        partition.checkpoint(PRODUCER_EXPIRATION_MS).await.map_err(|e| e.to_string())?;
        if put_back {
            let path = partition.log.dir().join(SNAPSHOT);
            let file = env.disk.open(&path).await.map_err(|e| e.to_string())?;
            let contents = file.read_at(0, file.len() as usize).await.map_err(|e| e.to_string())?;
            drop(file);
            partition.truncate_to(Offset(cut)).await.map_err(|e| e.to_string())?;
            let file = env.disk.create(&path).await.map_err(|e| e.to_string())?;
            file.write_at(0, contents).await.map_err(|e| e.to_string())?;
        } else {
            refusing.store(true, Ordering::SeqCst);
            let refused = partition.truncate_to(Offset(CUT)).await;
            ensure(refused.is_err(), || format!("the cut gave {refused:?} with removals failing"))?;
            refusing.store(false, Ordering::SeqCst);
        }
        // The replica fetcher's next step: the divergence asked again.
        let end = partition.log.log_end_offset();
        if partition.log.epochs().entries().is_empty() {
            partition.remove_snapshots_past_end().await.map_err(|e| e.to_string())?;
        } else if end > Offset(cut) {
            partition.truncate_to(Offset(cut)).await.map_err(|e| e.to_string())?;
        } else {
            partition.forget_epochs_at_end().await.map_err(|e| e.to_string())?;
        }
        let next: Vec<Bytes> = (0..copied).map(|n| batch(cut + n, 1, OTHER, n as i32)).collect();
        partition.append_replicated(&next).await.map_err(|e| e.to_string())?;
        drop(partition);
        let partition = open_partition(env.clone(), kept_forever()).await?;
        let end = partition.log.log_end_offset();
        ensure(end == Offset(cut + copied), || format!("the log reopened ending at {end}"))?;
        let state =
            producers::recover(&partition.log, &*env.disk).await.map_err(|e| e.to_string())?;
        let second = batch(end.0, 1, PRODUCER, 1);
        let header = parse_header(&second).map_err(|e| e.to_string())?;
        let decision = state.check(&header);
        ensure(matches!(decision, Ok(Decision::Append)), || {
            format!("the producer's second batch, after the cut removed it: {decision:?}")
        })
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn partition_cut_leaves_no_producer_snapshot_past_it() {
    for_each_seed("partition_cut_leaves_no_producer_snapshot_past_it", 0..12, scenario);
}
