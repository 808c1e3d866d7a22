//! Damage to the copies of a replicated partition, as the cluster scenarios inflict it: a batch
//! of partition `t-0`, damaged in place on some of its replicas once all of them have
//! checkpointed it, then read once by a consumer.

use std::path::PathBuf;
use std::time::Duration;

use weir_sim::client::Client;
use weir_sim::client::fetch::FetchWant;
use weir_sim::workload::cluster::Cluster;

use crate::ensure;
use crate::log::{durable_recovery_point, segment_batches};

/// Records every replica's checkpoint must cover before the batch is damaged.
pub const COVERED: i64 = 40;
/// How long the checkpoints may take to cover them.
pub const CHECKPOINT_BOUND: Duration = Duration::from_secs(180);

/// The batch damaged.
pub struct Damaged {
    /// The segment file holding it, in the partition's folder.
    pub segment: PathBuf,
    /// Its byte position and length in that file.
    pub at: usize,
    /// Its length.
    pub len: usize,
    /// Its first offset.
    pub base: i64,
    /// Its last offset.
    pub last: i64,
    /// Its bytes, intact.
    pub original: Vec<u8>,
}

impl Damaged {
    /// Whether node `ix` holds the batch intact.
    pub fn whole_on(&self, c: &Cluster, ix: usize) -> bool {
        let now = c.sim.durable_contents(c.nodes[ix], &self.segment);
        now.is_ok_and(|now| now.get(self.at..self.at + self.len) == Some(&self.original[..]))
    }
}

/// Waits until every one of `replicas` (node indexes) has checkpointed [`COVERED`] records of
/// `t-0`, then damages one batch of its first segment (the second to the fourth, by seed) in
/// place on each of `damaged`, which must hold it as `leader` does.
pub fn damage_alike(
    c: &mut Cluster,
    seed: u64,
    (replicas, damaged): (&[usize], &[usize]),
    leader: usize,
) -> Result<Damaged, String> {
    let dir = "t-0";
    let covered = c.run_until(CHECKPOINT_BOUND, |c| {
        let point = |r: usize| durable_recovery_point(&c.sim, c.nodes[r], dir);
        replicas.iter().all(|&r| point(r).is_some_and(|p| p >= COVERED))
    });
    ensure(covered, || format!("the replicas' checkpoints did not reach {COVERED}"))?;
    let segment = std::path::Path::new(dir).join(format!("{:020}.log", 0));
    let bytes = c.sim.durable_contents(c.nodes[leader], &segment).map_err(|e| e.to_string())?;
    let batches = segment_batches(&bytes);
    let (at, len, base, last) = *batches.get(1 + seed as usize % 3).ok_or("too few batches")?;
    let original = bytes.get(at..at + len).ok_or("the batch is outside the segment")?.to_vec();
    for &r in damaged {
        let held = c.sim.durable_contents(c.nodes[r], &segment).map_err(|e| e.to_string())?;
        ensure(held.get(at..at + len) == Some(&original[..]), || {
            format!("node{} holds other bytes at {at}", r + 1)
        })?;
        c.sim
            .corrupt_durable_file(c.nodes[r], &segment, (at + len - 1) as u64)
            .map_err(|e| format!("damaging node{}: {e}", r + 1))?;
    }
    Ok(Damaged { segment, at, len, base, last, original })
}

/// One consumer's fetch of `t-0` at `offset` from node `ix`, whatever it answers.
pub fn read_once(c: &mut Cluster, ix: usize, offset: i64) -> Result<(), String> {
    let addr = c.addr(ix);
    c.client_call(Duration::from_secs(10), move |env| async move {
        let mut client = Client::new(env, addr, "reader");
        let want = FetchWant { topic: "t".into(), partition: 0, offset };
        client.fetch(&[want], Duration::ZERO).await
    })
    .ok_or("no answer to the fetch")?
    .map(|_| ())
    .map_err(|e| format!("fetch: {e}"))
}
