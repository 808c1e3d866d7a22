//! Appending: validate a client's batch, assign its offsets, write it at the end of the active
//! segment (rolling first when the segment is full or old), and — under `flush.policy=ack` —
//! complete only once it is synced.

use std::io;

use bytes::Bytes;

use super::batch::{self, BATCH_HEADER_BYTES, BatchHeader};
use super::checkpoint;
use super::config::{FlushPolicy, TimestampPolicy};
use super::epochs::EPOCH_CHECKPOINT;
use super::error::{AppendError, Offline, RECORD_ERRORS_MAX};
use super::partition_log::Log;
use super::records;
use super::segment::{self, LOG_EXT, Segment, SegmentIndex};
use crate::model::{LeaderEpoch, Offset};

/// A batch a client produced that passed every check an append makes of it
/// ([`Log::validate_produced`]): one whole batch, its CRC intact, its header and records
/// well-formed, within the topic's size limit, keyed where the topic is compacted, under the
/// topic's settings when it was checked (a batch checked just before a setting changed is
/// appended under the old one, as one that arrived a moment earlier would have been).
#[derive(Clone, Debug)]
pub struct ValidBatch {
    bytes: Bytes,
    header: BatchHeader,
}

impl ValidBatch {
    /// Its header, as the client sent it.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// Its size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// What a follower's append of several batches did ([`Log::append_replicated_all`]).
#[derive(Debug)]
pub struct ReplicatedAppend {
    /// The batches appended, in order: a prefix of those given.
    pub appended: Vec<AppendInfo>,
    /// Why the next batch was not appended, if one was left.
    pub stopped: Option<AppendError>,
}

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

/// How long a log counts as out of room after an append was refused for lack of it, or a new
/// leader's epoch could not be recorded ([`Log::refused_for_room`]): long enough that a replica near the end of its disk is not
/// given writes back at every small append that fits, short enough that one whose disk has
/// room again, with nothing to append (its partition idle, or its leader refusing too), is let
/// back into the ISR soon.
pub const ROOM_REFUSAL_HOLD: std::time::Duration = std::time::Duration::from_secs(10);

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
    pub async fn append_unsynced(
        &self,
        batch: Bytes,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, AppendError> {
        let batch = self.validate_produced(batch)?;
        self.append_valid(batch, leader_epoch).await
    }

    /// Checks a batch a client produced as an append does, under the topic's current limits:
    /// what a leader must know before it even asks whether the batch is a retry of one it
    /// holds, since a retry is matched by its header alone.
    pub fn validate_produced(&self, batch: Bytes) -> Result<ValidBatch, AppendError> {
        let config = self.config();
        let (header, span) = batch::validate_produce_spanned(&batch, config.max_message_bytes)?;
        if let (TimestampPolicy::CreateTime, Some(span)) = (config.timestamp_policy, span) {
            let now = self.env.clock.wall_ms();
            let lower = now.saturating_sub(config.timestamp_before_max_ms);
            let upper = now.saturating_add(config.timestamp_after_max_ms);
            if span.earliest < lower || span.latest > upper {
                return Err(out_of_range(&batch, lower, upper)?);
            }
        }
        if config.cleanup_policy.compacts() && has_keyless_record(&batch)? {
            return Err(AppendError::KeylessOnCompacted);
        }
        Ok(ValidBatch { bytes: batch, header })
    }

    /// Appends a batch [`Log::validate_produced`] passed, without waiting for it to be durable.
    pub async fn append_valid(
        &self,
        valid: ValidBatch,
        leader_epoch: LeaderEpoch,
    ) -> Result<AppendInfo, AppendError> {
        let ValidBatch { bytes: batch, header } = valid;
        let config = self.config();
        // The header is stamped as a copy and written in front of the records, which stay
        // where the request put them: no copy of the batch, however its buffer is shared.
        let (mut head, log_append_time) = match config.timestamp_policy {
            TimestampPolicy::CreateTime => (batch::head(&batch)?, None),
            TimestampPolicy::LogAppendTime => {
                let now = self.env.clock.wall_ms();
                (batch::log_append_time_header(&batch, now)?, Some(now))
            }
        };
        let _append = self.append_lock.lock().await;
        let written = async {
            self.roll_if_needed(header.total_bytes() as u64, header.last_offset_delta()).await?;
            let (base, position, file) = self.tail()?;
            self.record_epoch(leader_epoch, base, OnShortage::Refuse).await?;
            batch::stamp(&mut head, base.0, leader_epoch.0)?;
            let header = batch::parse_header(&head)?;
            let records = batch.slice(BATCH_HEADER_BYTES..);
            self.write(&*file, position, vec![Bytes::copy_from_slice(&head), records]).await?;
            Ok(self.appended(header, position, log_append_time))
        }
        .await;
        if let Err(e) = &written {
            self.note_room(e);
        }
        written
    }

    /// Appends one batch a leader already stamped, as a follower copying the leader's log
    /// does: it must pass the frame, CRC and record checks and start exactly at this log's
    /// end; its base offset and leader epoch are kept as the leader wrote them (an epoch older
    /// than the log's newest is refused). Nothing is written unless every check passes. It is
    /// not synced: a follower syncs (`flush`) before it reports the batch as held.
    pub async fn append_replicated(&self, batch: Bytes) -> Result<AppendInfo, AppendError> {
        let mut copied = self.append_replicated_all(std::slice::from_ref(&batch)).await;
        match (copied.stopped, copied.appended.pop()) {
            (Some(e), _) => Err(e),
            (None, Some(info)) => Ok(info),
            // Not reached: an append that did not stop appended its one batch.
            (None, None) => Err(Offline::Closed.into()),
        }
    }

    /// Appends batches a leader already stamped, in order, each as [`Log::append_replicated`]
    /// appends one, until one is refused: the batches before its run stay appended; it, the
    /// rest, and (where its run's write failed) the run's batches before it are not.
    /// Consecutive batches that continue each other in one epoch and one segment form a run
    /// and reach the disk in one gathered write, as a fetch brought them: a follower copying
    /// many small batches would otherwise pay the kernel's cost of a write for each.
    pub async fn append_replicated_all(&self, batches: &[Bytes]) -> ReplicatedAppend {
        // The leader already applied the topic's size limit; the follower only needs each
        // batch to be whole and intact. Checked before any lock is taken.
        let checked: Vec<Option<BatchHeader>> =
            batches.iter().map(|b| batch::validate(b, b.len()).ok()).collect();
        let mut appended = Vec::with_capacity(batches.len());
        let _append = self.append_lock.lock().await;
        let stopped = loop {
            let at = appended.len();
            let Some(first) = batches.get(at) else { break None };
            if checked[at].is_none() {
                // Checked again for the reason it is refused.
                if let Err(e) = batch::validate(first, first.len()) {
                    break Some(e.into());
                }
            }
            if let Err(e) =
                self.append_replicated_run(&batches[at..], &checked[at..], &mut appended).await
            {
                break Some(e);
            }
        };
        if let Some(e) = &stopped {
            self.note_room(e);
        }
        ReplicatedAppend { appended, stopped }
    }

    /// Appends `batches[0]` and after it every following batch that continues it in the same
    /// epoch and segment, with one write (`checked` holds each batch's header, where it passed
    /// its checks); pushes what each append did onto `appended`. The caller holds the append
    /// lock.
    async fn append_replicated_run(
        &self,
        batches: &[Bytes],
        checked: &[Option<BatchHeader>],
        appended: &mut Vec<AppendInfo>,
    ) -> Result<(), AppendError> {
        // Not reached without a checked first batch: the caller refuses one that failed.
        let Some(Some(header)) = checked.first().copied() else {
            return Err(Offline::Closed.into());
        };
        self.roll_if_needed(header.total_bytes() as u64, header.last_offset_delta()).await?;
        let (end, position, file) = self.tail()?;
        let base = Offset(header.base_offset());
        if base != end {
            return Err(AppendError::OutOfOrder { expected: end, got: base });
        }
        let epoch = header.partition_leader_epoch();
        self.record_epoch(LeaderEpoch(epoch), base, OnShortage::Refuse).await?;
        let mut run = vec![(header, position)];
        let mut parts = vec![batches[0].clone()];
        let mut next_position = position + header.total_bytes() as u64;
        {
            let config = self.config();
            let now = self.env.clock.wall_ms();
            let state = self.state();
            let active = state.active().ok_or(Offline::Closed)?;
            let mut last = header;
            for (batch, next) in batches.iter().zip(checked).skip(1) {
                // A batch that failed its checks is refused when its turn comes.
                let Some(next) = *next else { break };
                let placed = Placed { bytes: next_position - position, batches: run.len() as u64 };
                let joins = next.base_offset() == last.last_offset() + 1
                    && next.partition_leader_epoch() == epoch
                    && !must_roll(&config, active, now, placed, &next);
                if !joins {
                    break;
                }
                run.push((next, next_position));
                parts.push(batch.clone());
                next_position += next.total_bytes() as u64;
                last = next;
            }
        }
        self.write(&*file, position, parts).await?;
        appended.extend(run.into_iter().map(|(header, at)| self.appended(header, at, None)));
        Ok(())
    }

    /// Whether an append was refused for lack of room (the disk out of space, or the process
    /// out of descriptors for a new segment's files), or a new leader's epoch could not be
    /// recorded for it ([`Log::begin_epoch`]), within the last [`ROOM_REFUSAL_HOLD`]: the
    /// controller then moves the partition's leadership and ISR membership to replicas that
    /// can take writes (see `node::isr_loop`). An append that succeeds meanwhile does not end
    /// it: a disk with a little room left would take a small write and refuse the next.
    pub fn refused_for_room(&self) -> bool {
        let now = self.env.clock.now();
        let refused = self.state().refused_for_room;
        refused.is_some_and(|at| now.saturating_duration_since(at) < ROOM_REFUSAL_HOLD)
    }

    /// Notes when an append was refused for lack of room.
    fn note_room(&self, refused: &AppendError) {
        if matches!(refused, AppendError::DiskFull | AppendError::OutOfDescriptors) {
            self.state().refused_for_room = Some(self.env.clock.now());
        }
    }

    /// Records the leader epoch `epoch` as starting at the log end, before anything is written
    /// under it: a broker that becomes leader does this at once, so that followers asking where
    /// their epochs end always get an answer from it (see `replication::follower`).
    ///
    /// Out of room (disk space, or descriptors) for the new checkpoint beside the old, the
    /// epoch is kept in memory only, which answers followers all the same, and the log stays
    /// online: the first append in it records it durably before it writes (or is refused), and
    /// a crash meanwhile loses only an epoch nothing was written in. The lack of room counts as
    /// a refused append ([`Log::refused_for_room`]), so the partition is handed to a replica
    /// with room where there is one. Any other failure takes the log offline.
    pub async fn begin_epoch(&self, epoch: LeaderEpoch) -> Result<(), AppendError> {
        let _append = self.append_lock.lock().await;
        let end = self.log_end_offset();
        self.record_epoch(epoch, end, OnShortage::KeepInMemory).await
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
    /// batch carries it, so recovery can vouch for every stored epoch (and the newest itself,
    /// where [`Log::begin_epoch`] could keep it in memory only). The caller holds the append
    /// lock. A disk out of space or a process out of descriptors while the new checkpoint is
    /// written beside the old one does what `on_shortage` says; the old checkpoint still
    /// stands, and the next append in the epoch tries again. Any other failure, or any failure
    /// once the new checkpoint replaces the old, takes the log offline.
    async fn record_epoch(
        &self,
        epoch: LeaderEpoch,
        start: Offset,
        on_shortage: OnShortage,
    ) -> Result<(), AppendError> {
        let (encoded, before) = {
            let mut state = self.state();
            match state.epochs.latest() {
                Some((latest, _)) if epoch < latest => {
                    return Err(AppendError::StaleEpoch { got: epoch, latest });
                }
                Some((latest, _)) if epoch == latest && !state.epochs_unsaved => return Ok(()),
                _ => {}
            }
            let before = state.epochs.clone();
            state.epochs.assign(epoch, start);
            (state.epochs.encode(), before)
        };
        let disk = &*self.env.disk;
        let temp = match checkpoint::write_temp(disk, &self.dir, EPOCH_CHECKPOINT, encoded).await {
            Ok(temp) => temp,
            Err(e) => {
                let Some(shortage) = Shortage::of(&e) else {
                    return Err(self.go_offline(Offline::WriteFailed(e.kind())).into());
                };
                let mut state = self.state();
                return match on_shortage {
                    OnShortage::Refuse => {
                        tracing::warn!(log = %self.dir.display(), error = %e, "cannot record leader epoch {epoch:?}: append refused");
                        state.epochs = before;
                        Err(shortage.into())
                    }
                    OnShortage::KeepInMemory => {
                        tracing::warn!(log = %self.dir.display(), error = %e, "cannot record leader epoch {epoch:?} yet: kept in memory until the first append in it");
                        state.epochs_unsaved = true;
                        state.refused_for_room = Some(self.env.clock.now());
                        Ok(())
                    }
                };
            }
        };
        match checkpoint::install(disk, &self.dir, EPOCH_CHECKPOINT, &temp).await {
            Ok(()) => {
                self.state().epochs_unsaved = false;
                Ok(())
            }
            Err(e) => Err(self.go_offline(Offline::WriteFailed(e.kind())).into()),
        }
    }

    /// Writes `parts` one after another at `position`; a failure leaves the tail unknown and
    /// takes the log offline, except a full disk, where the partial write is cut off again and
    /// the log stays usable.
    async fn write(
        &self,
        file: &dyn crate::io::File,
        position: u64,
        parts: Vec<Bytes>,
    ) -> Result<(), AppendError> {
        match file.write_gathered_at(position, parts).await {
            Ok(()) => Ok(()),
            Err(e)
                if e.kind() == io::ErrorKind::StorageFull
                    && file.truncate(position).await.is_ok() =>
            {
                Err(AppendError::DiskFull)
            }
            Err(e) => Err(self.go_offline(Offline::WriteFailed(e.kind())).into()),
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
            let last = Offset(state.log_end.0 + i64::from(last_delta));
            rolls_before(&config, active, now, Placed::NONE, incoming, last)
        };
        if needed {
            let _files = self.files_lock.lock().await;
            self.roll_or_refuse().await?;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one at the log end offset (if the active one
    /// holds anything). For operators and tests; appends roll by themselves. Out of disk space
    /// or descriptors it fails as an append's roll does, leaving the log as it was.
    pub async fn roll(&self) -> Result<(), AppendError> {
        let _append = self.append_lock.lock().await;
        let _files = self.files_lock.lock().await;
        self.roll_or_refuse().await
    }

    /// A roll before an append, or an operator's; the caller holds the append lock and the
    /// files lock. A disk
    /// out of space or a process out of descriptors refuses the append and leaves the log as it
    /// was, usable once they are back (see [`Log::try_roll`]); any other failure takes it
    /// offline.
    async fn roll_or_refuse(&self) -> Result<(), AppendError> {
        match self.try_roll().await {
            Ok(()) => Ok(()),
            Err(RollStop::Offline(offline)) => Err(offline.into()),
            Err(RollStop::Failed(e)) => match Shortage::of(&e) {
                Some(shortage) => {
                    tracing::warn!(log = %self.dir.display(), error = %e, "cannot start a new segment: append refused");
                    Err(shortage.into())
                }
                None => Err(self.go_offline(Offline::WriteFailed(e.kind())).into()),
            },
        }
    }

    /// The roll itself, where any failure takes the log offline (a cut that rolls has changed
    /// the log already). The caller holds the append lock and the files lock.
    pub(super) async fn roll_locked(&self) -> Result<(), AppendError> {
        self.try_roll().await.map_err(|stop| match stop {
            RollStop::Offline(offline) => offline.into(),
            RollStop::Failed(e) => self.go_offline(Offline::WriteFailed(e.kind())).into(),
        })
    }

    /// Writes the active segment's index files, creates the next segment's file, and only then
    /// changes the log: a failure on the way leaves it as it was. The index files it may have
    /// written are the active segment's own, which a checkpoint writes too and recovery reads
    /// only up to its recovery point; a temporary file it left is replaced by the next roll.
    async fn try_roll(&self) -> Result<(), RollStop> {
        let (old_base, index, new_base) = {
            let state = self.state();
            state.check_online().map_err(RollStop::Offline)?;
            let Some(active) = state.active() else {
                return Err(RollStop::Offline(Offline::Closed));
            };
            let Some(index) = active.index_to_seal() else {
                return Ok(());
            };
            if active.size == 0 {
                return Ok(());
            }
            (active.base, index, state.log_end)
        };
        let disk = &*self.env.disk;
        let created = async {
            let sealed = segment::write_index_files(disk, &self.dir, old_base, &index).await?;
            let file = disk.create(&segment::path(&self.dir, new_base, LOG_EXT)).await?;
            io::Result::Ok((sealed, file))
        }
        .await;
        let (sealed, file) = created.map_err(RollStop::Failed)?;
        let mut state = self.state();
        let offline = state.offline.is_some();
        if let Some(old) = state.segments.get_mut(&old_base) {
            old.index = SegmentIndex::Sealed(sealed);
            if offline {
                // Gone offline meanwhile, the log lets go of its index files (see `go_offline`).
                old.release();
            }
            let log = std::sync::Arc::clone(&old.log);
            state.unsynced.push(log);
        }
        state.segments.insert(new_base, Segment::new_active(new_base, file));
        state.dir_dirty = true;
        tracing::debug!(log = %self.dir.display(), segment = %new_base, "rolled");
        Ok(())
    }
}

/// What a shortage of space or descriptors does to a write that cannot do without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnShortage {
    /// The write is refused and the log left as it was.
    Refuse,
    /// The new epoch is kept in memory, unsaved, and the log counts the write as refused for
    /// room (see [`Log::begin_epoch`]).
    KeepInMemory,
}

/// Why a roll did not happen.
enum RollStop {
    /// The log is offline (or closed).
    Offline(Offline),
    /// Writing the index files or creating the new segment failed; the log is unchanged.
    Failed(io::Error),
}

/// A failure to write that passes once the resource is back: what a log refuses an append for,
/// and what the metadata quorum's store waits out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shortage {
    /// The disk is full.
    Space,
    /// The process or system has no file descriptor left (`EMFILE`, `ENFILE`).
    Descriptors,
}

impl Shortage {
    /// The shortage `e` reports, if it is one.
    pub(crate) fn of(e: &io::Error) -> Option<Shortage> {
        if e.kind() == io::ErrorKind::StorageFull {
            Some(Shortage::Space)
        } else if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
            Some(Shortage::Descriptors)
        } else {
            None
        }
    }
}

impl From<Shortage> for AppendError {
    fn from(shortage: Shortage) -> AppendError {
        match shortage {
            Shortage::Space => AppendError::DiskFull,
            Shortage::Descriptors => AppendError::OutOfDescriptors,
        }
    }
}

/// What a follower's run has placed after the active segment's recorded end, in the same
/// write, before a batch joins it.
#[derive(Clone, Copy, Debug)]
struct Placed {
    /// Bytes placed.
    bytes: u64,
    /// Batches placed: each may add one offset index entry.
    batches: u64,
}

impl Placed {
    const NONE: Placed = Placed { bytes: 0, batches: 0 };
}

/// Whether the active segment must roll before a batch of `incoming` bytes whose last offset
/// is `last`, with `placed` already written after it: the segment is too big, too old, has a
/// full index, or could not index the new offsets.
fn rolls_before(
    config: &super::LogConfig,
    active: &Segment,
    now: i64,
    placed: Placed,
    incoming: u64,
    last: Offset,
) -> bool {
    let size = active.size + placed.bytes;
    let first_append = active.first_append_wall_ms.or((placed.batches > 0).then_some(now));
    let entries = placed.batches + 1;
    size > 0
        && (size + incoming > config.segment_bytes
            || first_append.is_some_and(|t| now.saturating_sub(t) >= config.roll_ms())
            || active.index_bytes() + entries * index_entry_bytes() > config.segment_index_bytes
            || active.relative(last).is_none())
}

/// Whether a follower's run must end before `next`, because the segment would roll before it.
fn must_roll(
    config: &super::LogConfig,
    active: &Segment,
    now: i64,
    placed: Placed,
    next: &BatchHeader,
) -> bool {
    rolls_before(config, active, now, placed, next.total_bytes() as u64, Offset(next.last_offset()))
}

fn index_entry_bytes() -> u64 {
    super::index::OFFSET_ENTRY_BYTES as u64
}

/// The refusal of a batch some of whose records lie outside `[lower, upper]`, naming them as
/// Kafka's `record_errors` do (records without a timestamp are never out of range).
fn out_of_range(batch: &Bytes, lower: i64, upper: i64) -> Result<AppendError, AppendError> {
    let (mut records, mut count, mut first) = (Vec::new(), 0u64, None);
    for (index, record) in (0u32..).zip(records::record_iter(batch)?) {
        let timestamp = record?.timestamp;
        if timestamp == records::NO_TIMESTAMP || (lower..=upper).contains(&timestamp) {
            continue;
        }
        count += 1;
        first.get_or_insert(timestamp);
        if records.len() < RECORD_ERRORS_MAX {
            records.push(index);
        }
    }
    let first = first.unwrap_or(records::NO_TIMESTAMP);
    Ok(AppendError::TimestampOutOfRange { records, count, first, lower, upper })
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
