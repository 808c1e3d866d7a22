//! Sparse indexes of a segment, in Kafka's file formats so operators recognise them:
//! - `.index`: 8-byte entries (offset relative to the segment base `u32`, byte position `u32`),
//!   one per `index.interval.bytes` of log;
//! - `.timeindex`: 12-byte entries (timestamp `i64`, relative offset `u32`): the segment's
//!   largest timestamp so far and the batch that first reached it, added with an offset entry
//!   when it is newer than the last one, and once more when the segment is sealed.
//!
//! The active segment keeps its entries in memory and writes them out when it is sealed (at
//! roll or shutdown). Sealed segments are searched in their files, so memory does not grow with
//! the length of the log. Index files are hints: recovery checks them against the log and
//! rebuilds any that are missing or inconsistent. They have no checksum, so what is kept from
//! them (the active segment's entries, a sealed segment's largest timestamp) and time entries a
//! lookup believes are read until several reads agree (`segment::read_agreed`); an offset
//! entry a read follows is checked against the batch it names instead.

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes of one `.index` entry.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Bytes of one `.timeindex` entry.
pub const TIME_ENTRY_BYTES: usize = 12;

/// One `.index` entry: the batch starting at `position` holds offsets from `base + relative`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    /// Offset relative to the segment's base offset.
    pub relative: u32,
    /// Byte position of the batch in the `.log` file.
    pub position: u32,
}

/// One `.timeindex` entry: records at or after `base + relative` have timestamps ≥ `timestamp`'s
/// predecessors (Kafka's semantics: the first offset whose batch raised the max timestamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    /// The segment's largest timestamp so far, in ms.
    pub timestamp: i64,
    /// Offset (relative) of the batch that set it.
    pub relative: u32,
}

/// Encodes offset entries in file format.
pub fn encode_offsets(entries: &[OffsetEntry]) -> Bytes {
    let mut out = BytesMut::with_capacity(entries.len() * OFFSET_ENTRY_BYTES);
    for e in entries {
        out.put_u32(e.relative);
        out.put_u32(e.position);
    }
    out.freeze()
}

/// Encodes time entries in file format.
pub fn encode_times(entries: &[TimeEntry]) -> Bytes {
    let mut out = BytesMut::with_capacity(entries.len() * TIME_ENTRY_BYTES);
    for e in entries {
        out.put_i64(e.timestamp);
        out.put_u32(e.relative);
    }
    out.freeze()
}

/// Decodes one offset entry from exactly [`OFFSET_ENTRY_BYTES`] bytes.
pub fn decode_offset(bytes: &[u8]) -> Option<OffsetEntry> {
    let raw: [u8; OFFSET_ENTRY_BYTES] = bytes.get(..OFFSET_ENTRY_BYTES)?.try_into().ok()?;
    let (rel, pos) = raw.split_at(4);
    Some(OffsetEntry {
        relative: u32::from_be_bytes(rel.try_into().ok()?),
        position: u32::from_be_bytes(pos.try_into().ok()?),
    })
}

/// Decodes one time entry from exactly [`TIME_ENTRY_BYTES`] bytes.
pub fn decode_time(bytes: &[u8]) -> Option<TimeEntry> {
    let raw: [u8; TIME_ENTRY_BYTES] = bytes.get(..TIME_ENTRY_BYTES)?.try_into().ok()?;
    let (ts, rel) = raw.split_at(8);
    Some(TimeEntry {
        timestamp: i64::from_be_bytes(ts.try_into().ok()?),
        relative: u32::from_be_bytes(rel.try_into().ok()?),
    })
}

