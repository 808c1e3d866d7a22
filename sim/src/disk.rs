//! Simulated storage: each host's data folder as a durable image plus a volatile page cache, so
//! that the durability rules of [`weir::io::disk`] can be broken exactly where a real machine
//! breaks them.
//!
//! A host's [`DiskState`] outlives its processes. Every write lands in the page cache (visible at
//! once, durable later): file contents become durable on `sync_data`, names on `sync_dir` of
//! their folder (see `namespace` and `inode` for the two halves) — those changed before the sync
//! began; what changes while a slow sync runs stays pending, as nothing promises more. Killing
//! the process loses nothing but invalidates the old life's handles; a power failure loses the
//! page cache, keeping for each file a random prefix of its pending writes, the last one possibly
//! torn at a sector boundary. On top, [`DiskFaults`] injects the gray failures production disks
//! have: I/O errors, failed fsyncs that silently drop dirty pages ("fsyncgate"), bit flips on
//! read, a full disk and latency.
//!
//! Every random choice is drawn from the world's seeded stream, and every operation's kind, size
//! and outcome is folded into the trace, so a run replays bit for bit. Faults whose probability
//! is zero draw nothing, so switching one off does not shift the rest of a run.

mod inode;
mod namespace;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weir::io::disk::checked_path;
use weir::io::{BoxFuture, Disk, File};

use crate::executor::NodeIx;
use crate::sim::{Host, Sim};
use crate::timer::SimSleep;
use crate::trace::Event;
use crate::world::{World, lock};

use inode::checked_end;
pub use inode::{FILE_BYTES_MAX, SECTOR_BYTES};
use namespace::{FileNode, Namespace};

/// Faults a host's disk injects. Probabilities are per operation, from 0.0 (never) to 1.0.
#[derive(Clone, Debug, Default)]
pub struct DiskFaults {
    /// Probability that a read (`read_at`, `open`, `list`) fails with an I/O error.
    pub read_error: f64,
    /// Probability that a write fails with an I/O error: `write_at` and `append` after writing a
    /// random prefix (maybe nothing), `truncate` after maybe truncating, and name changes
    /// (`create`, `rename`, `remove`, `create_dir`, `remove_dir_all`) before changing anything.
    pub write_error: f64,
    /// Probability that a sync fails. A failed `sync_data` drops the file's pending writes from
    /// the way to the device (they stay readable until a power failure); a failed `sync_dir`
    /// makes nothing durable.
    pub sync_error: f64,
    /// Probability that a read silently returns one flipped bit (storage is unharmed).
    pub read_corruption: f64,
    /// Total bytes the disk holds; writes beyond fail with `StorageFull`.
    pub capacity_bytes: Option<u64>,
    /// Least latency of an operation.
    pub latency_min: Duration,
    /// Greatest latency of an operation; no latency at all when zero.
    pub latency_max: Duration,
    /// Further latency of every sync (`sync_data`, `sync_dir`), on top of the operation's: a
    /// device flush costs far more than a write into the page cache.
    pub sync_latency: Duration,
}

/// Which lives of the host may still use the disk.
#[derive(Debug, Default)]
struct Lives {
    /// The newest incarnation a [`SimDisk`] was built for.
    newest: u64,
    /// Incarnations up to this one were killed or power-failed.
    dead_through: Option<u64>,
}

/// One host's disk contents, which outlive the host's process.
#[derive(Debug, Default)]
pub struct DiskState {
    names: Mutex<Namespace>,
    faults: Mutex<DiskFaults>,
    lives: Mutex<Lives>,
    /// File syncs (`sync_data`) that succeeded.
    file_syncs: AtomicU64,
    /// Bytes returned by reads that succeeded.
    bytes_read: AtomicU64,
}

impl DiskState {
    /// The process died: the page cache survives, the old life's handles stop working.
    pub(crate) fn on_kill(&self) {
        let mut lives = lock(&self.lives);
        lives.dead_through = Some(lives.newest);
    }

    /// The power went: like a kill, and everything not durable is lost or torn.
    pub(crate) fn power_fail(&self, world: &World) {
        self.on_kill();
        let mut names = lock(&self.names);
        for file in names.durable_files() {
            let fate = lock(&file.inode).power_fail(&mut |n| world.random_below(n));
            world.trace.fold(Event::DiskFault, fate.trace_value(file.id));
        }
        names.revert_to_durable();
    }

