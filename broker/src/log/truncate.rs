//! Truncation: a follower cutting the tail of its log that diverges from its leader's (see
//! `replication::follower`), or emptying it to start again past its end.
//!
//! The cut falls on a batch boundary: the batch holding the target offset goes with everything
//! after it. The order makes a crash at any moment recover to a prefix of the old log no
//! shorter than the cut, never to anything else: the partition checkpoint's recovery point is
//! lowered to the cut first (so recovery rescans from there rather than trusting what follows),
//! then the epoch checkpoint forgets the epochs past the cut, later segments' files are
//! removed, the holding segment's index files are rewritten for the batches it keeps (entries
//! that hold for its file before the cut and after), and its file is cut and synced. A follower
//! that restarts asks its leader again where the logs diverge, so a cut a crash interrupted is
//! cut again. Both checkpoints and the holding segment's index files are first written to
//! temporary files beside them, before anything changes: out of room for them (disk space, or
//! descriptors), the cut is refused, the log stays online as it was, and the follower asks
//! again.
//!
//! The holding segment becomes the active one. Its index is kept up to the entry before the
//! cut and rebuilt from there by walking the batches up to the cut (from the segment's start
//! where the index is unusable), so a cut walks about two index intervals, not a whole
//! segment. Damage (a latent sector error in synced data, which reads report) never moves the
//! cut below its target: batches below that entry are not walked again, and a damaged batch
//! the walk meets is walked past when it lies wholly below the target.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::append::Shortage;
use super::checkpoint;
use super::epochs::{EPOCH_CHECKPOINT, EpochCache};
use super::error::{AppendError, MaintenanceError};
use super::open::{PARTITION_CHECKPOINT, PartitionCheckpoint, remove_segment_files};
use super::partition_log::{Log, RecoveryPoint};
use super::sealed::IndexFile;
use super::segment::{self, ActiveIndex, KeptPrefix, LOG_EXT, Segment, SegmentIndex};
use super::walk::{Epochs, WalkStop, Walker, walk_past};
use crate::io::File;
use crate::model::{LeaderEpoch, Offset};

