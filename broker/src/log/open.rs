//! Opening a log: find its segments, trust what the last checkpoint says was durable, and
//! re-verify only the tail after it — so recovery time depends on the unflushed tail, not on
//! the size of the log. A torn or corrupt batch in the unsynced tail ends the log: the file is
//! cut at the last valid batch and every later segment is dropped; so does an unsynced segment
//! that ends short of the next one's base. A bad batch in synced data (a latent sector error) is
//! damage instead: reads of it report it, and the walk goes on past it, so the batches after it
//! stay indexed and readable.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};

use super::checkpoint;
use super::cleaner::CLEANER_CHECKPOINT;
use super::config::LogConfig;
use super::epochs::{EPOCH_CHECKPOINT, EPOCH_CHECKPOINT_KIND, EpochCache};
use super::error::OpenError;
use super::index::{self, TIME_ENTRY_BYTES};
use super::partition_log::{Log, RecoveryPoint, State};
use super::segment::{
    self, ActiveIndex, INDEX_EXT, LOG_EXT, SealedIndex, Segment, SegmentIndex, TIME_INDEX_EXT,
};
use super::walk::{Epochs, WalkStop, Walker, walk_past};
use crate::io::{Env, File};
use crate::model::{LeaderEpoch, Offset};

/// Name of a partition's checkpoint file.
pub const PARTITION_CHECKPOINT: &str = "partition.checkpoint";
/// Checkpoint kind of [`PARTITION_CHECKPOINT`].
pub const PARTITION_CHECKPOINT_KIND: u8 = 1;
const PARTITION_CHECKPOINT_VERSION: u8 = 1;

/// What a partition checkpoint holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PartitionCheckpoint {
    /// Where recovery may start.
    pub recovery: RecoveryPoint,
    /// The first offset kept.
    pub log_start: Offset,
    /// The last high watermark known.
    pub high_watermark: Offset,
}

impl PartitionCheckpoint {
    /// Encodes the body.
    pub fn encode(&self) -> Bytes {
        let mut body = Vec::with_capacity(40);
        for value in [
            self.recovery.offset.0,
            self.recovery.segment.0,
            self.recovery.position as i64,
            self.log_start.0,
            self.high_watermark.0,
        ] {
            body.extend_from_slice(&value.to_be_bytes());
        }
        checkpoint::encode(PARTITION_CHECKPOINT_KIND, PARTITION_CHECKPOINT_VERSION, &body)
    }

    /// Decodes the bytes of a [`PARTITION_CHECKPOINT`] file (its framing and CRC checked);
    /// `None` if they are not a valid one.
    pub fn decode_file(bytes: &Bytes) -> Option<PartitionCheckpoint> {
        let (_, body) = checkpoint::decode(PARTITION_CHECKPOINT_KIND, bytes).ok()?;
        PartitionCheckpoint::decode(&body)
    }

    fn decode(body: &[u8]) -> Option<PartitionCheckpoint> {
        let mut values = body.chunks_exact(8).map(|c| c.try_into().map(i64::from_be_bytes));
        let mut next = || values.next()?.ok();
        let (offset, segment, position, log_start, hw) =
            (next()?, next()?, next()?, next()?, next()?);
        Some(PartitionCheckpoint {
            recovery: RecoveryPoint {
                offset: Offset(offset),
                segment: Offset(segment),
                position: u64::try_from(position).ok()?,
            },
            log_start: Offset(log_start),
            high_watermark: Offset(hw),
        })
    }
}

fn io_error(dir: &Path) -> impl Fn(io::Error) -> OpenError + '_ {
    move |source| OpenError::Io { dir: dir.display().to_string(), source }
}

