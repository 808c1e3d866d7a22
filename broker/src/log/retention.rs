//! Retention (`cleanup.policy=delete`) and DeleteRecords: advancing the log start offset and
//! deleting whole segments, oldest first — never the active segment, and never a segment that
//! reaches the bound the caller gives (the high watermark), so nothing a consumer has not been
//! allowed to read is deleted.
//!
//! Order of effects, for crash safety: the new log start offset is checkpointed first, then the
//! files are removed. A crash in between leaves segments below the log start, which the next open
//! removes.

use std::io;

use super::error::MaintenanceError;
use super::open::remove_segment_files;
use super::partition_log::Log;
use crate::model::Offset;

/// What a retention pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Segments deleted.
    pub segments: usize,
    /// Bytes freed.
    pub bytes: u64,
    /// The log start offset afterwards.
    pub log_start: Offset,
}

impl Log {
    /// Deletes the oldest segments that are past `retention.ms` (by their newest timestamp) or
    /// that keep the log over `retention.bytes`, or that lie wholly below the log start offset.
    /// Only segments ending at or before `upper_bound` are candidates.
    pub async fn apply_retention(
        &self,
        upper_bound: Offset,
    ) -> Result<RetentionOutcome, MaintenanceError> {
        let config = self.config();
        let now = self.env.clock.wall_ms();
        let append = self.append_lock.lock().await;
        let _files = self.files_lock.lock().await;
        let doomed: Vec<(Offset, Offset, u64)> = {
            let state = self.state();
            state.check_online()?;
            let mut total = state.size_bytes();
            let mut doomed = Vec::new();
            let bases: Vec<Offset> = state.segments.keys().copied().collect();
            for pair in bases.windows(2) {
                let (base, next) = (pair[0], pair[1]);
                let Some(seg) = state.segments.get(&base) else {
                    break;
                };
                if next > upper_bound.max(state.log_start) {
                    break;
                }
                let below_start = next <= state.log_start;
                let by_time = config.cleanup_policy.deletes()
                    && config.retention_ms >= 0
                    && seg.max_timestamp >= 0
                    && now.saturating_sub(seg.max_timestamp) > config.retention_ms;
                let by_size = config.cleanup_policy.deletes()
                    && config.retention_bytes >= 0
                    && total.saturating_sub(seg.size) >= config.retention_bytes as u64;
                if !(below_start || by_time || by_size) {
                    break;
                }
                total -= seg.size;
                doomed.push((base, next, seg.size));
            }
            doomed
        };
        self.delete_segments(&doomed, append).await
    }

    /// Advances the log start offset to `offset` (DeleteRecords), bounded by `upper_bound` (the
    /// high watermark), durably, and deletes the segments wholly below it. Returns the new log
    /// start offset.
    pub async fn delete_records_before(
        &self,
        offset: Offset,
        upper_bound: Offset,
    ) -> Result<Offset, MaintenanceError> {
        let append = self.append_lock.lock().await;
        let files = self.files_lock.lock().await;
        let (advanced, undurable) = {
            let mut state = self.state();
            state.check_online()?;
            let target = offset.min(upper_bound).min(state.log_end);
            let advanced = target > state.log_start;
            if advanced {
                state.log_start = target;
            }
            // A start an earlier checkpoint failed to record (here or in retention) is written
            // again: it is reported as deleted only once it is durable.
            (advanced, state.durable_log_start < state.log_start)
        };
        if advanced || undurable {
            let point = self.state().checkpointed;
            self.write_checkpoint_point(point).await?;
        }
        drop(files);
        drop(append);
        if advanced {
            self.apply_retention(upper_bound).await?;
        }
        Ok(self.log_start_offset())
    }

    /// Removes `doomed` (base, next base, size) segments: log start first, durably; then files.
    /// The caller holds the files lock throughout and hands over the append lock, which is let
    /// go once the segments are out of the log's map: appends never touch them, so they go on
    /// while the checkpoint is written and the files removed.
    async fn delete_segments(
        &self,
        doomed: &[(Offset, Offset, u64)],
        append: tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<RetentionOutcome, MaintenanceError> {
        let Some(&(_, new_start, _)) = doomed.last() else {
            return Ok(RetentionOutcome {
                log_start: self.log_start_offset(),
                ..RetentionOutcome::default()
            });
        };
        {
            let mut state = self.state();
            state.log_start = state.log_start.max(new_start);
            for (base, _, _) in doomed {
                if let Some(seg) = state.segments.remove(base) {
                    seg.retire();
                }
            }
        }
        drop(append);
        let point = self.state().checkpointed;
        self.write_checkpoint_point(point).await?;
        for (base, _, _) in doomed {
            remove_segment_files(&*self.env.disk, &self.dir, *base).await?;
        }
        self.env.disk.sync_dir(&self.dir).await.map_err(|e: io::Error| MaintenanceError::Io(e))?;
        let bytes = doomed.iter().map(|d| d.2).sum();
        tracing::debug!(log = %self.dir.display(), segments = doomed.len(), bytes, "retention deleted segments");
        Ok(RetentionOutcome { segments: doomed.len(), bytes, log_start: self.log_start_offset() })
    }
}
