//! Durability: group commit and checkpoints.
//!
//! Group commit: a caller that needs its offsets durable either finds a sync already covering
//! them, or becomes the one task that syncs everything written so far while the others wait for
//! it. The leader first lets in the appends that are ready to run (yielding to the scheduler
//! while the log keeps growing: the appenders the last sync released, connections whose requests
//! just arrived) and those already under way (it queues once on the fair append lock), and
//! however many appends arrive during a sync, the next sync covers them all, so the size of each
//! `fdatasync` adapts to the load by itself.
//!
//! A failed sync takes the log offline for good (fsyncgate): the kernel may have dropped the
//! unsynced pages, and a retried sync that succeeds proves nothing.

use std::sync::Arc;

use super::checkpoint;
use super::config::FlushPolicy;
use super::error::{MaintenanceError, Offline};
use super::open::{PARTITION_CHECKPOINT, PartitionCheckpoint};
use super::partition_log::Log;
use super::segment::{self, SegmentIndex};

use crate::model::Offset;

/// A sync's leadership (`syncing`), held by the task that leads it. If that task is dropped
/// before the sync ends — its request timed out, its connection went — the claim gives the
/// leadership back and returns what it had taken to sync (sealed segments' files, a folder
/// change), so that the next waiter leads a sync covering them; otherwise the log would never
/// sync again.
struct SyncClaim<'a> {
    log: &'a Log,
    files: Vec<Arc<dyn crate::io::File>>,
    dir_dirty: bool,
    /// The sync ended (and gave the leadership back itself).
    ended: bool,
}

impl Drop for SyncClaim<'_> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut state = self.log.state();
        state.syncing = false;
        state.unsynced.append(&mut self.files);
        state.dir_dirty |= self.dir_dirty;
        drop(state);
        self.log.synced.notify_waiters();
    }
}

/// Most scheduler passes a sync's leader spends letting ready appends in first (see
/// [`Log::gather`]).
const GATHER_PASSES_MAX: usize = 32;
/// Passes in a row without a new append after which the leader stops waiting.
const GATHER_IDLE_PASSES: usize = 3;

impl Log {
    /// Waits until every offset below `target` is durable, syncing if no sync in flight covers
    /// it. Fails if the log is (or goes) offline.
    pub async fn wait_durable(&self, target: Offset) -> Result<(), Offline> {
        loop {
            let notified = self.synced.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let lead = {
                let mut state = self.state();
                state.check_online()?;
                if state.durable.offset >= target.min(state.log_end) {
                    return Ok(());
                }
                !std::mem::replace(&mut state.syncing, true)
            };
            if lead {
                // Appends ready to run, and those already under way (holding or queued for the
                // append lock, which is fair), go first, so this one sync covers them too: the
                // more producers are writing, the more each sync carries, with no timer, and
                // a few scheduler passes when idle.
                let mut claim =
                    SyncClaim { log: self, files: Vec::new(), dir_dirty: false, ended: false };
                self.gather().await;
                drop(self.append_lock.lock().await);
                self.sync_once(&mut claim).await?;
            } else {
                notified.await;
            }
        }
    }

    /// Lets appends that are ready to run reach the log before a sync starts: the appenders
    /// the last sync released, and connections whose requests arrived meanwhile. Each pass
    /// yields to the scheduler once; passes go on while the log keeps growing.
    async fn gather(&self) {
        let mut seen = self.log_end_offset();
        let mut idle = 0;
        for _ in 0..GATHER_PASSES_MAX {
            // tokio's yield, not `io::yield_now`: it also waits until the thread has polled for
            // I/O, so connections whose requests just arrived get their turn, not only the
            // tasks already queued. Outside tokio (the simulator) it is a plain yield.
            tokio::task::yield_now().await;
            let now = self.log_end_offset();
            if now == seen {
                idle += 1;
                if idle == GATHER_IDLE_PASSES {
                    break;
                }
            } else {
                (seen, idle) = (now, 0);
            }
        }
    }

    /// Makes everything appended so far durable.
    pub async fn flush(&self) -> Result<(), Offline> {
        let end = self.log_end_offset();
        self.wait_durable(end).await
    }

    /// Under the interval policy, flushes if `flush.messages` records or `flush.ms` have
    /// accumulated since the last sync. Call it after appends and from a periodic task.
    pub async fn flush_if_due(&self) -> Result<(), Offline> {
        let config = self.config();
        if config.flush_policy != FlushPolicy::Interval {
            return Ok(());
        }
        let due = {
            let state = self.state();
            let elapsed = self.env.clock.now() - state.last_sync;
            let by_count = state.unflushed_records >= config.flush_messages.max(1);
            let by_time = config.flush_interval().is_some_and(|interval| elapsed >= interval);
            state.durable.offset < state.log_end && (by_count || by_time)
        };
        if due { self.flush().await } else { Ok(()) }
    }

