//! Pass-through files that count what the log asks of the production disk: file syncs
//! (`fdatasync`), the time spent in them, and bytes written. Wrapped around `FsDisk`'s files
//! (`weir::io::disk::WrapFiles`), they let the benchmark say how many appends shared each sync
//! (group commit) and how much of a run the disk spent syncing, without touching broker code.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use weir::io::disk::WrapFiles;
use weir::io::{BoxFuture, Env, File};

/// Counters shared by the files of a counted disk.
#[derive(Debug, Default)]
pub struct DiskCounters {
    /// `sync_data` calls on files.
    pub syncs: AtomicU64,
    /// Nanoseconds spent in them (summed over concurrent calls).
    pub sync_nanos: AtomicU64,
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
            written: self.written - earlier.written,
            read: self.read - earlier.read,
        }
    }
}

/// The production environment for `dir`, with its files wrapped to count what is asked of them.
pub fn counted_env(dir: std::path::PathBuf) -> (Env, Arc<DiskCounters>) {
    let mut env = weir::runtime::production_env(dir);
    let counters = Arc::new(DiskCounters::default());
    let wrapped = Arc::clone(&counters);
    env.disk = Arc::new(WrapFiles::new(env.disk, move |_path, inner| {
        Arc::new(CountingFile { inner, counters: Arc::clone(&wrapped) }) as Arc<dyn File>
    }));
    (env, counters)
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
