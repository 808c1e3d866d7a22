//! Reads served from the page cache alone, on the calling thread: `preadv2` with
//! `RWF_NOWAIT`, which copies what is cached and refuses (`EAGAIN`) instead of waiting for the
//! device. A consumer reading recent data finds it cached nearly always, and then its fetch
//! costs a copy instead of a round trip to the blocking pool (two thread wake-ups, which on
//! a small virtual machine cost more than copying a 64 KiB read).
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use bytes::BytesMut;

/// What a read from the page cache alone did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// Copied this many bytes (zero at the end of the file; fewer than asked when the rest is
    /// not cached or the file ends).
    Read(usize),
    /// Nothing at the position is cached: the device would have to be read.
    Miss,
    /// The kernel or file system does not offer such reads.
    Unsupported,
}

/// Reads up to `max` bytes from `pos` of `file`, from the page cache only, appending them to
/// `buf` (into its spare capacity, which is not zeroed first: the kernel writes every byte it
/// reports). `buf` grows to hold `max` more bytes if it must.
pub fn read_cached(file: &File, buf: &mut BytesMut, max: usize, pos: u64) -> io::Result<Cached> {
    let Ok(offset) = libc::off_t::try_from(pos) else {
        return Ok(Cached::Unsupported);
    };
    buf.reserve(max);
    let spare = &mut buf.spare_capacity_mut()[..max];
    let iov = libc::iovec { iov_base: spare.as_mut_ptr().cast(), iov_len: spare.len() };
    loop {
        // SAFETY: `iov` describes `spare`, valid for writes of its length and borrowed mutably
        // for the whole call; the descriptor belongs to `file`, open for the call.
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
        if let Ok(n) = usize::try_from(n) {
            // SAFETY: the kernel initialised the first `n` bytes of the spare capacity (at most
            // `max`, which was reserved).
            unsafe { buf.set_len(buf.len() + n) };
            return Ok(Cached::Read(n));
        }
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => Ok(Cached::Miss),
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => Ok(Cached::Unsupported),
            _ => Err(error),
        };
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods, clippy::disallowed_types)]

    use std::io::Write;

    use super::*;

    fn scratch(name: &str, bytes: &[u8]) -> (std::path::PathBuf, File) {
        let dir = std::env::temp_dir().join(format!("weir-cached-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        let path = dir.join("f");
        let mut file = File::create(&path).expect("create");
        file.write_all(bytes).expect("write");
        (dir, File::open(&path).expect("open"))
    }

    #[test]
    fn a_cached_read_returns_the_bytes_or_declines() {
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let (dir, file) = scratch("read", &bytes);
        let mut buf = BytesMut::from(&b"kept"[..]);
        match read_cached(&file, &mut buf, 8_192, 5_000).expect("read") {
            Cached::Read(n) => {
                assert!(n > 0 && n <= 8_192, "read {n}");
                assert_eq!(buf.len(), 4 + n, "the bytes read are appended");
                assert_eq!(&buf[..4], b"kept");
                assert_eq!(&buf[4..], &bytes[5_000..5_000 + n]);
            }
            // Just written, so cached, unless the file system cannot say.
            other => assert_eq!(other, Cached::Unsupported),
        }
        let mut tail = BytesMut::new();
        let at_end =
            read_cached(&file, &mut tail, 100, bytes.len() as u64).expect("read at the end");
        assert!(matches!(at_end, Cached::Read(0) | Cached::Unsupported), "{at_end:?}");
        assert!(tail.is_empty());
        let past = read_cached(&file, &mut tail, 100, u64::MAX).expect("a position past off_t");
        assert_eq!(past, Cached::Unsupported);
        std::fs::remove_dir_all(dir).expect("clean up");
    }
}
