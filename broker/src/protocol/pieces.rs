//! A response frame in pieces. The encoder writes into a buffer as usual, but the large byte
//! fields it was told about (a fetch's record batches, as read from the log) are kept as
//! references to the bytes they already are instead of being copied into the frame: the
//! socket write then gathers the pieces (`writev`), so a fetch's records are copied once, by
//! the kernel, on their way out.
//!
//! A field is recognised by its address: the encoder hands `put_slice` the very memory of the
//! field's `Bytes`, so a slice with the same start and length *is* that field, byte for byte.
//! Anything else is copied, as into a plain buffer.
#![allow(unsafe_code)]

use std::io::IoSlice;
use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

use super::frame::FRAME_SIZE_BYTES;

/// Fields shorter than this are copied: each reference costs a piece in the gathered write.
pub const SHARE_MIN_BYTES: usize = 4096;

/// An encoder's output buffer that keeps known large fields by reference.
pub struct Pieces {
    /// The frame's size prefix, filled in by [`Pieces::finish`].
    size: BytesMut,
    /// Finished pieces, in order.
    done: Vec<Bytes>,
    /// Bytes in `done`.
    done_len: usize,
    /// Where writes go now.
    head: BytesMut,
    /// Fields that may be kept by reference, in the order the encoder is expected to meet them.
    shared: Vec<Bytes>,
    /// The next of `shared` to look for first.
    next: usize,
}

impl Pieces {
    /// A buffer for a frame of about `capacity` bytes (size prefix included) whose fields in
    /// `shared` are to be referenced rather than copied.
    pub fn new(capacity: usize, shared: Vec<Bytes>) -> Pieces {
        let copied = capacity.saturating_sub(shared.iter().map(Bytes::len).sum());
        let mut head = BytesMut::with_capacity(copied.max(FRAME_SIZE_BYTES));
        head.put_u32(0);
        let size = head.split_to(FRAME_SIZE_BYTES);
        Pieces { size, done: Vec::new(), done_len: 0, head, shared, next: 0 }
    }

    /// The one of `shared` that `src` is, if any.
    fn shared_as(&mut self, src: &[u8]) -> Option<Bytes> {
        let same = |b: &Bytes| b.as_ptr() == src.as_ptr() && b.len() == src.len();
        let at =
            (self.next..self.shared.len()).chain(0..self.next).find(|&i| same(&self.shared[i]))?;
        self.next = at + 1;
        Some(self.shared[at].clone())
    }

    /// Turns everything into one buffer again, for an encoder that goes back into what it has
    /// written (which only record encoding does; responses never do).
    fn flatten(&mut self) {
        if self.done.is_empty() {
            return;
        }
        let mut all = BytesMut::with_capacity(self.done_len + self.head.len());
        for piece in self.done.drain(..) {
            all.extend_from_slice(&piece);
        }
        all.extend_from_slice(&self.head);
        self.head = all;
        self.done_len = 0;
    }

    /// The frame: its size prefix, then every piece. `None` if the body exceeds what a frame
    /// can declare.
    pub fn finish(mut self) -> Option<Frame> {
        // Clients read the size as a signed 32-bit number.
        let body = i32::try_from(self.done_len + self.head.len()).ok()?.unsigned_abs();
        self.size.copy_from_slice(&body.to_be_bytes());
        let mut pieces = Vec::with_capacity(self.done.len() + 2);
        if self.done.is_empty() {
            // Prefix and body are still one allocation, side by side: rejoin them.
            self.size.unsplit(self.head);
            pieces.push(self.size.freeze());
        } else {
            pieces.push(self.size.freeze());
            pieces.append(&mut self.done);
            if !self.head.is_empty() {
                pieces.push(self.head.freeze());
            }
        }
        Some(Frame { pieces, at: 0 })
    }
}

// SAFETY: every method hands its work to `head`, a `BytesMut`, which upholds `BufMut`'s
// contract; `put_slice` only adds whole pieces beside it.
unsafe impl BufMut for Pieces {
    fn remaining_mut(&self) -> usize {
        self.head.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `head`'s `chunk_mut`, as the contract
        // asks of it for ours.
        unsafe { self.head.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.head.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= SHARE_MIN_BYTES
            && let Some(field) = self.shared_as(src)
        {
            if !self.head.is_empty() {
                let written = self.head.split().freeze();
                self.done_len += written.len();
                self.done.push(written);
            }
            self.done_len += field.len();
            self.done.push(field);
            return;
        }
        self.head.extend_from_slice(src);
    }
}

impl ByteBufMut for Pieces {
    fn offset(&self) -> usize {
        self.done_len + self.head.len()
    }

