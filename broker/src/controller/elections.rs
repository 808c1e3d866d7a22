//! Leader elections the controller makes of its own accord or on an operator's request:
//! preferred replicas given their partitions back (automatic leader rebalancing), and
//! ElectLeaders, preferred or unclean; and which brokers may be elected.

use super::{ControllerLogic, Heard, MetadataImage, MetadataRecord, NO_LEADER};
use crate::controller::records::{BrokerId, PartitionRecord};
use crate::io::Instant;

/// How many of its heartbeat intervals a broker may have been silent for and still be elected
/// leader (see [`ControllerLogic::electable`]), within its session.
pub const ELECTABLE_SILENCE_HEARTBEATS: u32 = 3;

/// The most partitions one pass of leader rebalancing gives back to their preferred replicas
/// (Kafka's controller bounds its elections per pass too): one metadata entry stays small, and
/// the rest follow at the next pass.
pub const PREFERRED_ELECTIONS_MAX: usize = 1_000;

/// Which leader an election picks (Kafka's ElectLeaders election types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    /// The preferred replica, if it is in sync, electable and not known to hold damage, in
    /// place of another leader.
    Preferred,
    /// For a partition without a leader: an electable replica, in sync if one is, else any.
    Unclean,
}

impl ControllerLogic {
    /// Partition records giving each partition's leadership back to its preferred replica, the
    /// first of its assignment, where another replica leads it and the preferred one is in sync,
    /// electable (see [`ControllerLogic::electable`]) and not known to hold a damaged batch of
    /// it (it would hand the partition over again at the first read of that batch): automatic
    /// leader rebalancing, as Kafka's controller does it (`auto.leader.rebalance.enable`), so
    /// that leadership moved away by failovers spreads back over the brokers once they return.
    /// The election is clean (the new leader is in the ISR, so it holds everything the high
    /// watermark counts); the old leader stays in the ISR and follows. At most
    /// [`PREFERRED_ELECTIONS_MAX`] partitions at a time.
    pub fn preferred_leaders(&self, image: &MetadataImage, now: Instant) -> Vec<MetadataRecord> {
        self.elect_leaders(image, Election::Preferred, now, |_, _| true)
    }

    /// Partition records electing leaders for the partitions `only` admits (by topic name
    /// and index), at most [`PREFERRED_ELECTIONS_MAX`], for an operator's ElectLeaders. Only
    /// an electable replica is picked (see [`ControllerLogic::electable`]).
    /// - [`Election::Preferred`]: the preferred replica, where another replica leads and it is
    ///   in sync and whole (see [`ControllerLogic::preferred_leaders`]). A partition without a
    ///   leader is left to the registration or return of a replica that may lead it, as before.
    /// - [`Election::Unclean`]: for a partition without a leader, an in-sync replica if one is
    ///   electable, else any electable replica, which becomes the whole ISR (accepting the loss
    ///   of what only the others held), whatever the topic's `unclean.leader.election.enable`.
    ///   Among several, one not known to hold a damaged batch of it. A partition with a leader
    ///   is left alone.
    pub fn elect_leaders(
        &self,
        image: &MetadataImage,
        election: Election,
        now: Instant,
        only: impl Fn(&str, i32) -> bool,
    ) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for topic in image.topics.values() {
            for p in topic.partitions.values().filter(|p| only(&topic.name, p.partition)) {
                if out.len() == PREFERRED_ELECTIONS_MAX {
                    return out;
                }
                let electable = |b: &&BrokerId| self.electable(image, **b, p, now);
                let whole = |b: &&BrokerId| electable(b) && self.answering(**b, p, now);
                let mut next = p.clone();
                match election {
                    Election::Preferred => {
                        let Some(preferred) = p.replicas.first() else { continue };
                        if p.leader == NO_LEADER
                            || p.leader == *preferred
                            || !p.isr.contains(preferred)
                            || !whole(&preferred)
                        {
                            continue;
                        }
                        next.leader = *preferred;
                    }
                    Election::Unclean => {
                        if p.leader != NO_LEADER {
                            continue;
                        }
                        let first_whole = |among: &[BrokerId]| -> Option<BrokerId> {
                            let mut candidates = among.iter();
                            candidates
                                .clone()
                                .find(whole)
                                .or_else(|| candidates.find(electable))
                                .copied()
                        };
                        if let Some(clean) = first_whole(&p.isr) {
                            next.leader = clean;
                        } else if let Some(any) = first_whole(&p.unclean_order()) {
                            tracing::warn!(topic = %topic.name, partition = p.partition, leader = any, "unclean leader election asked for");
                            next.leader = any;
                            next.isr = vec![any];
                        } else {
                            continue;
                        }
                    }
                }
                next.leader_epoch += 1;
                next.partition_epoch += 1;
                out.push(MetadataRecord::Partition(next));
            }
        }
        out
    }

    /// Whether `broker` may be elected leader of `partition` by [`ControllerLogic::elect_leaders`]:
    /// live (neither fenced nor shutting down); heard from by this controller itself (not only
    /// seen in heartbeats copied to it before it became active) within
    /// [`ELECTABLE_SILENCE_HEARTBEATS`] heartbeat intervals, at most a session (one that died a
    /// moment ago is not fenced yet, and a partition handed to it would wait for the fence);
    /// and not reporting the partition's log offline (or unopened, or damaged where it led) in
    /// that heartbeat.
    pub(super) fn electable(
        &self,
        image: &MetadataImage,
        broker: BrokerId,
        partition: &PartitionRecord,
        now: Instant,
    ) -> bool {
        image.is_live(broker) && self.heard_lately(broker, partition, now).is_some()
    }

    /// What this controller last heard from `broker` itself, if within
    /// [`ELECTABLE_SILENCE_HEARTBEATS`] heartbeat intervals (at most a session) before `now`
    /// and not reporting `partition`'s log offline (or unopened, or damaged where it led).
    fn heard_lately(
        &self,
        broker: BrokerId,
        partition: &PartitionRecord,
        now: Instant,
    ) -> Option<&Heard> {
        let window = (self.config.heartbeat_interval * ELECTABLE_SILENCE_HEARTBEATS)
            .min(self.config.session_timeout);
        self.heard.get(&broker).filter(|h| {
            now.saturating_duration_since(h.at) <= window
                && !h.offline.contains(&(partition.topic_id, partition.partition))
        })
    }

    /// [`ControllerLogic::answering`] as of `now`, for the elections a broker's fate forces.
    pub(super) fn answering_at(
        &self,
        now: Instant,
    ) -> impl Fn(BrokerId, &PartitionRecord) -> bool + '_ {
        move |broker, partition| self.answering(broker, partition, now)
    }

    /// Whether this controller has heard from `broker` lately (see
    /// [`ControllerLogic::electable`]), and its last heartbeat reported `partition`'s log there
    /// neither offline, nor holding a damaged batch, nor out of room for writes. The elections
    /// a broker's fate forces, and unclean ones, prefer such a replica; a preferred election
    /// elects only such a replica.
    pub(super) fn answering(
        &self,
        broker: BrokerId,
        partition: &PartitionRecord,
        now: Instant,
    ) -> bool {
        let key = (partition.topic_id, partition.partition);
        self.heard_lately(broker, partition, now)
            .is_some_and(|h| !h.damaged.contains(&key) && !h.full.contains(&key))
    }
}
