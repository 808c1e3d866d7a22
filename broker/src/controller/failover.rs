//! Leader elections forced by a broker's fate: fencing, controlled shutdown, a log gone
//! offline, a restart (in a new epoch, or back on an empty disk), and the return of a replica
//! to partitions that have no leader; and unclean elections where a topic allows them.
//!
//! Each picks among the live replicas it may elect. Where several qualify, it prefers one the
//! controller has heard from lately whose log there is neither offline nor known to hold a
//! damaged batch (see [`Answering`]): a broker that died a moment ago is live until its session
//! ends, and a partition handed to it would wait for that fence; a replica whose log is offline
//! or damaged would hand the partition on, at its next heartbeat or at the first read of the
//! damage. Where none answers (a controller that has just taken
//! over has heard from no one yet), the first that qualifies is picked as before: failover never
//! waits for a heartbeat.

use super::{ControllerLogic, MetadataImage, MetadataRecord, NO_LEADER, TopicImage};
use crate::config::TopicConfig;
use crate::controller::records::{BrokerId, PartitionRecord};
use crate::io::Instant;
use crate::log::config::FlushPolicy;

/// Whether the controller has heard from a broker lately, and its last heartbeat reported the
/// partition's log neither offline nor holding a damaged batch (see
/// [`super::ControllerLogic::answering`]).
pub(super) type Answering<'a> = &'a dyn Fn(BrokerId, &PartitionRecord) -> bool;

/// The first of `candidates` that answers for `p`, else the first of them.
fn pick(
    candidates: impl Iterator<Item = BrokerId> + Clone,
    p: &PartitionRecord,
    answering: Answering,
) -> Option<BrokerId> {
    let mut first = candidates.clone();
    candidates.into_iter().find(|&b| answering(b, p)).or_else(|| first.next())
}

impl ControllerLogic {
    /// [`leadership_away_from`] with this controller's topic defaults and its
    /// preference for replicas that answer as of `now`.
    pub(super) fn leadership_away_from(
        &self,
        image: &MetadataImage,
        broker: BrokerId,
        now: Instant,
        only: impl Fn(&PartitionRecord) -> bool,
    ) -> Vec<MetadataRecord> {
        let defaults = &self.config.topic_defaults;
        leadership_away_from(image, broker, defaults, &self.answering_at(now), only)
    }
}

/// Whether `topic` may elect a leader from outside its ISR (`unclean.leader.election.enable`,
/// its override or the default).
fn unclean_allowed(topic: &TopicImage, defaults: &TopicConfig) -> bool {
    match topic.configs.get("unclean.leader.election.enable") {
        Some(value) => value == "true",
        None => defaults.unclean_leader_election(),
    }
}

/// Partition records moving leadership away from `broker` (fenced, shutting down, with its log
/// offline, or with its log out of room where another in-sync replica answers), for the
/// partitions `only` admits: the next live in-sync replica after it in
/// the assignment's order that answers leads, or the next that does not; with none, a live
/// out-of-sync replica where the topic allows unclean election (it becomes the whole ISR), else
/// none. The broker leaves the ISR unless it is the last member (the last member keeps the
/// partition's committed data: only it may lead again, cleanly).
fn leadership_away_from(
    image: &MetadataImage,
    broker: BrokerId,
    defaults: &TopicConfig,
    answering: Answering,
    only: impl Fn(&PartitionRecord) -> bool,
) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for p in topic.partitions.values().filter(|p| only(p)) {
            if p.leader != broker && !(p.isr.contains(&broker) && p.isr.len() > 1) {
                continue;
            }
            let mut next = p.clone();
            if next.isr.len() > 1 {
                next.isr.retain(|&b| b != broker);
            }
            if p.leader == broker {
                // The next live in-sync replica after it in the assignment's order, round:
                // leadership moved again and again (each leader handing over a damaged log)
                // then comes to every in-sync replica in turn.
                let after = p.replicas.iter().position(|&r| r == broker).map_or(0, |i| i + 1);
                let in_sync = p
                    .replicas
                    .iter()
                    .cycle()
                    .skip(after)
                    .take(p.replicas.len())
                    .copied()
                    .filter(|&b| b != broker && next.isr.contains(&b) && image.is_live(b));
                let clean = pick(in_sync, p, answering).or_else(|| {
                    next.isr.iter().copied().find(|&b| b != broker && image.is_live(b))
                });
                next.leader = match clean {
                    Some(leader) => leader,
                    None if unclean_allowed(topic, defaults) => {
                        let others = p.unclean_order();
                        let live = others.into_iter().filter(|&b| b != broker && image.is_live(b));
                        match pick(live, p, answering) {
                            Some(leader) => {
                                tracing::warn!(topic = %topic.name, partition = p.partition, leader, "unclean leader election");
                                next.isr = vec![leader];
                                leader
                            }
                            None => NO_LEADER,
                        }
                    }
                    None => NO_LEADER,
                };
                next.leader_epoch += 1;
            }
            next.partition_epoch += 1;
            out.push(MetadataRecord::Partition(next));
        }
    }
    out
}

