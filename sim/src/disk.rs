//! Simulated storage (placeholder interface; the full model replaces this file).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use weir::io::{BoxFuture, Disk, File};

use crate::executor::NodeIx;
use crate::world::World;

/// Faults a host's disk injects.
#[derive(Clone, Debug, Default)]
pub struct DiskFaults {
    /// Probability that a read fails with an I/O error.
    pub read_error: f64,
    /// Probability that a write fails with an I/O error.
    pub write_error: f64,
    /// Probability that a sync fails.
    pub sync_error: f64,
    /// Probability that a read silently returns a flipped bit.
    pub read_corruption: f64,
    /// Total bytes the disk holds; writes beyond fail with `StorageFull`.
    pub capacity_bytes: Option<u64>,
    /// Least latency of an operation.
    pub latency_min: Duration,
    /// Greatest latency of an operation.
    pub latency_max: Duration,
}

/// One host's disk contents, which outlive the host's process.
#[derive(Default)]
pub struct DiskState {}

impl DiskState {
    pub(crate) fn on_kill(&self) {}
    pub(crate) fn power_fail(&self, _world: &World) {}
    pub(crate) fn set_faults(&self, _faults: DiskFaults) {}
}

/// A host's [`Disk`].
pub struct SimDisk {}

impl SimDisk {
    pub(crate) fn new(_world: Arc<World>, _node: NodeIx, _state: Arc<DiskState>, _incarnation: u64) -> SimDisk {
        SimDisk {}
    }
}

fn unsupported<T: Send + 'static>() -> BoxFuture<'static, io::Result<T>> {
    Box::pin(async { Err(io::Error::from(io::ErrorKind::Unsupported)) })
}

impl Disk for SimDisk {
    fn create(&self, _: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> { unsupported() }
    fn open(&self, _: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> { unsupported() }
    fn rename(&self, _: &Path, _: &Path) -> BoxFuture<'_, io::Result<()>> { unsupported() }
    fn remove(&self, _: &Path) -> BoxFuture<'_, io::Result<()>> { unsupported() }
    fn create_dir(&self, _: &Path) -> BoxFuture<'_, io::Result<()>> { unsupported() }
    fn remove_dir_all(&self, _: &Path) -> BoxFuture<'_, io::Result<()>> { unsupported() }
    fn list(&self, _: &Path) -> BoxFuture<'_, io::Result<Vec<String>>> { unsupported() }
    fn sync_dir(&self, _: &Path) -> BoxFuture<'_, io::Result<()>> { unsupported() }
}
