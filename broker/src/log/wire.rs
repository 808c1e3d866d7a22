//! Bounds-checked reading and writing of the primitives inside Kafka's record formats:
//! big-endian integers and the zigzag varints records use.
//!
//! Everything read here came off the network or off a disk that may have torn a write, so no
//! read can panic: each returns `None` when the bytes run out and the caller turns that into the
//! error that names what was missing. Varints follow Kafka's `ByteUtils` exactly — at most 5
//! bytes for a varint and 10 for a varlong, high bits of the last byte dropped — so we accept and
//! refuse the same encodings the Java broker does.

use bytes::BufMut;

/// Most bytes a 32-bit varint may take.
const VARINT_BYTES_MAX: usize = 5;
/// Most bytes a 64-bit varlong may take.
const VARLONG_BYTES_MAX: usize = 10;

/// A cursor over untrusted bytes that never reads past their end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader positioned at the first of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Whether every byte has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next `n` bytes, or `None` (reading nothing) if fewer remain.
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(n)?;
        self.rest = tail;
        Some(head)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, tail) = self.rest.split_first_chunk::<N>()?;
        self.rest = tail;
        Some(*head)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|[b]| b)
    }

    pub(crate) fn i8(&mut self) -> Option<i8> {
        self.array().map(i8::from_be_bytes)
    }

    pub(crate) fn i16(&mut self) -> Option<i16> {
        self.array().map(i16::from_be_bytes)
    }

    pub(crate) fn i32(&mut self) -> Option<i32> {
        self.array().map(i32::from_be_bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    pub(crate) fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_be_bytes)
    }

    /// A little-endian `u32`, as the LZ4, zstd and gzip framings use.
    pub(crate) fn u32_le(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    /// A little-endian unsigned integer of `n` (at most 8) bytes, as zstd frame headers use.
    pub(crate) fn uint_le(&mut self, n: usize) -> Option<u64> {
        if n > 8 {
            return None;
        }
        let bytes = self.take(n)?;
        Some(bytes.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// An unsigned LEB128 integer of at most 5 bytes (snappy's length preamble).
    pub(crate) fn uvarint32(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..VARINT_BYTES_MAX {
            let b = self.u8()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// A zigzag varint (Kafka's `readVarint`).
    pub(crate) fn varint(&mut self) -> Option<i32> {
        let mut raw = 0u32;
        for i in 0..VARINT_BYTES_MAX {
            let b = self.u8()?;
            raw |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(((raw >> 1) as i32) ^ -((raw & 1) as i32));
            }
        }
        None
    }

    /// A zigzag varlong (Kafka's `readVarlong`).
    pub(crate) fn varlong(&mut self) -> Option<i64> {
        let mut raw = 0u64;
        for i in 0..VARLONG_BYTES_MAX {
            let b = self.u8()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        None
    }
}

/// Appends `value` as a zigzag varint.
pub(crate) fn put_varint(buf: &mut impl BufMut, value: i32) {
    put_unsigned(buf, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Appends `value` as a zigzag varlong.
pub(crate) fn put_varlong(buf: &mut impl BufMut, value: i64) {
    put_unsigned(buf, ((value << 1) ^ (value >> 63)) as u64);
}

fn put_unsigned(buf: &mut impl BufMut, mut raw: u64) {
    while raw >= 0x80 {
        buf.put_u8((raw as u8) | 0x80);
        raw >>= 7;
    }
    buf.put_u8(raw as u8);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn varint_round_trip(v: i32) -> Option<i32> {
        let mut buf = Vec::new();
        put_varint(&mut buf, v);
        let mut r = Reader::new(&buf);
        let got = r.varint();
        assert!(r.is_empty());
        got
    }

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            assert_eq!(varint_round_trip(v), Some(v));
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut buf = Vec::new();
            put_varlong(&mut buf, v);
            assert_eq!(Reader::new(&buf).varlong(), Some(v));
        }
    }

    #[test]
    fn overlong_and_truncated_varints_are_refused() {
        assert_eq!(Reader::new(&[0x80; 6]).varint(), None);
        assert_eq!(Reader::new(&[0x80; 11]).varlong(), None);
        assert_eq!(Reader::new(&[0x80, 0x80]).varint(), None);
        assert_eq!(Reader::new(&[]).varint(), None);
    }

    #[test]
    fn reads_past_the_end_return_none_and_consume_nothing() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.i32(), None);
        assert_eq!(r.take(4), None);
        assert_eq!(r.remaining(), 3);
        assert_eq!(r.uint_le(2), Some(0x0201));
    }
}