    /// The disk was replaced by an empty one (an operator swapping a failed disk, or a new
    /// machine taking the host's place): like a power failure, and then every file is gone.
    pub(crate) fn wipe(&self) {
        self.on_kill();
        lock(&self.names).wipe();
    }

    /// Sets the faults injected from now on.
    pub(crate) fn set_faults(&self, faults: DiskFaults) {
        *lock(&self.faults) = faults;
    }

    fn faults(&self) -> DiskFaults {
        lock(&self.faults).clone()
    }

    fn is_alive(&self, incarnation: u64) -> bool {
        lock(&self.lives).dead_through.is_none_or(|dead| incarnation > dead)
    }

    /// Bytes held by the files the live namespace names.
    fn live_bytes(&self) -> u64 {
        lock(&self.names).live_bytes()
    }
}

/// The kinds of operation, as folded into the trace.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
enum Op {
    Create = 1,
    Open = 2,
    Rename = 3,
    Remove = 4,
    CreateDir = 5,
    RemoveDirAll = 6,
    List = 7,
    SyncDir = 8,
    Read = 9,
    Write = 10,
    Append = 11,
    Truncate = 12,
    SyncData = 13,
}

/// The kinds of injected fault, as folded into the trace.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
enum Fault {
    ReadError = 1,
    WriteError = 2,
    SyncError = 3,
    ReadCorruption = 4,
    Full = 5,
    Latent = 6,
    Latency = 7,
}

/// Bits of a length kept in a trace value (the rest holds the operation and node).
const TRACE_LEN_MASK: u64 = (1 << 40) - 1;

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected disk fault: {what}"))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What every handle of one life of a host shares.
struct Ctx {
    world: Arc<World>,
    node: NodeIx,
    state: Arc<DiskState>,
    incarnation: u64,
}

impl Ctx {
    /// Waits out the operation's latency, then fails if this life of the host is over. Returns
    /// the faults in force.
    async fn begin(&self) -> io::Result<DiskFaults> {
        self.begin_op(false).await
    }

    /// [`Ctx::begin`] for a sync, which also waits out [`DiskFaults::sync_latency`].
    async fn begin_sync(&self) -> io::Result<DiskFaults> {
        self.begin_op(true).await
    }

    async fn begin_op(&self, sync: bool) -> io::Result<DiskFaults> {
        let (min, max, extra) = {
            let faults = lock(&self.state.faults);
            let extra = if sync { nanos(faults.sync_latency) } else { 0 };
            (nanos(faults.latency_min), nanos(faults.latency_max), extra)
        };
        let mut delay = extra;
        if max > 0 {
            let min = min.min(max);
            delay = delay
                .saturating_add(min + self.draw(Fault::Latency, (max - min).saturating_add(1)));
        }
        if delay > 0 {
            let at = self.world.now_nanos().saturating_add(delay);
            SimSleep::new(Arc::clone(&self.world), at).await;
        }
        if !self.state.is_alive(self.incarnation) {
            return Err(io::Error::other(
                "host restarted: this disk handle belongs to a dead process",
            ));
        }
        Ok(self.state.faults())
    }

    /// Whether to inject a fault of probability `p`; an injected one is folded into the trace.
    fn inject(&self, p: f64, fault: Fault) -> bool {
        let hit = self.world.chance(p);
        if hit {
            self.note(fault, 0);
        }
        hit
    }

    /// Draws a uniform number in `0..bound` that shapes an injected fault, and folds it into the
    /// trace.
    fn draw(&self, fault: Fault, bound: u64) -> u64 {
        let value = self.world.random_below(bound);
        self.note(fault, value);
        value
    }

    /// Folds an injected fault, with a detail, into the trace.
    fn note(&self, fault: Fault, detail: u64) {
        let value = (fault as u64) << 56 ^ (self.node as u64) << 40 ^ (detail & TRACE_LEN_MASK);
        self.world.trace.fold(Event::DiskFault, value);
    }

    /// Folds an operation's outcome into the trace.
    fn record<T>(&self, op: Op, len: u64, result: io::Result<T>) -> io::Result<T> {
        let ok = u64::from(result.is_ok());
        let value = (op as u64) << 56 ^ (self.node as u64) << 40 ^ (len & TRACE_LEN_MASK) << 1 ^ ok;
        self.world.trace.fold(Event::Disk, value);
        result
    }

