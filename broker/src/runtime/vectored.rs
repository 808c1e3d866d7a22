//! Writing several buffers at one position with `pwritev`: a log appending the batches that
//! queued up behind one write hands them to the kernel in one system call, without copying
//! them into one buffer first.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use bytes::Bytes;

/// Buffers per system call (Linux's `IOV_MAX`).
const IOVECS_MAX: usize = 1024;

/// Writes all of `pieces`, one after another, from `pos` of `file`.
pub fn write_all_at(file: &File, pieces: &[Bytes], pos: u64) -> io::Result<()> {
    let mut pos = pos;
    // The piece the next write starts in, and how much of it is already written.
    let (mut first, mut done) = (0usize, 0usize);
    while first < pieces.len() {
        if done == pieces[first].len() {
            first += 1;
            done = 0;
            continue;
        }
        let offset = libc::off_t::try_from(pos)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "position past off_t"))?;
        let iovecs: Vec<libc::iovec> = pieces[first..]
            .iter()
            .take(IOVECS_MAX)
            .enumerate()
            .map(|(i, piece)| {
                let piece = if i == 0 { &piece[done..] } else { &piece[..] };
                libc::iovec { iov_base: piece.as_ptr() as *mut libc::c_void, iov_len: piece.len() }
            })
            .collect();
        let count = libc::c_int::try_from(iovecs.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: every iovec describes a live slice of `pieces`, borrowed for the whole call
        // and only read by it; the descriptor belongs to `file`, open for the call.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iovecs.as_ptr(), count, offset) };
        let Ok(mut n) = usize::try_from(n) else {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        };
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        pos += n as u64;
        // Skip what was written.
        while n > 0 && first < pieces.len() {
            let left = pieces[first].len() - done;
            if n < left {
                done += n;
                n = 0;
            } else {
                n -= left;
                first += 1;
                done = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods, clippy::disallowed_types)]

    use super::*;

    #[test]
    fn pieces_land_one_after_another() {
        let dir = std::env::temp_dir().join(format!("weir-vectored-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        let path = dir.join("f");
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .expect("create");
        let pieces: Vec<Bytes> = (0..2_000u32)
            .map(|i| Bytes::from(vec![(i % 251) as u8; (i % 7) as usize * 3]))
            .collect();
        write_all_at(&file, &pieces, 10).expect("write");
        let written = std::fs::read(&path).expect("read back");
        let mut expected = vec![0u8; 10];
        for piece in &pieces {
            expected.extend_from_slice(piece);
        }
        assert_eq!(written, expected);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
