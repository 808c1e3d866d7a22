//! Storage: one node's data folder, as a small set of file-system operations with precise
//! durability rules.
//!
//! # Durability
//! - Every write is visible to every reader of the same disk as soon as its future completes.
//!   Visible is not durable: it may sit in the page cache.
//! - A file's *contents* (writes, appends, truncations) become durable when a later
//!   [`File::sync_data`] on that file completes successfully.
//! - A file's *name* (create, rename, remove, and a folder's own creation) becomes durable when a
//!   later [`Disk::sync_dir`] of the folder holding the name completes successfully. A synced file
//!   whose name was never made durable is lost in a power failure.
//! - A process crash loses nothing that was written: the operating system still holds it. A power
//!   failure loses everything not yet durable; a write in flight may survive whole, as a prefix
//!   cut at a sector boundary, or not at all.
//!
//! # Errors
//! Errors are `std::io::Error`. `NotFound` and `AlreadyExists` mean what they say and change
//! nothing. `StorageFull` means the write did not happen (no partial write is visible). Any other
//! error from a write, truncation or sync means the state of the file past its last successful
//! sync is unknown. A failed [`File::sync_data`] is fatal for that file: the unsynced data may
//! already be gone from the page cache even though reads still return it ("fsyncgate"), so a
//! later successful sync proves nothing. Callers must stop trusting the file and recover from
//! what was durable.
//!
//! # Paths
//! Paths are relative to the disk's root (the node's data folder), use `/` separators and never
//! contain `..`; an absolute or escaping path is rejected with `InvalidInput`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::BoxFuture;

/// A node's data folder.
pub trait Disk: Send + Sync {
    /// Creates the file at `path`, or truncates it to zero length if it exists, and opens it for
    /// reading and writing. The parent folder must exist. The new name is durable only after
    /// [`Disk::sync_dir`] of the parent.
    fn create(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>>;

    /// Opens an existing file for reading and writing; `NotFound` if there is none.
    fn open(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>>;

    /// Renames `from` to `to`, atomically replacing any file at `to`. Durable after syncing both
    /// parent folders (the destination's alone makes the new name durable).
    fn rename(&self, from: &Path, to: &Path) -> BoxFuture<'_, io::Result<()>>;

    /// Removes the file at `path`. Open handles keep working on the unlinked data. Durable after
    /// syncing the parent.
    fn remove(&self, path: &Path) -> BoxFuture<'_, io::Result<()>>;

    /// Creates the folder at `path` and any missing parents; succeeds if it already exists.
    /// Each new folder's name is durable after syncing its parent.
    fn create_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>>;

    /// Removes the folder at `path` and everything in it. Durable after syncing the parent.
    fn remove_dir_all(&self, path: &Path) -> BoxFuture<'_, io::Result<()>>;

    /// The names of the entries (files and folders) directly inside `path`, sorted.
    /// `path` may be empty, meaning the disk's root.
    fn list(&self, path: &Path) -> BoxFuture<'_, io::Result<Vec<String>>>;

    /// Makes every name change in the folder at `path` durable (`fsync` of the directory).
    fn sync_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>>;
}

/// An open file. Cheap to share between tasks (`Arc<dyn File>`); one handle per file per node
/// is the intended use, because [`File::len`] is tracked by the handle.
pub trait File: Send + Sync {
    /// Reads up to `len` bytes starting at `pos`. Returns fewer only when the file ends first
    /// (and none when `pos` is at or past the end).
    ///
    /// The bytes come from the storage device or page cache and may be silently corrupt (bit
    /// rot, misdirected writes): callers that care verify checksums.
    fn read_at(&self, pos: u64, len: usize) -> BoxFuture<'_, io::Result<Bytes>>;

    /// Writes all of `data` at `pos`, extending the file if needed (a gap reads as zeros).
    fn write_at(&self, pos: u64, data: Bytes) -> BoxFuture<'_, io::Result<()>>;

    /// Writes `parts` one after another from `pos`: one write, exactly as [`File::write_at`] of
    /// the parts joined would be (durability, errors and tearing alike), without joining them.
    fn write_gathered_at(&self, pos: u64, parts: Vec<Bytes>) -> BoxFuture<'_, io::Result<()>>;

    /// Writes all of `data` at the current end of the file and returns the position of its first
    /// byte. Appends through one handle land in call order.
    fn append(&self, data: Bytes) -> BoxFuture<'_, io::Result<u64>>;

    /// Sets the file's length, discarding bytes past `len` or extending with zeros.
    fn truncate(&self, len: u64) -> BoxFuture<'_, io::Result<()>>;

    /// The file's current length, including writes not yet durable.
    fn len(&self) -> u64;

    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes every completed write, append and truncation of this file durable (`fdatasync`).
    /// See the module documentation for what a failure means.
    fn sync_data(&self) -> BoxFuture<'_, io::Result<()>>;
}

/// A [`Disk`] that passes every operation to `inner`, and every file it creates or opens
/// through `wrap`, with the file's path: how a benchmark or a test watches what a component asks
/// of its files (bytes written, syncs, where the written bytes lie) without implementing the
/// disk again.
pub struct WrapFiles<W> {
    inner: Arc<dyn Disk>,
    wrap: W,
}

impl<W> WrapFiles<W>
where
    W: Fn(&Path, Arc<dyn File>) -> Arc<dyn File> + Send + Sync,
{
    /// `inner`, its files passed through `wrap`.
    pub fn new(inner: Arc<dyn Disk>, wrap: W) -> WrapFiles<W> {
        WrapFiles { inner, wrap }
    }
}

impl<W> Disk for WrapFiles<W>
where
    W: Fn(&Path, Arc<dyn File>) -> Arc<dyn File> + Send + Sync,
{
    fn create(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let path = path.to_owned();
        Box::pin(async move { Ok((self.wrap)(&path, self.inner.create(&path).await?)) })
    }

    fn open(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let path = path.to_owned();
        Box::pin(async move { Ok((self.wrap)(&path, self.inner.open(&path).await?)) })
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
        self.inner.sync_dir(path)
    }
}

/// Checks that `path` is relative and stays inside the disk's root; returns it normalised
/// (no `.` components). Both implementations call this before touching anything.
pub fn checked_path(path: &Path) -> io::Result<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("path {} escapes the data folder", path.display()),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_path_rejects_escapes() {
        assert_eq!(checked_path(Path::new("a/./b")).ok(), Some(PathBuf::from("a/b")));
        assert_eq!(checked_path(Path::new("")).ok(), Some(PathBuf::new()));
        for bad in ["/etc/passwd", "../x", "a/../../x"] {
            let err = checked_path(Path::new(bad)).err().map(|e| e.kind());
            assert_eq!(err, Some(io::ErrorKind::InvalidInput), "{bad}");
        }
    }
}
