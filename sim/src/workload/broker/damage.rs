//! Latent sector errors on the broker's disk: with disk faults on, a bit of a stored batch flips
//! in place, for good, in the page cache and on the device alike. Only a batch that no power
//! failure can take back is picked: one wholly below the recovery point of its partition's
//! checkpoint as the device holds it (damage past that point cannot be told from a torn write,
//! and recovery cuts the log there, as Kafka does).
//!
//! The damaged batch's records may be gone for good; every other record must be as if nothing
//! had happened. Clients that meet the damage (`CORRUPT_MESSAGE`) seek past it one offset at a
//! time, as an application would; the checkers hold the broker to the rest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use weir::log::batch;
use weir::log::{PARTITION_CHECKPOINT, PartitionCheckpoint};

use super::Shared;
use crate::sim::{Host, Sim};

/// Batches damaged at most per seed.
pub const DAMAGED_BATCHES_MAX: usize = 3;
/// One nemesis step in this many also damages a batch (while fewer than the most are).
pub const DAMAGE_ONE_STEP_IN: u64 = 8;

/// A batch a power failure cannot take back, in a segment file as the device holds it.
struct Candidate {
    tp: (String, i32),
    path: PathBuf,
    position: u64,
    len: u64,
    base: i64,
    last: i64,
}

/// The batches damaged so far, where they lie: (segment file, byte position) to the batch's
/// length, so that walks of the file later step over them by the length they had.
#[derive(Default)]
pub(crate) struct Damage {
    done: BTreeMap<(PathBuf, u64), u64>,
    /// What was damaged when, in the nemesis log's form.
    pub(crate) log: Vec<String>,
}

impl Damage {
    /// How many batches are damaged.
    pub(crate) fn count(&self) -> usize {
        self.done.len()
    }

    /// Flips one bit of a batch chosen by `pick`, below its partition's durable recovery point,
    /// and records it in the history. A description of what was damaged, or `None` if no batch
    /// could be.
    pub(crate) fn damage_one(
        &mut self,
        sim: &Sim,
        broker: Host,
        shared: &Shared,
        pick: u64,
    ) -> Option<String> {
        let partitions = shared.partitions();
        let tp = partitions.get((pick % partitions.len().max(1) as u64) as usize)?.clone();
        let candidates = self.candidates(sim, broker, &tp);
        let chosen = candidates.get(((pick >> 16) % candidates.len().max(1) as u64) as usize)?;
        let within = (pick >> 32) % chosen.len;
        sim.corrupt_durable_file(broker, &chosen.path, chosen.position + within).ok()?;
        self.done.insert((chosen.path.clone(), chosen.position), chosen.len);
        shared.with_history(|h| {
            h.damaged.entry(chosen.tp.clone()).or_default().insert(chosen.base, chosen.last)
        });
        let what = format!(
            "{:>10.3}s damaged the batch {}..={} of {}-{} ({} byte {}, {} into the batch)",
            sim.now().as_secs_f64(),
            chosen.base,
            chosen.last,
            chosen.tp.0,
            chosen.tp.1,
            chosen.path.display(),
            chosen.position + within,
            within
        );
        self.log.push(what.clone());
        Some(what)
    }

    /// Every undamaged batch of `tp` wholly below the recovery point of its checkpoint as the
    /// device holds it.
    fn candidates(&self, sim: &Sim, broker: Host, tp: &(String, i32)) -> Vec<Candidate> {
        let dir = PathBuf::from(format!("{}-{}", tp.0, tp.1));
        let Ok(checkpoint) = sim.durable_contents(broker, dir.join(PARTITION_CHECKPOINT)) else {
            return Vec::new();
        };
        let Some(saved) = PartitionCheckpoint::decode_file(&Bytes::from(checkpoint)) else {
            return Vec::new();
        };
        let recovery = saved.recovery.offset.0;
        let names = sim.durable_names(broker, &dir).unwrap_or_default();
        let mut out = Vec::new();
        for name in names.iter().filter(|n| n.len() == 24 && n.ends_with(".log")) {
            let path = dir.join(name);
            let Ok(bytes) = sim.durable_contents(broker, &path) else { continue };
            self.walk(tp, &path, &bytes, recovery, &mut out);
        }
        out
    }

    /// The undamaged batches of one segment file's durable `bytes` that end below `recovery`,
    /// walked from its start (stepping over the damaged ones by their recorded length).
    fn walk(
        &self,
        tp: &(String, i32),
        path: &Path,
        bytes: &[u8],
        recovery: i64,
        out: &mut Vec<Candidate>,
    ) {
        let mut at = 0usize;
        while at < bytes.len() {
            if let Some(&len) = self.done.get(&(path.to_path_buf(), at as u64)) {
                at += len as usize;
                continue;
            }
            let Ok(header) = batch::parse_header(&bytes[at..]) else { return };
            let len = header.total_bytes();
            if at + len > bytes.len() || header.last_offset() >= recovery {
                return;
            }
            out.push(Candidate {
                tp: tp.clone(),
                path: path.to_path_buf(),
                position: at as u64,
                len: len as u64,
                base: header.base_offset(),
                last: header.last_offset(),
            });
            at += len;
        }
    }
}