impl Log {
    /// Opens (creating if needed) the log in folder `dir` of `env.disk`, recovering it from
    /// whatever state a crash left.
    pub async fn open(env: Env, dir: PathBuf, config: LogConfig) -> Result<Log, OpenError> {
        let err = io_error(&dir);
        let disk = &*env.disk;
        disk.create_dir(&dir).await.map_err(&err)?;
        disk.sync_dir(dir.parent().unwrap_or(Path::new(""))).await.map_err(&err)?;
        super::cleaner::complete_interrupted_swaps(disk, &dir).await.map_err(&err)?;
        let bases = clean_folder(disk, &dir).await.map_err(&err)?;
        let gapped = disk.list(&dir).await.map_err(&err)?.iter().any(|n| n == CLEANER_CHECKPOINT);
        // Whether the checkpoint could be read (or was never written). If it could not, the log
        // start it held is unknown, and recovery cannot tell a hole between segments from
        // offsets below the log start, so it cuts at no hole.
        let (saved, known_start) =
            match checkpoint::read(disk, &dir, PARTITION_CHECKPOINT, PARTITION_CHECKPOINT_KIND)
                .await
            {
                Ok(Some((_, body))) => {
                    let decoded = PartitionCheckpoint::decode(&body);
                    let known = decoded.is_some();
                    (decoded, known)
                }
                Ok(None) => (None, true),
                // A read that fails is no word on what the checkpoint holds: without its
                // recovery point, recovery would take synced batches for an unsynced tail and
                // cut the log at any damage in them. The open fails, to be tried again.
                Err(checkpoint::CheckpointError::Io { source, .. }) => return Err(err(source)),
                Err(e) => {
                    tracing::warn!(log = %dir.display(), "ignoring checkpoint: {e}");
                    (None, false)
                }
            };
        let saved = saved.unwrap_or_default();
        let loaded_epochs = load_epochs(disk, &dir).await.map_err(&err)?;
        let mut epochs = loaded_epochs.clone();
        let mut recovered = recover_segments(
            disk,
            &dir,
            &bases,
            saved,
            &config,
            &mut epochs,
            Shape { gapped, known_start, vouched: Some(&loaded_epochs) },
        )
        .await
        .map_err(&err)?;
        let log_start =
            saved.log_start.max(recovered.keys().next().copied().unwrap_or(saved.log_start));
        if recovered.values().next_back().is_some_and(|last| last.next_offset < log_start) {
            // Every segment lies below the log start: the log was restarted past its end (see
            // `Log::restart_at`), or a power failure took back more than DeleteRecords had
            // already deleted. It continues, empty, from its start.
            for &base in recovered.keys() {
                remove_segment_files(disk, &dir, base).await.map_err(&err)?;
            }
            recovered.clear();
        }
        if recovered.is_empty() {
            let base = log_start;
            let file = disk.create(&segment::path(&dir, base, LOG_EXT)).await.map_err(&err)?;
            recovered.insert(base, Segment::new_active(base, file));
        }
        let log_end = recovered.values().next_back().map_or(log_start, |s| s.next_offset);
        epochs.truncate_from(log_end.max(log_start));
        if epochs != loaded_epochs {
            checkpoint::write_atomic(disk, &dir, EPOCH_CHECKPOINT, epochs.encode())
                .await
                .map_err(&err)?;
        }
        let log = Log::assemble(
            env.clone(),
            dir.clone(),
            config,
            recovered,
            log_start,
            saved.high_watermark,
        );
        {
            let mut state = log.state();
            state.epochs = epochs;
            state.gapped = gapped;
        }
        log.sync_from(saved.recovery.segment).await.map_err(&err)?;
        log.checkpoint()
            .await
            .map_err(|source| OpenError::Checkpoint { dir: dir.display().to_string(), source })?;
        Ok(log)
    }

