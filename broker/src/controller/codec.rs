//! A small binary codec for the controller's own messages: big-endian integers, length-prefixed
//! strings and byte strings, and a reader that checks every length against the bytes present
//! before trusting it.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::model::TopicId;

/// Longest string or byte string a message may carry.
pub const FIELD_BYTES_MAX: usize = 16 << 20;
/// Most elements a list in a message may carry.
pub const LIST_LEN_MAX: usize = 1 << 20;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes ended inside a field.
    #[error("truncated: {0} needs more bytes than remain")]
    Truncated(&'static str),
    /// A length or count is larger than allowed.
    #[error("{0} is too long ({1})")]
    TooLong(&'static str, usize),
    /// A string is not UTF-8.
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    /// An unknown type tag or version.
    #[error("unknown {0} {1}")]
    Unknown(&'static str, u32),
    /// The checksum does not match.
    #[error("checksum mismatch")]
    Checksum,
    /// Bytes remain after the message.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Writes fields.
#[derive(Default)]
pub struct Writer(pub BytesMut);

impl Writer {
    /// A `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.put_u8(v);
        self
    }
    /// A `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.put_u16(v);
        self
    }
    /// An `i32`.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.put_i32(v);
        self
    }
    /// A `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.put_u32(v);
        self
    }
    /// An `i64`.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.put_i64(v);
        self
    }
    /// A `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.put_u64(v);
        self
    }
    /// A `u128`.
    pub fn u128(&mut self, v: u128) -> &mut Self {
        self.0.put_u128(v);
        self
    }
    /// A `bool`.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    /// A topic id.
    pub fn topic_id(&mut self, id: TopicId) -> &mut Self {
        self.0.put_slice(&id.0);
        self
    }
    /// A length-prefixed byte string.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        self.0.put_slice(v);
        self
    }
    /// A length-prefixed UTF-8 string.
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
    /// An optional string (a presence byte, then the string).
    pub fn opt_str(&mut self, v: Option<&str>) -> &mut Self {
        self.bool(v.is_some());
        if let Some(v) = v {
            self.str(v);
        }
        self
    }
    /// A list of `i32`.
    pub fn i32s(&mut self, v: &[i32]) -> &mut Self {
        self.u32(v.len() as u32);
        for x in v {
            self.i32(*x);
        }
        self
    }
    /// A list of string pairs.
    pub fn pairs<'a>(&mut self, v: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> &mut Self {
        self.u32(v.len() as u32);
        for (k, x) in v {
            self.str(k).str(x);
        }
        self
    }
    /// The bytes written.
    pub fn finish(self) -> Bytes {
        self.0.freeze()
    }
}

/// Reads fields, checking lengths first.
pub struct Reader(pub Bytes);

impl Reader {
    fn need(&self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        if self.0.remaining() < n { Err(DecodeError::Truncated(what)) } else { Ok(()) }
    }
    /// A `u8`.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        self.need(1, what)?;
        Ok(self.0.get_u8())
    }
    /// A `u16`.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        self.need(2, what)?;
        Ok(self.0.get_u16())
    }
    /// An `i32`.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        self.need(4, what)?;
        Ok(self.0.get_i32())
    }
    /// A `u32`.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.need(4, what)?;
        Ok(self.0.get_u32())
    }
    /// An `i64`.
    pub fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        self.need(8, what)?;
        Ok(self.0.get_i64())
    }
    /// A `u64`.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        self.need(8, what)?;
        Ok(self.0.get_u64())
    }
    /// A `u128`.
    pub fn u128(&mut self, what: &'static str) -> Result<u128, DecodeError> {
        self.need(16, what)?;
        Ok(self.0.get_u128())
    }
    /// A `bool` (any non-zero byte is true).
    pub fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        Ok(self.u8(what)? != 0)
    }
    /// A topic id.
    pub fn topic_id(&mut self, what: &'static str) -> Result<TopicId, DecodeError> {
        self.need(16, what)?;
        let mut id = [0u8; 16];
        self.0.copy_to_slice(&mut id);
        Ok(TopicId(id))
    }
    /// A length-prefixed byte string.
    pub fn bytes(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u32(what)? as usize;
        if len > FIELD_BYTES_MAX {
            return Err(DecodeError::TooLong(what, len));
        }
        self.need(len, what)?;
        Ok(self.0.split_to(len))
    }
    /// A length-prefixed UTF-8 string.
    pub fn str(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let bytes = self.bytes(what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NotUtf8(what))
    }
    /// An optional string.
    pub fn opt_str(&mut self, what: &'static str) -> Result<Option<String>, DecodeError> {
        if self.bool(what)? { self.str(what).map(Some) } else { Ok(None) }
    }
    fn count(&mut self, what: &'static str, min_each: usize) -> Result<usize, DecodeError> {
        let n = self.u32(what)? as usize;
        if n > LIST_LEN_MAX {
            return Err(DecodeError::TooLong(what, n));
        }
        self.need(n.saturating_mul(min_each), what)?;
        Ok(n)
    }
    /// A list of `i32`.
    pub fn i32s(&mut self, what: &'static str) -> Result<Vec<i32>, DecodeError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.i32(what)).collect()
    }
    /// A list of string pairs.
    pub fn pairs(&mut self, what: &'static str) -> Result<Vec<(String, String)>, DecodeError> {
        let n = self.count(what, 8)?;
        (0..n).map(|_| Ok((self.str(what)?, self.str(what)?))).collect()
    }
    /// A list of items read by `item`, each at least `min_each` bytes.
    pub fn list<T>(
        &mut self,
        what: &'static str,
        min_each: usize,
        mut item: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.count(what, min_each)?;
        (0..n).map(|_| item(self)).collect()
    }
    /// Fails if bytes remain.
    pub fn end(&self) -> Result<(), DecodeError> {
        match self.0.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

/// Appends a CRC-32C of everything written so far.
pub fn seal(w: Writer) -> Bytes {
    let mut out = w.0;
    let crc = crate::log::crc::crc32c(&out);
    out.put_u32(crc);
    out.freeze()
}

/// Checks and strips the trailing CRC-32C.
pub fn unseal(bytes: &Bytes) -> Result<Reader, DecodeError> {
    if bytes.len() < 4 {
        return Err(DecodeError::Truncated("checksum"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let expected = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crate::log::crc::crc32c(body) != expected {
        return Err(DecodeError::Checksum);
    }
    Ok(Reader(bytes.slice(..bytes.len() - 4)))
}