    fn seek(&mut self, offset: usize) {
        if offset < self.done_len {
            self.flatten();
        }
        self.head.resize(offset - self.done_len, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        if r.start < self.done_len {
            self.flatten();
        }
        let base = self.done_len;
        &mut self.head[r.start - base..r.end - base]
    }
}

/// A framed response, ready to be written with one gathered write per socket call.
#[derive(Clone, Debug)]
pub struct Frame {
    pieces: Vec<Bytes>,
    /// The first piece not yet wholly consumed.
    at: usize,
}

impl Frame {
    /// A frame that is already one buffer (size prefix included).
    pub fn whole(bytes: Bytes) -> Frame {
        Frame { pieces: vec![bytes], at: 0 }
    }

    /// How many pieces it was made of.
    #[cfg(test)]
    pub fn piece_count(&self) -> usize {
        self.pieces.len()
    }

    /// The pieces not yet consumed.
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces[self.at..]
    }

    /// All of it in one buffer (a copy), for tests.
    #[cfg(test)]
    pub fn to_bytes(&self) -> Bytes {
        let mut all = BytesMut::with_capacity(self.remaining());
        for piece in self.pieces() {
            all.extend_from_slice(piece);
        }
        all.freeze()
    }
}

impl Buf for Frame {
    fn remaining(&self) -> usize {
        self.pieces().iter().map(Bytes::len).sum()
    }

    fn chunk(&self) -> &[u8] {
        self.pieces().iter().find(|p| !p.is_empty()).map_or(&[], |p| &p[..])
    }

