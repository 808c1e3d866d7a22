//! The swarm's checks after the heal: a write to and a read of every partition of every
//! surviving topic, replica convergence, each node's partition folders, and the group's
//! committed offsets. Partitions given up (their last in-sync replica came back on a new disk,
//! see [`Cluster::given_up`]) are not expected to take writes or to hold what they acknowledged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;

use super::group::{self, SharedGroup, TopicsNow};
use super::{Cluster, FINAL_BOUND, IDEMPOTENT_PREFIX, Shared};
use crate::client::Client;
use crate::client::codes;
use crate::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use crate::world::lock;

/// Values of the idempotent producer that appear at more than one offset of `read`.
fn duplicated(read: &BTreeMap<i64, Bytes>) -> Vec<(Bytes, Vec<i64>)> {
    let mut at: BTreeMap<&Bytes, Vec<i64>> = BTreeMap::new();
    for (offset, value) in read {
        if value.starts_with(IDEMPOTENT_PREFIX.as_bytes()) {
            at.entry(value).or_default().push(*offset);
        }
    }
    at.into_iter().filter(|(_, o)| o.len() > 1).map(|(v, o)| (v.clone(), o)).collect()
}

/// One write to every partition of every surviving topic, then every partition read from the
/// start: every acknowledged record must be at its offset.
pub(super) fn final_writes_and_reads(
    cluster: &mut Cluster,
    shared: &Shared,
    given_up: &BTreeSet<(String, i32)>,
) -> Vec<String> {
    let topics = lock(shared).live_topics();
    let given_up = given_up.clone();
    let addrs: Vec<_> = (0..cluster.nodes.len()).map(|ix| cluster.addr(ix)).collect();
    let ledger = Arc::clone(shared);
    let outcome = cluster.client_call(FINAL_BOUND, move |env: Env| async move {
        let mut violations = Vec::new();
        for t in &topics {
            for partition in (0..t.partitions).filter(|&p| !given_up.contains(&(t.name.clone(), p)))
            {
                let value = Bytes::from(format!("final-{}-{partition}", t.name));
                let mut written = false;
                for _ in 0..50 {
                    let mut meta = Client::new(env.clone(), addrs[0], "final");
                    let leader = match meta.cluster_view(Some(&[t.name.as_str()])).await {
                        Ok(view) => view.leader_addr(&t.name, partition),
                        Err(_) => None,
                    };
                    if let Some((_, leader)) = leader {
                        let batch = PartitionBatch {
                            partition,
                            base_sequence: 0,
                            records: vec![(None, value.clone())],
                        };
                        let mut client = Client::new(env.clone(), leader, "final");
                        if let Ok(ProduceOutcome::Answered(acks)) =
                            client.produce(&t.name, Acks::All, None, &[batch]).await
                            && acks[0].error_code == codes::NONE
                        {
                            let key = (t.name.clone(), partition, acks[0].base_offset);
                            lock(&ledger).acked.insert(key, value.clone());
                            written = true;
                            break;
                        }
                    }
                    env.clock.sleep(Duration::from_millis(200)).await;
                }
                if !written {
                    violations.push(format!("{}-{partition} took no write after the heal", t.name));
                    continue;
                }
                let read = read_back(&env, &addrs, &ledger, (&t.name, partition), t.retained);
                violations.extend(read.await);
            }
        }
        violations
    });
    outcome.unwrap_or_else(|| {
        vec![format!("the final writes and reads did not finish within {FINAL_BOUND:?}")]
    })
}

