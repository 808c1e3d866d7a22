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
use crate::client::fetch::FetchWant;
use crate::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use crate::workload::damage;
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
    let bound = FINAL_BOUND + DAMAGE_BOUND * damage::DAMAGED_BATCHES_MAX as u32;
    let outcome = cluster.client_call(bound, move |env: Env| async move {
        let mut violations = Vec::new();
        let (mut skipped, mut unwritten, mut unseen) = (Vec::new(), Vec::new(), Vec::new());
        for t in &topics {
            for partition in (0..t.partitions).filter(|&p| !given_up.contains(&(t.name.clone(), p)))
            {
                let value = Bytes::from(format!("final-{}-{partition}", t.name));
                let mut written = None;
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
                            written = Some(acks[0].base_offset);
                            break;
                        }
                    }
                    env.clock.sleep(Duration::from_millis(200)).await;
                }
                if written.is_none() {
                    unwritten.push((t.name.clone(), partition));
                }
                // Read back even without the final write: what was acknowledged before must be
                // there, whether or not refusing the write was allowed.
                let tp = (t.name.as_str(), partition);
                let reach = written.map_or(0, |at| at + 1);
                let read = read_back(&env, &addrs, &ledger, tp, t.retained, reach);
                let (found, passed, beyond) = read.await;
                violations.extend(found);
                skipped.extend(passed.into_iter().map(|o| (t.name.clone(), partition, o)));
                unseen.extend(beyond.into_iter().map(|o| (t.name.clone(), partition, o)));
            }
        }
        (violations, skipped, unwritten, unseen)
    });
    let Some((mut violations, skipped, unwritten, unseen)) = outcome else {
        return vec![format!("the final writes and reads did not finish within {FINAL_BOUND:?}")];
    };
    let damaged = lock(shared).damaged.clone();
    // The in-sync replicas of a partition that hold no batch damaged within `offsets`.
    let intact = |cluster: &Cluster, (topic, partition): (&str, i32), offsets: (i64, i64)| {
        let isr = cluster.committed_partition(topic, partition).map(|p| p.isr).unwrap_or_default();
        let on = damaged.get(&(topic.to_owned(), partition)).cloned().unwrap_or_default();
        let holds = |ix: usize| {
            on.iter().any(|&(at, base, last)| at == ix && base <= offsets.1 && offsets.0 <= last)
        };
        let intact: Vec<i32> =
            isr.into_iter().filter(|&id| cluster.ix_of(id).is_none_or(|ix| !holds(ix))).collect();
        intact
    };
    // A partition may refuse acks=all writes for good only where every in-sync replica holds a
    // damaged batch: then no follower can copy past it to join the ISR again, and below
    // `min.insync.replicas` the high watermark cannot move (so records acknowledged past the
    // one a restarted leader recovered stay unseen).
    for (topic, partition) in unwritten {
        if !intact(cluster, (&topic, partition), (0, i64::MAX)).is_empty() {
            violations.push(format!("{topic}-{partition} took no write after the heal"));
        }
    }
    for (topic, partition, offset) in unseen {
        if !intact(cluster, (&topic, partition), (0, i64::MAX)).is_empty() {
            violations.push(format!("{topic}-{partition}@{offset}: acked, past the final read"));
        }
    }
    // An offset is left unread for good only where every in-sync replica's copy is damaged.
    for (topic, partition, offset) in skipped {
        let intact = intact(cluster, (&topic, partition), (offset, offset));
        if !intact.is_empty() {
            violations.push(format!(
                "{topic}-{partition}@{offset}: CORRUPT_MESSAGE for good, while in-sync replicas \
                 {intact:?} hold it intact"
            ));
        }
    }
    violations
}

/// What the final read of one partition found.
struct PartitionRead {
    /// The records read, by offset.
    records: BTreeMap<i64, Bytes>,
    /// Offsets read past as damaged.
    skipped: Vec<i64>,
    /// Where the read ended (the high watermark then).
    end: i64,
    /// The highest log start the read moved up to, having found the log starting past where
    /// it was (0 if it never did).
    moved_to: i64,
}

/// How long the final read asks again for a batch answered CORRUPT_MESSAGE (its leader hands
/// the partition over to an in-sync replica with an intact copy), before it reads past it.
const DAMAGE_BOUND: Duration = Duration::from_secs(20);
/// Between those asks, and after other errors.
const READ_PAUSE: Duration = Duration::from_millis(250);
/// Fetches the final read of one partition makes at most.
const READ_FETCHES_MAX: usize = 2_000;