    fn assemble(
        env: Env,
        dir: PathBuf,
        config: LogConfig,
        segments: BTreeMap<Offset, Segment>,
        log_start: Offset,
        high_watermark: Offset,
    ) -> Log {
        let now = env.clock.now();
        let mut state = State {
            segments,
            log_start,
            durable_log_start: log_start,
            log_end: log_start,
            durable: RecoveryPoint::default(),
            checkpointed: RecoveryPoint::default(),
            last_checkpoint: None,
            high_watermark,
            syncing: false,
            cuts: 0,
            rewrites: 0,
            unsynced: Vec::new(),
            dir_dirty: true,
            offline: None,
            refused_for_room: None,
            gapped: false,
            epochs: EpochCache::default(),
            epochs_unsaved: false,
            unflushed_records: 0,
            last_sync: now,
        };
        state.log_end = state.active().map_or(log_start, |a| a.next_offset).max(log_start);
        state.high_watermark = state.high_watermark.min(state.log_end);
        Log {
            env,
            dir,
            config: Mutex::new(config),
            state: Mutex::new(state),
            append_lock: tokio::sync::Mutex::new(()),
            files_lock: tokio::sync::Mutex::new(()),
            synced: tokio::sync::Notify::new(),
            cleaner: Default::default(),
            open_indexes: Default::default(),
        }
    }

    /// Syncs the segment files recovery may have touched (from the recovery segment on) and the
    /// folder, then records the whole log as durable.
    async fn sync_from(&self, first: Offset) -> io::Result<()> {
        let files: Vec<Arc<dyn File>> =
            self.state().segments.range(first..).map(|(_, s)| Arc::clone(&s.log)).collect();
        for file in files {
            file.sync_data().await?;
        }
        self.env.disk.sync_dir(&self.dir).await?;
        let mut state = self.state();
        state.durable = state.end_point();
        state.dir_dirty = false;
        Ok(())
    }
}

/// The leader-epoch checkpoint, or an empty history if there is none or it is invalid (the
/// tail rescan then relearns what it can). A read that fails is an error: the history vouches
/// for every stored batch's epoch, and the open is tried again rather than done without it.
async fn load_epochs(disk: &dyn crate::io::Disk, dir: &Path) -> io::Result<EpochCache> {
    match checkpoint::read(disk, dir, EPOCH_CHECKPOINT, EPOCH_CHECKPOINT_KIND).await {
        Ok(Some((_, body))) => Ok(EpochCache::decode(&body).unwrap_or_default()),
        Ok(None) => Ok(EpochCache::default()),
        Err(checkpoint::CheckpointError::Io { source, .. }) => Err(source),
        Err(e) => {
            tracing::warn!(log = %dir.display(), "ignoring leader-epoch checkpoint: {e}");
            Ok(EpochCache::default())
        }
    }
}

/// Removes leftovers of interrupted operations and returns the base offsets of the segments.
async fn clean_folder(disk: &dyn crate::io::Disk, dir: &Path) -> io::Result<Vec<Offset>> {
    let mut bases = Vec::new();
    for name in disk.list(dir).await? {
        if checkpoint::is_temp(&name) || name.ends_with(".cleaned") {
            disk.remove(&dir.join(&name)).await?;
            continue;
        }
        if let Some((base, LOG_EXT)) = segment::parse_file_name(&name) {
            bases.push(base);
        }
    }
    bases.sort();
    Ok(bases)
}

/// What recovery knows of a log beyond its segment files.
#[derive(Clone, Copy, Debug)]
struct Shape<'a> {
    /// The log may have offset gaps: it has been compacted.
    gapped: bool,
    /// The partition checkpoint's log start is known: it was read, or never written.
    known_start: bool,
    /// The epoch history as loaded, which vouches for the epoch of every stored batch (if it
    /// could be read): see `Epochs::vouched_by`.
    vouched: Option<&'a EpochCache>,
}