    fn advance(&mut self, mut cnt: usize) {
        debug_assert!(cnt <= self.remaining(), "advanced past the end of a frame");
        while cnt > 0 {
            let Some(piece) = self.pieces.get_mut(self.at) else { return };
            let n = cnt.min(piece.len());
            piece.advance(n);
            cnt -= n;
            if piece.is_empty() {
                self.at += 1;
            }
        }
        while self.pieces.get(self.at).is_some_and(Bytes::is_empty) {
            self.at += 1;
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for piece in self.pieces().iter().filter(|p| !p.is_empty()) {
            let Some(slot) = dst.get_mut(n) else { break };
            *slot = IoSlice::new(piece);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(len: usize, seed: u8) -> Bytes {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect::<Vec<_>>().into()
    }

    #[test]
    fn a_known_field_is_referenced_and_the_rest_copied() {
        let big = field(SHARE_MIN_BYTES * 2, 7);
        let unknown = field(SHARE_MIN_BYTES, 9);
        let mut pieces = Pieces::new(64, vec![big.clone()]);
        pieces.put_u16(0xabcd);
        pieces.put_slice(&big);
        pieces.put_slice(&unknown);
        pieces.put_u8(1);
        let frame = pieces.finish().expect("frame");
        // Size prefix, the bytes before, the field itself, the bytes after.
        assert_eq!(frame.piece_count(), 4);
        assert_eq!(frame.pieces()[2].as_ptr(), big.as_ptr(), "the field was copied");
        let mut expected = BytesMut::new();
        expected.put_u32((2 + big.len() + unknown.len() + 1) as u32);
        expected.put_u16(0xabcd);
        expected.put_slice(&big);
        expected.put_slice(&unknown);
        expected.put_u8(1);
        assert_eq!(frame.to_bytes(), expected.freeze());
    }

    #[test]
    fn an_equal_copy_of_a_field_is_not_mistaken_for_it() {
        let big = field(SHARE_MIN_BYTES, 3);
        let copy = Bytes::copy_from_slice(&big);
        let mut pieces = Pieces::new(16, vec![big]);
        pieces.put_slice(&copy);
        let frame = pieces.finish().expect("frame");
        assert_eq!(frame.piece_count(), 1, "only the field's own memory may be referenced");
        assert_eq!(&frame.to_bytes()[FRAME_SIZE_BYTES..], &copy[..]);
    }

    #[test]
    fn going_back_over_a_referenced_field_writes_as_a_plain_buffer_would() {
        let big = field(SHARE_MIN_BYTES, 5);
        let mut pieces = Pieces::new(16, vec![big.clone()]);
        let mut plain = BytesMut::new();
        for buf in [&mut pieces as &mut dyn ByteBufMutDyn, &mut plain] {
            buf.put_all(&[1, 2, 3]);
            buf.put_all(&big);
            buf.put_all(&[4, 5]);
            buf.patch(1..3, &[9, 9]);
            buf.patch(SHARE_MIN_BYTES..SHARE_MIN_BYTES + 4, &[8, 8, 8, 8]);
            buf.seek_to(SHARE_MIN_BYTES + 2);
            buf.put_all(&[6]);
        }
        let frame = pieces.finish().expect("frame");
        assert_eq!(&frame.to_bytes()[FRAME_SIZE_BYTES..], &plain[..]);
    }

    /// The operations of the test above, on either buffer.
    trait ByteBufMutDyn {
        fn put_all(&mut self, src: &[u8]);
        fn patch(&mut self, r: Range<usize>, src: &[u8]);
        fn seek_to(&mut self, offset: usize);
    }

    impl<T: ByteBufMut> ByteBufMutDyn for T {
        fn put_all(&mut self, src: &[u8]) {
            self.put_slice(src);
        }
        fn patch(&mut self, r: Range<usize>, src: &[u8]) {
            self.range(r).copy_from_slice(src);
        }
        fn seek_to(&mut self, offset: usize) {
            self.seek(offset);
        }
    }

    /// A writer that gathers, taking at most `per_call` bytes per call.
    struct ShortWriter {
        out: Vec<u8>,
        per_call: usize,
    }

    impl ShortWriter {
        fn take(&mut self, bufs: &[IoSlice<'_>]) -> usize {
            let mut taken = 0;
            for buf in bufs {
                let n = buf.len().min(self.per_call - taken);
                self.out.extend_from_slice(&buf[..n]);
                taken += n;
                if taken == self.per_call {
                    break;
                }
            }
            taken
        }
    }

    impl tokio::io::AsyncWrite for ShortWriter {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Ready(Ok(self.take(&[IoSlice::new(buf)])))
        }

        fn poll_write_vectored(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Ready(Ok(self.take(bufs)))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_gathered_write_sends_the_pieces_in_order_across_short_writes() {
        use tokio::io::AsyncWriteExt;
        let fields = [field(SHARE_MIN_BYTES, 1), field(SHARE_MIN_BYTES * 3 + 5, 2)];
        for per_call in [1, 7, 4096, 5000, 1 << 20] {
            let mut pieces = Pieces::new(64, fields.to_vec());
            pieces.put_u8(10);
            pieces.put_slice(&fields[0]);
            pieces.put_slice(&fields[1]);
            pieces.put_u16(11);
            pieces.put_slice(&fields[0]);
            let mut frame = pieces.finish().expect("frame");
            assert_eq!(frame.piece_count(), 6);
            let whole = frame.to_bytes();
            let mut writer = ShortWriter { out: Vec::new(), per_call };
            writer.write_all_buf(&mut frame).await.expect("written");
            assert_eq!(writer.out, whole, "{per_call} bytes per call");
        }
    }

    #[test]
    fn a_frame_is_consumed_across_its_pieces() {
        let big = field(SHARE_MIN_BYTES, 1);
        let mut pieces = Pieces::new(16, vec![big.clone()]);
        pieces.put_u8(42);
        pieces.put_slice(&big);
        pieces.put_u8(43);
        let mut frame = pieces.finish().expect("frame");
        let whole = frame.to_bytes();
        assert_eq!(frame.chunks_vectored(&mut [IoSlice::new(&[]); 8]), 4);
        let mut got = Vec::new();
        // Consume in steps that straddle piece boundaries.
        while frame.has_remaining() {
            let step = frame.chunk().len().min(3);
            got.extend_from_slice(&frame.chunk()[..step]);
            frame.advance(step);
        }
        assert_eq!(got, whole);
        assert_eq!(frame.remaining(), 0);
        assert_eq!(frame.chunks_vectored(&mut [IoSlice::new(&[]); 8]), 0);
    }
}
