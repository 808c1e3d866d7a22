//! A sealed segment's index files are named, not held open. A lookup opens the one it needs,
//! and each log keeps at most [`OPEN_INDEX_FILES`] of them open for the lookups that follow
//! (a consumer reading a sealed segment looks it up once per fetch), closing those no lookup
//! used between two checkpoints. A segment therefore costs
//! one descriptor, its `.log`, however long the log grows, as in Kafka, which memory-maps its
//! indexes and closes their files.
//!
//! A name is only as good as the folder behind it. Once a segment leaves the log (retention
//! removes it, a truncation cuts it, a clean replaces it, the log closes or goes offline), the
//! same name may come to hold another segment's index. Reads check the offset entries they
//! follow against the log, but a lookup has no business with another segment's file. So
//! whoever takes a segment out retires its index files first, before any of its files
//! change, and a lookup uses a file it opened by name only if its index was not yet retired
//! once the file was open: an open that began before the retirement and ended after it is
//! thrown away, and the lookup walks the segment from its start instead (an index is only a
//! hint). A handle the log already holds stays usable: it was opened before, so it is the
//! segment's own file. A log going offline or closing lets go of its handles too.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::io::{Disk, File};

/// Index files one log keeps open after their lookups, the least recently used closed first:
/// two segments' offset and time indexes.
pub const OPEN_INDEX_FILES: usize = 4;

/// One index file of a sealed segment.
pub(crate) struct IndexFile {
    path: PathBuf,
    /// Its length when the segment was sealed or opened (a sealed index is never rewritten).
    len: u64,
    /// Set when the segment leaves the log, before its files change.
    retired: AtomicBool,
    /// The file, while it is among its log's open ones.
    open: Mutex<Option<Arc<dyn File>>>,
}

impl IndexFile {
    pub(crate) fn new(path: PathBuf, len: u64) -> Arc<IndexFile> {
        Arc::new(IndexFile { path, len, retired: AtomicBool::new(false), open: Mutex::new(None) })
    }

    /// Bytes the file holds.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The segment is leaving the log: no lookup opens this file by name from now on. Call
    /// before any of the segment's files change on disk. A handle already open still serves
    /// (it was opened before, so it is this segment's file) until the segment is dropped.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

    /// Retires the file and closes the log's handle to it (the log is going offline or closing,
    /// its segments staying in memory).
    pub(crate) fn release(&self) {
        self.retire();
        self.slot().take();
    }

    fn retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    fn slot(&self) -> MutexGuard<'_, Option<Arc<dyn File>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The index files a log holds open, most recently used last, each with whether it was used
/// since the last [`OpenIndexes::expire`].
#[derive(Default)]
pub(crate) struct OpenIndexes {
    recent: Mutex<VecDeque<(Weak<IndexFile>, bool)>>,
}

impl OpenIndexes {
    /// `index`'s file, open; `None` if the caller must do without the index: its segment has
    /// left the log, or the file is gone or cannot be opened (out of descriptors, say). An index
    /// is only a hint, and a lookup without one walks the segment from its start.
    pub(crate) async fn open(
        &self,
        disk: &dyn Disk,
        index: &Arc<IndexFile>,
    ) -> Option<Arc<dyn File>> {
        let held = index.slot().clone();
        if let Some(file) = held {
            self.keep(index);
            return Some(file);
        }
        if index.retired() {
            return None;
        }
        let file = match disk.open(&index.path).await {
            Ok(file) => file,
            Err(e) => {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::debug!(index = %index.path.display(), error = %e, "index file not opened: the lookup walks its segment");
                }
                return None;
            }
        };
        // Another file by the same name (a sealed index is never rewritten in place).
        if file.len() != index.len {
            return None;
        }
        {
            let mut slot = index.slot();
            // Retired while it was being opened: the name may have named another file by then.
            // (A retirement marks the file first, and a release empties the slot after, under
            // this lock.)
            if index.retired() {
                return None;
            }
            if slot.is_some() {
                return Some(file);
            }
            *slot = Some(Arc::clone(&file));
        }
        self.keep(index);
        Some(file)
    }

    /// Counts `index` as the most recently used, closing the least recent past the limit.
    fn keep(&self, index: &Arc<IndexFile>) {
        let evicted: Vec<Arc<IndexFile>> = {
            let mut recent = self.recents();
            recent.retain(|(w, _)| {
                w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(index))
            });
            recent.push_back((Arc::downgrade(index), true));
            let excess = recent.len().saturating_sub(OPEN_INDEX_FILES);
            recent.drain(..excess).filter_map(|(w, _)| w.upgrade()).collect()
        };
        for old in evicted {
            old.slot().take();
        }
    }

    /// Closes the index files no lookup used since the last call: a consumer that read a
    /// sealed segment and moved on, or stopped, leaves none open for long. Called with each
    /// checkpoint of the log (once a minute by default; also at open and close, and after a
    /// clean).
    pub(crate) fn expire(&self) {
        let idle: Vec<Arc<IndexFile>> = {
            let mut recent = self.recents();
            let mut idle = Vec::new();
            recent.retain_mut(|(w, used)| {
                let keep = std::mem::replace(used, false);
                if !keep && let Some(index) = w.upgrade() {
                    idle.push(index);
                }
                keep && w.strong_count() > 0
            });
            idle
        };
        for index in idle {
            index.slot().take();
        }
    }

    fn recents(&self) -> MutexGuard<'_, VecDeque<(Weak<IndexFile>, bool)>> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }
}
