//! Gathered positional writes (`pwritev`): a batch's stamped header and its records lie in
//! different buffers (the header is the log's 61-byte copy, the records are still where the
//! request was read), and reach the file in one write without being joined first.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;

use bytes::Bytes;

/// The most buffers one `pwritev` takes (Linux's `IOV_MAX`).
const BUFFERS_PER_CALL_MAX: usize = 1024;

/// Writes `parts` one after another from `pos` of `file`, retrying short and interrupted
/// writes until every byte is written or an error stops it.
pub fn write_all_at(file: &File, parts: &[Bytes], pos: u64) -> io::Result<()> {
    write_all_with(parts, pos, |slices, at| pwritev(file, slices, at))
}

fn pwritev(file: &File, slices: &[IoSlice<'_>], pos: u64) -> io::Result<usize> {
    let offset = libc::off_t::try_from(pos)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "position past the file limit"))?;
    let count = libc::c_int::try_from(slices.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many buffers"))?;
    // SAFETY: `IoSlice` has the layout of `iovec` on Unix; each describes bytes borrowed from
    // `slices` for the whole call, valid for reads; the descriptor belongs to `file`, open for
    // the call.
    let written = unsafe { libc::pwritev(file.as_raw_fd(), slices.as_ptr().cast(), count, offset) };
    usize::try_from(written).map_err(|_| io::Error::last_os_error())
}

/// The loop of [`write_all_at`] over any positional gathered `write`, which may write less
/// than it is offered.
fn write_all_with(
    parts: &[Bytes],
    mut pos: u64,
    mut write: impl FnMut(&[IoSlice<'_>], u64) -> io::Result<usize>,
) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|part| IoSlice::new(part)).collect();
    let mut rest = &mut slices[..];
    // Drops leading empty parts, so that an empty `rest` means everything is written.
    IoSlice::advance_slices(&mut rest, 0);
    while !rest.is_empty() {
        let offered = &rest[..rest.len().min(BUFFERS_PER_CALL_MAX)];
        let offered_bytes: usize = offered.iter().map(|slice| slice.len()).sum();
        let written = match write(offered, pos) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) if n > offered_bytes => {
                return Err(io::Error::other(format!(
                    "a write of {offered_bytes} bytes reported {n} written"
                )));
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        pos += written as u64;
        IoSlice::advance_slices(&mut rest, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods, clippy::disallowed_types)]

    use super::*;

    fn parts() -> Vec<Bytes> {
        let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        vec![
            Bytes::new(),
            Bytes::from_static(&[7; 61]),
            Bytes::new(),
            Bytes::from(body),
            Bytes::from_static(b"end"),
        ]
    }

    /// A file that takes at most `most` bytes per call, interrupting every third call.
    fn write_through(parts: &[Bytes], start: u64, most: usize) -> io::Result<(Vec<u8>, usize)> {
        let mut file = vec![0u8; start as usize];
        let mut calls = 0;
        write_all_with(parts, start, |slices, pos| {
            calls += 1;
            if calls % 3 == 0 {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            assert_eq!(pos as usize, file.len(), "each write continues where the last ended");
            let mut taken = 0;
            for slice in slices {
                let take = slice.len().min(most - taken);
                file.extend_from_slice(&slice[..take]);
                taken += take;
            }
            Ok(taken)
        })?;
        Ok((file, calls))
    }

    #[test]
    fn short_and_interrupted_writes_still_write_every_part_in_order() {
        let parts = parts();
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        for most in [1, 7, 60, 61, 62, 4096, 10_064, usize::MAX] {
            let (file, calls) = write_through(&parts, 5, most).expect("written");
            assert_eq!(&file[5..], &joined[..], "at most {most} bytes per call");
            if most == usize::MAX {
                assert_eq!(calls, 1, "one call writes it all");
            }
        }
        let (file, calls) = write_through(&[Bytes::new(), Bytes::new()], 0, 1).expect("nothing");
        assert!(file.is_empty());
        assert_eq!(calls, 0, "nothing to write makes no call");
    }

    #[test]
    fn a_write_that_makes_no_progress_or_lies_is_an_error() {
        let stuck = write_all_with(&parts(), 0, |_, _| Ok(0)).expect_err("no progress");
        assert_eq!(stuck.kind(), io::ErrorKind::WriteZero);
        let lying = write_all_with(&parts(), 0, |_, _| Ok(1 << 30)).expect_err("more than given");
        assert_eq!(lying.kind(), io::ErrorKind::Other);
    }

    #[test]
    fn a_gathered_write_lands_in_the_file_at_its_position() {
        let dir = std::env::temp_dir().join(format!("weir-gathered-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        let path = dir.join("f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("create");
        let parts = parts();
        write_all_at(&file, &parts, 100).expect("written");
        let written = std::fs::read(&path).expect("read back");
        std::fs::remove_dir_all(&dir).expect("clean up");
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        assert!(written[..100].iter().all(|&b| b == 0), "the gap reads as zeros");
        assert_eq!(&written[100..], &joined[..]);
    }
}
