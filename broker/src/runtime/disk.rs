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
use super::gathered;
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
    Ok(Arc::new(FsFile {
        file: Arc::new(file),
        len: Arc::new(AtomicU64::new(len)),
        changing: Arc::new(tokio::sync::Mutex::new(())),
    }))
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
        Box::pin(async move { blocking(move || sync_folder(&full?)).await })
    }
}

/// `fsync` of a folder, which needs a descriptor for it. A process out of descriptors cannot
/// open one: `sync(2)`, which needs none, makes the folder's name changes durable instead, with
/// everything else the machine holds dirty (on Linux it returns once written, as `fsync` of
/// every file would). It reports no error: a failing device goes unseen here, as it would if
/// the folder had been synced a moment later by a process with a descriptor to spare, and the
/// next file sync meets it.
fn sync_folder(path: &Path) -> io::Result<()> {
    match std::fs::File::open(path) {
        Ok(folder) => folder.sync_all(),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
            sync_everything();
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[allow(unsafe_code)]
fn sync_everything() {
    // SAFETY: sync(2) takes no arguments, touches no memory of this process and cannot fail.
    unsafe { libc::sync() }
}

/// An open file with its length tracked in process, so `len` costs no system call.
struct FsFile {
    file: Arc<std::fs::File>,
    len: Arc<AtomicU64>,
    /// Held by every write, append and truncation from its start to its end, also by one on
    /// the blocking pool whose caller went away meanwhile (the guard goes with the work), so
    /// that they reach the file in the order they began: a write that was abandoned while it
    /// ran can never land after, and over, a later write to the same range, nor past a later
    /// truncation.
    changing: Arc<tokio::sync::Mutex<()>>,
}

impl FsFile {
    /// Runs `work`, a change to the file, under its change lock: on the calling task if
    /// `inline`, else on the blocking pool, where the lock stays held until the work is done
    /// even if the caller goes away.
    async fn change<T, F>(&self, inline: bool, work: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> io::Result<T> + Send + 'static,
    {
        let changing = Arc::clone(&self.changing).lock_owned().await;
        let work = move || {
            let _changing = changing;
            work()
        };
        if inline { work() } else { blocking(work).await }
    }
}

impl File for FsFile {
    fn read_at(&self, pos: u64, len: usize) -> BoxFuture<'_, io::Result<Bytes>> {
        let file = Arc::clone(&self.file);
        Box::pin(async move {
            // Not zeroed: the page cache's bytes are copied straight into the spare capacity.
            let mut buf = BytesMut::with_capacity(len);
            if len <= INLINE_READ_BYTES_MAX && CACHED_READS.load(Ordering::Relaxed) {
                while buf.len() < len {
                    if !buf.is_empty() {
                        // Between pieces, let the other tasks of this thread run.
                        tokio::task::yield_now().await;
                    }
                    let (piece, at) = ((len - buf.len()).min(INLINE_READ_PIECE_BYTES), buf.len());
                    match cached::read_cached(&file, &mut buf, piece, pos + at as u64)? {
                        Cached::Read(0) => return Ok(buf.freeze()),
                        Cached::Read(_) => {}
                        Cached::Miss => break,
                        Cached::Unsupported => {
                            CACHED_READS.store(false, Ordering::Relaxed);
                            break;
                        }
                    }
                }
                if buf.len() == len {
                    return Ok(buf.freeze());
                }
            }
            let mut filled = buf.len();
            buf.resize(len, 0);
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
        self.write_gathered_at(pos, vec![data])
    }

    fn write_gathered_at(&self, pos: u64, parts: Vec<Bytes>) -> BoxFuture<'_, io::Result<()>> {
        let (file, len) = (Arc::clone(&self.file), Arc::clone(&self.len));
        let size: usize = parts.iter().map(Bytes::len).sum();
        let end = pos + size as u64;
        let inline = size <= INLINE_WRITE_BYTES_MAX;
        Box::pin(self.change(inline, move || {
            gathered::write_all_at(&file, &parts, pos)?;
            len.fetch_max(end, Ordering::SeqCst);
            Ok(())
        }))
    }

    fn append(&self, data: Bytes) -> BoxFuture<'_, io::Result<u64>> {
        let file = Arc::clone(&self.file);
        // Reserving the range up front keeps appends in call order.
        let pos = self.len.fetch_add(data.len() as u64, Ordering::SeqCst);
        let inline = data.len() <= INLINE_WRITE_BYTES_MAX;
        Box::pin(self.change(inline, move || file.write_all_at(&data, pos).map(|()| pos)))
    }

    fn truncate(&self, to: u64) -> BoxFuture<'_, io::Result<()>> {
        let (file, len) = (Arc::clone(&self.file), Arc::clone(&self.len));
        Box::pin(self.change(false, move || {
            file.set_len(to)?;
            len.store(to, Ordering::SeqCst);
            Ok(())
        }))
    }

    fn len(&self) -> u64 {
        self.len.load(Ordering::SeqCst)
    }

    fn sync_data(&self) -> BoxFuture<'_, io::Result<()>> {
        let file = Arc::clone(&self.file);
        Box::pin(async move { blocking(move || file.sync_data()).await })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods, clippy::disallowed_types)]

    use std::task::Poll;

    use super::*;

    /// A large write goes to the blocking pool; its caller gives up before it has run. A later
    /// small write to the same range, issued meanwhile, must still land after it.
    #[test]
    fn an_abandoned_write_never_lands_over_a_later_one() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .build()
            .expect("a runtime");
        let root = std::env::temp_dir().join(format!("weir-fs-order-{}", std::process::id()));
        let disk = FsDisk::new(root.clone());
        let big = INLINE_WRITE_BYTES_MAX * 2;
        runtime.block_on(async {
            disk.create_dir(Path::new("d")).await.expect("folder");
            let file = disk.create(Path::new("d/f")).await.expect("file");
            // The only blocking thread is busy until told to go on.
            let (go_on, wait) = std::sync::mpsc::channel::<()>();
            let busy = tokio::task::spawn_blocking(move || wait.recv());
            // The large write starts (it queues on the blocking pool) and is abandoned.
            let mut abandoned = file.write_at(0, Bytes::from(vec![1u8; big]));
            std::future::poll_fn(|cx| {
                let _ = abandoned.as_mut().poll(cx);
                Poll::Ready(())
            })
            .await;
            drop(abandoned);
            let later = {
                let file = Arc::clone(&file);
                tokio::spawn(async move { file.write_at(0, Bytes::from(vec![2u8; 4096])).await })
            };
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            go_on.send(()).expect("the busy thread waits");
            busy.await.expect("joined").expect("told to go on");
            later.await.expect("joined").expect("the later write");
            // Whatever the pool still had queued has run once this has.
            tokio::task::spawn_blocking(|| ()).await.expect("joined");
        });
        let written = std::fs::read(root.join("d/f")).expect("read back");
        std::fs::remove_dir_all(&root).expect("clean up");
        assert_eq!(written.len(), big);
        assert!(written[..4096].iter().all(|&b| b == 2), "the abandoned write landed last");
        assert!(written[4096..].iter().all(|&b| b == 1));
    }
}