/// Opens the segments: those before the recovery point as sealed (trusted), the rest rescanned.
async fn recover_segments(
    disk: &dyn crate::io::Disk,
    dir: &Path,
    bases: &[Offset],
    saved: PartitionCheckpoint,
    config: &LogConfig,
    epochs: &mut EpochCache,
    shape: Shape<'_>,
) -> io::Result<BTreeMap<Offset, Segment>> {
    let Shape { gapped, known_start, vouched } = shape;
    let mut segments = BTreeMap::new();
    // Segments wholly before the log start were deleted in all but name.
    let first_kept = bases.iter().rposition(|&b| b <= saved.log_start).unwrap_or(0);
    for &base in &bases[..first_kept] {
        remove_segment_files(disk, dir, base).await?;
    }
    let bases = &bases[first_kept..];
    let recovery_ix = bases.iter().position(|&b| b == saved.recovery.segment);
    for (ix, &base) in bases.iter().enumerate() {
        let log = disk.open(&segment::path(dir, base, LOG_EXT)).await?;
        let next_base = bases.get(ix + 1).copied();
        let trusted = recovery_ix.is_some_and(|r| ix < r);
        if trusted && let Some(sealed) = open_sealed(disk, dir, base, &log, next_base).await? {
            segments.insert(base, sealed);
            continue;
        }
        let resume = (recovery_ix == Some(ix)).then_some(saved.recovery);
        // Below the recovery point every batch was durable: a bad one there is damage to keep
        // reporting (reads fail their checksum), never a tail to cut off with what follows it.
        let dense = !gapped && !config.cleanup_policy.compacts();
        let (mut seg, clean) = rescan(
            disk,
            dir,
            base,
            log,
            Rescan { resume, may_truncate: !trusted, dense, next_base, vouched },
            config,
            epochs,
        )
        .await?;
        if !clean && trusted {
            // Offsets past the damage still exist; reads reaching them report the corruption.
            seg.next_offset = next_base.unwrap_or(seg.next_offset);
        }
        // An unsynced segment can come back shorter than the one after it begins (a power
        // failure kept the later file's pages but not all of this one's): the log ends at the
        // hole, as at a torn batch. Only a log without offset gaps can tell a hole from a
        // compacted-away tail; offsets below the log start are no hole (a cut that left the
        // log ending below its start continues it in a segment at the start), so a log whose
        // start is unknown (its checkpoint unreadable) is never cut at one.
        let hole = dense
            && known_start
            && next_base.is_some_and(|next| next > seg.next_offset.max(saved.log_start));
        if hole && !trusted {
            tracing::warn!(log = %dir.display(), segment = %base, end = %seg.next_offset, "the log ends short of the next segment");
        }
        let ends_here = !trusted && (!clean || hole);
        segments.insert(base, seg);
        if ends_here {
            for &later in &bases[ix + 1..] {
                tracing::warn!(log = %dir.display(), segment = %later, "dropping segment past the end of the recovered log");
                remove_segment_files(disk, dir, later).await?;
            }
            break;
        }
    }
    seal_all_but_last(disk, dir, &mut segments).await?;
    Ok(segments)
}

/// Opens a sealed segment from its files, or `None` if its indexes are missing or implausible
/// (the caller then rescans it).
async fn open_sealed(
    disk: &dyn crate::io::Disk,
    dir: &Path,
    base: Offset,
    log: &Arc<dyn File>,
    next_base: Option<Offset>,
) -> io::Result<Option<Segment>> {
    let (Some(offsets), Some(times)) = (
        open_optional(disk, dir, base, INDEX_EXT).await?,
        open_optional(disk, dir, base, TIME_INDEX_EXT).await?,
    ) else {
        return Ok(None);
    };
    if offsets.len() % index::OFFSET_ENTRY_BYTES as u64 != 0
        || times.len() % TIME_ENTRY_BYTES as u64 != 0
    {
        return Ok(None);
    }
    // What these reads return is kept for as long as the log is open (the segment's largest
    // timestamp decides retention and lookups): only bytes several reads agree on will do.
    let last_entry = if offsets.is_empty() {
        None
    } else {
        let at = offsets.len() - index::OFFSET_ENTRY_BYTES as u64;
        let Some(bytes) = segment::read_agreed(&*offsets, at, index::OFFSET_ENTRY_BYTES).await?
        else {
            return Ok(None);
        };
        index::decode_offset(&bytes)
    };
    if last_entry.is_some_and(|e| u64::from(e.position) >= log.len())
        || (last_entry.is_none() && !log.is_empty())
    {
        return Ok(None);
    }
    let last_time = if times.is_empty() {
        None
    } else {
        let at = times.len() - TIME_ENTRY_BYTES as u64;
        let Some(bytes) = segment::read_agreed(&*times, at, TIME_ENTRY_BYTES).await? else {
            return Ok(None);
        };
        index::decode_time(&bytes)
    };
    let size = log.len();
    Ok(Some(Segment {
        base,
        log: Arc::clone(log),
        size,
        next_offset: next_base.unwrap_or(base),
        max_timestamp: last_time.map_or(-1, |t| t.timestamp),
        max_timestamp_batch: last_time.map_or(base, |t| Offset(base.0 + i64::from(t.relative))),
        first_append_wall_ms: None,
        // Checked, the index files are closed: lookups open them as they need them.
        index: SegmentIndex::Sealed(SealedIndex::named(dir, base, (offsets.len(), times.len()))),
    }))
}

