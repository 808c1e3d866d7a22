//! The quorum's durable state over [`Disk`], with the partition log's rules: everything
//! checksummed; nothing reported persisted before `sync_data` returned; atomic replacement by
//! temp file, sync, rename, sync of the folder.
//!
//! - `hardstate.checkpoint`: term, vote, commit;
//! - `snapshot.checkpoint`: the latest snapshot (index, term, voters, the image's bytes);
//! - `entries.log`: frames of length (`u32`), CRC-32C (`u32`), index, term, type, data.
//!   A frame at index `i` replaces every stored entry from `i` on (Raft truncating a
//!   conflicting suffix). A torn or corrupt last frame was never reported durable and is cut
//!   off at recovery; the log is rewritten without the prefix a new snapshot covers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use raft::prelude::{ConfState, Entry, EntryType, HardState};

use super::super::codec::{Reader, Writer};
use super::{Persist, Recovered, SnapshotData};
use crate::io::{Disk, File};
use crate::log::checkpoint;

const HARD_STATE_FILE: &str = "hardstate.checkpoint";
const SNAPSHOT_FILE: &str = "snapshot.checkpoint";
const ENTRIES_FILE: &str = "entries.log";
const ENTRIES_TEMP: &str = "entries.log.tmp";
const HARD_STATE_KIND: u8 = 20;
const SNAPSHOT_KIND: u8 = 21;
/// Frame header: length and CRC.
const FRAME_HEADER_BYTES: usize = 8;
/// Largest entry frame accepted at recovery.
pub const ENTRY_FRAME_BYTES_MAX: usize = 64 << 20;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The disk failed.
    #[error("quorum store I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A checkpoint is unreadable.
    #[error("quorum store: {0}")]
    Checkpoint(#[from] checkpoint::CheckpointError),
    /// Stored state is corrupt before the tail.
    #[error("quorum store is corrupt: {0}")]
    Corrupt(String),
}

/// The quorum's durable state.
pub struct QuorumStore {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    log: Arc<dyn File>,
    /// The stored entries (mirrors the file, for rewriting it at compaction).
    entries: Vec<Entry>,
    /// Where the next frame goes: writes go at a tracked position, so a write cut short by a
    /// crash is overwritten rather than left as a gap before later frames.
    end: u64,
}

fn encode_frame(e: &Entry) -> Bytes {
    let mut body = Writer::default();
    body.u64(e.index).u64(e.term).u8(e.get_entry_type() as u8).bytes(&e.data);
    let body = body.finish();
    let mut out = BytesMut::with_capacity(FRAME_HEADER_BYTES + body.len());
    out.put_u32(body.len() as u32);
    out.put_u32(crate::log::crc::crc32c(&body));
    out.put_slice(&body);
    out.freeze()
}

/// Decodes frames from `bytes`; returns the entries and the length of the valid prefix.
fn decode_frames(bytes: &Bytes) -> (Vec<Entry>, usize) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut pos = 0;
    while bytes.len() - pos >= FRAME_HEADER_BYTES {
        let mut header = &bytes[pos..pos + FRAME_HEADER_BYTES];
        let len = header.get_u32() as usize;
        let crc = header.get_u32();
        if len > ENTRY_FRAME_BYTES_MAX || bytes.len() - pos - FRAME_HEADER_BYTES < len {
            break;
        }
        let body = bytes.slice(pos + FRAME_HEADER_BYTES..pos + FRAME_HEADER_BYTES + len);
        if crate::log::crc::crc32c(&body) != crc {
            break;
        }
        let mut r = Reader(body);
        let parsed = (|| {
            let index = r.u64("index")?;
            let term = r.u64("term")?;
            let kind = r.u8("type")?;
            let data = r.bytes("data")?;
            r.end()?;
            Ok::<_, super::super::codec::DecodeError>((index, term, kind, data))
        })();
        let Ok((index, term, kind, data)) = parsed else { break };
        let mut e = Entry { index, term, ..Default::default() };
        e.set_entry_type(match kind {
            1 => EntryType::EntryConfChange,
            2 => EntryType::EntryConfChangeV2,
            _ => EntryType::EntryNormal,
        });
        e.data = data.to_vec().into();
        entries.retain(|x| x.index < index);
        entries.push(e);
        pos += FRAME_HEADER_BYTES + len;
    }
    (entries, pos)
}