    /// Fails with `StorageFull` if growing the live files by `growth` bytes exceeds capacity.
    fn check_space(&self, faults: &DiskFaults, growth: u64) -> io::Result<()> {
        let Some(capacity) = faults.capacity_bytes else {
            return Ok(());
        };
        if growth == 0 || self.state.live_bytes().saturating_add(growth) <= capacity {
            return Ok(());
        }
        self.note(Fault::Full, growth);
        Err(io::Error::new(io::ErrorKind::StorageFull, "simulated disk is full"))
    }

    /// Runs a name change: latency, liveness, an injected write error, then `change`.
    async fn change_names<T>(
        &self,
        op: Op,
        change: impl FnOnce(&mut Namespace) -> io::Result<T>,
    ) -> io::Result<T> {
        let result = async {
            let faults = self.begin().await?;
            if self.inject(faults.write_error, Fault::WriteError) {
                return Err(injected("write error"));
            }
            change(&mut lock(&self.state.names))
        }
        .await;
        self.record(op, 0, result)
    }

    /// Runs a lookup: latency, liveness, an injected read error, then `look`.
    async fn read_names<T>(
        &self,
        op: Op,
        look: impl FnOnce(&Namespace) -> io::Result<T>,
    ) -> io::Result<T> {
        let result = async {
            let faults = self.begin().await?;
            if self.inject(faults.read_error, Fault::ReadError) {
                return Err(injected("read error"));
            }
            look(&lock(&self.state.names))
        }
        .await;
        self.record(op, 0, result)
    }
}

/// A host's [`Disk`], for one life of the host.
pub struct SimDisk {
    ctx: Arc<Ctx>,
}

impl SimDisk {
    /// The disk of life `incarnation` of host `node`, over the contents in `state`.
    pub(crate) fn new(
        world: Arc<World>,
        node: NodeIx,
        state: Arc<DiskState>,
        incarnation: u64,
    ) -> SimDisk {
        {
            let mut lives = lock(&state.lives);
            lives.newest = lives.newest.max(incarnation);
        }
        SimDisk { ctx: Arc::new(Ctx { world, node, state, incarnation }) }
    }

    fn handle(&self, file: Arc<FileNode>) -> Arc<dyn File> {
        Arc::new(SimFile { ctx: Arc::clone(&self.ctx), file })
    }
}

impl Disk for SimDisk {
    fn create(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let path = checked_path(path);
        Box::pin(async move {
            let file = self.ctx.change_names(Op::Create, |names| names.create_file(&path?)).await?;
            Ok(self.handle(file))
        })
    }

    fn open(&self, path: &Path) -> BoxFuture<'_, io::Result<Arc<dyn File>>> {
        let path = checked_path(path);
        Box::pin(async move {
            let file = self.ctx.read_names(Op::Open, |names| names.open(&path?)).await?;
            Ok(self.handle(file))
        })
    }

    fn rename(&self, from: &Path, to: &Path) -> BoxFuture<'_, io::Result<()>> {
        let (from, to) = (checked_path(from), checked_path(to));
        Box::pin(self.ctx.change_names(Op::Rename, move |names| names.rename(&from?, &to?)))
    }

    fn remove(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let path = checked_path(path);
        Box::pin(self.ctx.change_names(Op::Remove, move |names| names.remove(&path?)))
    }

    fn create_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let path = checked_path(path);
        Box::pin(self.ctx.change_names(Op::CreateDir, move |names| names.create_dir_all(&path?)))
    }

    fn remove_dir_all(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let path = checked_path(path);
        Box::pin(self.ctx.change_names(Op::RemoveDirAll, move |names| names.remove_dir_all(&path?)))
    }

    fn list(&self, path: &Path) -> BoxFuture<'_, io::Result<Vec<String>>> {
        let path = checked_path(path);
        Box::pin(self.ctx.read_names(Op::List, move |names| names.list(&path?)))
    }

    fn sync_dir(&self, path: &Path) -> BoxFuture<'_, io::Result<()>> {
        let path = checked_path(path);
        Box::pin(async move {
            let result = async {
                let path = path?;
                // Like a file's, a folder's sync vouches for the changes made before it began.
                let mark = lock(&self.ctx.state.names).sync_mark(&path);
                let faults = self.ctx.begin_sync().await?;
                let mut names = lock(&self.ctx.state.names);
                if self.ctx.inject(faults.sync_error, Fault::SyncError) {
                    names.check_folder(&path)?;
                    return Err(injected("directory sync failed"));
                }
                names.sync_to(mark?);
                Ok(())
            }
            .await;
            self.ctx.record(Op::SyncDir, 0, result)
        })
    }
}

