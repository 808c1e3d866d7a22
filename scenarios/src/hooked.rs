//! [`Hooked`], a file that passes every operation to the file it wraps and tells its
//! [`Hooks`] first: how a scenario counts a component's reads, writes or open handles, or fails
//! its reads, without writing out [`File`]'s pass-through again. Wrapped around every file of a
//! disk with `weir::io::disk::WrapFiles`.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use weir::io::{BoxFuture, File};

/// What a [`Hooked`] file tells before it passes an operation on. Each does nothing unless
/// implemented.
pub trait Hooks: Send + Sync + 'static {
    /// A read of `len` bytes at `pos` is asked for: the error to fail it with, or `None` to
    /// let it through.
    fn read(&self, pos: u64, len: usize) -> Option<io::Error> {
        let _ = (pos, len);
        None
    }

    /// `parts` are to be written, one after another (one part for a plain write or append).
    fn write(&self, parts: &[Bytes]) {
        let _ = parts;
    }

    /// The file handle was dropped (closed).
    fn dropped(&self) {}
}

/// `inner`, with `hooks` told of what is asked of it.
pub struct Hooked<H: Hooks> {
    inner: Arc<dyn File>,
    hooks: H,
}

impl<H: Hooks> Hooked<H> {
    /// `inner` behind `hooks`, as a file.
    pub fn wrap(inner: Arc<dyn File>, hooks: H) -> Arc<dyn File> {
        Arc::new(Hooked { inner, hooks })
    }
}

impl<H: Hooks> Drop for Hooked<H> {
    fn drop(&mut self) {
        self.hooks.dropped();
    }
}

impl<H: Hooks> File for Hooked<H> {
    fn read_at(&self, pos: u64, len: usize) -> BoxFuture<'_, io::Result<Bytes>> {
        match self.hooks.read(pos, len) {
            Some(error) => Box::pin(async move { Err(error) }),
            None => self.inner.read_at(pos, len),
        }
    }

    fn write_at(&self, pos: u64, data: Bytes) -> BoxFuture<'_, io::Result<()>> {
        self.hooks.write(std::slice::from_ref(&data));
        self.inner.write_at(pos, data)
    }

    fn write_gathered_at(&self, pos: u64, parts: Vec<Bytes>) -> BoxFuture<'_, io::Result<()>> {
        self.hooks.write(&parts);
        self.inner.write_gathered_at(pos, parts)
    }

    fn append(&self, data: Bytes) -> BoxFuture<'_, io::Result<u64>> {
        self.hooks.write(std::slice::from_ref(&data));
        self.inner.append(data)
    }

    fn truncate(&self, len: u64) -> BoxFuture<'_, io::Result<()>> {
        self.inner.truncate(len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn sync_data(&self) -> BoxFuture<'_, io::Result<()>> {
        self.inner.sync_data()
    }
}