/// Partition records for `broker` registering a new incarnation (it restarted):
///
/// - Every partition it leads starts a new leader epoch. It may have come back with a shorter
///   log — a crash or power failure took its unsynced tail, which followers may already hold.
///   Leading on in the same epoch, it would write new records at those offsets under the same
///   epoch, and no follower could tell its copy diverged; a new epoch starts where the
///   restarted log ends, and followers cut back to it.
/// - After an unclean shutdown, it leaves the ISR of every `flush.policy=interval` partition
///   with another member (KIP-966's "last replica standing" guard): such a log acknowledges
///   what it fetched, not what it synced, so a power failure may have taken records the high
///   watermark already counted. Where it led, the next live in-sync replica leads, or none
///   until one returns. The last member stays: no replica holds more. Under `flush.policy=ack`
///   a follower reports only what it synced, so a restarted replica holds everything it
///   acknowledged and stays.
/// - Back on a new disk (another directory id), it holds nothing: it leaves every ISR, even as
///   the last member. A partition whose ISR it was then has no in-sync replica and no leader
///   (electing the empty log would make every other replica truncate to it) — unless the topic
///   allows unclean election, which picks another live replica at once, or this one if none
///   is up.
pub(super) fn restarted_records(
    image: &MetadataImage,
    broker: BrokerId,
    came_back: Restart,
    defaults: &TopicConfig,
    answering: Answering,
) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics.values() {
        let distrusted = came_back.unclean_shutdown && flushes_on_interval(topic, defaults);
        for p in topic.partitions.values() {
            let leaves_isr =
                p.isr.contains(&broker) && (came_back.new_disk || (distrusted && p.isr.len() > 1));
            if !leaves_isr && p.leader != broker {
                continue;
            }
            let mut next = p.clone();
            if leaves_isr {
                next.isr.retain(|&b| b != broker);
                if next.isr.is_empty() && unclean_allowed(topic, defaults) {
                    // A replica with a log of its own, if one is up, beats the empty one.
                    let others = p.unclean_order();
                    let live = others.into_iter().filter(|&b| b != broker && image.is_live(b));
                    let leader = pick(live, p, answering).unwrap_or(broker);
                    tracing::warn!(topic = %topic.name, partition = p.partition, leader, "unclean leader election");
                    next.leader = leader;
                    next.isr = vec![leader];
                } else if p.leader == broker {
                    let live = next.isr.iter().copied().filter(|&b| image.is_live(b));
                    next.leader = pick(live, p, answering).unwrap_or(NO_LEADER);
                }
            }
            if p.leader == broker || next.leader != p.leader {
                next.leader_epoch += 1;
            }
            next.partition_epoch += 1;
            out.push(MetadataRecord::Partition(next));
        }
    }
    out
}

/// How a registering broker's new run began.
#[derive(Clone, Copy, Debug)]
pub(super) struct Restart {
    /// Its last run ended without a clean shutdown.
    pub(super) unclean_shutdown: bool,
    /// Its data folder is another than the one it registered with before: an empty disk.
    pub(super) new_disk: bool,
}

/// Whether `topic` acknowledges records before they are synced (`flush.policy=interval`, its
/// override or the default).
fn flushes_on_interval(topic: &TopicImage, defaults: &TopicConfig) -> bool {
    match topic.configs.get("flush.policy") {
        Some(value) => value == "interval",
        None => defaults.log_config().flush_policy == FlushPolicy::Interval,
    }
}

/// Partition records electing, in `topic` (whose config now allows unclean election), a leader
/// for each partition that has none and no live in-sync replica: its first live replica that
/// answers, else its first live replica, which becomes the whole ISR. An operator enabling
/// `unclean.leader.election.enable` on a partition stuck without a leader (its in-sync replicas
/// gone, or its last one back on a new disk) gets it served again at once, as in Kafka, at the
/// cost of whatever only those replicas held.
pub(super) fn unclean_elections(
    image: &MetadataImage,
    topic: &TopicImage,
    answering: Answering,
) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for p in topic.partitions.values() {
        if p.leader != NO_LEADER || p.isr.iter().any(|&b| image.is_live(b)) {
            continue;
        }
        let live = p.unclean_order().into_iter().filter(|&b| image.is_live(b));
        let Some(leader) = pick(live, p, answering) else {
            continue;
        };
        tracing::warn!(topic = %topic.name, partition = p.partition, leader, "unclean leader election");
        let mut next = p.clone();
        next.leader = leader;
        next.isr = vec![leader];
        next.leader_epoch += 1;
        next.partition_epoch += 1;
        out.push(MetadataRecord::Partition(next));
    }
    out
}

/// Partition records giving `broker` leadership of partitions that have no leader and list it
/// in sync — or, where the topic allows unclean election, of leaderless partitions it is a
/// replica of whose in-sync replicas are all down (it becomes the whole ISR).
pub(super) fn leaderless_to(
    image: &MetadataImage,
    broker: BrokerId,
    defaults: &TopicConfig,
) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for p in topic.partitions.values() {
            if p.leader != NO_LEADER || !p.replicas.contains(&broker) {
                continue;
            }
            let mut next = p.clone();
            if !p.isr.contains(&broker) {
                let isr_down = !p.isr.iter().any(|&b| image.is_live(b));
                if !(isr_down && unclean_allowed(topic, defaults)) {
                    continue;
                }
                tracing::warn!(topic = %topic.name, partition = p.partition, leader = broker, "unclean leader election");
                next.isr = vec![broker];
            }
            next.leader = broker;
            next.leader_epoch += 1;
            next.partition_epoch += 1;
            out.push(MetadataRecord::Partition(next));
        }
    }
    out
}