/// Reads of a file before a corrupt result is believed.
const READ_ATTEMPTS: usize = 3;

/// A checkpoint read, retried when it comes back corrupt (a read can be wrong once).
async fn read_checkpoint(
    disk: &dyn Disk,
    dir: &Path,
    name: &str,
    kind: u8,
) -> Result<Option<(u8, Bytes)>, checkpoint::CheckpointError> {
    let mut last = None;
    for _ in 0..READ_ATTEMPTS {
        match checkpoint::read(disk, dir, name, kind).await {
            Err(e @ checkpoint::CheckpointError::Invalid { .. }) => last = Some(e),
            other => return other,
        }
    }
    Err(last.unwrap_or(checkpoint::CheckpointError::Invalid {
        path: dir.join(name),
        reason: "unreadable",
    }))
}

/// Whether the bytes from `valid` on are a write a crash cut short: a frame that runs past the
/// end, or nothing but zeros.
fn is_torn_tail(bytes: &Bytes, valid: usize) -> bool {
    let rest = &bytes[valid..];
    if rest.iter().all(|&b| b == 0) || rest.len() < FRAME_HEADER_BYTES {
        return true;
    }
    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    FRAME_HEADER_BYTES + len >= rest.len()
}

fn encode_hard_state(hs: &HardState) -> Bytes {
    let mut w = Writer::default();
    w.u64(hs.term).u64(hs.vote).u64(hs.commit);
    checkpoint::encode(HARD_STATE_KIND, 1, &w.finish())
}

fn encode_snapshot(data: &SnapshotData, conf: &ConfState) -> Bytes {
    let mut w = Writer::default();
    w.u64(data.index).u64(data.term);
    let voters: Vec<i32> = conf.voters.iter().map(|&v| v as i32).collect();
    w.i32s(&voters).bytes(&data.data);
    checkpoint::encode(SNAPSHOT_KIND, 1, &w.finish())
}

