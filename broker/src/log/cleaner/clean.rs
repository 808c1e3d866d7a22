//! The reading and writing half of a pass, done without the append lock: build the offset map
//! over the dirty section, then write each group's cleaned segment as `<base>.log.cleaned`.
//!
//! Both read sealed segments through the file handles the pass snapshotted, so retention
//! deleting a segment meanwhile does not disturb them (open handles keep working on unlinked
//! files); the swap notices instead. Every batch is read through the verified walker, so a
//! corrupt batch is never laundered into a fresh CRC: the map passes over it, and the writing of
//! its group fails, leaving that group as it was (see the parent module).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::io::{Disk, File};
use crate::log::batch::{self, BatchHeader};
use crate::log::epochs::EpochCache;
use crate::log::error::MaintenanceError;
use crate::log::records;
use crate::log::segment::{self, ActiveIndex, LOG_EXT, Segment};
use crate::log::walk::{Epochs, WalkStop, Walked, Walker, walk_past};
use crate::model::Offset;

use super::filter::{self, Filtered, Removed, Rules};
use super::offset_map::{MapFull, OffsetMap};
use super::plan::Source;

/// Bytes of cleaned output gathered before they are written.
pub const CLEANER_WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Suffix of a cleaned segment being written (removed at open if a crash left one).
pub const CLEANED_SUFFIX: &str = "cleaned";

/// Where the map stopped.
pub(super) struct MapEnd {
    /// One past the last offset mapped: the end of the section this pass cleans.
    pub(super) end: Offset,
    /// The record whose key did not fit (its offset and key length), if the map filled.
    pub(super) full_at: Option<(Offset, usize)>,
    /// The first offset of a damaged batch the map passed over, unmapped, if it met one.
    pub(super) damaged_at: Option<Offset>,
}

/// Maps every keyed record of `sources` from `first_dirty` on, until the map is full. A batch
/// that fails its checks however often it is read (a latent sector error) is passed over, where
/// the batches after it chain on as a read would find them (`walk::walk_past`), else with the
/// rest of its segment: its records stay unmapped, so nothing is taken for superseded by them.
pub(super) async fn build_map(
    sources: &[Source],
    first_dirty: Offset,
    map: &mut OffsetMap,
    epochs: &EpochCache,
) -> Result<MapEnd, MaintenanceError> {
    let end = sources.last().map_or(first_dirty, |s| s.end);
    let mut damaged_at: Option<Offset> = None;
    for source in sources.iter().filter(|s| s.end > first_dirty) {
        let mut walker = walker(source, epochs);
        loop {
            let walked = match walker.next().await {
                Ok(Some(walked)) => walked,
                Ok(None) => break,
                Err(WalkStop::Io(e)) => return Err(e.into()),
                Err(WalkStop::Invalid { position, .. }) => {
                    let at = walker.expected();
                    note_damage(&mut damaged_at, at);
                    let bounds = (source.size, source.end);
                    match walk_past(&*source.log, (position, at), bounds, Some(epochs)).await? {
                        Some((next, base)) if position < next && next < source.size => {
                            walker = walker_at(source, epochs, next, base);
                            continue;
                        }
                        _ => break,
                    }
                }
            };
            let header = &walked.header;
            if header.last_offset() < first_dirty.0 || header.is_control() {
                continue;
            }
            let Ok(records) = records::record_iter(&walked.bytes) else {
                note_damage(&mut damaged_at, Offset(header.base_offset()));
                continue;
            };
            for record in records {
                let Ok(record) = record else {
                    note_damage(&mut damaged_at, Offset(header.base_offset()));
                    break;
                };
                let offset = Offset(record.offset);
                let Some(key) = record.key.as_deref().filter(|_| offset >= first_dirty) else {
                    continue;
                };
                if map.insert(key, offset) == Err(MapFull) {
                    return Ok(MapEnd {
                        end: offset,
                        full_at: Some((offset, key.len())),
                        damaged_at,
                    });
                }
            }
        }
    }
    Ok(MapEnd { end, full_at: None, damaged_at })
}

/// Records damage at `at`, keeping the first offset met.
pub(super) fn note_damage(damaged_at: &mut Option<Offset>, at: Offset) {
    *damaged_at = Some(damaged_at.map_or(at, |d| d.min(at)));
}

/// A cleaned segment written and synced, not yet swapped in.
pub(super) struct Cleaned {
    /// The segment as it will be installed.
    pub(super) segment: Segment,
    /// Its index, to be written out at the swap.
    pub(super) index: ActiveIndex,
    pub(super) removed: Removed,
}

/// Path of the cleaned segment being written for `base`.
pub(super) fn cleaned_path(dir: &Path, base: Offset) -> PathBuf {
    dir.join(format!("{}.{CLEANED_SUFFIX}", segment::file_name(base, LOG_EXT)))
}