/// Every record of `topic`/`partition` from its log start up to the high watermark, and at least
/// to `reach` (a new leader's high watermark may take a moment to cover the last acknowledged
/// write), by offset, from whichever broker leads it as Metadata names it (asked again after
/// every error). A batch
/// answered CORRUPT_MESSAGE is asked for again for [`DAMAGE_BOUND`]; offsets still answered so
/// are then read past, one at a time, as an application would, and returned apart. A corrupt
/// batch served (caught by the client's CRC check) is an error: nothing damages disks now.
/// Also returned: the highest log start the read found past where it was, and moved up to.
async fn read_past_damage(
    env: &Env,
    addrs: &[std::net::SocketAddr],
    (topic, partition): (&str, i32),
    reach: i64,
) -> Result<PartitionRead, String> {
    let (mut out, mut skipped) = (BTreeMap::new(), Vec::new());
    let mut at = 0;
    let mut moved_to = 0;
    // Since when the damage the read is at has been answered CORRUPT_MESSAGE.
    let mut corrupt_since: Option<weir::io::Instant> = None;
    let mut leader = None;
    for _ in 0..READ_FETCHES_MAX {
        let Some(addr) = leader else {
            let mut meta = Client::new(env.clone(), addrs[0], "final-read");
            leader = meta
                .cluster_view(Some(&[topic]))
                .await
                .ok()
                .and_then(|v| v.leader_addr(topic, partition))
                .map(|(_, addr)| addr);
            if leader.is_none() {
                env.clock.sleep(READ_PAUSE).await;
            }
            continue;
        };
        let mut client = Client::new(env.clone(), addr, "final-read");
        let want = FetchWant { topic: topic.to_owned(), partition, offset: at };
        let answer = client.fetch(&[want], Duration::from_millis(100)).await;
        let Some(p) = answer.ok().and_then(|parts| parts.into_iter().next()) else {
            leader = None;
            env.clock.sleep(READ_PAUSE).await;
            continue;
        };
        if p.error_code == codes::OFFSET_OUT_OF_RANGE && at < p.log_start_offset {
            at = p.log_start_offset;
            moved_to = at;
            continue;
        }
        if let Some(why) = p.corrupt {
            return Err(format!("corrupt batch served at {at}: {why}"));
        }
        if p.error_code == codes::CORRUPT_MESSAGE {
            let now = env.clock.now();
            let since = *corrupt_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= DAMAGE_BOUND {
                skipped.push(at);
                at += 1;
            } else {
                leader = None;
                env.clock.sleep(READ_PAUSE).await;
            }
            continue;
        }
        if p.error_code != codes::NONE {
            leader = None;
            env.clock.sleep(READ_PAUSE).await;
            continue;
        }
        if p.records.is_empty() {
            if at < p.high_watermark {
                return Err(format!("nothing readable at {at} below {}", p.high_watermark));
            }
            if at >= reach {
                return Ok(PartitionRead { records: out, skipped, end: at, moved_to });
            }
            // A new leader's high watermark may not cover the last acknowledged write yet.
            env.clock.sleep(READ_PAUSE).await;
            continue;
        }
        corrupt_since = None;
        for r in p.records {
            at = r.offset + 1;
            out.insert(r.offset, r.value.unwrap_or_default());
        }
    }
    Err(format!("not read to its end in {READ_FETCHES_MAX} fetches (at {at})"))
}

/// Reads `topic`/`partition` from its start and checks every acknowledged record (for a topic
/// with `retention.bytes`, every one from the first offset read), but two kinds the caller
/// judges, returned apart: those at offsets read past as damaged, and, where the partition took
/// no final write (`reach` 0), those past the high watermark the read ended at.
async fn read_back(
    env: &Env,
    addrs: &[std::net::SocketAddr],
    shared: &Shared,
    (topic, partition): (&str, i32),
    retained: bool,
    reach: i64,
) -> (Vec<String>, Vec<i64>, Vec<i64>) {
    let found = read_past_damage(env, addrs, (topic, partition), reach).await;
    let PartitionRead { records: read, skipped, end, moved_to } = match found {
        Ok(read) => read,
        Err(e) => {
            return (vec![format!("{topic}-{partition}: final read: {e}")], Vec::new(), Vec::new());
        }
    };
    let mut unseen = Vec::new();
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
        if offset >= end && reach == 0 {
            // Past the high watermark of a partition that took no final write: judged apart.
            unseen.push(offset);
            continue;
        }
        // Retention may delete the segments ahead of a read that waits on damage: what the
        // read found deleted before it got there is gone as the topic's settings allow.
        if retained && offset < moved_to && !read.contains_key(&offset) {
            continue;
        }
        if read.get(&offset) != Some(&value) && !skipped.contains(&offset) {
            out.push(format!(
                "{topic}-{partition}@{offset}: acked {value:?} but read {:?}",
                read.get(&offset)
            ));
        }
    }
    (out, skipped, unseen)
}

