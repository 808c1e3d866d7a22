//! One file's contents as a power failure sees them: the bytes on the platter (`durable`), the
//! bytes every reader sees (`live`, durable plus the page cache), and the ordered operations
//! that turn one into the other.
//!
//! Keeping the pending operations, rather than a second copy of the file, is what lets a power
//! failure be realistic: the device received some of them whole, maybe the next one in part (a
//! torn write, cut where a sector ends) and none after that. It also keeps `sync_data` cheap: it
//! replays the operations since the last sync instead of copying the file.

use std::io;

use bytes::Bytes;

/// The unit a device writes atomically: a torn write keeps whole sectors only.
pub const SECTOR_BYTES: u64 = 512;

/// Largest file the simulation accepts (it keeps two copies in memory). Beyond it a write fails
/// with `FileTooLarge` instead of exhausting the host running the simulation.
pub const FILE_BYTES_MAX: u64 = 1 << 34;

/// A change to a file not yet made durable.
#[derive(Clone, Debug)]
enum PendingOp {
    Write { pos: u64, data: Bytes },
    Truncate { len: u64 },
}

/// What a power failure left of one file's pending operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CrashFate {
    /// Operations that were pending.
    pub(crate) pending: u64,
    /// Operations that survived whole, from the first.
    pub(crate) kept: u64,
    /// Bytes of the next operation (a write) that survived as a prefix of whole sectors.
    pub(crate) torn_bytes: u64,
}

impl CrashFate {
    /// A compact value for the trace.
    pub(crate) fn trace_value(self, file_id: u64) -> u64 {
        file_id << 48 ^ self.pending << 32 ^ self.kept << 16 ^ self.torn_bytes
    }
}

/// How far a sync reaches: the count of operations issued to the file when it began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SyncMark(u64);

/// The contents of one file.
#[derive(Default)]
pub(crate) struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<PendingOp>,
    /// Operations ever issued to this file (applied, pending or lost): `pending` holds the last
    /// `pending.len()` of them.
    issued: u64,
    /// Where the next append goes if it is later than the live end: appends reserve their range
    /// when called, so that they land in call order whatever their latencies.
    append_next: u64,
}

/// Sizes only: a file's bytes would drown any report that prints a disk.
impl std::fmt::Debug for Inode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inode")
            .field("live_len", &self.live.len())
            .field("durable_len", &self.durable.len())
            .field("pending_ops", &self.pending.len())
            .finish()
    }
}

/// `pos` as an index into a file's bytes, refusing sizes the simulation will not hold.
pub(crate) fn checked_end(pos: u64, len: u64) -> io::Result<u64> {
    match pos.checked_add(len) {
        Some(end) if end <= FILE_BYTES_MAX => Ok(end),
        _ => Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("a file may not exceed {FILE_BYTES_MAX} bytes in simulation"),
        )),
    }
}

/// An index into bytes known to be at most [`FILE_BYTES_MAX`] long.
fn index(pos: u64) -> usize {
    usize::try_from(pos).expect("positions are bounded by FILE_BYTES_MAX")
}

fn apply(bytes: &mut Vec<u8>, op: &PendingOp) {
    match op {
        PendingOp::Write { pos, data } => write_bytes(bytes, *pos, data),
        PendingOp::Truncate { len } => bytes.resize(index(*len), 0),
    }
}

fn write_bytes(bytes: &mut Vec<u8>, pos: u64, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let start = index(pos);
    let end = start + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(data);
}

/// How many bytes of a write at `pos` survive if `sectors` of the sectors it touches reached the
/// device. Cuts fall on absolute sector boundaries, so a write starting mid-sector keeps its
/// first partial sector or nothing.
fn sector_prefix(pos: u64, len: u64, sectors: u64) -> u64 {
    if sectors == 0 {
        return 0;
    }
    let first_boundary = (pos / SECTOR_BYTES + 1) * SECTOR_BYTES;
    (first_boundary + (sectors - 1) * SECTOR_BYTES - pos).min(len)
}

/// The number of ways a write at `pos` of `len` bytes can be cut short: nothing, or up to each
/// sector boundary strictly inside it.
fn tear_choices(pos: u64, len: u64) -> u64 {
    let first_boundary = (pos / SECTOR_BYTES + 1) * SECTOR_BYTES;
    let end = pos + len;
    let inner_boundaries =
        if first_boundary >= end { 0 } else { (end - 1 - first_boundary) / SECTOR_BYTES + 1 };
    inner_boundaries + 1
}

impl Inode {
    /// The live length.
    pub(crate) fn len(&self) -> u64 {
        self.live.len() as u64
    }

