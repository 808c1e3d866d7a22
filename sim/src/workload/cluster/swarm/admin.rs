//! The swarm's admin task: it creates, grows, reconfigures and deletes topics, deletes records
//! and moves partitions' replicas (or cancels a move) through random nodes, and notes in the
//! ledger what the checks may then expect.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use weir::io::Env;

use super::super::group::SharedGroup;
use super::{Shared, TopicState, any_node, below};
use crate::client::Client;
use crate::world::lock;

/// Topics the admin task keeps alive at most.
const TOPICS_MAX: usize = 4;
/// Partitions a topic may grow to.
const PARTITIONS_MAX: i32 = 6;
/// `segment.bytes` a topic may get: Kafka's default, or segments small enough that logs roll
/// every few batches (so truncation, recovery and DeleteRecords cross segment boundaries).
const SEGMENT_BYTES: [&str; 3] = ["1073741824", SMALL_SEGMENT_BYTES, "4096"];
/// The smallest `segment.bytes` drawn.
const SMALL_SEGMENT_BYTES: &str = "1024";
/// `retention.bytes` of the topics that get one.
const RETENTION_BYTES: &str = "4096";
/// The `timeout_ms` of the admin task's DeleteRecords and CreatePartitions, and how long it
/// waits for a config change.
const ADMIN_WAIT: Duration = Duration::from_secs(5);

/// Creates and deletes topics through random nodes until told to stop.
pub(super) async fn admin(
    env: Env,
    addrs: Arc<Vec<std::net::SocketAddr>>,
    (shared, group): (Shared, SharedGroup),
    stop: Arc<AtomicBool>,
) {
    let mut next = 0u32;
    while !stop.load(Ordering::Relaxed) {
        env.clock.sleep(Duration::from_millis(500 + below(&env, 2_500))).await;
        let live = lock(&shared).live_topics();
        let step = below(&env, 9);
        if !live.is_empty() && step == 8 {
            reassign(&env, &addrs, &shared, &live).await;
        } else if !live.is_empty() && step < 2 {
            delete_records(&env, &addrs, &shared, &live).await;
        } else if !live.is_empty() && step == 2 {
            grow(&env, &addrs, &shared, &live).await;
        } else if !live.is_empty() && step == 3 {
            reconfigure(&env, &addrs, &shared, &live).await;
        } else if live.len() < TOPICS_MAX && (live.is_empty() || below(&env, 3) != 0) {
            let name = format!("t{next}");
            next += 1;
            let partitions = 1 + below(&env, 4) as i32;
            let replication = 1 + below(&env, addrs.len().min(3) as u64) as i16;
            let min_isr = (1 + below(&env, 2) as i16).min(replication).to_string();
            let segment = SEGMENT_BYTES[below(&env, SEGMENT_BYTES.len() as u64) as usize];
            // Small segments under a small retention.bytes: retention deletes segments all
            // along, on leaders and followers alike, amid the faults.
            let retained = segment == SMALL_SEGMENT_BYTES && below(&env, 2) == 0;
            let retention = if retained { RETENTION_BYTES } else { "-1" };
            let configs = [
                ("flush.policy", "ack"),
                ("min.insync.replicas", min_isr.as_str()),
                ("segment.bytes", segment),
                ("retention.bytes", retention),
            ];
            // Retry until answered: an unanswered create may or may not have happened, and
            // an existing topic is the answer to a retry of one that did.
            loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let mut client = any_node(&env, &addrs, "admin");
                match client.create_replicated_topic(&name, partitions, replication, &configs).await
                {
                    Ok(()) => {
                        let mut l = lock(&shared);
                        l.creates += 1;
                        l.topics.push(TopicState {
                            name: name.clone(),
                            partitions,
                            replication,
                            deleting: false,
                            retained,
                        });
                        break;
                    }
                    Err(_) => env.clock.sleep(Duration::from_millis(200)).await,
                }
            }
        } else if let Some(victim) = live.get(below(&env, live.len() as u64) as usize) {
            {
                let mut l = lock(&shared);
                l.deletes += 1;
                if let Some(t) = l.topics.iter_mut().find(|t| t.name == victim.name) {
                    t.deleting = true;
                }
            }
            {
                // Its committed offsets may go from now on.
                let mut g = lock(&group);
                let sent = g.history.tick();
                g.history.topic_deletions.entry(victim.name.clone()).or_insert(sent);
            }
            let mut client = any_node(&env, &addrs, "admin");
            let _ = client.delete_topic(&victim.name).await;
        }
    }
}

