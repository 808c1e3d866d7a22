//! Checkpoint files: small records of a partition's state (recovery point, log start offset,
//! high watermark, leader epochs, producer state), replaced atomically so that a crash at any
//! instant leaves either the old or the new contents, never a mix.
//!
//! Format: magic `WEIRCKPT`, kind (`u8`), version (`u8`), body length (`u32`), body,
//! CRC-32C of everything before it. Atomic replace: write `<name>.tmp`, sync it, rename over
//! `<name>`, sync the folder.

use std::io;
use std::path::{Path, PathBuf};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::io::Disk;

const MAGIC: &[u8; 8] = b"WEIRCKPT";
const HEADER_BYTES: usize = MAGIC.len() + 1 + 1 + 4;
const CRC_BYTES: usize = 4;
/// The largest checkpoint body accepted when reading (producer state is the big one).
pub const CHECKPOINT_BODY_BYTES_MAX: usize = 64 << 20;
const TEMP_SUFFIX: &str = ".tmp";
/// Reads of a checkpoint that fails its checks before it is called invalid. More than a log
/// batch gets: a checkpoint is tiny, and taking a passing fault for damage forgets what it
/// recorded (a log start DeleteRecords moved, a recovery point).
pub const CHECKPOINT_READ_ATTEMPTS: usize = 8;

/// Why a checkpoint could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The file could not be read.
    #[error("reading checkpoint {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The file is not a valid checkpoint of this kind (torn, corrupt, or another kind).
    #[error("checkpoint {path} is invalid: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Frames `body` as a checkpoint of `kind`/`version`.
pub fn encode(kind: u8, version: u8, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_BYTES + body.len() + CRC_BYTES);
    out.put_slice(MAGIC);
    out.put_u8(kind);
    out.put_u8(version);
    out.put_u32(u32::try_from(body.len()).unwrap_or(u32::MAX));
    out.put_slice(body);
    let crc = crate::log::crc::crc32c(&out);
    out.put_u32(crc);
    out.freeze()
}

/// Unframes a checkpoint, checking magic, kind, length and CRC. Returns (version, body).
pub fn decode(kind: u8, bytes: &Bytes) -> Result<(u8, Bytes), &'static str> {
    if bytes.len() < HEADER_BYTES + CRC_BYTES {
        return Err("shorter than a header");
    }
    let (framed, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
    if crate::log::crc::crc32c(framed) != u32::from_be_bytes(crc.try_into().map_err(|_| "crc")?) {
        return Err("checksum mismatch");
    }
    let mut header = &framed[..HEADER_BYTES];
    if &header[..MAGIC.len()] != MAGIC {
        return Err("bad magic");
    }
    header.advance(MAGIC.len());
    if header.get_u8() != kind {
        return Err("another kind of checkpoint");
    }
    let version = header.get_u8();
    let len = header.get_u32() as usize;
    if len != framed.len() - HEADER_BYTES || len > CHECKPOINT_BODY_BYTES_MAX {
        return Err("length mismatch");
    }
    Ok((version, bytes.slice(HEADER_BYTES..HEADER_BYTES + len)))
}

/// Atomically replaces `dir/name` with `contents` and makes the replacement durable.
pub async fn write_atomic(
    disk: &dyn Disk,
    dir: &Path,
    name: &str,
    contents: Bytes,
) -> io::Result<()> {
    let temp = write_temp(disk, dir, name, contents).await?;
    install(disk, dir, name, &temp).await
}

/// The first half of [`write_atomic`]: `contents` written and synced to a temporary file beside
/// `dir/name`, which a failure leaves untouched (the temporary file it began is removed).
/// Returns the temporary file's path.
pub async fn write_temp(
    disk: &dyn Disk,
    dir: &Path,
    name: &str,
    contents: Bytes,
) -> io::Result<PathBuf> {
    let temp = temp_path(dir, name);
    let file = disk.create(&temp).await?;
    let written = match file.write_at(0, contents).await {
        Ok(()) => file.sync_data().await,
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        // What part of it was written takes room for nothing (the next open removes it too).
        let _ = disk.remove(&temp).await;
        return Err(e);
    }
    Ok(temp)
}

/// The second half of [`write_atomic`]: the temporary file renamed over `dir/name`, durably.
pub async fn install(disk: &dyn Disk, dir: &Path, name: &str, temp: &Path) -> io::Result<()> {
    disk.rename(temp, &dir.join(name)).await?;
    disk.sync_dir(dir).await
}

/// Reads `dir/name` as a checkpoint of `kind`. `Ok(None)` if there is none.
pub async fn read(
    disk: &dyn Disk,
    dir: &Path,
    name: &str,
    kind: u8,
) -> Result<Option<(u8, Bytes)>, CheckpointError> {
    let path = dir.join(name);
    let file = match disk.open(&path).await {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(CheckpointError::Io { path, source }),
    };
    let len = usize::try_from(file.len()).unwrap_or(usize::MAX);
    if len > CHECKPOINT_BODY_BYTES_MAX + HEADER_BYTES + CRC_BYTES {
        return Err(CheckpointError::Invalid { path, reason: "too large" });
    }
    // A read can return a flipped bit: one that fails its checks is read again before the
    // file is called invalid, or a passing fault would make a caller forget what it recorded.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let bytes = file
            .read_at(0, len)
            .await
            .map_err(|source| CheckpointError::Io { path: path.clone(), source })?;
        match decode(kind, &bytes) {
            Ok(decoded) => return Ok(Some(decoded)),
            Err(_) if attempts < CHECKPOINT_READ_ATTEMPTS => continue,
            Err(reason) => return Err(CheckpointError::Invalid { path, reason }),
        }
    }
}

/// The temporary file beside `dir/name` that a replacement of it is first written to; the next
/// open removes a leftover one (see [`is_temp`]).
pub fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}{TEMP_SUFFIX}"))
}

/// Whether `name` is a leftover temporary file of [`write_atomic`] or of another replacement
/// (safe to delete at start-up).
pub fn is_temp(name: &str) -> bool {
    name.ends_with(TEMP_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_reject_damage() {
        let framed = encode(3, 1, b"hello");
        assert_eq!(decode(3, &framed), Ok((1, Bytes::from_static(b"hello"))));
        assert_eq!(decode(4, &framed), Err("another kind of checkpoint"));
        for cut in 0..framed.len() {
            assert!(
                decode(3, &framed.slice(..cut)).is_err(),
                "a torn checkpoint of {cut} bytes was accepted"
            );
        }
        let mut flipped = framed.to_vec();
        flipped[HEADER_BYTES] ^= 1;
        assert_eq!(decode(3, &Bytes::from(flipped)), Err("checksum mismatch"));
    }
}
