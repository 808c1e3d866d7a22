//! Acknowledged writes to every partition of a topic, and the check that each reads back.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_sim::workload::cluster::Cluster;

/// How long one write may take, retries included.
pub const WRITE_BOUND: Duration = Duration::from_secs(10);

/// `acks=all` writes to partitions `0..partitions` of `topic`, sent to the leader node `via`
/// names, and what each was acknowledged at.
pub struct Writes {
    topic: String,
    partitions: i32,
    via: usize,
    acked: BTreeMap<(i32, i64), String>,
}

impl Writes {
    /// No writes yet.
    pub fn new(topic: &str, partitions: i32, via: usize) -> Writes {
        Writes { topic: topic.to_owned(), partitions, via, acked: BTreeMap::new() }
    }

    /// One record to each partition, `<round>-p<partition>`, each acknowledged within
    /// [`WRITE_BOUND`].
    pub fn round(&mut self, c: &mut Cluster, round: &str) -> Result<(), String> {
        for p in 0..self.partitions {
            let value = format!("{round}-p{p}");
            let offset = c
                .produce(self.via, &self.topic, p, &value, WRITE_BOUND)
                .ok_or_else(|| format!("{value} was not acknowledged within {WRITE_BOUND:?}"))?;
            self.acked.insert((p, offset), value);
        }
        Ok(())
    }

    /// Reads every partition from its leader: each acknowledged write must be at its offset.
    pub fn check_read_back(&self, c: &mut Cluster) -> Result<(), String> {
        for p in 0..self.partitions {
            let leader = c.committed_partition(&self.topic, p).ok_or("no partition")?.leader;
            let ix = c.ix_of(leader).ok_or("the leader is no node")?;
            let read = c.read_all(ix, &self.topic, p)?;
            for ((_, offset), value) in self.acked.range((p, 0)..(p + 1, 0)) {
                crate::ensure(
                    read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()),
                    || {
                        format!(
                            "{}-{p}@{offset}: acked {value:?}, read {:?}",
                            self.topic,
                            read.get(offset)
                        )
                    },
                )?;
            }
        }
        Ok(())
    }
}