/// An open file of a [`SimDisk`]: a handle on the file's inode, so it keeps working after the
/// file is renamed or removed, until its host's life ends.
pub struct SimFile {
    ctx: Arc<Ctx>,
    file: Arc<FileNode>,
}

impl SimFile {
    /// Writes `data` at `pos` (after the operation's latency and liveness check).
    fn write(&self, faults: &DiskFaults, pos: u64, data: Bytes) -> io::Result<()> {
        let len = data.len() as u64;
        let end = checked_end(pos, len)?;
        let growth = lock(&self.file.inode).growth_to(end);
        self.ctx.check_space(faults, growth)?;
        if self.ctx.inject(faults.write_error, Fault::WriteError) {
            let written = self.ctx.draw(Fault::WriteError, len + 1);
            let prefix = data.slice(..usize::try_from(written).unwrap_or(data.len()));
            lock(&self.file.inode).write(pos, prefix);
            return Err(injected("write error"));
        }
        lock(&self.file.inode).write(pos, data);
        Ok(())
    }

    async fn read(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let faults = self.ctx.begin().await?;
        if self.ctx.inject(faults.read_error, Fault::ReadError) {
            return Err(injected("read error"));
        }
        let mut bytes = lock(&self.file.inode).read(pos, len);
        if !bytes.is_empty() && self.ctx.inject(faults.read_corruption, Fault::ReadCorruption) {
            let bit = self.ctx.draw(Fault::ReadCorruption, bytes.len() as u64 * 8);
            let byte = usize::try_from(bit / 8).expect("the bit lies inside the bytes read");
            bytes[byte] ^= 1 << (bit % 8);
        }
        Ok(Bytes::from(bytes))
    }

    async fn append_at(&self, pos: u64, data: Bytes) -> io::Result<u64> {
        let len = data.len() as u64;
        let result = match self.ctx.begin().await {
            Ok(faults) => self.write(&faults, pos, data),
            Err(e) => Err(e),
        };
        if result.is_err() {
            lock(&self.file.inode).release_append(pos, len);
        }
        result.map(|()| pos)
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        let faults = self.ctx.begin().await?;
        checked_end(len, 0)?;
        let growth = lock(&self.file.inode).growth_to(len);
        self.ctx.check_space(&faults, growth)?;
        if self.ctx.inject(faults.write_error, Fault::WriteError) {
            if self.ctx.draw(Fault::WriteError, 2) == 1 {
                lock(&self.file.inode).truncate(len);
            }
            return Err(injected("truncate error"));
        }
        lock(&self.file.inode).truncate(len);
        Ok(())
    }

    async fn sync(&self) -> io::Result<()> {
        // A sync vouches for what was written before it began, not for what is written while
        // it takes its time.
        let mark = lock(&self.file.inode).sync_mark();
        let faults = self.ctx.begin_sync().await?;
        let mut inode = lock(&self.file.inode);
        if self.ctx.inject(faults.sync_error, Fault::SyncError) {
            inode.drop_pending();
            return Err(injected("fsync failed; unsynced writes are lost to the device"));
        }
        inode.sync(mark);
        self.ctx.state.file_syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl File for SimFile {
    fn read_at(&self, pos: u64, len: usize) -> BoxFuture<'_, io::Result<Bytes>> {
        Box::pin(async move {
            let result = self.read(pos, len).await;
            if let Ok(bytes) = &result {
                self.ctx.state.bytes_read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            let got = result.as_ref().map_or(len as u64, |b| b.len() as u64);
            self.ctx.record(Op::Read, got, result)
        })
    }

    fn write_at(&self, pos: u64, data: Bytes) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let len = data.len() as u64;
            let result = match self.ctx.begin().await {
                Ok(faults) => self.write(&faults, pos, data),
                Err(e) => Err(e),
            };
            self.ctx.record(Op::Write, len, result)
        })
    }

    fn write_gathered_at(&self, pos: u64, parts: Vec<Bytes>) -> BoxFuture<'_, io::Result<()>> {
        // One write of the joined bytes, open to the same faults as any write (a power failure
        // may keep only a prefix of it), as one `pwritev` is.
        self.write_at(pos, parts.concat().into())
    }

    fn append(&self, data: Bytes) -> BoxFuture<'_, io::Result<u64>> {
        let len = data.len() as u64;
        // Reserved now, not when polled: appends land in call order whatever their latencies.
        let pos = lock(&self.file.inode).reserve_append(len);
        Box::pin(async move {
            let result = self.append_at(pos, data).await;
            self.ctx.record(Op::Append, len, result)
        })
    }

    fn truncate(&self, len: u64) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let result = self.set_len(len).await;
            self.ctx.record(Op::Truncate, len, result)
        })
    }

    fn len(&self) -> u64 {
        lock(&self.file.inode).len()
    }

    fn sync_data(&self) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move {
            let result = self.sync().await;
            self.ctx.record(Op::SyncData, 0, result)
        })
    }
}