/// CreatePartitions on one of `live`, by one or two partitions (to at most
/// [`PARTITIONS_MAX`]), through a random node. Only an answered growth counts: an unanswered
/// one may or may not have happened, and then its partitions are just not checked.
async fn grow(env: &Env, addrs: &[std::net::SocketAddr], shared: &Shared, live: &[TopicState]) {
    let topic = &live[below(env, live.len() as u64) as usize];
    let count = (topic.partitions + 1 + below(env, 2) as i32).min(PARTITIONS_MAX);
    if count <= topic.partitions {
        return;
    }
    let mut client = any_node(env, addrs, "admin");
    if client.create_partitions(&topic.name, count, ADMIN_WAIT).await.is_ok() {
        let mut l = lock(shared);
        l.grown += 1;
        if let Some(t) = l.topics.iter_mut().find(|t| t.name == topic.name) {
            t.partitions = t.partitions.max(count);
        }
    }
}

/// Changes `min.insync.replicas` (within the replication factor) or `segment.bytes` of one of
/// `live` through a random node.
async fn reconfigure(
    env: &Env,
    addrs: &[std::net::SocketAddr],
    shared: &Shared,
    live: &[TopicState],
) {
    let topic = &live[below(env, live.len() as u64) as usize];
    let min_isr = (1 + below(env, topic.replication as u64)).to_string();
    let config = if below(env, 2) == 0 {
        ("min.insync.replicas", min_isr.as_str())
    } else {
        ("segment.bytes", SEGMENT_BYTES[below(env, SEGMENT_BYTES.len() as u64) as usize])
    };
    let mut client = any_node(env, addrs, "admin");
    if client.set_topic_config(&topic.name, config, ADMIN_WAIT).await.is_ok() {
        lock(shared).reconfigured += 1;
    }
}

/// Moves a random partition of one of `live` to as many random nodes as it has replicas, or
/// one time in four cancels the move in progress there (if any), through a random node. The
/// checks need nothing noted: every acknowledged write must read back wherever the partition's
/// replicas are, and the heal waits for every move to complete.
async fn reassign(env: &Env, addrs: &[std::net::SocketAddr], shared: &Shared, live: &[TopicState]) {
    let topic = &live[below(env, live.len() as u64) as usize];
    let partition = below(env, topic.partitions as u64) as i32;
    let target = if below(env, 4) == 0 {
        None
    } else {
        let mut nodes: Vec<i32> = (0..addrs.len()).map(crate::workload::cluster::node_id).collect();
        let mut target = Vec::new();
        while target.len() < topic.replication as usize && !nodes.is_empty() {
            target.push(nodes.swap_remove(below(env, nodes.len() as u64) as usize));
        }
        Some(target)
    };
    let mut client = any_node(env, addrs, "admin");
    let changes = [(topic.name.as_str(), partition, target)];
    if let Ok(answers) = client.alter_reassignments(&changes).await
        && answers.values().all(|&code| code == crate::client::codes::NONE)
    {
        lock(shared).reassigned += 1;
    }
}

/// DeleteRecords on a random partition of one of `live`, below one of its acknowledged
/// offsets, through the leader a random node names.
async fn delete_records(
    env: &Env,
    addrs: &[std::net::SocketAddr],
    shared: &Shared,
    live: &[TopicState],
) {
    let topic = &live[below(env, live.len() as u64) as usize];
    let partition = below(env, topic.partitions as u64) as i32;
    let tp = (topic.name.clone(), partition);
    let offsets: Vec<i64> = lock(shared)
        .acked
        .range((tp.0.clone(), partition, 0)..(tp.0.clone(), partition + 1, 0))
        .map(|((_, _, o), _)| *o)
        .collect();
    let Some(&offset) = offsets.get(below(env, offsets.len() as u64) as usize) else { return };
    let Ok(view) = any_node(env, addrs, "admin").cluster_view(Some(&[topic.name.as_str()])).await
    else {
        return;
    };
    let Some((_, leader)) = view.leader_addr(&topic.name, partition) else { return };
    {
        let mut l = lock(shared);
        let asked = l.delete_asked.entry(tp.clone()).or_insert(0);
        *asked = (*asked).max(offset);
    }
    let mut client = Client::new(env.clone(), leader, "admin");
    let answer = client.delete_records(&topic.name, partition, offset, ADMIN_WAIT).await;
    if let Ok(low) = answer {
        let mut l = lock(shared);
        l.record_deletes += 1;
        if low < offset {
            l.anomalies.push(format!(
                "{}-{partition}: DeleteRecords below {offset} answered a low watermark of {low}",
                topic.name
            ));
        }
        l.deleted.entry(tp).or_default().push((low, env.clock.now()));
    }
}