/// Replica convergence: every partition of every surviving topic with more than one replica
/// must come to have its in-sync replicas byte-identical to the leader up to the high
/// watermark, apart from the batches damaged in place on either.
pub(super) fn final_convergence(
    cluster: &mut Cluster,
    shared: &Shared,
    given_up: &BTreeSet<(String, i32)>,
) -> Vec<String> {
    let (topics, damaged) = {
        let l = lock(shared);
        (l.live_topics(), l.damaged.clone())
    };
    let mut out = Vec::new();
    for t in topics.iter().filter(|t| t.replication > 1) {
        for partition in (0..t.partitions).filter(|&p| !given_up.contains(&(t.name.clone(), p))) {
            let apart = damaged.get(&(t.name.clone(), partition)).cloned().unwrap_or_default();
            let mut last = Ok(());
            let converged = (0..(FINAL_BOUND.as_millis() / 500)).any(|_| {
                last = cluster.replicas_converged_apart(&t.name, partition, &apart);
                if last.is_err() {
                    cluster.run_for(Duration::from_millis(500));
                }
                last.is_ok()
            });
            if !converged {
                out.push(format!("replicas did not converge: {}", last.err().unwrap_or_default()));
                continue;
            }
            if let Err(why) = repaired(cluster, &t.name, partition, &apart) {
                out.push(why);
            }
        }
    }
    out
}

/// With the scrub on, a damaged copy on an in-sync follower is found and repaired from the
/// leader's where that is intact (the nemesis damaged no overlapping batch on the leader's
/// node): within [`REPAIR_BOUND`], the replicas must converge excusing only damage on the
/// leader's node and the followers' damage it overlaps. (A leader does not repair its own copy:
/// it hands the partition over once, then only notes damage; and where no scrub runs, damage no
/// read meets stays unknown.)
fn repaired(
    cluster: &mut Cluster,
    topic: &str,
    partition: i32,
    damaged: &[(usize, i64, i64)],
) -> Result<(), String> {
    if cluster.spec.scrub_interval_ms == 0 || damaged.is_empty() {
        return Ok(());
    }
    let excused = |cluster: &Cluster| -> Vec<(usize, i64, i64)> {
        let leader = cluster
            .committed_partition(topic, partition)
            .and_then(|p| cluster.ix_of(p.leader))
            .unwrap_or(usize::MAX);
        let on_leader: Vec<(i64, i64)> =
            damaged.iter().filter(|d| d.0 == leader).map(|d| (d.1, d.2)).collect();
        let overlaps = |d: &(usize, i64, i64)| on_leader.iter().any(|&(a, b)| a <= d.2 && d.1 <= b);
        damaged.iter().copied().filter(|d| d.0 == leader || overlaps(d)).collect()
    };
    let bound = REPAIR_BOUND + Duration::from_millis(cluster.spec.scrub_interval_ms);
    let mut last = Ok(());
    let converged = (0..(bound.as_millis() / 500)).any(|_| {
        let apart = excused(cluster);
        last = cluster.replicas_converged_apart(topic, partition, &apart);
        if last.is_err() {
            cluster.run_for(Duration::from_millis(500));
        }
        last.is_ok()
    });
    match converged {
        true => Ok(()),
        false => Err(format!(
            "damage {damaged:?} (node index, first, last) was not repaired from an intact copy within {bound:?}: {}",
            last.err().unwrap_or_default()
        )),
    }
}

/// How long a follower's damaged copy may take to be repaired after the replicas converged,
/// beyond one scrub interval: a pass over the swarm's small logs, and the repair's fetch.
const REPAIR_BOUND: Duration = Duration::from_secs(30);

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
