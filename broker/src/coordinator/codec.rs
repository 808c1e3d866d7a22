//! Big-endian primitives in Kafka's classic (non-flexible) encoding: the format of the
//! `__consumer_offsets` keys and values, and of the consumer protocol's subscription.
//!
//! Strings carry an `i16` length (−1 for null), byte strings an `i32` length, arrays an `i32`
//! count. Every read checks the bytes present before trusting a length read off the data.

use bytes::{BufMut, Bytes, BytesMut};

/// Why bytes could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The data ended early.
    #[error("truncated at byte {0}")]
    Truncated(usize),
    /// A length or count was negative where null is not allowed.
    #[error("invalid length {0}")]
    InvalidLength(i64),
    /// A string was not UTF-8.
    #[error("string is not UTF-8")]
    NotUtf8,
    /// A key or value version this code does not write.
    #[error("unknown {what} version {version}")]
    UnknownVersion {
        /// "key" or a value's record type.
        what: &'static str,
        /// The version found.
        version: i16,
    },
    /// Bytes were left after the value.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Why a value could not be encoded: a string or byte string longer than its length prefix
/// can express. The coordinator refuses such inputs, so its own records always encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a field of {0} bytes is too long to encode")]
pub struct EncodeError(pub usize);

/// The longest string Kafka's encoding can carry.
pub const STRING_BYTES_MAX: usize = i16::MAX as usize;

/// Appends big-endian fields.
#[derive(Default)]
pub struct Writer {
    buf: BytesMut,
}

impl Writer {
    /// Appends an `i16`.
    pub fn i16(&mut self, v: i16) {
        self.buf.put_i16(v);
    }

    /// Appends an `i32`.
    pub fn i32(&mut self, v: i32) {
        self.buf.put_i32(v);
    }

    /// Appends an `i64`.
    pub fn i64(&mut self, v: i64) {
        self.buf.put_i64(v);
    }

    /// Appends a string with an `i16` length.
    pub fn str(&mut self, s: &str) -> Result<(), EncodeError> {
        let len = i16::try_from(s.len()).map_err(|_| EncodeError(s.len()))?;
        self.buf.put_i16(len);
        self.buf.put_slice(s.as_bytes());
        Ok(())
    }

    /// Appends a nullable string (−1 for `None`).
    pub fn opt_str(&mut self, s: Option<&str>) -> Result<(), EncodeError> {
        match s {
            Some(s) => self.str(s),
            None => {
                self.buf.put_i16(-1);
                Ok(())
            }
        }
    }

    /// Appends a byte string with an `i32` length.
    pub fn bytes(&mut self, b: &[u8]) -> Result<(), EncodeError> {
        let len = i32::try_from(b.len()).map_err(|_| EncodeError(b.len()))?;
        self.buf.put_i32(len);
        self.buf.put_slice(b);
        Ok(())
    }

    /// The bytes written.
    pub fn finish(self) -> Bytes {
        self.buf.freeze()
    }
}

/// Reads big-endian fields, checking bounds.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `data` from its start.
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated(self.pos))?;
        let slice = self.data.get(self.pos..end).ok_or(DecodeError::Truncated(self.pos))?;
        self.pos = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// Reads an `i16`.
    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    /// Reads an `i32`.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// Reads an `i64`.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// Reads a nullable string.
    pub fn opt_str(&mut self) -> Result<Option<String>, DecodeError> {
        let len = self.i16()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| DecodeError::InvalidLength(len.into()))?;
        let raw = self.take(len)?;
        let s = std::str::from_utf8(raw).map_err(|_| DecodeError::NotUtf8)?;
        Ok(Some(s.to_owned()))
    }

    /// Reads a non-null string.
    pub fn str(&mut self) -> Result<String, DecodeError> {
        self.opt_str()?.ok_or(DecodeError::InvalidLength(-1))
    }

    /// Reads a nullable byte string (`None` for length −1).
    pub fn opt_bytes(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let len = self.i32()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| DecodeError::InvalidLength(len.into()))?;
        Ok(Some(Bytes::copy_from_slice(self.take(len)?)))
    }

    /// Reads a non-null byte string.
    pub fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        self.opt_bytes()?.ok_or(DecodeError::InvalidLength(-1))
    }

    /// Reads an array count, refusing counts that could not fit in the bytes left (each
    /// element takes at least `element_bytes_min`), so a hostile count never reserves memory.
    pub fn count(&mut self, element_bytes_min: usize) -> Result<usize, DecodeError> {
        let n = self.i32()?;
        let n = usize::try_from(n).map_err(|_| DecodeError::InvalidLength(n.into()))?;
        if n.saturating_mul(element_bytes_min.max(1)) > self.remaining() {
            return Err(DecodeError::Truncated(self.pos));
        }
        Ok(n)
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Fails unless every byte was read.
    pub fn end(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_bounds() {
        let mut w = Writer::default();
        w.i16(3);
        w.str("héllo").unwrap();
        w.opt_str(None).unwrap();
        w.bytes(b"xyz").unwrap();
        w.i64(-5);
        let data = w.finish();
        let mut r = Reader::new(&data);
        assert_eq!(r.i16().unwrap(), 3);
        assert_eq!(r.str().unwrap(), "héllo");
        assert_eq!(r.opt_str().unwrap(), None);
        assert_eq!(&r.bytes().unwrap()[..], b"xyz");
        assert_eq!(r.i64().unwrap(), -5);
        r.end().unwrap();
        assert!(Reader::new(&data[..4]).str().is_err());
    }

    #[test]
    fn hostile_counts_and_lengths_are_refused() {
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 0]);
        assert!(r.count(2).is_err());
        let mut r = Reader::new(&[0xff, 0xfe]);
        assert_eq!(r.opt_str(), Err(DecodeError::InvalidLength(-2)));
        let long = "x".repeat(STRING_BYTES_MAX + 1);
        assert_eq!(Writer::default().str(&long), Err(EncodeError(STRING_BYTES_MAX + 1)));
    }
}