/// Decodes a whole `.index` file, or `None` if it is not a plausible index for a log of
/// `log_bytes` bytes: a partial entry, relative offsets or positions that do not strictly
/// increase, or a position past the log's end. A `None` means: rebuild from the log.
pub fn decode_offsets_checked(bytes: &[u8], log_bytes: u64) -> Option<Vec<OffsetEntry>> {
    if !bytes.len().is_multiple_of(OFFSET_ENTRY_BYTES) {
        return None;
    }
    let entries: Vec<OffsetEntry> =
        bytes.chunks_exact(OFFSET_ENTRY_BYTES).filter_map(decode_offset).collect();
    let increasing =
        entries.windows(2).all(|w| w[0].relative < w[1].relative && w[0].position < w[1].position);
    let inside = entries.last().is_none_or(|e| u64::from(e.position) < log_bytes);
    (increasing && inside).then_some(entries)
}

/// Decodes a whole `.timeindex` file, or `None` if implausible (partial entry, timestamps or
/// offsets going backwards).
pub fn decode_times_checked(bytes: &[u8]) -> Option<Vec<TimeEntry>> {
    if !bytes.len().is_multiple_of(TIME_ENTRY_BYTES) {
        return None;
    }
    let entries: Vec<TimeEntry> =
        bytes.chunks_exact(TIME_ENTRY_BYTES).filter_map(decode_time).collect();
    let increasing = entries
        .windows(2)
        .all(|w| w[0].timestamp < w[1].timestamp && w[0].relative <= w[1].relative);
    increasing.then_some(entries)
}

/// The last entry at or before `relative` (binary search), if any.
pub fn floor_offset(entries: &[OffsetEntry], relative: u32) -> Option<OffsetEntry> {
    let after = entries.partition_point(|e| e.relative <= relative);
    after.checked_sub(1).and_then(|i| entries.get(i)).copied()
}

/// The last entry whose timestamp is older than `timestamp`, if any: where a scan for the first
/// record at or after `timestamp` may start (see `segment::sealed_time_floor`).
pub fn floor_time(entries: &[TimeEntry], timestamp: i64) -> Option<TimeEntry> {
    let after = entries.partition_point(|e| e.timestamp < timestamp);
    after.checked_sub(1).and_then(|i| entries.get(i)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(pairs: &[(u32, u32)]) -> Vec<OffsetEntry> {
        pairs.iter().map(|&(relative, position)| OffsetEntry { relative, position }).collect()
    }

    #[test]
    fn round_trip_and_lookup() {
        let entries = offsets(&[(0, 0), (10, 4096), (25, 8200)]);
        let bytes = encode_offsets(&entries);
        assert_eq!(bytes.len(), 24);
        assert_eq!(decode_offsets_checked(&bytes, 10_000), Some(entries.clone()));
        assert_eq!(floor_offset(&entries, 9), Some(entries[0]));
        assert_eq!(floor_offset(&entries, 10), Some(entries[1]));
        assert_eq!(floor_offset(&entries, 1_000), Some(entries[2]));
        assert_eq!(floor_offset(&[], 3), None);
        let times =
            vec![TimeEntry { timestamp: 5, relative: 0 }, TimeEntry { timestamp: 9, relative: 4 }];
        assert_eq!(decode_times_checked(&encode_times(&times)), Some(times.clone()));
        assert_eq!(floor_time(&times, 5), None);
        assert_eq!(floor_time(&times, 6), Some(times[0]));
        assert_eq!(floor_time(&times, 9), Some(times[0]));
        assert_eq!(floor_time(&times, 10), Some(times[1]));
    }

    #[test]
    fn implausible_indexes_are_rejected() {
        let bytes = encode_offsets(&offsets(&[(0, 0), (10, 4096)]));
        assert_eq!(decode_offsets_checked(&bytes[..12], 10_000), None, "partial entry");
        assert_eq!(decode_offsets_checked(&bytes, 4096), None, "position past the log's end");
        let backwards = encode_offsets(&offsets(&[(10, 0), (5, 4096)]));
        assert_eq!(decode_offsets_checked(&backwards, 10_000), None);
        let times = encode_times(&[
            TimeEntry { timestamp: 9, relative: 0 },
            TimeEntry { timestamp: 5, relative: 1 },
        ]);
        assert_eq!(decode_times_checked(&times), None);
    }
}