async fn open_optional(
    disk: &dyn crate::io::Disk,
    dir: &Path,
    base: Offset,
    ext: &str,
) -> io::Result<Option<Arc<dyn File>>> {
    match disk.open(&segment::path(dir, base, ext)).await {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// How to rescan one segment.
struct Rescan<'a> {
    /// Where to start (its start if `None`, or if the point's index files are unusable).
    resume: Option<RecoveryPoint>,
    /// Whether a bad batch ends the log (the unflushed tail) or is damage to report (durable
    /// data, which is never cut off).
    may_truncate: bool,
    /// Whether base offsets must continue exactly (the log was never compacted).
    dense: bool,
    /// The next segment's base offset, if there is one.
    next_base: Option<Offset>,
    /// The epoch history that vouches for every stored batch's epoch, if it could be read.
    vouched: Option<&'a EpochCache>,
}

/// Rescans a segment from `resume` (or its start), rebuilding its index in memory and cutting
/// off a torn or corrupt tail. Returns the segment and whether it ended cleanly.
async fn rescan(
    disk: &dyn crate::io::Disk,
    dir: &Path,
    base: Offset,
    log: Arc<dyn File>,
    how: Rescan<'_>,
    config: &LogConfig,
    epochs: &mut EpochCache,
) -> io::Result<(Segment, bool)> {
    let Rescan { resume, may_truncate, dense, next_base, vouched } = how;
    let mut seg = Segment::new_active(base, Arc::clone(&log));
    let mut start = 0;
    let resume = resume.filter(|p| p.position > 0 && p.position <= log.len());
    // Bytes below the recovery point were synced: even when its index cannot be loaded and the
    // walk starts below it, a bad batch there is damage to report, never a tail to cut off
    // (with it everything after it).
    let durable = resume.map_or(0, |p| p.position);
    // Where synced data ends, at which byte and offset: damage before it is walked past.
    let synced_end = if may_truncate {
        resume.map(|p| (p.position, p.offset))
    } else {
        next_base.map(|next| (log.len(), next))
    };
    if let Some(point) = resume
        && let Some(mut index) = load_prefix(disk, dir, base, &log, point).await?
        && let Some((max, max_batch)) =
            max_since_last_entry(&log, base, &index, point, (dense, vouched)).await?
    {
        index.bytes_since_entry = index
            .offsets
            .last()
            .map_or(0, |e| point.position.saturating_sub(u64::from(e.position)));
        seg.index = SegmentIndex::Active(index);
        seg.size = point.position;
        seg.next_offset = point.offset;
        seg.max_timestamp = max;
        seg.max_timestamp_batch = max_batch;
        start = point.position;
    }
    let interval = config.index_interval_bytes;
    let before = epochs.epoch_for(Offset(seg.next_offset.0 - 1)).unwrap_or(LeaderEpoch(i32::MIN));
    let checks = Epochs::vouched_by(vouched, before);
    let mut walker = Walker::new(&*log, start, log.len(), seg.next_offset, dense, checks);
    let mut rewrite = Rewrite::new(&*log, start.max(durable));
    let stop = loop {
        match walker.next().await {
            Ok(Some(walked)) => {
                let header = &walked.header;
                let epoch = LeaderEpoch(header.partition_leader_epoch());
                epochs.assign(epoch, Offset(header.base_offset()));
                seg.record_batch(header, walked.position, interval);
                if may_truncate && walked.position >= durable {
                    rewrite.push(walked.position, &walked.bytes).await?;
                }
            }
            Ok(None) => break None,
            Err(WalkStop::Io(e)) => return Err(e),
            Err(WalkStop::Invalid { position, error }) => {
                let Some((end, end_offset)) = synced_end.filter(|(end, _)| position < *end) else {
                    break Some((position, error));
                };
                // Damage in synced data: reads reaching it report it. The walk goes on past
                // it, from the next batch (see `walk::walk_past`) if batches from there
                // reach the synced end (they stay readable), else from the synced end.
                tracing::error!(log = %dir.display(), segment = %base, position, %error, "corrupt batch in synced data");
                let damaged = (position, seg.next_offset);
                let (at, offset) = walk_past(&*log, damaged, (end, end_offset), vouched)
                    .await?
                    .unwrap_or((end, end_offset));
                seg.skip_to(at, offset);
                let before =
                    epochs.epoch_for(Offset(offset.0 - 1)).unwrap_or(LeaderEpoch(i32::MIN));
                let checks = Epochs::vouched_by(vouched, before);
                walker = Walker::new(&*log, at, log.len(), offset, dense, checks);
            }
        }
    };
    let clean = stop.is_none();
    if let Some((position, error)) = stop {
        if !may_truncate {
            tracing::error!(log = %dir.display(), segment = %base, position, %error, "corrupt batch in durable data");
            seg.size = log.len();
            return Ok((seg, false));
        }
        tracing::warn!(log = %dir.display(), segment = %base, position, %error, "truncating a torn or corrupt tail");
        log.truncate(position).await?;
    }
    rewrite.finish().await?;
    Ok((seg, clean))
}

/// Writes the batches of the unflushed tail again, unchanged, as recovery verifies them. If an
/// earlier sync failed, the kernel may hold those pages as clean though the disk never got them
/// (fsyncgate), and a sync now would not write them; rewriting dirties them again, so the sync
/// that follows really makes what recovery verified durable.
///
/// What is written is the very bytes the walk verified, never a fresh read: a read can return a
/// flipped bit (the walk reads a bad batch again before believing it), and writing such a read
/// back would turn a passing fault into damage that the sync makes durable and the checkpoint
/// then vouches for.
struct Rewrite<'a> {
    file: &'a dyn File,
    /// Where `buffer` goes in the file.
    at: u64,
    buffer: BytesMut,
}

