//! Frames: a 4-byte big-endian size, then that many bytes. The size is checked against
//! `socket.request.max.bytes` before a buffer is allocated; a client connection then waits for
//! room for the frame within `queued.max.request.bytes` (see `server::memory`) before its body
//! is read.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes of a frame's size prefix.
pub const FRAME_SIZE_BYTES: usize = 4;

/// Why a frame could not be read. Any of these ends the connection.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the connection between frames.
    #[error("connection closed")]
    Closed,
    /// The declared size is negative or above the limit.
    #[error("frame of {size} bytes is outside 0..={max}")]
    BadSize {
        /// The declared size.
        size: i32,
        /// The limit.
        max: usize,
    },
    /// The connection failed or closed mid-frame.
    #[error("reading a frame: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads a frame's size prefix: the size of the body that follows, at most `max_bytes`.
pub async fn read_frame_size<R: AsyncRead + Unpin + ?Sized>(
    reader: &mut R,
    max_bytes: usize,
) -> Result<usize, FrameError> {
    let mut size = [0u8; FRAME_SIZE_BYTES];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    let size = i32::from_be_bytes(size);
    usize::try_from(size)
        .ok()
        .filter(|&len| len <= max_bytes)
        .ok_or(FrameError::BadSize { size, max: max_bytes })
}

/// Reads the `len` bytes of a frame's body, its size prefix already read.
pub async fn read_frame_body<R: AsyncRead + Unpin + ?Sized>(
    reader: &mut R,
    len: usize,
) -> Result<Bytes, FrameError> {
    // Read into spare capacity rather than a zeroed buffer: a produce frame is mostly record
    // bytes, and zeroing them first would touch every byte once more for nothing.
    let mut buf = BytesMut::with_capacity(len);
    while buf.len() < len {
        let mut rest = (&mut *reader).take((len - buf.len()) as u64);
        if rest.read_buf(&mut buf).await? == 0 {
            return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    Ok(buf.freeze())
}

/// Prefixes `body` with its size.
pub fn frame(body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out.freeze()
}
