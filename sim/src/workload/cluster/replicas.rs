//! What each node of a [`Cluster`] holds: its partition folders, and its replicas' log ends
//! and bytes, read through the node, and whether in-sync replicas hold their leader's bytes.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::model::Offset;

use super::{Cluster, node_id};
use crate::node::NodeStatus;

impl Cluster {
    /// Every partition folder on node `ix`'s disk, read through the node (None if it is down
    /// or the listing did not finish).
    pub fn partition_folders(&mut self, ix: usize) -> Option<BTreeSet<String>> {
        let host = self.nodes[ix];
        if self.sim.status(host) != NodeStatus::Up {
            return None;
        }
        let listed = self.sim.block_on(host, Duration::from_secs(5), |env: Env| async move {
            env.disk.list(std::path::Path::new("")).await
        })?;
        let names = listed.ok()?;
        Some(
            names
                .into_iter()
                .filter(|n| n.rsplit_once('-').is_some_and(|(_, i)| i.parse::<i32>().is_ok()))
                .collect(),
        )
    }

    /// The log end offset of `topic`/`partition` on node `ix` (None if it is down or does not
    /// host the partition).
    pub fn log_end(&self, ix: usize, topic: &str, partition: i32) -> Option<i64> {
        Some(self.broker(ix)?.catalog.partition(topic, partition)?.log.log_end_offset().0)
    }

    /// The raw log bytes of `topic`/`partition` on node `ix` from `from` up to `upto` (whole
    /// batches), read through the node; None if it is down, does not host the partition, or
    /// the read failed.
    pub fn replica_bytes(
        &mut self,
        ix: usize,
        topic: &str,
        partition: i32,
        from: i64,
        upto: i64,
    ) -> Option<Bytes> {
        let host = self.nodes[ix];
        let p = self.broker(ix)?.catalog.partition(topic, partition)?;
        self.sim
            .block_on(host, Duration::from_secs(10), move |_env: Env| async move {
                let mut out = Vec::new();
                let mut at = Offset(from);
                while at.0 < upto {
                    let chunk = p.log.read(at, 1 << 20, Offset(upto)).await.ok()?;
                    if chunk.records.is_empty() {
                        break;
                    }
                    out.extend_from_slice(&chunk.records);
                    at = chunk.next_offset;
                }
                Some(Bytes::from(out))
            })
            .flatten()
    }

    /// Replica convergence: every member of `topic`/`partition`'s committed ISR holds exactly
    /// the leader's bytes up to the leader's high watermark, from the latest log start among
    /// them.
    pub fn replicas_converged(&mut self, topic: &str, partition: i32) -> Result<(), String> {
        self.replicas_converged_apart(topic, partition, &[])
    }

    /// [`Cluster::replicas_converged`], apart from batches damaged in place: `damaged` lists
    /// (node index, first offset, last offset) of each, and the offsets a replica or the leader
    /// holds damaged are left out of the comparison of their bytes.
    pub fn replicas_converged_apart(
        &mut self,
        topic: &str,
        partition: i32,
        damaged: &[(usize, i64, i64)],
    ) -> Result<(), String> {
        let image = self.committed_image().ok_or("no committed image")?;
        let p = image
            .topic(topic)
            .and_then(|t| t.partitions.get(&partition))
            .ok_or("no partition")?
            .clone();
        let leader = self.ix_of(p.leader).ok_or("no leader")?;
        let lp = self
            .broker(leader)
            .and_then(|b| b.catalog.partition(topic, partition))
            .ok_or("leader lacks the partition")?;
        let hw = lp.high_watermark().0;
        let mut from = 0;
        for &r in &p.isr {
            let ix = self.ix_of(r).ok_or("ISR member is no node")?;
            let rp = self.broker(ix).and_then(|b| b.catalog.partition(topic, partition));
            from = rp.map_or(from, |rp| from.max(rp.log.log_start_offset().0));
        }
        let on = |ix: usize| damaged.iter().filter(move |d| d.0 == ix).map(|d| (d.1, d.2));
        for &r in &p.isr {
            let ix = self.ix_of(r).ok_or("ISR member is no node")?;
            let mut apart: Vec<(i64, i64)> = on(leader).chain(on(ix)).collect();
            apart.sort_unstable();
            let mut ranges = Vec::new();
            let mut lo = from;
            for (first, last) in apart {
                if first > lo {
                    ranges.push((lo, first.min(hw)));
                }
                lo = lo.max(last + 1);
            }
            ranges.push((lo, hw));
            for (lo, hi) in ranges.into_iter().filter(|(lo, hi)| lo < hi) {
                let expected = self
                    .replica_bytes(leader, topic, partition, lo, hi)
                    .ok_or("cannot read the leader")?;
                let got = self.replica_bytes(ix, topic, partition, lo, hi);
                if got.as_ref() != Some(&expected) {
                    return Err(format!(
                        "{topic}-{partition}: node{}'s bytes in [{lo}, {hi}) ({:?} of them) differ from the leader node{}'s ({})",
                        ix + 1,
                        got.map(|b| b.len()),
                        leader + 1,
                        expected.len()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The partition folders node `ix` should hold by the committed image.
    pub fn expected_folders(&self, ix: usize) -> Option<BTreeSet<String>> {
        let image = self.committed_image()?;
        let id = node_id(ix);
        Some(
            image
                .topics
                .values()
                .flat_map(|t| {
                    t.partitions
                        .values()
                        .filter(move |p| p.replicas.contains(&id))
                        .map(move |p| format!("{}-{}", t.name, p.partition))
                })
                .collect(),
        )
    }
}