/// Writes the cleaned form of `group` (consecutive segments) as one segment named after the
/// group's first base, and syncs it. The group's last batch is always kept, if need be with no
/// records, so the cleaned segment ends exactly where the group did; so is each producer's
/// newest batch (see [`Rules::keeps_empty`]).
pub(super) async fn write_cleaned(
    disk: &dyn Disk,
    dir: &Path,
    group: &[Source],
    rules: &Rules<'_>,
    epochs: &EpochCache,
    index_interval_bytes: u64,
) -> Result<Cleaned, MaintenanceError> {
    let base = group.first().map_or(Offset(0), |s| s.base);
    let file = disk.create(&cleaned_path(dir, base)).await?;
    let mut out = Output::new(base, file, index_interval_bytes);
    let mut removed = Removed::default();
    // The last batch dropped, while no kept batch has followed it.
    let mut dropped_last: Option<BatchHeader> = None;
    for source in group {
        let mut walker = walker(source, epochs);
        while let Some(walked) = next(&mut walker).await? {
            let offset = Offset(walked.header.base_offset());
            let (filtered, gone) = filter::filter_batch(&walked.bytes, &walked.header, rules)
                .map_err(|cause| MaintenanceError::Damaged { offset, cause })?;
            removed.superseded += gone.superseded;
            removed.tombstones += gone.tombstones;
            match filtered {
                Filtered::Unchanged => out.push(walked.bytes, &walked.header).await?,
                Filtered::Rewritten(bytes) => {
                    let header = batch::parse_header(&bytes)?;
                    out.push(bytes, &header).await?;
                }
                Filtered::Dropped if rules.keeps_empty(&walked.header) => {
                    let empty = filter::empty_batch(&walked.header)?;
                    let header = batch::parse_header(&empty)?;
                    out.push(empty, &header).await?;
                }
                Filtered::Dropped => {
                    dropped_last = Some(walked.header);
                    continue;
                }
            }
            dropped_last = None;
        }
    }
    if let Some(last) = dropped_last {
        let empty = filter::empty_batch(&last)?;
        let header = batch::parse_header(&empty)?;
        out.push(empty, &header).await?;
    }
    let segment = out.finish().await?;
    let index = segment.index_to_seal().unwrap_or_default();
    let group_end = group.last().map_or(base, |s| s.end);
    if segment.next_offset > group_end {
        return Err(batch::BatchError::Corrupt("cleaned segment runs past its group").into());
    }
    Ok(Cleaned { segment, index, removed })
}

/// The cleaned segment as it is written: batches buffered, then written in large chunks.
struct Output {
    segment: Segment,
    buffer: BytesMut,
    written: u64,
    index_interval_bytes: u64,
}

impl Output {
    fn new(base: Offset, file: Arc<dyn File>, index_interval_bytes: u64) -> Output {
        Output {
            segment: Segment::new_active(base, file),
            buffer: BytesMut::new(),
            written: 0,
            index_interval_bytes,
        }
    }

    async fn push(&mut self, bytes: Bytes, header: &BatchHeader) -> std::io::Result<()> {
        let offsets_rise = header.base_offset() >= self.segment.next_offset.0;
        if !offsets_rise || self.segment.relative(Offset(header.last_offset())).is_none() {
            let error = batch::BatchError::Corrupt("cleaned batches out of order");
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, error));
        }
        let position = self.segment.size;
        self.segment.record_batch(header, position, self.index_interval_bytes);
        self.buffer.extend_from_slice(&bytes);
        if self.buffer.len() >= CLEANER_WRITE_CHUNK_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = self.buffer.split().freeze();
        let len = chunk.len() as u64;
        self.segment.log.write_at(self.written, chunk).await?;
        self.written += len;
        Ok(())
    }

    async fn finish(mut self) -> std::io::Result<Segment> {
        self.flush().await?;
        self.segment.log.sync_data().await?;
        Ok(self.segment)
    }
}

fn walker<'a>(source: &'a Source, epochs: &EpochCache) -> Walker<'a> {
    walker_at(source, epochs, 0, source.base)
}

/// A walk of `source` from byte `position`, where a batch at `expected` or later starts.
fn walker_at<'a>(
    source: &'a Source,
    epochs: &EpochCache,
    position: u64,
    expected: Offset,
) -> Walker<'a> {
    let verify = Epochs::Verify(epochs.clone());
    Walker::new(&*source.log, position, source.size, expected, false, verify)
}

async fn next(walker: &mut Walker<'_>) -> Result<Option<Walked>, MaintenanceError> {
    match walker.next().await {
        Ok(walked) => Ok(walked),
        Err(WalkStop::Io(e)) => Err(e.into()),
        Err(WalkStop::Invalid { error, .. }) => {
            Err(MaintenanceError::Damaged { offset: walker.expected(), cause: error })
        }
    }
}