impl Log {
    /// Removes the batch holding `offset` and every batch after it, durably; returns the new
    /// log end (`offset` or lower, never below the log start). A target past the end changes
    /// nothing; a target at the end removes no batch but forgets the epochs begun there (see
    /// [`Log::forget_epochs_at_end`]). Producer state kept above the log is the caller's to cut.
    pub async fn truncate_to(&self, offset: Offset) -> Result<Offset, MaintenanceError> {
        let _append = self.append_lock.lock().await;
        let _files = self.files_lock.lock().await;
        if let Some(end) = self.at_or_past_end(Some(offset)).await? {
            return Ok(end);
        }
        let (base, log, dense, log_start, interval, holding, epochs) = {
            let state = self.state();
            state.check_online()?;
            let target = offset.max(state.log_start);
            let Some((&base, seg)) = state.segments.range(..=target).next_back() else {
                return Ok(state.log_end);
            };
            let interval = self.config().index_interval_bytes;
            let holding_end = (seg.size, seg.next_offset);
            let holding = match &seg.index {
                SegmentIndex::Active(active) => Holding::Active(active.clone()),
                SegmentIndex::Sealed(sealed) => {
                    Holding::Sealed(Arc::clone(&sealed.offsets), Arc::clone(&sealed.times))
                }
            };
            let log = Arc::clone(&seg.log);
            let epochs = state.epochs.clone();
            (base, log, !state.gapped, state.log_start, interval, (holding, holding_end), epochs)
        };
        let (holding, (end, end_offset)) = holding;
        let target = offset.max(log_start);
        // The holding segment anew: every batch wholly below the target, walked from its
        // index's entry just below the target where the index allows, else from its start.
        let prefix = match holding.index(self, &*log).await {
            Ok(index) => index.and_then(|i| i.kept_below(u32::try_from(target.0 - base.0).ok()?)),
            Err(e) => {
                tracing::warn!(log = %self.dir.display(), segment = %base, error = %e, "the index of the segment to cut is unreadable: walking it from its start");
                None
            }
        };
        let walk =
            Walk { base, log: &log, dense, interval, target, end, end_offset, epochs: &epochs };
        let kept = walk.keep(prefix).await.map_err(|e| self.failed(e))?;
        // The cut may remove a batch that straddles the log start: the log then continues at
        // the log start, in a segment of its own (offsets within a segment are dense).
        let natural = kept.next_offset;
        let end = natural.max(log_start);
        let point = RecoveryPoint { offset: end, segment: base, position: kept.size };
        let lower = |p: RecoveryPoint| if p.offset > end { point } else { p };
        // The checkpoints the cut rewrites, staged first with the index files: recovery starts
        // at or below the cut, and epochs past the cut are no longer vouched for.
        let (body, epochs) = {
            let state = self.state();
            let mut epochs = state.epochs.clone();
            epochs.truncate_from(natural);
            let body = PartitionCheckpoint {
                recovery: lower(state.checkpointed),
                log_start: state.log_start,
                high_watermark: state.high_watermark.min(end),
            };
            (body, epochs)
        };
        let index = match &kept.index {
            SegmentIndex::Active(index) => Some((base, index)),
            SegmentIndex::Sealed(_) => None,
        };
        let staged = self.stage_cut(body, epochs.encode(), index).await?;
        {
            let mut state = self.state();
            state.rewrites += 1;
            state.high_watermark = state.high_watermark.min(end);
            state.checkpointed = body.recovery;
            state.epochs = epochs;
        }
        // 1. Recovery starts at or below the cut. 2. The epochs past it go.
        let index = self.install_cut(staged).await?;
        // 3. Later segments go.
        let later: Vec<Offset> = {
            let mut state = self.state();
            let later: Vec<Offset> =
                state.segments.range(base..).skip(1).map(|(b, _)| *b).collect();
            for b in &later {
                if let Some(seg) = state.segments.remove(b) {
                    seg.retire();
                }
            }
            // The holding segment's index files are rewritten next.
            if let Some(holding) = state.segments.get(&base) {
                holding.retire();
            }
            later
        };
        let disk = &*self.env.disk;
        for b in &later {
            remove_segment_files(disk, &self.dir, *b).await.map_err(|e| self.failed(e))?;
        }
        // 4. The holding segment's index files describe the kept batches only (entries valid
        // for the file before the cut and after it alike), then the segment is cut. Recovery
        // resumes from them at the lowered point; without them it would walk the segment from
        // its start, and damage below the point would leave the batches after it unindexed.
        for (temp, name) in &index {
            disk.rename(temp, &self.dir.join(name)).await.map_err(|e| self.failed(e))?;
        }
        log.truncate(kept.size).await.map_err(|e| self.failed(e))?;
        log.sync_data().await.map_err(|e| self.failed(e))?;
        disk.sync_dir(&self.dir).await.map_err(|e| self.failed(e))?;
        let emptied = kept.size == 0;
        {
            let mut state = self.state();
            state.segments.insert(base, kept);
            state.log_end = end;
            state.durable = lower(state.durable);
            state.cuts += 1;
            state.rewrites += 1;
            state.unsynced.retain(|f| !Arc::ptr_eq(f, &log));
        }
        if natural < end {
            if emptied {
                // Nothing is left in the holding segment: a fresh one at the log start
                // replaces it.
                let file = disk
                    .create(&segment::path(&self.dir, end, LOG_EXT))
                    .await
                    .map_err(|e| self.failed(e))?;
                remove_segment_files(disk, &self.dir, base).await.map_err(|e| self.failed(e))?;
                disk.sync_dir(&self.dir).await.map_err(|e| self.failed(e))?;
                let mut state = self.state();
                state.segments.remove(&base);
                state.segments.insert(end, Segment::new_active(end, file));
            } else {
                self.roll_locked().await.map_err(|e| match e {
                    AppendError::Offline(o) => MaintenanceError::Offline(o),
                    other => MaintenanceError::Io(io::Error::other(other.to_string())),
                })?;
                // The new segment's name must outlive a power failure: without it the log
                // would reopen ending below its start.
                disk.sync_dir(&self.dir).await.map_err(|e| self.failed(e))?;
            }
        }
        tracing::info!(log = %self.dir.display(), end = %end, "truncated");
        Ok(end)
    }

