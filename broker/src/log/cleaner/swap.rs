//! Swapping a cleaned segment in for the segments it replaces, so that a crash or power failure
//! at any instant leaves either the old segments or the cleaned one — never both halves of a
//! mix, and never neither. Kafka's protocol, with a folder sync after each step:
//!
//! 1. `<base>.log.cleaned` is written and synced (before the swap; a crash leaves a leftover
//!    that open deletes: the old segments are untouched);
//! 2. it is renamed to `<base>.log.swap`, and the folder synced: from here on the swap is
//!    decided, and open completes it;
//! 3. the replaced segments' files are removed, and the folder synced;
//! 4. `.swap` is renamed to `<base>.log`, and the folder synced;
//! 5. its indexes are written (they are hints: a crash before leaves none, and open rebuilds
//!    them from the log), and the in-memory segment list changes in one step.
//!
//! Recovery (step 2 done, 4 not): the replaced segments are those whose base offsets fall in
//! the swapped segment's offset range `[base, next offset)`. That range is exact because a
//! cleaned segment always keeps its group's last batch (with no records if need be), so its next
//! offset is the base of the segment after the group.
//!
//! The swap holds the append lock (no roll, retention or checkpoint meanwhile) and first checks
//! that the group's segments are still the files the pass read. A failure after step 2 takes the
//! log offline: the folder is then in a state only recovery knows how to finish.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::io::Disk;
use crate::log::epochs::EpochCache;
use crate::log::error::{MaintenanceError, Offline};
use crate::log::open::remove_segment_files;
use crate::log::partition_log::Log;
use crate::log::segment::{self, INDEX_EXT, LOG_EXT, SegmentIndex, TIME_INDEX_EXT};
use crate::log::walk::{Epochs, WalkStop, Walker};
use crate::model::Offset;

use super::clean::{Cleaned, cleaned_path};
use super::plan::Source;

/// Extension (after the base offset) of a cleaned segment whose swap is decided.
pub const SWAP_EXT: &str = "log.swap";

impl Log {
    /// Swaps `cleaned` in for `group`. `Ok(false)` if the group changed since the pass read it
    /// (retention deleted a segment): the cleaned file is discarded and nothing else changes.
    pub(super) async fn install_cleaned(
        &self,
        group: &[Source],
        cleaned: Cleaned,
    ) -> Result<bool, MaintenanceError> {
        let disk = &*self.env.disk;
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            return Ok(false);
        };
        let _append = self.append_lock.lock().await;
        let _files = self.files_lock.lock().await;
        let unchanged = {
            let state = self.state();
            state.check_online()?;
            let same = |s: &Source| {
                state.segments.get(&s.base).is_some_and(|seg| Arc::ptr_eq(&seg.log, &s.log))
            };
            group.iter().all(same) && state.segments.contains_key(&last.end)
        };
        if !unchanged {
            if let Err(e) = disk.remove(&cleaned_path(&self.dir, first.base)).await {
                tracing::warn!(log = %self.dir.display(), "removing an abandoned cleaned segment: {e}");
            }
            return Ok(false);
        }
        let Cleaned { mut segment, index, .. } = cleaned;
        {
            // Their files are about to be removed, and the first one's name reused.
            let state = self.state();
            for source in group {
                if let Some(seg) = state.segments.get(&source.base) {
                    seg.retire();
                }
            }
        }
        let sealed = match self.swap_files(first.base, group, &index).await {
            Ok(sealed) => sealed,
            Err(e) => return Err(self.go_offline(Offline::WriteFailed(e.kind())).into()),
        };
        segment.index = SegmentIndex::Sealed(sealed);
        segment.next_offset = last.end;
        let mut state = self.state();
        if state.offline.is_some() {
            // Gone offline meanwhile, the log lets go of its index files (see `go_offline`).
            segment.release();
        }
        for source in group {
            state.segments.remove(&source.base);
        }
        state.segments.insert(first.base, segment);
        state.rewrites += 1;
        state.gapped = true;
        state.dir_dirty = true;
        Ok(true)
    }

    /// Steps 2–5 on disk. Returns the new segment's index files.
    async fn swap_files(
        &self,
        base: Offset,
        group: &[Source],
        index: &segment::ActiveIndex,
    ) -> io::Result<segment::SealedIndex> {
        let (disk, dir) = (&*self.env.disk, &*self.dir);
        let swap = swap_path(dir, base);
        disk.rename(&cleaned_path(dir, base), &swap).await?;
        disk.sync_dir(dir).await?;
        for source in group {
            remove_segment_files(disk, dir, source.base).await?;
        }
        disk.sync_dir(dir).await?;
        disk.rename(&swap, &segment::path(dir, base, LOG_EXT)).await?;
        disk.sync_dir(dir).await?;
        segment::write_index_files(disk, dir, base, index).await
    }
}

fn swap_path(dir: &Path, base: Offset) -> std::path::PathBuf {
    dir.join(segment::file_name(base, SWAP_EXT))
}

/// Finishes every swap a crash interrupted (a `<base>.log.swap` in `dir`): removes the segments
/// it replaces, then renames it into place. Open calls this before it lists the segments.
pub(crate) async fn complete_interrupted_swaps(disk: &dyn Disk, dir: &Path) -> io::Result<()> {
    for name in disk.list(dir).await? {
        let Some((base, SWAP_EXT)) = segment::parse_file_name(&name) else {
            continue;
        };
        let swap = disk.open(&dir.join(&name)).await?;
        let end = swapped_end(&*swap, base, dir).await?.max(base.next());
        tracing::warn!(log = %dir.display(), segment = %base, %end, "completing an interrupted segment swap");
        for other in disk.list(dir).await? {
            let replaced = segment::parse_file_name(&other).is_some_and(|(b, ext)| {
                [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT].contains(&ext) && base <= b && b < end
            });
            if replaced {
                disk.remove(&dir.join(&other)).await?;
            }
        }
        disk.sync_dir(dir).await?;
        disk.rename(&dir.join(&name), &segment::path(dir, base, LOG_EXT)).await?;
        disk.sync_dir(dir).await?;
    }
    Ok(())
}

/// One past the last offset of the swapped segment. A bad batch (the file was synced before the
/// swap was decided, so only damage can cause one) ends the range there; the segment's own
/// recovery then reports the damage.
async fn swapped_end(file: &dyn crate::io::File, base: Offset, dir: &Path) -> io::Result<Offset> {
    let any_epoch = Epochs::Verify(EpochCache::default());
    let mut walker = Walker::new(file, 0, file.len(), base, false, any_epoch);
    let mut end = base;
    loop {
        match walker.next().await {
            Ok(Some(walked)) => end = Offset(walked.header.next_offset()),
            Ok(None) => return Ok(end),
            Err(WalkStop::Io(e)) => return Err(e),
            Err(WalkStop::Invalid { position, error }) => {
                tracing::error!(log = %dir.display(), segment = %base, position, %error, "damaged swap file");
                return Ok(end);
            }
        }
    }
}