    /// The durable length (for tests).
    #[cfg(test)]
    fn durable_len(&self) -> u64 {
        self.durable.len() as u64
    }

    /// The bytes on the device: what a power failure leaves at least.
    pub(crate) fn durable(&self) -> &[u8] {
        &self.durable
    }

    /// Up to `len` live bytes from `pos`; fewer only at the end of the file.
    pub(crate) fn read(&self, pos: u64, len: usize) -> Vec<u8> {
        let size = self.len();
        if pos >= size {
            return Vec::new();
        }
        let end = size.min(pos.saturating_add(len as u64));
        self.live[index(pos)..index(end)].to_vec()
    }

    /// How many bytes the live file would grow if it ended at least at `end`.
    pub(crate) fn growth_to(&self, end: u64) -> u64 {
        end.saturating_sub(self.len())
    }

    /// Writes `data` at `pos` in the page cache.
    pub(crate) fn write(&mut self, pos: u64, data: Bytes) {
        if data.is_empty() {
            return;
        }
        write_bytes(&mut self.live, pos, &data);
        self.push(PendingOp::Write { pos, data });
    }

    /// Sets the live length, in the page cache.
    pub(crate) fn truncate(&mut self, len: u64) {
        self.live.resize(index(len), 0);
        self.append_next = len;
        self.push(PendingOp::Truncate { len });
    }

    fn push(&mut self, op: PendingOp) {
        self.pending.push(op);
        self.issued += 1;
    }

    /// Where a sync starting now must reach: every operation issued so far.
    pub(crate) fn sync_mark(&self) -> SyncMark {
        SyncMark(self.issued)
    }

    /// Reserves `len` bytes at the end of the file for an append and returns their position.
    pub(crate) fn reserve_append(&mut self, len: u64) -> u64 {
        let pos = self.append_next.max(self.len());
        self.append_next = pos.saturating_add(len);
        pos
    }

    /// Gives back a reservation whose append failed, if no later append reserved after it.
    pub(crate) fn release_append(&mut self, pos: u64, len: u64) {
        if self.append_next == pos.saturating_add(len) {
            self.append_next = pos;
        }
    }

    /// `fdatasync` ending: the operations issued before it began (`mark`) reach the device, in
    /// order. Those issued while it was under way stay pending — a real sync may or may not
    /// carry them, so nothing may count on it (a power failure keeps a random prefix of them).
    pub(crate) fn sync(&mut self, mark: SyncMark) {
        let first_pending = self.issued - self.pending.len() as u64;
        let covered = mark.0.saturating_sub(first_pending).min(self.pending.len() as u64);
        for op in self.pending.drain(..index(covered)) {
            apply(&mut self.durable, &op);
        }
    }

    /// A failed `fdatasync` (fsyncgate): the kernel dropped the dirty pages' write-back. The
    /// data stays readable from the page cache, but no later sync will write it.
    pub(crate) fn drop_pending(&mut self) {
        self.pending.clear();
    }

    /// The page cache is lost. `draw(n)` is a uniform number in `0..n`. Some pending operations
    /// survive whole, the next may survive as a sector prefix, the rest are lost; the live bytes
    /// become what the device holds.
    pub(crate) fn power_fail(&mut self, draw: &mut dyn FnMut(u64) -> u64) -> CrashFate {
        let pending = std::mem::take(&mut self.pending);
        let count = pending.len() as u64;
        let kept = draw(count + 1);
        let mut torn_bytes = 0;
        for (i, op) in pending.iter().enumerate() {
            let i = i as u64;
            if i < kept {
                apply(&mut self.durable, op);
                continue;
            }
            if let PendingOp::Write { pos, data } = op {
                let len = data.len() as u64;
                torn_bytes = sector_prefix(*pos, len, draw(tear_choices(*pos, len)));
                write_bytes(&mut self.durable, *pos, &data[..index(torn_bytes)]);
            }
            break;
        }
        self.live.clone_from(&self.durable);
        self.append_next = 0;
        CrashFate { pending: count, kept, torn_bytes }
    }