    /// Empties the log and starts it again at `start`, past its end (Kafka's truncate fully
    /// and start at): a follower whose whole log lies below its leader's log start cannot copy
    /// what the leader has deleted, so it continues from the leader's start. An empty log may
    /// also start again below its end: when the leader's start lies inside a batch, the leader
    /// sends that whole batch, and the log starts again at its base. The new start is
    /// checkpointed first, so a crash at any later moment reopens an empty log at `start` (see
    /// [`Log::open`]) and one before it the old log; below the end, the old empty segment
    /// outlives the checkpoint until the last folder sync, and until then a crash reopens the
    /// old empty log. The checkpoints and the fresh segment's file are made before anything
    /// changes (see [`Log::stage_cut`]): out of room for them, the start again is refused and
    /// the log stays as it was. A `start` within a log that holds records changes nothing.
    /// Producer state kept above the log is the caller's to reset.
    pub async fn restart_at(&self, start: Offset) -> Result<(), MaintenanceError> {
        let _append = self.append_lock.lock().await;
        let _files = self.files_lock.lock().await;
        let point = RecoveryPoint { offset: start, segment: start, position: 0 };
        {
            let state = self.state();
            state.check_online()?;
            let empty = state.log_start == state.log_end;
            if start == state.log_end || (start < state.log_end && !empty) {
                return Ok(());
            }
        }
        let body = PartitionCheckpoint { recovery: point, log_start: start, high_watermark: start };
        let staged = self.stage_cut(body, EpochCache::default().encode(), None).await?;
        // The fresh segment is made before anything changes too, under a temporary name (a
        // leftover is removed at the next open): out of descriptors for it, the start again is
        // refused like the checkpoints. Its name is taken once the old segments are gone, so
        // that it may be the name of one of them.
        let disk = &*self.env.disk;
        let name = segment::file_name(start, LOG_EXT);
        let temp = checkpoint::temp_path(&self.dir, &name);
        let file = match disk.create(&temp).await {
            Ok(file) => file,
            Err(e) => {
                let mut made = staged.checkpoints.clone();
                made.push((temp, name));
                return Err(self.refused_cut(e, &made).await);
            }
        };
        {
            let mut state = self.state();
            state.rewrites += 1;
            state.log_start = start;
            state.high_watermark = start;
            state.checkpointed = point;
            state.epochs = Default::default();
        }
        // 1. The new start, durable: from here on a reopen drops every old segment. 2. No
        // epoch vouches for an offset below it.
        self.install_cut(staged).await?;
        // 3. The fresh active segment at the start replaces the old ones.
        let old: Vec<Offset> = {
            let mut state = self.state();
            let old = state.segments.keys().copied().collect();
            for seg in std::mem::take(&mut state.segments).into_values() {
                seg.retire();
            }
            state.segments.insert(start, Segment::new_active(start, file));
            state.log_end = start;
            state.durable = point;
            state.cuts += 1;
            state.rewrites += 1;
            state.unsynced.clear();
            old
        };
        for base in old {
            remove_segment_files(disk, &self.dir, base).await.map_err(|e| self.failed(e))?;
        }
        disk.rename(&temp, &self.dir.join(&name)).await.map_err(|e| self.failed(e))?;
        disk.sync_dir(&self.dir).await.map_err(|e| self.failed(e))?;
        tracing::info!(log = %self.dir.display(), start = %start, "restarted past its end");
        Ok(())
    }

    /// Forgets the leader epochs begun at the log end, in which nothing was written: a leader
    /// records its epoch before its first write, and if it is deposed first, the entry vouches
    /// for no record. A follower whose leader's log matches its own up to its end must drop
    /// such an entry, or the leader's batches of older epochs that follow would look out of
    /// order. Durable before it returns.
    ///
    /// The end is the one under the append lock, so a batch appended meanwhile is never cut.
    pub async fn forget_epochs_at_end(&self) -> Result<(), MaintenanceError> {
        let _append = self.append_lock.lock().await;
        let _files = self.files_lock.lock().await;
        self.at_or_past_end(None).await.map(|_| ())
    }

    /// With the append and files locks held: if `offset` (the log end when `None`) is at or
    /// past the end, forgets the epochs begun at the end if it is the end, durably, and returns
    /// the end; `None` if there is a tail to cut.
    async fn at_or_past_end(
        &self,
        offset: Option<Offset>,
    ) -> Result<Option<Offset>, MaintenanceError> {
        let at_end = {
            let mut state = self.state();
            state.check_online()?;
            let end = state.log_end;
            let offset = offset.unwrap_or(end);
            let before = (offset == end).then(|| state.epochs.clone());
            let forget = offset == end && state.epochs.truncate_from(end);
            (offset >= end).then(|| (end, forget.then(|| (state.epochs.encode(), before))))
        };
        let Some((end, forgotten)) = at_end else { return Ok(None) };
        if let Some((epochs, Some(before))) = forgotten {
            // Out of room (space, or descriptors) for the new checkpoint beside the old, the
            // epochs are not forgotten yet: the old checkpoint still stands, and the follower
            // asks again. Any failure once the new one replaces it takes the log offline.
            let disk = &*self.env.disk;
            let temp = match checkpoint::write_temp(disk, &self.dir, EPOCH_CHECKPOINT, epochs).await
            {
                Ok(temp) => temp,
                Err(e) if Shortage::of(&e).is_some() => {
                    tracing::warn!(log = %self.dir.display(), error = %e, "cannot forget the epochs begun at the log end yet");
                    self.state().epochs = before;
                    return Err(MaintenanceError::Io(e));
                }
                Err(e) => return Err(self.failed(e)),
            };
            checkpoint::install(disk, &self.dir, EPOCH_CHECKPOINT, &temp)
                .await
                .map_err(|e| self.failed(e))?;
            self.state().epochs_unsaved = false;
        }
        Ok(Some(end))
    }

