//! The cleaner's offset map: for each key of the dirty section, the latest offset written with
//! it — in a fixed memory budget.
//!
//! Why a budget: the dirty section may hold any number of distinct keys, and the map must not
//! grow with it. Kafka's `SkimpyOffsetMap` keeps a 16-byte MD5 hash per key in a preallocated
//! buffer and accepts that two keys may collide (a collision drops a record nobody superseded).
//! We keep the key bytes themselves, so no record is ever judged by another key's offset, and
//! charge every entry its key's length plus [`OFFSET_MAP_ENTRY_OVERHEAD_BYTES`]. When the next
//! new key would not fit, the map is full: the pass cleans only up to that record and leaves the
//! rest dirty for the next pass. The bound is never exceeded, not even by one key.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::model::Offset;

/// Bytes charged per map entry on top of its key: the `Bytes` handle and offset stored in the
/// tree node (40), the tree's per-entry share of node headers and the allocator's header on the
/// copied key (24), rounded up.
pub const OFFSET_MAP_ENTRY_OVERHEAD_BYTES: usize = 64;

/// The map is full: the key offered is new and does not fit the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapFull;

/// Key → latest offset, in at most `bytes_max` bytes (as charged by [`entry_bytes`]).
#[derive(Debug)]
pub struct OffsetMap {
    entries: BTreeMap<Bytes, Offset>,
    bytes: usize,
    bytes_max: usize,
}

/// What one entry with a key of `key_len` bytes is charged.
pub fn entry_bytes(key_len: usize) -> usize {
    key_len.saturating_add(OFFSET_MAP_ENTRY_OVERHEAD_BYTES)
}

impl OffsetMap {
    /// An empty map that will hold at most `bytes_max` bytes of entries.
    pub fn new(bytes_max: usize) -> OffsetMap {
        OffsetMap { entries: BTreeMap::new(), bytes: 0, bytes_max }
    }

    /// Records that `key` was written at `offset`. A key already present only has its offset
    /// raised (it costs nothing more); a new key that does not fit leaves the map unchanged and
    /// returns [`MapFull`]. The key is copied, so the map never pins a segment read buffer.
    pub fn insert(&mut self, key: &[u8], offset: Offset) -> Result<(), MapFull> {
        if let Some(latest) = self.entries.get_mut(key) {
            *latest = (*latest).max(offset);
            return Ok(());
        }
        let total = self
            .bytes
            .checked_add(entry_bytes(key.len()))
            .filter(|&total| total <= self.bytes_max)
            .ok_or(MapFull)?;
        self.entries.insert(Bytes::copy_from_slice(key), offset);
        self.bytes = total;
        Ok(())
    }

    /// The latest offset recorded for `key`.
    pub fn latest(&self, key: &[u8]) -> Option<Offset> {
        self.entries.get(key).copied()
    }

    /// Distinct keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes charged so far (never above the budget).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_never_exceeded_and_known_keys_still_update() {
        let budget = entry_bytes(3) * 2 + entry_bytes(1) - 1;
        let mut map = OffsetMap::new(budget);
        assert_eq!(map.insert(b"aaa", Offset(1)), Ok(()));
        assert_eq!(map.insert(b"bbb", Offset(2)), Ok(()));
        assert_eq!(map.insert(b"c", Offset(3)), Err(MapFull), "one byte short");
        assert_eq!(map.len(), 2);
        assert!(map.bytes() <= budget);
        assert_eq!(map.insert(b"aaa", Offset(9)), Ok(()), "a known key costs nothing");
        assert_eq!(map.latest(b"aaa"), Some(Offset(9)));
        assert_eq!(map.insert(b"aaa", Offset(4)), Ok(()));
        assert_eq!(map.latest(b"aaa"), Some(Offset(9)), "offsets only rise");
        assert_eq!(map.latest(b"c"), None, "a refused key is not recorded");
        assert_eq!(map.bytes(), entry_bytes(3) * 2);
    }

    #[test]
    fn a_budget_smaller_than_one_entry_holds_nothing() {
        let mut map = OffsetMap::new(entry_bytes(4) - 1);
        assert_eq!(map.insert(b"four", Offset(0)), Err(MapFull));
        assert!(map.is_empty());
        assert_eq!(map.bytes(), 0);
        let mut exact = OffsetMap::new(entry_bytes(4));
        assert_eq!(exact.insert(b"four", Offset(0)), Ok(()));
        assert_eq!(exact.bytes(), entry_bytes(4));
    }

    #[test]
    fn keys_are_compared_by_bytes_not_by_prefix() {
        let mut map = OffsetMap::new(1 << 20);
        map.insert(b"k", Offset(1)).unwrap_or(());
        map.insert(b"k1", Offset(2)).unwrap_or(());
        map.insert(b"", Offset(3)).unwrap_or(());
        assert_eq!(map.latest(b"k"), Some(Offset(1)));
        assert_eq!(map.latest(b"k1"), Some(Offset(2)));
        assert_eq!(map.latest(b""), Some(Offset(3)), "an empty key is a key");
        assert_eq!(map.len(), 3);
    }
}
