//! Latent sector errors on a node's disk: with disk faults on, a bit of a stored batch flips in
//! place, for good, in the page cache and on the device alike. Only a batch that no power
//! failure can take back is picked: one wholly below the recovery point of its partition's
//! checkpoint as the device holds it (damage past that point cannot be told from a torn write,
//! and recovery cuts the log there, as Kafka does).
//!
//! The damaged batch's records may be gone for good on that node; every other record must be
//! as if nothing had happened. The workloads say what else they expect (see the broker and
//! cluster workloads).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use weir::coordinator::Record;
use weir::log::{PARTITION_CHECKPOINT, PartitionCheckpoint};
use weir::log::{batch, records};
use weir::topics::OFFSETS_TOPIC;

use crate::checker::History;
use crate::checker::history::{DamagedGroupRecord, GroupRecordLost};
use crate::sim::{Host, Sim};

/// Batches damaged at most per seed.
pub const DAMAGED_BATCHES_MAX: usize = 3;
/// One nemesis step in this many also damages a batch (while fewer than the most are).
pub const DAMAGE_ONE_STEP_IN: u64 = 8;

/// Bytes of a batch's base offset, its first field.
const BASE_OFFSET_BYTES: u64 = 8;

/// A batch a power failure cannot take back, in a segment file as the device holds it.
struct Candidate {
    tp: (String, i32),
    path: PathBuf,
    position: u64,
    len: u64,
    base: i64,
    last: i64,
    /// Its bytes as the device holds them.
    bytes: Bytes,
}

/// The batches damaged so far, where they lie: (host, segment file, byte position) to the
/// batch's length, so that walks of the file later step over them by the length they had.
#[derive(Default)]
pub(crate) struct Damage {
    done: BTreeMap<(Host, PathBuf, u64), u64>,
    /// What was damaged when, in the nemesis log's form.
    pub(crate) log: Vec<String>,
}

/// A batch one call damaged.
#[derive(Clone, Debug)]
pub(crate) struct Damaged {
    /// Its topic and partition.
    pub(crate) tp: (String, i32),
    /// Its first offset.
    pub(crate) base: i64,
    /// Its last offset.
    pub(crate) last: i64,
    /// Its bytes as they were before the damage.
    pub(crate) batch: Bytes,
}

impl Damage {
    /// How many batches are damaged.
    pub(crate) fn count(&self) -> usize {
        self.done.len()
    }

    /// Flips one bit of a batch of one of `partitions` on `host`, chosen by `pick`, below its
    /// partition's durable recovery point. The batch damaged, or `None` if none could be.
    pub(crate) fn damage_one(
        &mut self,
        sim: &Sim,
        host: Host,
        partitions: &[(String, i32)],
        pick: u64,
    ) -> Option<Damaged> {
        let tp = partitions.get((pick % partitions.len().max(1) as u64) as usize)?.clone();
        let candidates = self.candidates(sim, host, &tp);
        let chosen = candidates.get(((pick >> 16) % candidates.len().max(1) as u64) as usize)?;
        let mut within = (pick >> 32) % chosen.len;
        if tp.0 == OFFSETS_TOPIC && within < BASE_OFFSET_BYTES {
            // Not the base offset of a batch of a compacted log (the workloads compact only
            // `__consumer_offsets`): where offsets may have gaps, a lasting flip there is
            // believed as offsets (see the README), and what reads then skip no checker could
            // excuse.
            within += BASE_OFFSET_BYTES;
        }
        let batch = chosen.bytes.clone();
        sim.corrupt_durable_file(host, &chosen.path, chosen.position + within).ok()?;
        self.done.insert((host, chosen.path.clone(), chosen.position), chosen.len);
        let what = format!(
            "{:>10.3}s damaged the batch {}..={} of {}-{} on {} ({} byte {}, {} into the batch)",
            sim.now().as_secs_f64(),
            chosen.base,
            chosen.last,
            chosen.tp.0,
            chosen.tp.1,
            sim.name(host),
            chosen.path.display(),
            chosen.position + within,
            within
        );
        self.log.push(what);
        Some(Damaged { tp: chosen.tp.clone(), base: chosen.base, last: chosen.last, batch })
    }

    /// Every undamaged batch of `tp` wholly below the recovery point of its checkpoint as the
    /// device holds it.
    fn candidates(&self, sim: &Sim, host: Host, tp: &(String, i32)) -> Vec<Candidate> {
        let dir = PathBuf::from(format!("{}-{}", tp.0, tp.1));
        let Ok(checkpoint) = sim.durable_contents(host, dir.join(PARTITION_CHECKPOINT)) else {
            return Vec::new();
        };
        let Some(saved) = PartitionCheckpoint::decode_file(&Bytes::from(checkpoint)) else {
            return Vec::new();
        };
        let recovery = saved.recovery.offset.0;
        let names = sim.durable_names(host, &dir).unwrap_or_default();
        let mut out = Vec::new();
        for name in names.iter().filter(|n| n.len() == 24 && n.ends_with(".log")) {
            let path = dir.join(name);
            let Ok(bytes) = sim.durable_contents(host, &path) else { continue };
            let bytes = Bytes::from(bytes);
            self.walk((host, tp), &path, &bytes, recovery, &mut out);
        }
        out
    }

    /// The undamaged batches of one segment file's durable `bytes` that end below `recovery`,
    /// walked from its start (stepping over the damaged ones by their recorded length).
    fn walk(
        &self,
        (host, tp): (Host, &(String, i32)),
        path: &Path,
        bytes: &Bytes,
        recovery: i64,
        out: &mut Vec<Candidate>,
    ) {
        let mut at = 0usize;
        while at < bytes.len() {
            if let Some(&len) = self.done.get(&(host, path.to_path_buf(), at as u64)) {
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
                bytes: bytes.slice(at..at + len),
            });
            at += len;
        }
    }
}

/// Notes in `history` that the group records a damaged batch of `__consumer_offsets` held are
/// lost, as of now.
pub(crate) fn note_group_records(history: &mut History, batch: &Bytes) {
    let at = history.tick();
    for lost in group_records(batch) {
        history.damaged_group_records.push(DamagedGroupRecord { at, lost });
    }
}

/// The group records a batch of `__consumer_offsets` held, as the checkers name what was lost
/// with it. Records that do not decode as group records are left out (the coordinator skips
/// them too).
fn group_records(batch: &Bytes) -> Vec<GroupRecordLost> {
    let Ok(iter) = records::record_iter(batch) else { return Vec::new() };
    let decoded =
        iter.flatten().filter_map(|r| Record::decode(r.key.as_deref()?, r.value.as_deref()).ok());
    decoded
        .map(|record| match record {
            Record::Offset { group, partition, value } => GroupRecordLost::Offset {
                group: group.0,
                tp: (partition.topic, partition.partition.0),
                offset: value.map(|v| v.offset.0),
            },
            Record::Group { group, value } => GroupRecordLost::Metadata {
                group: group.0,
                generation: value.map_or(i32::MAX, |v| v.generation.0),
            },
        })
        .collect()
}