    /// Flips `bit` of the byte at `pos` in both the live and the durable bytes (a latent sector
    /// error the device will return from now on). False if `pos` is past both ends.
    pub(crate) fn corrupt(&mut self, pos: u64, bit: u8) -> bool {
        let mask = 1u8 << (bit % 8);
        let mut hit = false;
        for bytes in [&mut self.live, &mut self.durable] {
            if let Some(byte) = usize::try_from(pos).ok().and_then(|i| bytes.get_mut(i)) {
                *byte ^= mask;
                hit = true;
            }
        }
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(len: usize, byte: u8) -> Bytes {
        Bytes::from(vec![byte; len])
    }

    #[test]
    fn sync_replays_pending_in_order() {
        let mut inode = Inode::default();
        inode.write(0, filled(10, 1));
        inode.truncate(4);
        inode.write(6, filled(2, 2));
        assert_eq!(inode.read(0, 100), vec![1, 1, 1, 1, 0, 0, 2, 2]);
        assert_eq!(inode.durable_len(), 0);
        inode.sync(inode.sync_mark());
        assert_eq!(inode.durable, inode.live);
        assert!(inode.pending.is_empty());
    }

    #[test]
    fn sync_carries_only_what_was_issued_before_it_began() {
        let mut inode = Inode::default();
        inode.write(0, filled(4, 1));
        let mark = inode.sync_mark();
        // Written while the sync is under way.
        inode.write(4, filled(4, 2));
        inode.sync(mark);
        assert_eq!(inode.durable, vec![1, 1, 1, 1]);
        assert_eq!(inode.pending.len(), 1);
        // A power failure may keep the later write or not; a power failure that keeps none of
        // the pending operations leaves exactly what the sync carried.
        inode.power_fail(&mut |_| 0);
        assert_eq!(inode.read(0, 100), vec![1, 1, 1, 1]);
        // A mark taken before a power failure covers nothing issued after it.
        let stale = inode.sync_mark();
        inode.write(0, filled(2, 3));
        inode.sync(stale);
        assert_eq!(inode.durable, vec![1, 1, 1, 1]);
        inode.sync(inode.sync_mark());
        assert_eq!(inode.durable, vec![3, 3, 1, 1]);
    }

    #[test]
    fn read_stops_at_the_end() {
        let mut inode = Inode::default();
        inode.write(0, filled(5, 7));
        assert_eq!(inode.read(3, 10), vec![7, 7]);
        assert!(inode.read(5, 10).is_empty());
        assert!(inode.read(50, 10).is_empty());
    }

    #[test]
    fn dropped_pending_stays_live_but_never_becomes_durable() {
        let mut inode = Inode::default();
        inode.write(0, filled(4, 1));
        inode.drop_pending();
        inode.write(4, filled(4, 2));
        inode.sync(inode.sync_mark());
        assert_eq!(inode.live, vec![1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(inode.durable, vec![0, 0, 0, 0, 2, 2, 2, 2]);
    }

    #[test]
    fn tear_choices_count_inner_boundaries() {
        assert_eq!(tear_choices(0, 512), 1);
        assert_eq!(tear_choices(0, 513), 2);
        assert_eq!(tear_choices(0, 2048), 4);
        assert_eq!(tear_choices(100, 412), 1);
        assert_eq!(tear_choices(100, 413), 2);
        assert_eq!(sector_prefix(100, 2000, 1), 412);
        assert_eq!(sector_prefix(100, 2000, 2), 924);
        assert_eq!(sector_prefix(0, 2048, 3), 1536);
    }

    #[test]
    fn power_fail_keeps_ops_then_a_sector_prefix() {
        let mut inode = Inode::default();
        inode.write(0, filled(100, 1));
        inode.write(100, filled(2000, 2));
        inode.write(0, filled(10, 3));
        // Keep one op, then two sectors' worth of the second (cut at 1024).
        let mut draws = vec![1, 2].into_iter();
        let fate = inode.power_fail(&mut |_| draws.next().unwrap_or(0));
        assert_eq!(fate, CrashFate { pending: 3, kept: 1, torn_bytes: 924 });
        assert_eq!(inode.len(), 1024);
        assert!(inode.live[..100].iter().all(|&b| b == 1));
        assert!(inode.live[100..].iter().all(|&b| b == 2));
        assert_eq!(inode.live, inode.durable);
    }

    #[test]
    fn append_reservations_are_in_call_order() {
        let mut inode = Inode::default();
        let a = inode.reserve_append(10);
        let b = inode.reserve_append(5);
        assert_eq!((a, b), (0, 10));
        inode.release_append(b, 5);
        assert_eq!(inode.reserve_append(1), 10);
        inode.write(b, filled(5, 2));
        inode.write(a, filled(10, 1));
        assert_eq!(inode.len(), 15);
    }

    #[test]
    fn corrupt_flips_live_and_durable() {
        let mut inode = Inode::default();
        inode.write(0, filled(4, 0));
        inode.sync(inode.sync_mark());
        assert!(inode.corrupt(2, 3));
        assert_eq!(inode.live[2], 8);
        assert_eq!(inode.durable[2], 8);
        assert!(!inode.corrupt(4, 0));
    }
}