impl<'a> Rewrite<'a> {
    fn new(file: &'a dyn File, at: u64) -> Rewrite<'a> {
        Rewrite { file, at, buffer: BytesMut::new() }
    }

    /// Queues the verified batch `bytes` found at `position`, writing once a chunk is full.
    async fn push(&mut self, position: u64, bytes: &[u8]) -> io::Result<()> {
        if position != self.at + self.buffer.len() as u64 {
            self.flush().await?;
            self.at = position;
        }
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= REWRITE_CHUNK_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = self.buffer.split().freeze();
        let len = chunk.len() as u64;
        self.file.write_at(self.at, chunk).await?;
        self.at += len;
        Ok(())
    }

    /// Writes what is still queued.
    async fn finish(mut self) -> io::Result<()> {
        self.flush().await
    }
}

/// Bytes rewritten at a time by [`Rewrite`].
const REWRITE_CHUNK_BYTES: usize = 1 << 20;

/// The index entries before a checkpointed recovery point, from the index files the checkpoint
/// wrote. `None` if the files do not fit the point.
async fn load_prefix(
    disk: &dyn crate::io::Disk,
    dir: &Path,
    base: Offset,
    log: &Arc<dyn File>,
    point: RecoveryPoint,
) -> io::Result<Option<ActiveIndex>> {
    let (Some(offsets), Some(times)) = (
        open_optional(disk, dir, base, INDEX_EXT).await?,
        open_optional(disk, dir, base, TIME_INDEX_EXT).await?,
    ) else {
        return Ok(None);
    };
    // The entries are kept and written out again: only bytes several reads agree on will do.
    let Some(index) = segment::read_index_files(&*offsets, &*times, log.len()).await? else {
        return Ok(None);
    };
    let index = index.truncated_to(point.position);
    if index.offsets.is_empty() {
        return Ok(None);
    }
    Ok(Some(index))
}

/// The segment's largest timestamp below the recovery point, and the base offset of the batch
/// holding it: the time index records it as of the last offset entry, and the batches from
/// there to the point (at most one index interval) are walked for any that raised it since.
/// A damaged batch among them (a latent sector error: they were synced) is walked past where
/// the batches after it chain to the point, and otherwise ends the walk: its timestamps, and
/// those of the batches up to the point, are not counted, and reads of it report the damage.
/// `None` if the first batch, the one the last entry names, cannot be read (the entry may be
/// wrong: the caller then walks the whole segment).
async fn max_since_last_entry(
    log: &Arc<dyn File>,
    base: Offset,
    index: &ActiveIndex,
    point: RecoveryPoint,
    (dense, vouched): (bool, Option<&EpochCache>),
) -> io::Result<Option<(i64, Offset)>> {
    let Some(last) = index.offsets.last() else { return Ok(None) };
    let at = |relative: u32| Offset(base.0 + i64::from(relative));
    let (mut max, mut max_batch) =
        index.times.last().map_or((-1, base), |t| (t.timestamp, at(t.relative)));
    let epochs = Epochs::vouched_by(vouched, LeaderEpoch(i32::MIN));
    let from = u64::from(last.position);
    let mut walker = Walker::new(&**log, from, point.position, at(last.relative), dense, epochs);
    loop {
        match walker.next().await {
            Ok(Some(walked)) => {
                if walked.header.max_timestamp() > max {
                    max = walked.header.max_timestamp();
                    max_batch = Offset(walked.header.base_offset());
                }
            }
            Ok(None) => return Ok(Some((max, max_batch))),
            Err(WalkStop::Io(e)) => return Err(e),
            Err(WalkStop::Invalid { position, .. }) if position == from => return Ok(None),
            Err(WalkStop::Invalid { position, error }) => {
                tracing::error!(segment = %base, position, %error, "corrupt batch in synced data");
                let damaged = (position, walker.expected());
                let end = (point.position, point.offset);
                match walk_past(&**log, damaged, end, vouched).await? {
                    Some((resume, next)) => {
                        let epochs = Epochs::vouched_by(vouched, LeaderEpoch(i32::MIN));
                        walker = Walker::new(&**log, resume, point.position, next, dense, epochs);
                    }
                    None => return Ok(Some((max, max_batch))),
                }
            }
        }
    }
}

/// Writes the index files of every rescanned segment except the last, which stays active.
async fn seal_all_but_last(
    disk: &dyn crate::io::Disk,
    dir: &Path,
    segments: &mut BTreeMap<Offset, Segment>,
) -> io::Result<()> {
    let last = segments.keys().next_back().copied();
    for (base, seg) in segments.iter_mut() {
        if Some(*base) == last {
            continue;
        }
        if let Some(index) = seg.index_to_seal() {
            seg.index =
                SegmentIndex::Sealed(segment::write_index_files(disk, dir, *base, &index).await?);
        }
    }
    Ok(())
}

/// Removes a segment's files (those that exist).
pub(super) async fn remove_segment_files(
    disk: &dyn crate::io::Disk,
    dir: &Path,
    base: Offset,
) -> io::Result<()> {
    for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
        match disk.remove(&segment::path(dir, base, ext)).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
