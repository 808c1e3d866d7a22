//! A pass-through [`Disk`] that counts what the log asks of the production disk: file syncs
//! (`fdatasync`), the time spent in them, and bytes written. Wrapped around `FsDisk`, it lets the
//! benchmark say how many appends shared each sync (group commit) and how much of a run the
//! disk spent syncing, without touching broker code.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use weir::io::{BoxFuture, Disk, Env, File};

/// Counters shared by a [`CountingDisk`] and its files.
#[derive(Debug, Default)]
pub struct DiskCounters {
    /// `sync_data` calls on files.
    pub syncs: AtomicU64,
    /// Nanoseconds spent in them (summed over concurrent calls).
    pub sync_nanos: AtomicU64,
    /// `sync_dir` calls.
    pub dir_syncs: AtomicU64,
    /// Bytes passed to `write_at` / `append`.
    pub written: AtomicU64,
    /// Bytes returned by `read_at`.
    pub read: AtomicU64,
}

/// A snapshot of [`DiskCounters`].
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskSnapshot {
    /// File syncs.
    pub syncs: u64,
    /// Seconds in file syncs.
    pub sync_secs: f64,
    /// Folder syncs.
    pub dir_syncs: u64,
    /// Bytes written.
    pub written: u64,
    /// Bytes read.
    pub read: u64,
}

impl DiskCounters {
    /// The counters now.
    pub fn snapshot(&self) -> DiskSnapshot {
        DiskSnapshot {
            syncs: self.syncs.load(Ordering::Relaxed),
            sync_secs: self.sync_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            dir_syncs: self.dir_syncs.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            read: self.read.load(Ordering::Relaxed),
        }
    }
}

impl DiskSnapshot {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &DiskSnapshot) -> DiskSnapshot {
        DiskSnapshot {
            syncs: self.syncs - earlier.syncs,
            sync_secs: self.sync_secs - earlier.sync_secs,
            dir_syncs: self.dir_syncs - earlier.dir_syncs,
            written: self.written - earlier.written,
            read: self.read - earlier.read,
        }
    }
}

/// The production environment for `dir`, with its disk wrapped in a [`CountingDisk`].
pub fn counted_env(dir: std::path::PathBuf) -> (Env, Arc<DiskCounters>) {
    let mut env = weir::runtime::production_env(dir);
    let counters = Arc::new(DiskCounters::default());
    env.disk = Arc::new(CountingDisk { inner: env.disk, counters: Arc::clone(&counters) });
    (env, counters)
}

/// See the module documentation.
pub struct CountingDisk {
    inner: Arc<dyn Disk>,
    counters: Arc<DiskCounters>,
}

impl CountingDisk {
    fn wrap(&self, file: Arc<dyn File>) -> Arc<dyn File> {
        Arc::new(CountingFile { inner: file, counters: Arc::clone(&self.counters) })
    }
}

impl Disk for CountingDisk {
    fn create(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let path = path.to_owned();
        Box::pin(async move { Ok(self.wrap(self.inner.create(&path).await?)) })
    }

    fn open(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let path = path.to_owned();
        Box::pin(async move { Ok(self.wrap(self.inner.open(&path).await?)) })
    }

    fn rename(&self, from: &Path, to: &Path) -> BoxFuture<'_, io::Result<()>> {
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
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
        self.counters.dir_syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_dir(path)
    }
}

struct CountingFile {
    inner: Arc<dyn File>,
    counters: Arc<DiskCounters>,
}

impl File for CountingFile {
    fn read_at(&self, pos: u64, len: usize) -> BoxFuture<'_, io::Result<Bytes>> {
        Box::pin(async move {
            let bytes = self.inner.read_at(pos, len).await?;
            self.counters.read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            Ok(bytes)
        })
    }

    fn write_at(&self, pos: u64, data: Bytes) -> BoxFuture<'_, io::Result<()>> {
        self.counters.written.fetch_add(data.len() as u64, Ordering::Relaxed);
        self.inner.write_at(pos, data)
    }

    fn write_gathered_at(&self, pos: u64, parts: Vec<Bytes>) -> BoxFuture<'_, io::Result<()>> {
        let size: usize = parts.iter().map(Bytes::len).sum();
        self.counters.written.fetch_add(size as u64, Ordering::Relaxed);
        self.inner.write_gathered_at(pos, parts)
    }

    fn append(&self, data: Bytes) -> BoxFuture<'_, io::Result<u64>> {
        self.counters.written.fetch_add(data.len() as u64, Ordering::Relaxed);
        self.inner.append(data)
    }

    fn truncate(&self, len: u64) -> BoxFuture<'_, io::Result<()>> {
        self.inner.truncate(len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn sync_data(&self) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let start = Instant::now();
            let result = self.inner.sync_data().await;
            let nanos = start.elapsed().as_nanos() as u64;
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
            self.counters.sync_nanos.fetch_add(nanos, Ordering::Relaxed);
            result
        })
    }
}
