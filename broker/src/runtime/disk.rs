//! Production storage: `std::fs` under a root folder. Operations that may wait for the device
//! (a cold read, an `fdatasync`, metadata) run on tokio's blocking pool, so that a slow disk
//! never stalls the tasks serving sockets; small writes into the page cache, and reads the page
//! cache can serve whole, run on the calling task.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};

use super::cached::{self, Cached};
use crate::io::disk::checked_path;
use crate::io::{BoxFuture, Disk, File};

/// A data folder on the local file system.
pub struct FsDisk {
    root: PathBuf,
}

impl FsDisk {
    /// A disk rooted at `root`. The folder is created on first use if missing.
    pub fn new(root: PathBuf) -> FsDisk {
        FsDisk { root }
    }

    fn full(&self, path: &Path) -> io::Result<PathBuf> {
        Ok(self.root.join(checked_path(path)?))
    }
}

/// Writes up to this size go straight to the page cache from the calling task: a copy of a
/// few microseconds, far cheaper than handing the work to a blocking thread and back, which on
/// a two-core machine dominated the cost of appending a 16 KiB batch. Larger writes, and every
/// read, sync and metadata operation (which may wait on the device), still run on the blocking
/// pool.
const INLINE_WRITE_BYTES_MAX: usize = 128 << 10;

/// Reads up to this size are first served from the page cache on the calling task
/// ([`cached::read_cached`]), falling back to the blocking pool for whatever is not cached. A
/// fetch reads its byte budget (1 MiB per partition by default) plus a little slack; copying
/// that from memory costs less than the pool's round trip.
const INLINE_READ_BYTES_MAX: usize = 2 << 20;

/// A read from the page cache on the calling task copies this much at a time, yielding to the
/// thread's other tasks in between, so that a consumer reading a MiB at a time holds up the
/// producers' requests on its thread for tens of microseconds, not hundreds.
const INLINE_READ_PIECE_BYTES: usize = 128 << 10;

/// Whether page-cache-only reads work on this kernel and file system; cleared for good on the
/// first refusal.
static CACHED_READS: AtomicBool = AtomicBool::new(true);

/// Runs blocking file-system work off the async worker threads.
async fn blocking<T, F>(work: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join) => Err(io::Error::other(format!("blocking disk task failed: {join}"))),
    }
}

fn open_file(full: PathBuf, create: bool) -> io::Result<Arc<dyn File>> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    if create {
        options.create(true).truncate(true);
    }
    let file = options.open(full)?;
    let len = file.metadata()?.len();
    Ok(Arc::new(FsFile { file: Arc::new(file), len: AtomicU64::new(len) }))
}

impl Disk for FsDisk {
    fn create(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let full = self.full(path);
        Box::pin(async move { blocking(move || open_file(full?, true)).await })
    }

    fn open(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let full = self.full(path);
        Box::pin(async move { blocking(move || open_file(full?, false)).await })
    }

    fn rename(&self, from: &Path, to: &Path) -> BoxFuture<'_, io::Result<()>> {
        let (from, to) = (self.full(from), self.full(to));
        Box::pin(async move { blocking(move || std::fs::rename(from?, to?)).await })
    }

    fn remove(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let full = self.full(path);
        Box::pin(async move { blocking(move || std::fs::remove_file(full?)).await })
    }

    fn create_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let full = self.full(path);
        Box::pin(async move { blocking(move || std::fs::create_dir_all(full?)).await })
    }

    fn remove_dir_all(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let full = self.full(path);
        Box::pin(async move { blocking(move || std::fs::remove_dir_all(full?)).await })
    }

    fn list(&self, path: &Path) -> BoxFuture<'_, io::Result<Vec<String>>> {
        let full = self.full(path);
        Box::pin(async move {
            blocking(move || {
                let mut names = Vec::new();
                for entry in std::fs::read_dir(full?)? {
                    names.push(entry?.file_name().to_string_lossy().into_owned());
                }
                names.sort();
                Ok(names)
            })
            .await
        })
    }

    fn sync_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let full = self.full(path);
        Box::pin(async move { blocking(move || std::fs::File::open(full?)?.sync_all()).await })
    }
}

/// An open file with its length tracked in process, so `len` costs no system call.
struct FsFile {
    file: Arc<std::fs::File>,
    len: AtomicU64,
}

impl File for FsFile {
    fn read_at(&self, pos: u64, len: usize) -> BoxFuture<'_, io::Result<Bytes>> {
        let file = Arc::clone(&self.file);
        Box::pin(async move {
            let mut buf = BytesMut::zeroed(len);
            let mut filled = 0;
            if len <= INLINE_READ_BYTES_MAX && CACHED_READS.load(Ordering::Relaxed) {
                while filled < len {
                    if filled > 0 {
                        // Between pieces, let the other tasks of this thread run.
                        tokio::task::yield_now().await;
                    }
                    let piece = (len - filled).min(INLINE_READ_PIECE_BYTES);
                    let into = &mut buf[filled..filled + piece];
                    match cached::read_cached(&file, into, pos + filled as u64)? {
                        Cached::Read(0) => {
                            buf.truncate(filled);
                            return Ok(buf.freeze());
                        }
                        Cached::Read(n) => filled += n,
                        Cached::Miss => break,
                        Cached::Unsupported => {
                            CACHED_READS.store(false, Ordering::Relaxed);
                            break;
                        }
                    }
                }
                if filled == len {
                    return Ok(buf.freeze());
                }
            }
            // The rest needs the device: read it on the blocking pool.
            blocking(move || {
                while filled < len {
                    match file.read_at(&mut buf[filled..], pos + filled as u64) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                buf.truncate(filled);
                Ok(buf.freeze())
            })
            .await
        })
    }

    fn write_at(&self, pos: u64, data: Bytes) -> BoxFuture<'_, io::Result<()>> {
        let file = Arc::clone(&self.file);
        let end = pos + data.len() as u64;
        Box::pin(async move {
            if data.len() <= INLINE_WRITE_BYTES_MAX {
                file.write_all_at(&data, pos)?;
            } else {
                blocking(move || file.write_all_at(&data, pos)).await?;
            }
            self.len.fetch_max(end, Ordering::SeqCst);
            Ok(())
        })
    }

    fn append(&self, data: Bytes) -> BoxFuture<'_, io::Result<u64>> {
        let file = Arc::clone(&self.file);
        // Reserving the range up front keeps appends in call order without a lock.
        let pos = self.len.fetch_add(data.len() as u64, Ordering::SeqCst);
        Box::pin(async move {
            if data.len() <= INLINE_WRITE_BYTES_MAX {
                file.write_all_at(&data, pos)?;
            } else {
                blocking(move || file.write_all_at(&data, pos)).await?;
            }
            Ok(pos)
        })
    }

    fn truncate(&self, len: u64) -> BoxFuture<'_, io::Result<()>> {
        let file = Arc::clone(&self.file);
        Box::pin(async move {
            blocking(move || file.set_len(len)).await?;
            self.len.store(len, Ordering::SeqCst);
            Ok(())
        })
    }

    fn len(&self) -> u64 {
        self.len.load(Ordering::SeqCst)
    }

    fn sync_data(&self) -> BoxFuture<'_, io::Result<()>> {
        let file = Arc::clone(&self.file);
        Box::pin(async move { blocking(move || file.sync_data()).await })
    }
}