/// Reads `topic`/`partition` from its start and checks every acknowledged record (for a topic
/// with `retention.bytes`, every one from the first offset read).
async fn read_back(
    env: &Env,
    addrs: &[std::net::SocketAddr],
    shared: &Shared,
    (topic, partition): (&str, i32),
    retained: bool,
) -> Vec<String> {
    let mut meta = Client::new(env.clone(), addrs[0], "final-read");
    let Some((_, leader)) =
        meta.cluster_view(Some(&[topic])).await.ok().and_then(|v| v.leader_addr(topic, partition))
    else {
        return vec![format!("{topic}-{partition}: no leader for the final read")];
    };
    let mut client = Client::new(env.clone(), leader, "final-read");
    let read = match client.read_to_end(topic, partition).await {
        Ok(read) => read,
        Err(e) => return vec![format!("{topic}-{partition}: final read: {e}")],
    };
    let mut l = lock(shared);
    let mut out = Vec::new();
    let tp = (topic.to_owned(), partition);
    if let Some(low) = l.deleted_before(&tp, env.clock.now())
        && let Some((&first, _)) = read.first_key_value()
        && first < low
    {
        out.push(format!(
            "{topic}-{partition}@{first}: read at the end, below a DeleteRecords low watermark of {low}"
        ));
    }
    let mut asked = l.delete_asked.get(&tp).copied().unwrap_or(0);
    if retained {
        asked = asked.max(read.first_key_value().map_or(0, |(&first, _)| first));
    }
    for (value, offsets) in duplicated(&read) {
        out.push(format!("{topic}-{partition}: idempotent {value:?} appears at {offsets:?}"));
    }
    for (offset, value) in &read {
        l.read((topic.to_owned(), partition, *offset), value.clone());
    }
    let acked: Vec<(i64, Bytes)> = l
        .acked
        .range((topic.to_owned(), partition, asked)..(topic.to_owned(), partition + 1, 0))
        .map(|((_, _, o), v)| (*o, v.clone()))
        .collect();
    for (offset, value) in acked {
        if read.get(&offset) != Some(&value) {
            out.push(format!(
                "{topic}-{partition}@{offset}: acked {value:?} but read {:?}",
                read.get(&offset)
            ));
        }
    }
    out
}

/// Replica convergence: every partition of every surviving topic with more than one replica
/// must come to have its in-sync replicas byte-identical to the leader up to the high
/// watermark.
pub(super) fn final_convergence(
    cluster: &mut Cluster,
    shared: &Shared,
    given_up: &BTreeSet<(String, i32)>,
) -> Vec<String> {
    let topics = lock(shared).live_topics();
    let mut out = Vec::new();
    for t in topics.iter().filter(|t| t.replication > 1) {
        for partition in (0..t.partitions).filter(|&p| !given_up.contains(&(t.name.clone(), p))) {
            let mut last = Ok(());
            let converged = (0..(FINAL_BOUND.as_millis() / 500)).any(|_| {
                last = cluster.replicas_converged(&t.name, partition);
                if last.is_err() {
                    cluster.run_for(Duration::from_millis(500));
                }
                last.is_ok()
            });
            if !converged {
                out.push(format!("replicas did not converge: {}", last.err().unwrap_or_default()));
            }
        }
    }
    out
}

/// The group's committed offsets read back from its coordinator, and the group checkers.
pub(super) fn final_group(
    cluster: &mut Cluster,
    group: &SharedGroup,
    topics: &TopicsNow,
) -> Vec<String> {
    let addrs: Arc<Vec<_>> =
        Arc::new((0..cluster.nodes.len()).map(|ix| cluster.addr(ix)).collect());
    let (group, topics) = (Arc::clone(group), Arc::clone(topics));
    cluster
        .client_call(FINAL_BOUND + Duration::from_secs(5), move |env: Env| {
            group::final_read(env, addrs, group, topics, FINAL_BOUND)
        })
        .unwrap_or_else(|| {
            vec![format!("the final group read did not finish within {FINAL_BOUND:?}")]
        })
}

/// Every node's disk must come to hold exactly the partition folders the image gives it.
pub(super) fn final_folders(cluster: &mut Cluster) -> Vec<String> {
    let mut out = Vec::new();
    for ix in 0..cluster.nodes.len() {
        let mut last = None;
        let matched = (0..(FINAL_BOUND.as_millis() / 500)).any(|_| {
            let (have, want) = (cluster.partition_folders(ix), cluster.expected_folders(ix));
            let same = have.is_some() && have == want;
            last = Some((have, want));
            if !same {
                cluster.run_for(Duration::from_millis(500));
            }
            same
        });
        if !matched {
            out.push(format!("node{}: partition folders {:?}", ix + 1, last));
        }
    }
    out
}
