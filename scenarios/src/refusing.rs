//! A disk that refuses chosen calls: a process out of file descriptors, seen from the log, or
//! a removal that fails.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use weir::io::{BoxFuture, Disk, File};

/// Linux's "too many open files" (`EMFILE`).
pub const EMFILE: i32 = 24;
/// Linux's "input/output error" (`EIO`).
pub const EIO: i32 = 5;

/// Which calls a [`RefusingDisk`] refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refuse {
    /// `open` of a segment's `.index` or `.timeindex`.
    IndexOpens,
    /// `create` of a segment's `.log`, or of one under its temporary name (`.log.tmp`).
    SegmentLogs,
    /// Every `create` and `open`.
    NewFiles,
    /// `remove` of a producer snapshot (`.snapshot`), failing with `EIO`.
    SnapshotRemovals,
}

/// `inner`, with the calls [`Refuse`] names failing with `EMFILE` while `refusing` is set,
/// but for the first `allowed` of them (descriptors a process had left when it ran short).
pub struct RefusingDisk {
    inner: Arc<dyn Disk>,
    refuse: Refuse,
    refusing: Arc<AtomicBool>,
    allowed: Arc<AtomicUsize>,
}

impl RefusingDisk {
    /// The disk, and the switch that makes it refuse.
    pub fn new(inner: Arc<dyn Disk>, refuse: Refuse) -> (RefusingDisk, Arc<AtomicBool>) {
        let (disk, refusing, _) = RefusingDisk::allowing(inner, refuse);
        (disk, refusing)
    }

    /// The disk, the switch that makes it refuse, and the count of chosen calls it lets
    /// through before it refuses (none unless set).
    pub fn allowing(
        inner: Arc<dyn Disk>,
        refuse: Refuse,
    ) -> (RefusingDisk, Arc<AtomicBool>, Arc<AtomicUsize>) {
        let refusing = Arc::new(AtomicBool::new(false));
        let allowed = Arc::new(AtomicUsize::new(0));
        let disk = RefusingDisk {
            inner,
            refuse,
            refusing: Arc::clone(&refusing),
            allowed: Arc::clone(&allowed),
        };
        (disk, refusing, allowed)
    }

    fn refuses(&self, path: &Path, create: bool) -> bool {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let chosen = match self.refuse {
            Refuse::IndexOpens => !create && (ext == "index" || ext == "timeindex"),
            Refuse::SegmentLogs => create && (name.ends_with(".log") || name.ends_with(".log.tmp")),
            Refuse::NewFiles => true,
            Refuse::SnapshotRemovals => false,
        };
        let spare = || {
            let take = |left: usize| left.checked_sub(1);
            self.allowed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, take).is_ok()
        };
        chosen && self.refusing.load(Ordering::SeqCst) && !spare()
    }
}

fn out_of_descriptors<T: Send + 'static>() -> BoxFuture<'static, io::Result<T>> {
    Box::pin(async { Err(io::Error::from_raw_os_error(EMFILE)) })
}

impl Disk for RefusingDisk {
    fn create(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        if self.refuses(path, true) {
            return out_of_descriptors();
        }
        self.inner.create(path)
    }

    fn open(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        if self.refuses(path, false) {
            return out_of_descriptors();
        }
        self.inner.open(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let snapshot = path.extension().is_some_and(|e| e == "snapshot");
        if self.refuse == Refuse::SnapshotRemovals
            && snapshot
            && self.refusing.load(Ordering::SeqCst)
        {
            return Box::pin(async { Err(io::Error::from_raw_os_error(EIO)) });
        }
        self.inner.remove(path)
    }

    fn create_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.create_dir(path)
    }

    fn remove_dir_all(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.remove_dir_all(path)
    }

    fn list(&self, path: &Path) -> BoxFuture<'_, io::Result<Vec<String>>> {
        self.inner.list(path)
    }

    fn sync_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.sync_dir(path)
    }
}