    /// One sync of everything written so far, under `claim` (the caller has set `syncing`).
    async fn sync_once(&self, claim: &mut SyncClaim<'_>) -> Result<(), Offline> {
        let (target, active, records, cuts) = {
            let mut state = self.state();
            claim.files = std::mem::take(&mut state.unsynced);
            claim.dir_dirty = std::mem::take(&mut state.dir_dirty);
            let active = state.active().map(|a| Arc::clone(&a.log));
            (state.end_point(), active, state.unflushed_records, state.cuts)
        };
        let result = async {
            for file in claim.files.iter().chain(active.iter()) {
                file.sync_data().await?;
            }
            if claim.dir_dirty {
                self.env.disk.sync_dir(&self.dir).await?;
            }
            std::io::Result::Ok(())
        }
        .await;
        let outcome = {
            let mut state = self.state();
            state.syncing = false;
            claim.ended = true;
            match result {
                Ok(()) => {
                    if target.offset > state.durable.offset && state.cuts == cuts {
                        state.durable = target;
                    }
                    state.unflushed_records -= records;
                    state.last_sync = self.env.clock.now();
                    Ok(())
                }
                Err(e) => Err(e.kind()),
            }
        };
        match outcome {
            Ok(()) => {
                self.synced.notify_waiters();
                Ok(())
            }
            Err(kind) => Err(self.go_offline(Offline::SyncFailed(kind))),
        }
    }

    /// Records how far recovery may trust the log: writes the active segment's index up to the
    /// durable point and then the partition checkpoint (recovery point, log start offset, high
    /// watermark). Runs periodically and at shutdown; after a crash, recovery rescans only what
    /// was appended since. Also closes the sealed index files no lookup used since the last
    /// checkpoint.
    ///
    /// Appends go on meanwhile: it holds the files lock, not the append lock, so only a roll
    /// (and truncation, retention, a cleaner's swap) waits for it.
    pub async fn checkpoint(&self) -> Result<(), MaintenanceError> {
        self.open_indexes.expire();
        let _files = self.files_lock.lock().await;
        self.checkpoint_locked().await
    }

    /// The checkpoint itself; the caller holds the files lock (so no roll seals the active
    /// segment, and no truncation cuts it, while its index is written).
    pub(super) async fn checkpoint_locked(&self) -> Result<(), MaintenanceError> {
        let (point, index) = {
            let state = self.state();
            state.check_online()?;
            let point = state.durable;
            // Nothing synced, started, cut or acknowledged since the last checkpoint: the
            // files on disk already say all this one would (an idle partition costs no syncs).
            let same = PartitionCheckpoint {
                recovery: point,
                log_start: state.log_start,
                high_watermark: state.high_watermark,
            };
            if state.checkpointed == point && state.last_checkpoint == Some((same, state.rewrites))
            {
                return Ok(());
            }
            let index = state.segments.get(&point.segment).and_then(|s| match &s.index {
                SegmentIndex::Active(active) => Some(active.truncated_to(point.position)),
                SegmentIndex::Sealed(_) => None,
            });
            (point, index)
        };
        if let Some(index) = index {
            segment::write_index_files(&*self.env.disk, &self.dir, point.segment, &index).await?;
        }
        self.write_checkpoint_point(point).await?;
        self.state().checkpointed = point;
        Ok(())
    }

    /// Records the high watermark, if it moved since the last checkpoint, beside the recovery
    /// point already checkpointed: a small file and no index, cheap enough to run every few
    /// seconds (Kafka's `replica.high.watermark.checkpoint.interval.ms`), where the whole
    /// [`Log::checkpoint`] runs every minute.
    pub async fn checkpoint_high_watermark(&self) -> Result<(), MaintenanceError> {
        let _files = self.files_lock.lock().await;
        let point = {
            let state = self.state();
            state.check_online()?;
            let recorded = state.last_checkpoint.as_ref().map(|(last, _)| last.high_watermark);
            if recorded == Some(state.high_watermark) {
                return Ok(());
            }
            state.checkpointed
        };
        self.write_checkpoint_point(point).await?;
        Ok(())
    }

    /// Writes the partition checkpoint with the current log start and high watermark.
    pub(super) async fn write_checkpoint_point(
        &self,
        recovery: super::partition_log::RecoveryPoint,
    ) -> std::io::Result<()> {
        let (body, rewrites) = {
            let state = self.state();
            let body = PartitionCheckpoint {
                recovery,
                log_start: state.log_start,
                high_watermark: state.high_watermark,
            };
            (body, state.rewrites)
        };
        checkpoint::write_atomic(&*self.env.disk, &self.dir, PARTITION_CHECKPOINT, body.encode())
            .await?;
        self.checkpoint_written(body, rewrites);
        Ok(())
    }

    /// Notes that the partition checkpoint `body`, taken at `rewrites`, is now the one on disk.
    pub(super) fn checkpoint_written(&self, body: PartitionCheckpoint, rewrites: u64) {
        // Checkpoints are written one at a time (under the files lock), so this is the latest.
        let mut state = self.state();
        state.durable_log_start = body.log_start;
        state.last_checkpoint = Some((body, rewrites));
    }

    /// Flushes, checkpoints and takes the log offline (`Closed`), so that the next open has
    /// nothing to recover.
    ///
    /// Closed it is, whether or not the flush and checkpoint succeed (its folder may be removed
    /// next): only recovery then knows what the files hold.
    pub async fn close(&self) -> Result<(), MaintenanceError> {
        let saved = async {
            self.flush().await?;
            self.checkpoint().await
        }
        .await;
        self.go_offline(Offline::Closed);
        saved
    }
}