impl QuorumStore {
    /// Opens (creating) the store in `dir` and returns what it holds.
    pub async fn open(
        disk: Arc<dyn Disk>,
        dir: &Path,
    ) -> Result<(QuorumStore, Recovered), StoreError> {
        // Create each folder on the way and sync the folder holding it, so a power failure
        // cannot forget the quorum's folder (and with it the cluster's metadata).
        let mut created = PathBuf::new();
        for part in dir.components() {
            let parent = created.clone();
            created.push(part);
            disk.create_dir(&created).await?;
            disk.sync_dir(&parent).await?;
        }
        let mut recovered = Recovered::default();
        if let Some((_, body)) =
            read_checkpoint(&*disk, dir, HARD_STATE_FILE, HARD_STATE_KIND).await?
        {
            let mut r = Reader(body);
            let bad = |e: super::super::codec::DecodeError| StoreError::Corrupt(e.to_string());
            recovered.hard_state.term = r.u64("term").map_err(bad)?;
            recovered.hard_state.vote = r.u64("vote").map_err(bad)?;
            recovered.hard_state.commit = r.u64("commit").map_err(bad)?;
        }
        if let Some((_, body)) = read_checkpoint(&*disk, dir, SNAPSHOT_FILE, SNAPSHOT_KIND).await? {
            let mut r = Reader(body);
            let bad = |e: super::super::codec::DecodeError| StoreError::Corrupt(e.to_string());
            let index = r.u64("index").map_err(bad)?;
            let term = r.u64("term").map_err(bad)?;
            let voters: Vec<u64> =
                r.i32s("voters").map_err(bad)?.into_iter().map(|v| v as u64).collect();
            let data = r.bytes("data").map_err(bad)?;
            recovered.snapshot =
                Some((SnapshotData { index, term, data }, ConfState::from((voters, Vec::new()))));
        }
        let path = dir.join(ENTRIES_FILE);
        let log = match disk.open(&path).await {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let f = disk.create(&path).await?;
                disk.sync_dir(dir).await?;
                f
            }
            Err(e) => return Err(e.into()),
        };
        let len = usize::try_from(log.len()).unwrap_or(usize::MAX);
        // A read can return corrupt bytes that a second read gets right: keep the read that
        // decodes furthest.
        let mut best: Option<(Bytes, Vec<Entry>, usize)> = None;
        for _ in 0..READ_ATTEMPTS {
            let bytes = log.read_at(0, len).await?;
            let (entries, valid) = decode_frames(&bytes);
            let better = best.as_ref().is_none_or(|(_, _, v)| valid > *v);
            let complete = valid == bytes.len();
            if better {
                best = Some((bytes, entries, valid));
            }
            if complete {
                break;
            }
        }
        let Some((bytes, mut entries, valid)) = best else {
            return Err(StoreError::Corrupt("the entries log could not be read".into()));
        };
        if valid < bytes.len() {
            if !is_torn_tail(&bytes, valid) {
                return Err(StoreError::Corrupt(format!(
                    "a corrupt frame at byte {valid} of the entries log is followed by more data"
                )));
            }
            tracing::warn!(
                cut = bytes.len() - valid,
                "dropping a torn tail of the metadata quorum's log"
            );
            log.truncate(valid as u64).await?;
        }
        // What a killed process left in the page cache is made durable before it is trusted.
        // A sync alone is not enough: after a failed sync (fsyncgate) the kernel keeps the
        // pages readable but will never write them back, so they would vanish in a later power
        // failure, after this store had built on them. Writing the bytes again makes them dirty,
        // and the sync then reaches the device.
        if valid > 0 {
            log.write_at(0, bytes.slice(..valid)).await?;
        }
        log.sync_data().await?;
        disk.sync_dir(dir).await?;
        let snapshot_index = recovered.snapshot.as_ref().map_or(0, |(s, _)| s.index);
        entries.retain(|e| e.index > snapshot_index);
        recovered.entries = entries.clone();
        // Raft must not believe more is committed than this log and snapshot hold.
        let last = entries.last().map_or(snapshot_index, |e| e.index);
        recovered.hard_state.commit = recovered.hard_state.commit.min(last).max(snapshot_index);
        let end = valid as u64;
        Ok((QuorumStore { disk, dir: dir.to_owned(), log, entries, end }, recovered))
    }

    /// Makes `persist` durable.
    pub async fn persist(&mut self, persist: &Persist) -> Result<(), StoreError> {
        if let Some((data, conf)) = &persist.snapshot {
            checkpoint::write_atomic(
                &*self.disk,
                &self.dir,
                SNAPSHOT_FILE,
                encode_snapshot(data, conf),
            )
            .await?;
            self.entries.retain(|e| e.index > data.index);
            self.rewrite_log().await?;
        }
        if !persist.entries.is_empty() {
            let mut out = BytesMut::new();
            for e in &persist.entries {
                out.put_slice(&encode_frame(e));
            }
            if let Some(first) = persist.entries.first() {
                self.entries.retain(|e| e.index < first.index);
            }
            self.entries.extend(persist.entries.iter().cloned());
            let out = out.freeze();
            let len = out.len() as u64;
            self.log.write_at(self.end, out).await?;
            self.log.sync_data().await?;
            self.end += len;
        }
        if let Some(hs) = &persist.hard_state {
            checkpoint::write_atomic(
                &*self.disk,
                &self.dir,
                HARD_STATE_FILE,
                encode_hard_state(hs),
            )
            .await?;
        }
        Ok(())
    }

    async fn rewrite_log(&mut self) -> Result<(), StoreError> {
        let mut out = BytesMut::new();
        for e in &self.entries {
            out.put_slice(&encode_frame(e));
        }
        let temp = self.dir.join(ENTRIES_TEMP);
        let file = self.disk.create(&temp).await?;
        file.write_at(0, out.freeze()).await?;
        file.sync_data().await?;
        drop(file);
        let path = self.dir.join(ENTRIES_FILE);
        self.disk.rename(&temp, &path).await?;
        self.disk.sync_dir(&self.dir).await?;
        self.log = self.disk.open(&path).await?;
        self.end = self.log.len();
        Ok(())
    }
}