/// Disk inspection and damage for tests and nemeses.
impl Sim {
    fn disk_state(&self, host: Host) -> Arc<DiskState> {
        self.world.nodes.with(host.0, |n| Arc::clone(&n.disk))
    }

    /// Bytes held by the files the host's disk names now (page cache included).
    pub fn disk_usage(&self, host: Host) -> u64 {
        self.disk_state(host).live_bytes()
    }

    /// File syncs (`sync_data`) of the host's disk that have succeeded, over all its lives.
    pub fn file_syncs(&self, host: Host) -> u64 {
        self.disk_state(host).file_syncs.load(Ordering::Relaxed)
    }

    /// Bytes the host's disk has returned from reads, over all its lives.
    pub fn bytes_read(&self, host: Host) -> u64 {
        self.disk_state(host).bytes_read.load(Ordering::Relaxed)
    }

    /// A latent sector error: flips one bit, chosen by the seed, of the byte at `pos` of the file
    /// at `path`, both in the page cache and on the device, so every later read sees it.
    /// `NotFound` if there is no such file, `InvalidInput` if `pos` is past its end.
    pub fn corrupt_file(&self, host: Host, path: impl AsRef<Path>, pos: u64) -> io::Result<()> {
        let path: PathBuf = checked_path(path.as_ref())?;
        let file = lock(&self.disk_state(host).names).open(&path)?;
        self.corrupt_node(host, &file, pos)
    }

    /// [`Sim::corrupt_file`] of the file a power failure would leave at `path` (the one
    /// [`Sim::durable_contents`] reads), whatever name the page cache gives it now.
    pub fn corrupt_durable_file(
        &self,
        host: Host,
        path: impl AsRef<Path>,
        pos: u64,
    ) -> io::Result<()> {
        let path: PathBuf = checked_path(path.as_ref())?;
        let file = lock(&self.disk_state(host).names).open_durable(&path)?;
        self.corrupt_node(host, &file, pos)
    }

    fn corrupt_node(&self, host: Host, file: &FileNode, pos: u64) -> io::Result<()> {
        let bit = self.world.random_below(8) as u8;
        if !lock(&file.inode).corrupt(pos, bit) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "position past the end"));
        }
        let value =
            (Fault::Latent as u64) << 56 ^ (host.0 as u64) << 40 ^ pos << 3 ^ u64::from(bit);
        self.world.trace.fold(Event::DiskFault, value);
        Ok(())
    }

    /// The bytes of the file at `path` that a power failure now would leave at least: the file
    /// reached through synced folder entries, and its synced contents (a test's view of what
    /// is durable, at no cost to the host).
    pub fn durable_contents(&self, host: Host, path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        let path: PathBuf = checked_path(path.as_ref())?;
        let file = lock(&self.disk_state(host).names).open_durable(&path)?;
        Ok(lock(&file.inode).durable().to_vec())
    }

    /// The names a power failure now would leave in the folder at `path`, sorted.
    pub fn durable_names(&self, host: Host, path: impl AsRef<Path>) -> io::Result<Vec<String>> {
        let path: PathBuf = checked_path(path.as_ref())?;
        lock(&self.disk_state(host).names).list_durable(&path)
    }
}