    /// Stages the files a cut rewrites in temporary files beside them, before the cut changes
    /// anything: the partition checkpoint `body`, the epoch checkpoint `epochs` (the log's own
    /// as the cut leaves them, under the append lock) and, for a truncation, the index files
    /// of the segment `index` names as the cut leaves them. Out of room for any (disk space,
    /// or descriptors), the cut has not begun: the temporary files go, the log stays online as
    /// it was, and the follower asks again, as for a refused append. Before, the log went
    /// offline until a restart. Any other failure takes the log offline.
    async fn stage_cut(
        &self,
        body: PartitionCheckpoint,
        epochs: bytes::Bytes,
        index: Option<(Offset, &ActiveIndex)>,
    ) -> Result<StagedCut, MaintenanceError> {
        let disk = &*self.env.disk;
        let rewrites = self.state().rewrites + 1;
        let mut files = vec![
            (PARTITION_CHECKPOINT.to_owned(), body.encode()),
            (EPOCH_CHECKPOINT.to_owned(), epochs),
        ];
        if let Some((base, active)) = index {
            let offsets = super::index::encode_offsets(&active.offsets);
            let times = super::index::encode_times(&active.times);
            files.push((segment::file_name(base, segment::INDEX_EXT), offsets));
            files.push((segment::file_name(base, segment::TIME_INDEX_EXT), times));
        }
        let mut staged = Vec::with_capacity(files.len());
        for (name, contents) in files {
            match checkpoint::write_temp(disk, &self.dir, &name, contents).await {
                Ok(temp) => staged.push((temp, name)),
                Err(e) => return Err(self.refused_cut(e, &staged).await),
            }
        }
        let index = staged.split_off(CUT_CHECKPOINTS);
        Ok(StagedCut { body, rewrites, checkpoints: staged, index })
    }

    /// A cut refused for `e` while staging its files, with `staged` the temporary files
    /// written so far: for want of room they are removed (as is the one that failed, and any
    /// leftover at the next open), the log stays online and counts it as an append refused for
    /// room (see [`Log::refused_for_room`]); otherwise it goes offline.
    async fn refused_cut(&self, e: io::Error, staged: &[(PathBuf, String)]) -> MaintenanceError {
        if Shortage::of(&e).is_none() {
            return self.failed(e);
        }
        // The node warns once per episode of want of room (the refusal counts as one).
        tracing::debug!(log = %self.dir.display(), error = %e, "no room to cut the log yet");
        for (temp, _) in staged {
            let _ = self.env.disk.remove(temp).await;
        }
        // Counted as a refused append: this replica cannot take writes until it has room.
        self.state().refused_for_room = Some(self.env.clock.now());
        MaintenanceError::Io(e)
    }

    /// Installs a staged cut's checkpoints, the partition checkpoint first; returns its staged
    /// index files, for the cut to rename into place once the later segments are gone. A
    /// failure takes the log offline.
    async fn install_cut(
        &self,
        staged: StagedCut,
    ) -> Result<Vec<(PathBuf, String)>, MaintenanceError> {
        let disk = &*self.env.disk;
        for (temp, name) in &staged.checkpoints {
            checkpoint::install(disk, &self.dir, name, temp).await.map_err(|e| self.failed(e))?;
            if name == PARTITION_CHECKPOINT {
                self.checkpoint_written(staged.body, staged.rewrites);
            } else {
                self.state().epochs_unsaved = false;
            }
        }
        Ok(staged.index)
    }

    /// A failure mid-cut leaves the tail unknown: the log goes offline until it is reopened
    /// (recovery then finishes or undoes the cut).
    fn failed(&self, e: io::Error) -> MaintenanceError {
        self.go_offline(super::error::Offline::WriteFailed(e.kind())).into()
    }
}

