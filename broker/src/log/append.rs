//! Appending: validate a client's batch, assign its offsets, write it at the end of the active
//! segment (rolling first when the segment is full or old), and — under `flush.policy=ack` —
//! complete only once it is synced.

use std::collections::VecDeque;
use std::io;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use super::batch::{self, BatchHeader};
use super::checkpoint;
use super::config::{FlushPolicy, LogConfig, TimestampPolicy};
use super::epochs::EPOCH_CHECKPOINT;
use super::error::{AppendError, Offline};
use super::partition_log::Log;
use super::records;
use super::segment::{self, LOG_EXT, Segment, SegmentIndex};
use crate::model::{LeaderEpoch, Offset};

/// What an append did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the batch's first record.
    pub base_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// The broker's timestamp, when the topic uses LogAppendTime.
    pub log_append_time: Option<i64>,
    /// The log start offset after the append.
    pub log_start: Offset,
    /// The stamped header as stored.
    pub header: BatchHeader,
}

impl Log {
    /// Appends one batch a client produced and, under the `ack` flush policy, waits until it is
    /// durable. Nothing is written unless the batch passes every check.
    pub async fn append(
        &self,
        batch: Bytes,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, AppendError> {
        let info = self.append_unsynced(batch, leader_epoch).await?;
        match self.config().flush_policy {
            FlushPolicy::Ack => self.wait_durable(info.last_offset.next()).await?,
            FlushPolicy::Interval => self.flush_if_due().await?,
        }
        Ok(info)
    }

    /// Appends one batch a client produced without waiting for it to be durable.
    ///
    /// The batch joins the log's queue; whichever appender holds the append lock writes every
    /// batch queued by then, in queue order, with one write where they follow one another in
    /// the active segment (see [`Log::write_queued`]). Each caller still gets its own batch's
    /// offsets or error.
    pub async fn append_unsynced(
        &self,
        batch: Bytes,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, AppendError> {
        let config = self.config();
        let header = batch::validate_produce(&batch, config.max_message_bytes)?;
        if config.cleanup_policy.compacts() && has_keyless_record(&batch)? {
            return Err(AppendError::KeylessOnCompacted);
        }
        let mut owned = segment::owned(batch);
        let log_append_time = match config.timestamp_policy {
            TimestampPolicy::CreateTime => None,
            TimestampPolicy::LogAppendTime => {
                let now = self.env.clock.wall_ms();
                batch::set_log_append_time(&mut owned, now)?;
                Some(now)
            }
        };
        // Alone — nobody writing, nothing queued — it is written at once, without queueing.
        if let Ok(_append) = self.append_lock.try_lock()
            && self.queue().is_empty()
        {
            return self.append_alone(owned, &header, leader_epoch, log_append_time).await;
        }
        let (done, mut answer) = oneshot::channel();
        self.queue().push_back(Queued {
            owned,
            header,
            epoch: leader_epoch,
            log_append_time,
            done,
        });
        // Either another appender writes this batch, or this one takes the lock and writes
        // it with everything queued before and after it.
        let _append = tokio::select! {
            biased;
            answered = &mut answer => return answered.unwrap_or(Err(UNANSWERED)),
            guard = self.append_lock.lock() => guard,
        };
        match answer.try_recv() {
            Ok(answered) => return answered,
            Err(oneshot::error::TryRecvError::Closed) => return Err(UNANSWERED),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        self.write_queued().await;
        answer.await.unwrap_or(Err(UNANSWERED))
    }

    /// Writes one client batch at the log end; the caller holds the append lock.
    async fn append_alone(
        &self,
        mut owned: BytesMut,
        header: &BatchHeader,
        epoch: LeaderEpoch,
        log_append_time: Option<i64>,
    ) -> Result<AppendInfo, AppendError> {
        let (base, position, file) = self.ready_for(header, epoch).await?;
        batch::stamp(&mut owned, base.0, epoch.0)?;
        let stamped = owned.freeze();
        let header = batch::parse_header(&stamped)?;
        self.write(&*file, position, vec![stamped]).await?;
        Ok(self.appended(header, position, log_append_time))
    }

    /// Brings the files up to a client batch with `header` in `epoch` (a roll if the active
    /// segment is full or old, the epoch recorded if new) and says where it goes: its base
    /// offset, its position and the active segment's file. The caller holds the append lock.
    async fn ready_for(
        &self,
        header: &BatchHeader,
        epoch: LeaderEpoch,
    ) -> Result<(Offset, u64, std::sync::Arc<dyn crate::io::File>), AppendError> {
        self.roll_if_needed(header.total_bytes() as u64, header.last_offset_delta()).await?;
        let (base, position, file) = self.tail()?;
        self.record_epoch(epoch, base).await?;
        Ok((base, position, file))
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Queued>> {
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes every queued batch, in order; the caller holds the append lock. Batches that fit
    /// the active segment in the current leader epoch are placed one after another and written
    /// together (up to [`RUN_BYTES_MAX`]); one that needs a roll or a new epoch first has the
    /// batches before it written, then goes the way a lone append does. If this future is
    /// dropped midway, what it has not answered goes back to the head of the queue, for the
    /// next holder of the lock to write.
    async fn write_queued(&self) {
        let entries: VecDeque<Queued> = {
            let mut queue = self.queue();
            // A batch whose caller is gone is not written, as if it never got the lock.
            queue.drain(..).filter(|q| !q.done.is_closed()).collect()
        };
        let mut claim = QueueClaim { log: self, entries, run: Vec::new() };
        while let Some(front) = claim.entries.front() {
            let (incoming, last_delta, epoch) =
                (front.header.total_bytes() as u64, front.header.last_offset_delta(), front.epoch);
            let placed = self.place(&claim.run, incoming, last_delta, epoch);
            let (base, position) = match placed {
                Some(at) => at,
                None => {
                    // Bring the files up to this batch first, as a lone append does.
                    self.write_run(&mut claim).await;
                    let header = claim.entries.front().map(|q| q.header);
                    let ready = match header {
                        Some(header) => self.ready_for(&header, epoch).await,
                        None => break,
                    };
                    match ready {
                        Ok((base, position, _)) => (base, position),
                        Err(e) => {
                            if let Some(q) = claim.entries.pop_front() {
                                let _ = q.done.send(Err(e));
                            }
                            continue;
                        }
                    }
                }
            };
            let Some(mut q) = claim.entries.pop_front() else { break };
            let stamped = batch::stamp(&mut q.owned, base.0, epoch.0).and_then(|()| {
                let bytes = q.owned.split().freeze();
                batch::parse_header(&bytes).map(|header| (bytes, header))
            });
            match stamped {
                Ok((bytes, header)) => {
                    let run_bytes = position + bytes.len() as u64
                        - claim.run.first().map_or(position, |p| p.position);
                    claim.run.push(Placed { queued: q, bytes, header, position });
                    if run_bytes >= RUN_BYTES_MAX {
                        self.write_run(&mut claim).await;
                    }
                }
                Err(e) => {
                    let _ = q.done.send(Err(e.into()));
                }
            }
        }
        self.write_run(&mut claim).await;
    }

    /// Where the next queued batch goes if it can join `run` without touching the files: the
    /// log is online, the batch continues the run (or the log) in the active segment without
    /// a roll, and its epoch is the log's newest. `None`: write the run, then take the slow way.
    fn place(
        &self,
        run: &[Placed],
        incoming: u64,
        last_delta: i32,
        epoch: LeaderEpoch,
    ) -> Option<(Offset, u64)> {
        let config = self.config();
        let now = self.env.clock.wall_ms();
        let state = self.state();
        if state.offline.is_some() || state.epochs.latest().map(|(e, _)| e) != Some(epoch) {
            return None;
        }
        let active = state.active()?;
        let (end, size) = match run.last() {
            Some(p) => (Offset(p.header.last_offset() + 1), p.position + p.bytes.len() as u64),
            None => (state.log_end, active.size),
        };
        let roll = needs_roll(active, size, end, incoming, last_delta, run.len(), &config, now);
        (!roll).then_some((end, size))
    }

    /// Writes the placed batches with one write and answers their callers.
    async fn write_run(&self, claim: &mut QueueClaim<'_>) {
        let Some(first) = claim.run.first() else { return };
        let position = first.position;
        let file = self.state().active().map(|a| std::sync::Arc::clone(&a.log));
        let written = match file {
            Some(file) => {
                let pieces = claim.run.iter().map(|p| p.bytes.clone()).collect();
                self.write(&*file, position, pieces).await
            }
            None => Err(WriteFailed::Offline(Offline::Closed)),
        };
        for placed in std::mem::take(&mut claim.run) {
            let answer = match &written {
                Ok(()) => {
                    Ok(self.appended(placed.header, placed.position, placed.queued.log_append_time))
                }
                Err(failed) => Err(failed.clone().into()),
            };
            let _ = placed.queued.done.send(answer);
        }
    }

    /// Appends one batch a leader already stamped, as a follower copying the leader's log
    /// does: it must pass the frame, CRC and record checks and start exactly at this log's
    /// end; its base offset and leader epoch are kept as the leader wrote them (an epoch older
    /// than the log's newest is refused). Nothing is written unless every check passes. It is
    /// not synced: a follower syncs (`flush`) before it reports the batch as held.
    pub async fn append_replicated(&self, batch: Bytes) -> Result<AppendInfo, AppendError> {
        // The leader already applied the topic's size limit; the follower only needs the
        // batch to be whole and intact.
        let header = batch::validate(&batch, batch.len())?;
        let _append = self.append_lock.lock().await;
        self.roll_if_needed(header.total_bytes() as u64, header.last_offset_delta()).await?;
        let (end, position, file) = self.tail()?;
        let base = Offset(header.base_offset());
        if base != end {
            return Err(AppendError::OutOfOrder { expected: end, got: base });
        }
        self.record_epoch(LeaderEpoch(header.partition_leader_epoch()), base).await?;
        self.write(&*file, position, vec![batch]).await?;
        Ok(self.appended(header, position, None))
    }

    /// Records the leader epoch `epoch` as starting at the log end, before anything is written
    /// under it: a broker that becomes leader does this at once, so that followers asking where
    /// their epochs end always get an answer from it (see `replication::follower`).
    pub async fn begin_epoch(&self, epoch: LeaderEpoch) -> Result<(), AppendError> {
        let _append = self.append_lock.lock().await;
        let end = self.log_end_offset();
        self.record_epoch(epoch, end).await
    }

    /// Where the next batch goes: the log end offset, the active segment's size and file.
    /// The caller holds the append lock.
    fn tail(&self) -> Result<(Offset, u64, std::sync::Arc<dyn crate::io::File>), Offline> {
        let state = self.state();
        state.check_online()?;
        let active = state.active().ok_or(Offline::Closed)?;
        Ok((state.log_end, active.size, std::sync::Arc::clone(&active.log)))
    }

    /// The bookkeeping after a batch `header` was written at `position` of the active segment:
    /// its index entries, the log end, the unflushed count; what the append reports.
    fn appended(
        &self,
        header: BatchHeader,
        position: u64,
        log_append_time: Option<i64>,
    ) -> AppendInfo {
        let interval = self.config().index_interval_bytes;
        let mut state = self.state();
        let first_write = state.active().is_some_and(|a| a.size == 0);
        let now = self.env.clock.wall_ms();
        if let Some(active) = state.active_mut() {
            active.record_batch(&header, position, interval);
            if first_write {
                active.first_append_wall_ms = Some(now);
            }
        }
        state.log_end = Offset(header.last_offset() + 1);
        state.unflushed_records += i64::from(header.record_count());
        AppendInfo {
            base_offset: Offset(header.base_offset()),
            last_offset: Offset(header.last_offset()),
            log_append_time,
            log_start: state.log_start,
            header,
        }
    }

    /// Refuses an epoch older than the log's newest; records a newer one durably before any
    /// batch carries it, so recovery can vouch for every stored epoch.
    async fn record_epoch(&self, epoch: LeaderEpoch, start: Offset) -> Result<(), AppendError> {
        let encoded = {
            let mut state = self.state();
            match state.epochs.latest() {
                Some((latest, _)) if epoch < latest => {
                    return Err(AppendError::StaleEpoch { got: epoch, latest });
                }
                Some((latest, _)) if epoch == latest => return Ok(()),
                _ => {}
            }
            state.epochs.assign(epoch, start);
            state.epochs.encode()
        };
        let written =
            checkpoint::write_atomic(&*self.env.disk, &self.dir, EPOCH_CHECKPOINT, encoded);
        match written.await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.go_offline(Offline::WriteFailed(e.kind())).into()),
        }
    }

    /// Writes `pieces` one after another from `position`; a failure leaves the tail unknown and
    /// takes the log offline, except a full disk, where the partial write is cut off again and
    /// the log stays usable.
    async fn write(
        &self,
        file: &dyn crate::io::File,
        position: u64,
        pieces: Vec<Bytes>,
    ) -> Result<(), WriteFailed> {
        match file.write_pieces_at(position, pieces).await {
            Ok(()) => Ok(()),
            Err(e)
                if e.kind() == io::ErrorKind::StorageFull
                    && file.truncate(position).await.is_ok() =>
            {
                Err(WriteFailed::DiskFull)
            }
            Err(e) => Err(WriteFailed::Offline(self.go_offline(Offline::WriteFailed(e.kind())))),
        }
    }

    /// Rolls before an append of `incoming` bytes and `last_delta + 1` records if the active
    /// segment is too big, too old, has a full index, or could not index the new offsets.
    async fn roll_if_needed(&self, incoming: u64, last_delta: i32) -> Result<(), AppendError> {
        let config = self.config();
        let now = self.env.clock.wall_ms();
        let needed = {
            let state = self.state();
            let Some(active) = state.active() else {
                return Err(Offline::Closed.into());
            };
            needs_roll(active, active.size, state.log_end, incoming, last_delta, 0, &config, now)
        };
        if needed {
            self.roll_locked().await?;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one at the log end offset (if the active one
    /// holds anything). For operators and tests; appends roll by themselves.
    pub async fn roll(&self) -> Result<(), AppendError> {
        let _append = self.append_lock.lock().await;
        self.roll_locked().await
    }

    /// The roll itself; the caller holds the append lock.
    pub(super) async fn roll_locked(&self) -> Result<(), AppendError> {
        let (old_base, index, new_base) = {
            let state = self.state();
            state.check_online()?;
            let Some(active) = state.active() else {
                return Err(Offline::Closed.into());
            };
            let SegmentIndex::Active(index) = &active.index else {
                return Ok(());
            };
            if active.size == 0 {
                return Ok(());
            }
            (active.base, index.clone(), state.log_end)
        };
        let disk = &*self.env.disk;
        let created = async {
            let sealed = segment::write_index_files(disk, &self.dir, old_base, &index).await?;
            let file = disk.create(&segment::path(&self.dir, new_base, LOG_EXT)).await?;
            io::Result::Ok((sealed, file))
        }
        .await;
        let (sealed, file) = match created {
            Ok(done) => done,
            Err(e) => return Err(self.go_offline(Offline::WriteFailed(e.kind())).into()),
        };
        let mut state = self.state();
        if let Some(old) = state.segments.get_mut(&old_base) {
            old.index = SegmentIndex::Sealed(sealed);
            let log = std::sync::Arc::clone(&old.log);
            state.unsynced.push(log);
        }
        state.segments.insert(new_base, Segment::new_active(new_base, file));
        state.dir_dirty = true;
        tracing::debug!(log = %self.dir.display(), segment = %new_base, "rolled");
        Ok(())
    }
}

fn index_entry_bytes() -> u64 {
    super::index::OFFSET_ENTRY_BYTES as u64
}

/// Whether a batch of `incoming` bytes and `last_delta + 1` records, going at byte `size` and
/// offset `end` of the active segment, needs a roll first: the segment holds something and is
/// too big, too old, has a full index (counting an entry for each of `unindexed` batches
/// placed but not yet recorded), or could not index the new offsets.
#[allow(clippy::too_many_arguments)]
fn needs_roll(
    active: &Segment,
    size: u64,
    end: Offset,
    incoming: u64,
    last_delta: i32,
    unindexed: usize,
    config: &LogConfig,
    now: i64,
) -> bool {
    let last = Offset(end.0 + i64::from(last_delta));
    let index_bytes = active.index_bytes() + (unindexed as u64 + 1) * index_entry_bytes();
    size > 0
        && (size + incoming > config.segment_bytes
            || active
                .first_append_wall_ms
                .is_some_and(|t| now.saturating_sub(t) >= config.segment_ms)
            || index_bytes > config.segment_index_bytes
            || active.relative(last).is_none())
}

/// Bytes of queued batches written with one write at most.
const RUN_BYTES_MAX: u64 = 1 << 20;

/// The answer of a caller whose batch was never answered: cannot happen while the log lives
/// (a queued batch is answered, or handed back to the queue, by whoever took it).
const UNANSWERED: AppendError = AppendError::Offline(Offline::Closed);

/// A client batch, validated, waiting in the queue for its offsets.
pub(super) struct Queued {
    owned: BytesMut,
    /// The header as the client sent it.
    header: BatchHeader,
    epoch: LeaderEpoch,
    log_append_time: Option<i64>,
    done: oneshot::Sender<Result<AppendInfo, AppendError>>,
}

/// A queued batch stamped with its offsets and placed at `position`, not yet written.
struct Placed {
    queued: Queued,
    bytes: Bytes,
    /// The header as stamped.
    header: BatchHeader,
    position: u64,
}

/// The batches one holder of the append lock took from the queue and has not answered yet.
/// Dropped midway (the holder's caller went away), it hands them back to the head of the
/// queue, in order: the next holder writes them, at the same offsets if the log has not moved.
struct QueueClaim<'a> {
    log: &'a Log,
    entries: VecDeque<Queued>,
    run: Vec<Placed>,
}

impl Drop for QueueClaim<'_> {
    fn drop(&mut self) {
        if self.entries.is_empty() && self.run.is_empty() {
            return;
        }
        let placed = std::mem::take(&mut self.run)
            .into_iter()
            .map(|p| Queued { owned: BytesMut::from(&p.bytes[..]), ..p.queued });
        let back: Vec<Queued> = placed.chain(std::mem::take(&mut self.entries)).collect();
        let mut queue = self.log.queue();
        for q in back.into_iter().rev() {
            queue.push_front(q);
        }
    }
}

/// Why a write failed, for every batch it carried.
#[derive(Clone, Debug)]
enum WriteFailed {
    DiskFull,
    Offline(Offline),
}

impl From<WriteFailed> for AppendError {
    fn from(failed: WriteFailed) -> AppendError {
        match failed {
            WriteFailed::DiskFull => AppendError::DiskFull,
            WriteFailed::Offline(offline) => AppendError::Offline(offline),
        }
    }
}

/// Whether any record of the batch has a null key (decompressing if needed).
fn has_keyless_record(batch: &Bytes) -> Result<bool, AppendError> {
    for record in records::record_iter(batch)? {
        if record?.key.is_none() {
            return Ok(true);
        }
    }
    Ok(false)
}
