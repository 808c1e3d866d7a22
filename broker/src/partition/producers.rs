//! The idempotent-producer state of one partition, kept beside its log: snapshots
//! (`<offset>.snapshot`, state as of that offset) written at checkpoints, and recovery that
//! loads the newest usable snapshot and replays the batches after it from the log.

use std::path::Path;

use bytes::Bytes;

use crate::io::Disk;
use crate::log::batch;
use crate::log::checkpoint;
use crate::log::producers::{
    PRODUCER_SNAPSHOT_KIND, ProducerStateManager, decode_snapshot_body, parse_snapshot_file_name,
    snapshot_file_name, snapshots_to_try,
};
use crate::log::split::split_batches;
use crate::log::{Log, ReadError};
use crate::model::Offset;

/// Snapshots kept per partition (the newest, and one older in case the newest is past a
/// power failure's cut).
pub const PRODUCER_SNAPSHOTS_KEPT: usize = 2;
/// Bytes read at a time when replaying the log into the producer state.
pub const REPLAY_CHUNK_BYTES: usize = 1 << 20;

async fn snapshots(disk: &dyn Disk, dir: &Path) -> std::io::Result<Vec<Offset>> {
    Ok(disk.list(dir).await?.iter().filter_map(|name| parse_snapshot_file_name(name)).collect())
}

/// Rebuilds the state: the newest snapshot within the log, then every batch after it.
pub async fn recover(log: &Log, disk: &dyn Disk) -> Result<ProducerStateManager, ReadError> {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let available = snapshots(disk, log.dir()).await?;
    // A snapshot past the recovered end describes writes a power failure took back; it would
    // be wrong once the log grows past it again.
    remove_listed_past(disk, log.dir(), &available, Some(end)).await?;
    let mut state = ProducerStateManager::new();
    let mut from = start;
    for offset in snapshots_to_try(available, start, end) {
        let name = snapshot_file_name(offset);
        match checkpoint::read(disk, log.dir(), &name, PRODUCER_SNAPSHOT_KIND).await {
            Ok(Some((version, body))) => match decode_snapshot_body(version, &body) {
                Ok((at, loaded)) => {
                    state = loaded;
                    from = at;
                    break;
                }
                Err(e) => {
                    tracing::warn!(log = %log.dir().display(), snapshot = %name, "ignoring snapshot: {e}")
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(log = %log.dir().display(), snapshot = %name, "ignoring snapshot: {e}")
            }
        }
    }
    replay(log, &mut state, from, end).await?;
    Ok(state)
}

/// Feeds every batch in `[from, end)` to the state.
///
/// A damaged batch (a latent sector error: it fails its checks however often it is read) is
/// passed over, with a warning, where failing would keep the partition from opening at all. The
/// state then misses what that batch held, so its producer's next batch may be refused as out of
/// sequence, and a retry of the damaged batch itself would be taken for a new batch: the state
/// records that it passed damage ([`ProducerStateManager::uncertain`]), and the partition does
/// not take such batches for as long as such a retry may come, where another replica may hold
/// the batch intact: it hands its lead to another in-sync replica, or with none waits for one
/// (see [`super::Partition::produce`] and [`super::PRODUCER_RETRY_WINDOW`]). The replay goes on
/// where the read says reads go on past the damage, else at the next segment; with neither, it
/// ends there.
async fn replay(
    log: &Log,
    state: &mut ProducerStateManager,
    mut from: Offset,
    end: Offset,
) -> Result<(), ReadError> {
    while from < end {
        let result = match log.read(from, REPLAY_CHUNK_BYTES, end).await {
            Ok(result) => result,
            Err(ReadError::Corrupt { offset, cause, resume }) => {
                let next = log.past_damage(from, resume);
                tracing::warn!(
                    log = %log.dir().display(),
                    "producer state: passing over the damaged batch at {offset} ({cause}); \
                     going on at {next:?}"
                );
                // The damage runs up to where reads go on past it (or to the end).
                state.passed_damage(Offset(next.unwrap_or(end).0 - 1).max(offset));
                match next {
                    Some(next) => from = next,
                    None => break,
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        if result.records.is_empty() {
            break;
        }
        for stored in split_batches(&result.records) {
            let stored = stored.map_err(|cause| ReadError::corrupt(from, cause))?;
            let header =
                batch::parse_header(&stored).map_err(|cause| ReadError::corrupt(from, cause))?;
            state.record(&header, Offset(header.base_offset()), Offset(header.last_offset()));
        }
        from = result.next_offset;
    }
    Ok(())
}

/// Removes every snapshot: the log is emptied and starts again past them all, so what they
/// describe will no longer be in it (a snapshot at the new start would otherwise be loaded).
pub async fn remove_all(disk: &dyn Disk, dir: &Path) -> std::io::Result<()> {
    remove_past(disk, dir, None).await
}

/// Removes every snapshot past `offset` (all of them for `None`).
///
/// A follower's cut removes them before it cuts the log: a snapshot left past the cut (its
/// removal failing after the cut, when nothing would try again) would be loaded once the log
/// grew past it again, and describe batches no longer in it. Removed first, a failure leaves
/// the log uncut, and the follower cuts it again.
pub async fn remove_past(
    disk: &dyn Disk,
    dir: &Path,
    offset: Option<Offset>,
) -> std::io::Result<()> {
    remove_listed_past(disk, dir, &snapshots(disk, dir).await?, offset).await
}

/// Removes the snapshots of `listed` (those in `dir`) past `offset` (all of them for `None`).
async fn remove_listed_past(
    disk: &dyn Disk,
    dir: &Path,
    listed: &[Offset],
    offset: Option<Offset>,
) -> std::io::Result<()> {
    for &at in listed.iter().filter(|&&at| offset.is_none_or(|offset| at > offset)) {
        disk.remove(&dir.join(snapshot_file_name(at))).await?;
    }
    Ok(())
}

/// Writes a snapshot of `state` as of `end` and removes all but the newest snapshots.
pub async fn save(
    state_bytes: Bytes,
    end: Offset,
    disk: &dyn Disk,
    dir: &Path,
) -> std::io::Result<()> {
    checkpoint::write_atomic(disk, dir, &snapshot_file_name(end), state_bytes).await?;
    let mut existing = snapshots(disk, dir).await?;
    existing.sort_unstable_by(|a, b| b.cmp(a));
    for old in existing.into_iter().skip(PRODUCER_SNAPSHOTS_KEPT) {
        disk.remove(&dir.join(snapshot_file_name(old))).await?;
    }
    Ok(())
}
