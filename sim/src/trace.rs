//! The running trace hash: every scheduling decision and I/O result of a run folded into one
//! `u64`. Two runs of the same seed on the same binary must end with the same hash; the first
//! divergence between two runs shows up as different hashes, which is how nondeterminism is
//! caught.

use std::sync::atomic::{AtomicU64, Ordering};

/// What kind of event a fold records, so that equal values of different events never cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Event {
    /// A task was polled (value: task serial).
    Poll = 1,
    /// Time advanced (value: new time in nanoseconds).
    Advance = 2,
    /// A task was spawned (value: task serial).
    Spawn = 3,
    /// A task finished or was dropped (value: task serial).
    TaskEnd = 4,
    /// Bytes were written to a connection (value: length).
    NetSend = 10,
    /// Bytes were read from a connection (value: length).
    NetRecv = 11,
    /// A connection was opened, refused, reset or closed (value: detail).
    NetConn = 12,
    /// A network fault changed (value: detail).
    NetFault = 13,
    /// A disk operation completed (value: detail).
    Disk = 20,
    /// A disk fault was injected (value: detail).
    DiskFault = 21,
    /// A node was started, killed, power-failed, paused or resumed (value: detail).
    Node = 30,
    /// A clock was skewed (value: detail).
    Clock = 31,
    /// A random number was drawn by a node (value: the number).
    Entropy = 40,
    /// Application-defined (workloads and checkers may fold their own observations).
    User = 50,
}

/// A 64-bit order-sensitive running hash.
#[derive(Debug, Default)]
pub struct TraceHash(AtomicU64);

impl TraceHash {
    /// Folds one event into the hash.
    pub fn fold(&self, event: Event, value: u64) {
        let h = self.0.load(Ordering::Relaxed);
        self.0.store(mix(h ^ mix((event as u64) << 56 ^ value)), Ordering::Relaxed);
    }

    /// The hash so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A strong 64-bit finaliser (splitmix64's), so that nearby inputs give unrelated outputs.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_matters() {
        let (a, b) = (TraceHash::default(), TraceHash::default());
        a.fold(Event::Poll, 1);
        a.fold(Event::Poll, 2);
        b.fold(Event::Poll, 2);
        b.fold(Event::Poll, 1);
        assert_ne!(a.get(), b.get());
        let c = TraceHash::default();
        c.fold(Event::NetSend, 1);
        c.fold(Event::NetSend, 2);
        assert_ne!(a.get(), c.get(), "the event kind is part of the hash");
    }
}