/// The checkpoints a cut rewrites, the partition checkpoint and the epoch checkpoint.
const CUT_CHECKPOINTS: usize = 2;

/// The files a cut rewrites, written to temporary files beside them (see [`Log::stage_cut`]),
/// as (temporary file, name) pairs.
struct StagedCut {
    /// The partition checkpoint staged.
    body: PartitionCheckpoint,
    /// The log's count of rewrites once the cut has begun.
    rewrites: u64,
    /// The partition checkpoint, then the epoch checkpoint.
    checkpoints: Vec<(PathBuf, String)>,
    /// The index files of the segment holding a truncation.
    index: Vec<(PathBuf, String)>,
}

/// The index of the segment holding a cut, as the log had it.
enum Holding {
    /// The active segment's entries, in memory.
    Active(ActiveIndex),
    /// A sealed segment's index files.
    Sealed(Arc<IndexFile>, Arc<IndexFile>),
}

impl Holding {
    /// The whole index, if it is at hand (a sealed segment's read until reads agree).
    async fn index(self, owner: &Log, log: &dyn File) -> io::Result<Option<ActiveIndex>> {
        match self {
            Holding::Active(active) => Ok(Some(active)),
            Holding::Sealed(offsets, times) => {
                match (owner.open_index(&offsets).await, owner.open_index(&times).await) {
                    (Some(offsets), Some(times)) => {
                        segment::read_index_files(&*offsets, &*times, log.len()).await
                    }
                    _ => Ok(None),
                }
            }
        }
    }
}

/// The walk that rebuilds the holding segment of a cut.
struct Walk<'a> {
    base: Offset,
    log: &'a Arc<dyn File>,
    dense: bool,
    interval: u64,
    target: Offset,
    /// Where the holding segment ends: its size, and the offset after its last batch.
    end: u64,
    end_offset: Offset,
    /// The log's epoch history, which vouches for the epoch of every batch it holds.
    epochs: &'a EpochCache,
}

impl Walk<'_> {
    /// The holding segment with every batch wholly below the target, walked from `prefix` (see
    /// [`ActiveIndex::kept_below`]) or from its start. What lies before the walk's start is
    /// kept unwalked. A bad batch the walk meets (a latent sector error) is walked past if it
    /// lies wholly below the target and the batches after it chain to the segment's end (see
    /// [`walk_past`]); otherwise the cut falls there. A walk from a prefix that finds no batch
    /// where its entry points walks again from the start.
    async fn keep(&self, mut prefix: Option<KeptPrefix>) -> io::Result<Segment> {
        let Walk { base, log, dense, interval, target, end, end_offset, epochs: history } = *self;
        'walks: loop {
            let mut kept = Segment::new_active(base, Arc::clone(log));
            let from_entry = prefix.is_some();
            if let Some(KeptPrefix { index, start, max }) = prefix.take() {
                kept.index = SegmentIndex::Active(index);
                kept.skip_to(u64::from(start.position), Offset(base.0 + i64::from(start.relative)));
                if let Some(max) = max {
                    kept.max_timestamp = max.timestamp;
                    kept.max_timestamp_batch = Offset(base.0 + i64::from(max.relative));
                }
            }
            let epochs = Epochs::vouched_by(Some(history), LeaderEpoch(i32::MIN));
            let mut walker =
                Walker::new(&**log, kept.size, log.len(), kept.next_offset, dense, epochs)
                    .starting_at_entry(from_entry);
            let mut walked_any = false;
            loop {
                match walker.next().await {
                    Ok(Some(walked)) if walked.header.last_offset() < target.0 => {
                        kept.record_batch(&walked.header, walked.position, interval);
                        walked_any = true;
                    }
                    Ok(_) => return Ok(kept),
                    Err(WalkStop::Invalid { .. }) if from_entry && !walked_any => continue 'walks,
                    Err(WalkStop::Invalid { position, .. }) => {
                        let damaged = (position, kept.next_offset);
                        let past =
                            walk_past(&**log, damaged, (end, end_offset), Some(history)).await?;
                        // Unless the damaged batch lies wholly below the target and something
                        // vouches for where the batch after it starts, the cut falls here.
                        let Some((at, next)) = past.filter(|&(_, next)| next <= target) else {
                            return Ok(kept);
                        };
                        kept.skip_to(at, next);
                        let epochs = Epochs::vouched_by(Some(history), LeaderEpoch(i32::MIN));
                        walker = Walker::new(&**log, at, log.len(), next, dense, epochs);
                    }
                    Err(WalkStop::Io(e)) => return Err(e),
                }
            }
        }
    }
}
