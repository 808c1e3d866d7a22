//! The active controller's decisions, sans-IO: given the committed metadata image and a
//! request (or the passing of time), which records to append. Placement of new partitions,
//! topic and partition changes, broker registration, heartbeats, fencing and producer-id
//! blocks live here; the leadership moves that follow a broker's fate in the child module
//! `failover`, and preferred and operator-asked elections in `elections`. The shell in
//! [`super::service`] only feeds requests in one at a time and appends what comes out.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::image::{MetadataImage, TopicImage};
use super::records::{
    BrokerEpoch, BrokerId, BrokerRegistration, Incarnation, MetadataRecord, NO_LEADER,
    PartitionRecord,
};
use super::rpc::LogReports;
use crate::catalog::TOPIC_PARTITIONS_MAX;
use crate::config::{ConfigChange, ConfigError, TopicConfig};
use crate::io::Instant;
use crate::model::TopicId;
use crate::topics::{self, TopicNameError};

/// Producer ids handed to a broker at a time.
pub const PRODUCER_ID_BLOCK: i64 = 1_000;

/// Why the controller refused a request (each maps to a Kafka error code).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    /// NOT_CONTROLLER: ask the active controller.
    #[error("not the active controller")]
    NotController,
    /// TOPIC_ALREADY_EXISTS.
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    /// UNKNOWN_TOPIC_OR_PARTITION.
    #[error("topic {0:?} does not exist")]
    UnknownTopic(String),
    /// INVALID_TOPIC_EXCEPTION.
    #[error("{0}")]
    BadName(String),
    /// INVALID_PARTITIONS.
    #[error("invalid partition count {0}: must be from 1 to {TOPIC_PARTITIONS_MAX} and not shrink")]
    BadPartitions(i32),
    /// INVALID_REPLICATION_FACTOR.
    #[error("replication factor {wanted} is larger than the {live} available brokers")]
    BadReplication {
        /// Asked for.
        wanted: i32,
        /// Brokers that could host replicas.
        live: usize,
    },
    /// INVALID_CONFIG.
    #[error("{0}")]
    BadConfig(String),
    /// Internal topics cannot be deleted or grown by clients.
    #[error("topic {0:?} is internal")]
    Internal(String),
    /// The broker's registration is not current: it must register again.
    #[error("broker {0} is not registered with that incarnation")]
    StaleBroker(BrokerId),
    /// The request could not be completed in time (the quorum may be changing leader).
    #[error("the controller timed out")]
    Timeout,
    /// An ISR change from a leader that is not the current one, or based on an older
    /// partition epoch (Kafka's FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION).
    #[error("stale partition change: {0}")]
    StalePartition(String),
    /// An ISR change naming a replica that may not join it (INELIGIBLE_REPLICA).
    #[error("ineligible replica: {0}")]
    IneligibleReplica(String),
    /// A reassignment's replicas are not a valid assignment (INVALID_REPLICA_ASSIGNMENT).
    #[error("invalid replica assignment: {0}")]
    BadAssignment(String),
    /// A cancel of a reassignment that is not in progress (NO_REASSIGNMENT_IN_PROGRESS).
    #[error("{0}")]
    NoReassignment(String),
    /// A reassignment that would change the replication factor where the request does not
    /// allow it (INVALID_REPLICATION_FACTOR, KIP-860).
    #[error("the reassignment changes the replication factor from {from} to {to}")]
    ReplicationFactorChange {
        /// The partition's replication factor.
        from: i32,
        /// The target's.
        to: i32,
    },
}

impl From<TopicNameError> for ControllerError {
    fn from(e: TopicNameError) -> ControllerError {
        ControllerError::BadName(e.to_string())
    }
}

impl From<ConfigError> for ControllerError {
    fn from(e: ConfigError) -> ControllerError {
        ControllerError::BadConfig(e.to_string())
    }
}

/// A topic to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTopic {
    /// Its name.
    pub name: String,
    /// Partitions (−1: the default).
    pub partitions: i32,
    /// Replication factor (−1: the default).
    pub replication: i32,
    /// Configuration overrides.
    pub configs: Vec<(String, String)>,
    /// The replicas of each partition, in partition order, the first the preferred leader
    /// (CreateTopics' explicit assignments, with `partitions` and `replication` −1); empty:
    /// the controller places them.
    pub assignments: Vec<Vec<BrokerId>>,
}

/// An ISR change a partition leader asks for.
#[derive(Clone, Copy, Debug)]
pub struct IsrChange<'a> {
    /// The leader asking.
    pub broker_id: BrokerId,
    /// The partition's topic.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The leader epoch it leads in.
    pub leader_epoch: i32,
    /// The partition epoch the change is based on.
    pub partition_epoch: i32,
    /// The ISR asked for.
    pub isr: &'a [BrokerId],
    /// Members added, each with the broker epoch of the run whose progress made it eligible
    /// (empty from leaders that do not know them).
    pub joining: &'a [(BrokerId, BrokerEpoch)],
}

/// The controller's settings.
#[derive(Clone, Debug)]
pub struct LogicConfig {
    /// Topic configuration defaults, to validate overrides against.
    pub topic_defaults: TopicConfig,
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i32,
    /// A broker that has not heartbeated for this long is fenced.
    pub session_timeout: Duration,
    /// How often brokers heartbeat (`broker.heartbeat.interval.ms`).
    pub heartbeat_interval: Duration,
}

/// The least time a controller taking over gives a broker it has heard from to heartbeat to it
/// before fencing it: two of the default heartbeat intervals, for a live broker to learn of the
/// new controller and reach it.
pub const TAKEOVER_GRACE: Duration = Duration::from_millis(500);

/// The active controller's volatile state.
pub struct ControllerLogic {
    config: LogicConfig,
    /// When each broker last heartbeated, by this controller's clock.
    heartbeats: BTreeMap<BrokerId, Instant>,
    /// Rotates the first broker of each placement.
    placement_start: usize,
    /// For each broker that registered or heartbeated to this controller since it became
    /// active: when last, and the partitions its last heartbeat reported offline, damaged or
    /// out of room there.
    heard: BTreeMap<BrokerId, Heard>,
}

/// What the active controller last heard from a broker itself.
struct Heard {
    /// When.
    at: Instant,
    /// The partitions it reported offline there.
    offline: BTreeSet<(TopicId, i32)>,
    /// The partitions it reported holding a damaged batch there.
    damaged: BTreeSet<(TopicId, i32)>,
    /// The partitions it reported out of room for writes there.
    full: BTreeSet<(TopicId, i32)>,
}

impl Heard {
    /// Heard at `at`, reporting every log whole.
    fn whole(at: Instant) -> Heard {
        Heard { at, offline: BTreeSet::new(), damaged: BTreeSet::new(), full: BTreeSet::new() }
    }
}

impl ControllerLogic {
    /// Fresh state for a newly active controller that knows nothing of the brokers' last
    /// heartbeats: every broker gets a full session from `now` before it can be fenced.
    pub fn new(config: LogicConfig, image: &MetadataImage, now: Instant) -> ControllerLogic {
        ControllerLogic::taking_over(config, image, now, &BTreeMap::new())
    }

    /// Fresh state for a controller becoming active at `now` that last heard from each broker
    /// at `seen` (brokers copy their heartbeats to every voter). A broker's session runs from
    /// then — so a broker that died with the previous controller is fenced a session after its
    /// death, not a session after the election — but never ends sooner than
    /// [`TAKEOVER_GRACE`] from now, time for a live broker to find the new controller. A
    /// broker not seen at all gets a full session.
    pub fn taking_over(
        config: LogicConfig,
        image: &MetadataImage,
        now: Instant,
        seen: &BTreeMap<BrokerId, Instant>,
    ) -> ControllerLogic {
        let grace = TAKEOVER_GRACE.min(config.session_timeout);
        // A session running from here ends `grace` from now.
        let earliest = now.saturating_add(grace).saturating_sub(config.session_timeout);
        let heartbeats = image
            .brokers
            .keys()
            .map(|&id| (id, seen.get(&id).map_or(now, |&at| at.max(earliest).min(now))))
            .collect();
        ControllerLogic {
            config,
            heartbeats,
            placement_start: image.topics.len(),
            heard: BTreeMap::new(),
        }
    }

    /// Records registering a broker, and giving it back leadership of partitions that have
    /// none and list it in sync.
    pub fn register(
        &mut self,
        image: &MetadataImage,
        registration: BrokerRegistration,
        now: Instant,
    ) -> Vec<MetadataRecord> {
        let id = registration.broker_id;
        self.heartbeats.insert(id, now);
        self.heard.insert(id, Heard::whole(now));
        let restarted = image
            .brokers
            .get(&id)
            .is_some_and(|b| b.registration.incarnation != registration.incarnation);
        let came_back = Restart {
            unclean_shutdown: registration.unclean_shutdown,
            new_disk: image.brokers.get(&id).is_some_and(|b| {
                matches!((b.registration.directory, registration.directory),
                    (Some(before), Some(now)) if before != now)
            }),
        };
        if came_back.new_disk {
            tracing::warn!(
                broker = id,
                "registered with a new data folder: it holds no record and leaves every ISR"
            );
        }
        let mut out = vec![MetadataRecord::RegisterBroker(registration)];
        if restarted {
            let defaults = &self.config.topic_defaults;
            out.extend(restarted_records(image, id, came_back, defaults, &self.answering_at(now)));
        }
        let changed: BTreeSet<(TopicId, i32)> = out
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition(p) => Some((p.topic_id, p.partition)),
                _ => None,
            })
            .collect();
        out.extend(
            leaderless_to(image, id, &self.config.topic_defaults).into_iter().filter(|r| {
                !matches!(r, MetadataRecord::Partition(p) if changed.contains(&(p.topic_id, p.partition)))
            }),
        );
        out
    }

    /// A heartbeat: records unfencing the broker (and its leadership back) if it was fenced,
    /// or starting its controlled shutdown (its leadership moved away).
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        broker_id: BrokerId,
        incarnation: Incarnation,
        shutdown: bool,
        reports: &LogReports,
        now: Instant,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let broker = image
            .brokers
            .get(&broker_id)
            .filter(|b| b.registration.incarnation == incarnation)
            .ok_or(ControllerError::StaleBroker(broker_id))?;
        self.heartbeats.insert(broker_id, now);
        if shutdown {
            // Not elected again by this controller, even if its shutdown does not commit.
            self.heard.remove(&broker_id);
            if broker.shutting_down {
                return Ok(Vec::new());
            }
            let mut out = vec![MetadataRecord::ShutdownBroker { broker_id, incarnation }];
            out.extend(self.leadership_away_from(image, broker_id, now, |_| true));
            return Ok(out);
        }
        let LogReports { offline, damaged, full } = reports;
        let heard = Heard {
            at: now,
            offline: offline.iter().copied().collect(),
            damaged: damaged.iter().copied().collect(),
            full: full.iter().copied().collect(),
        };
        self.heard.insert(broker_id, heard);
        // A log out of room gives way only to another in-sync replica that is live and
        // answering (heard from lately, reporting its log neither offline, damaged nor out of
        // room), which leads cleanly: never to no leader, nor to an unclean election.
        let able = |b: BrokerId, p: &PartitionRecord| {
            b != broker_id && image.is_live(b) && self.answering(b, p, now)
        };
        let gone = |p: &PartitionRecord| {
            let key = (p.topic_id, p.partition);
            offline.contains(&key) || (full.contains(&key) && p.isr.iter().any(|&b| able(b, p)))
        };
        let away = self.leadership_away_from(image, broker_id, now, gone);
        if !away.is_empty() {
            tracing::warn!(
                broker_id,
                partitions = away.len(),
                "moving partitions away from logs that went offline or out of room"
            );
        }
        if broker.fenced {
            let mut out = vec![MetadataRecord::UnfenceBroker { broker_id, incarnation }];
            out.extend(away);
            out.extend(leaderless_to(image, broker_id, &self.config.topic_defaults));
            return Ok(out);
        }
        Ok(away)
    }

    /// The records fencing the first broker whose session expired by `now`, if any. One at a
    /// time: each batch's partition changes are computed from `image`, so the next broker's
    /// must be computed from the image with this batch applied (two fences from one image
    /// would each undo the other's ISR removal).
    pub fn expire(&mut self, image: &MetadataImage, now: Instant) -> Option<Vec<MetadataRecord>> {
        for broker in image.live_brokers() {
            let id = broker.registration.broker_id;
            let last = *self.heartbeats.entry(id).or_insert(now);
            if now.saturating_duration_since(last) > self.config.session_timeout {
                let incarnation = broker.registration.incarnation;
                let mut batch = vec![MetadataRecord::FenceBroker { broker_id: id, incarnation }];
                batch.extend(self.leadership_away_from(image, id, now, |_| true));
                return Some(batch);
            }
        }
        None
    }

    /// Records creating `topic` (or, with `validate_only`, none), with its partitions placed
    /// across live brokers.
    pub fn create_topic(
        &mut self,
        image: &MetadataImage,
        topic: &NewTopic,
        validate_only: bool,
        topic_id: TopicId,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        topics::validate_name(&topic.name)?;
        if image.topic(&topic.name).is_some() {
            return Err(ControllerError::TopicExists(topic.name.clone()));
        }
        let manual = !topic.assignments.is_empty();
        let partitions = match topic.partitions {
            _ if manual => i32::try_from(topic.assignments.len()).unwrap_or(i32::MAX),
            -1 => self.config.num_partitions,
            n => n,
        };
        if !(1..=TOPIC_PARTITIONS_MAX).contains(&partitions) {
            return Err(ControllerError::BadPartitions(partitions));
        }
        // The default as configured, as in Kafka: too few live brokers for it refuses the
        // topic (the client tries again), never makes it with fewer replicas for good. (The
        // offsets topic is asked for with as many as are live, up to the default: see
        // `create_offsets_topic`.)
        let replication = if topic.replication == -1 {
            self.config.default_replication_factor
        } else {
            topic.replication
        };
        let mut config = self.config.topic_defaults.clone();
        config.apply(topic.configs.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))))?;
        config.check_consistent()?;
        let placement = if manual {
            manual_placement(image, &topic.assignments)?
        } else {
            self.place(image, 0, partitions, replication)?
        };
        if validate_only {
            return Ok(Vec::new());
        }
        let mut out = vec![MetadataRecord::CreateTopic {
            name: topic.name.clone(),
            topic_id,
            configs: config.overrides().iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }];
        out.extend(placement.into_iter().enumerate().map(|(i, replicas)| {
            // Placed replicas are all live; assigned ones may not be, and only the live ones
            // start in the ISR (at least one, see `manual_placement`).
            let isr: Vec<BrokerId> =
                replicas.iter().copied().filter(|&r| image.is_live(r)).collect();
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: i as i32,
                leader: isr[0],
                isr,
                replicas,
                leader_epoch: 0,
                partition_epoch: 0,
                adding: Vec::new(),
                removing: Vec::new(),
            })
        }));
        Ok(out)
    }

    /// The record committing an ISR change asked for by the partition's leader `broker_id`:
    /// refused unless it comes from the current leader in its current leader epoch, is based on
    /// the current partition epoch, keeps the leader, and adds only live replicas, each in the
    /// run that caught up, none whose last heartbeat here reported its log of the partition
    /// offline or out of room.
    pub fn alter_partition(
        &self,
        image: &MetadataImage,
        change: &IsrChange<'_>,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let p = image
            .topics
            .values()
            .find(|t| t.id == change.topic_id)
            .and_then(|t| t.partitions.get(&change.partition))
            .ok_or_else(|| ControllerError::UnknownTopic(format!("{:?}", change.topic_id)))?;
        if p.leader != change.broker_id || p.leader_epoch != change.leader_epoch {
            return Err(ControllerError::StalePartition(format!(
                "leader {} epoch {} asked; leader is {} in epoch {}",
                change.broker_id, change.leader_epoch, p.leader, p.leader_epoch
            )));
        }
        if p.partition_epoch != change.partition_epoch {
            return Err(ControllerError::StalePartition(format!(
                "based on partition epoch {}; it is {}",
                change.partition_epoch, p.partition_epoch
            )));
        }
        let mut isr: Vec<BrokerId> =
            p.replicas.iter().copied().filter(|r| change.isr.contains(r)).collect();
        if isr.len() != change.isr.len() || !isr.contains(&change.broker_id) {
            return Err(ControllerError::IneligibleReplica(format!(
                "ISR {:?} must be replicas of {:?} and hold the leader",
                change.isr, p.replicas
            )));
        }
        if let Some(dead) = isr.iter().find(|&&r| !p.isr.contains(&r) && !image.is_live(r)) {
            return Err(ControllerError::IneligibleReplica(format!("broker {dead} is fenced")));
        }
        // A replica whose log cannot take writes (offline, or out of room) is not let in: it
        // would hold up every acks=all write until it fell out again.
        let key = (p.topic_id, p.partition);
        let unable = |r: BrokerId| {
            self.heard.get(&r).is_some_and(|h| h.offline.contains(&key) || h.full.contains(&key))
        };
        if let Some(r) = isr.iter().find(|&&r| !p.isr.contains(&r) && unable(r)) {
            return Err(ControllerError::IneligibleReplica(format!(
                "broker {r} reports its log of the partition offline or out of room"
            )));
        }
        // KIP-903: a member is added for what one run of it fetched. If it has registered again
        // since (a restart, perhaps on a new disk), that run's log is not the one it has now.
        for &(r, epoch) in change.joining.iter().filter(|(r, _)| !p.isr.contains(r)) {
            let current = image.brokers.get(&r).map(|b| b.registration.incarnation.epoch());
            if current != Some(epoch) {
                return Err(ControllerError::IneligibleReplica(format!(
                    "broker {r} caught up in a run (epoch {}) it has since left",
                    epoch.0
                )));
            }
        }
        if isr == p.isr {
            return Ok(Vec::new());
        }
        isr.dedup();
        let mut next = p.clone();
        next.isr = isr;
        next.partition_epoch += 1;
        Ok(vec![MetadataRecord::Partition(next)])
    }

    /// Records deleting the topic called `name`.
    pub fn delete_topic(
        &self,
        image: &MetadataImage,
        name: &str,
    ) -> Result<(TopicId, Vec<MetadataRecord>), ControllerError> {
        let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.into()))?;
        if crate::topics::is_internal(name) {
            return Err(ControllerError::Internal(name.into()));
        }
        Ok((topic.id, vec![MetadataRecord::DeleteTopic { topic_id: topic.id }]))
    }

    /// Records growing the topic called `name` to `count` partitions: on the brokers
    /// `assignments` name for each new partition, or placed like its first.
    pub fn create_partitions(
        &mut self,
        image: &MetadataImage,
        name: &str,
        count: i32,
        assignments: &[Vec<BrokerId>],
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.into()))?;
        if crate::topics::is_internal(name) {
            // `__consumer_offsets` maps each group to a partition by the partition count:
            // another count would move groups away from the records that hold them.
            return Err(ControllerError::Internal(name.into()));
        }
        let current = topic.partitions.len() as i32;
        if count <= current || count > TOPIC_PARTITIONS_MAX {
            return Err(ControllerError::BadPartitions(count));
        }
        // A partition being moved counts the replicas it moves to.
        let replication =
            topic.partitions.values().next().map_or(1, |p| p.target().len() as i32).max(1);
        let placement = if assignments.is_empty() {
            self.place(image, current, count - current, replication)?
        } else {
            // As Kafka checks them: one for each new partition, each of the topic's replication
            // factor.
            let added = count - current;
            if i32::try_from(assignments.len()) != Ok(added) {
                return Err(ControllerError::BadAssignment(format!(
                    "{} assignments given for {added} new partitions",
                    assignments.len()
                )));
            }
            if let Some(odd) = assignments.iter().find(|a| a.len() as i32 != replication) {
                return Err(ControllerError::BadAssignment(format!(
                    "an assignment of {} replicas, where the topic has {replication}",
                    odd.len()
                )));
            }
            manual_placement(image, assignments)?
        };
        if validate_only {
            return Ok(Vec::new());
        }
        Ok(placement
            .into_iter()
            .enumerate()
            .map(|(i, replicas)| {
                // Placed replicas are all live; assigned ones may not be, and only the live
                // ones start in the ISR (at least one, see `manual_placement`).
                let isr: Vec<BrokerId> =
                    replicas.iter().copied().filter(|&r| image.is_live(r)).collect();
                MetadataRecord::Partition(PartitionRecord {
                    topic_id: topic.id,
                    partition: current + i as i32,
                    leader: isr[0],
                    isr,
                    replicas,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    adding: Vec::new(),
                    removing: Vec::new(),
                })
            })
            .collect())
    }

    /// Records replacing the overrides of the topic called `name` with `configs` (already
    /// merged by the caller for incremental changes).
    pub fn alter_configs(
        &self,
        image: &MetadataImage,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
        now: Instant,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.into()))?;
        let mut config = self.config.topic_defaults.clone();
        config.replace(configs)?;
        config.check_consistent()?;
        if validate_only {
            return Ok(Vec::new());
        }
        let mut out = vec![MetadataRecord::TopicConfigs {
            topic_id: topic.id,
            configs: config.overrides().iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }];
        if config.unclean_leader_election() {
            out.extend(unclean_elections(image, topic, &self.answering_at(now)));
        }
        Ok(out)
    }

    /// [`ControllerLogic::alter_configs`] with `changes` applied, in order, to the topic's
    /// overrides as this controller holds them; no record where they change nothing.
    pub fn alter_configs_incremental(
        &self,
        image: &MetadataImage,
        name: &str,
        changes: &[ConfigChange],
        validate_only: bool,
        now: Instant,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic = image.topic(name).ok_or_else(|| ControllerError::UnknownTopic(name.into()))?;
        let mut config = self.config.topic_defaults.clone();
        config.replace(topic.configs.clone())?;
        config.apply_incremental(changes)?;
        if config.overrides() == &topic.configs {
            // Nothing changes (a delete of a setting the topic does not hold): no record.
            return Ok(Vec::new());
        }
        self.alter_configs(image, name, config.overrides().clone(), validate_only, now)
    }

    /// The record handing `broker_id` the next block of producer ids.
    pub fn producer_ids(image: &MetadataImage, broker_id: BrokerId) -> MetadataRecord {
        MetadataRecord::ProducerIds {
            broker_id,
            first: image.next_producer_id,
            count: PRODUCER_ID_BLOCK,
        }
    }

    /// Replica lists for `count` new partitions, round-robin over live brokers from a rotating
    /// start; with racks, brokers are interleaved across racks so replicas spread over them.
    fn place(
        &mut self,
        image: &MetadataImage,
        first: i32,
        count: i32,
        replication: i32,
    ) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
        let brokers = rack_interleaved(image);
        if replication < 1 || replication as usize > brokers.len() {
            return Err(ControllerError::BadReplication {
                wanted: replication,
                live: brokers.len(),
            });
        }
        let n = brokers.len();
        let start = self.placement_start;
        self.placement_start = self.placement_start.wrapping_add(1);
        Ok((0..count)
            .map(|i| {
                let base = start + (first + i) as usize;
                (0..replication as usize).map(|r| brokers[(base + r) % n]).collect()
            })
            .collect())
    }
}

/// CreateTopics' (or CreatePartitions') explicit assignments, checked as Kafka checks them: each partition's replicas
/// distinct registered brokers, at least one of them live, and every partition with as many.
fn manual_placement(
    image: &MetadataImage,
    assignments: &[Vec<BrokerId>],
) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
    for (partition, replicas) in assignments.iter().enumerate() {
        reassignments::validate_target(image, replicas)?;
        if replicas.len() != assignments[0].len() {
            return Err(ControllerError::BadAssignment(format!(
                "partition {partition} has {} replicas where partition 0 has {}",
                replicas.len(),
                assignments[0].len()
            )));
        }
        if !replicas.iter().any(|&r| image.is_live(r)) {
            return Err(ControllerError::BadAssignment(format!(
                "no broker assigned to partition {partition} is live (fenced, or shutting down)"
            )));
        }
    }
    Ok(assignments.to_vec())
}

/// Live brokers ordered so that consecutive ones are on different racks where racks exist
/// (Kafka's rack-alternating order); brokers without a rack form one rack.
fn rack_interleaved(image: &MetadataImage) -> Vec<BrokerId> {
    let mut racks: BTreeMap<Option<&str>, Vec<BrokerId>> = BTreeMap::new();
    for b in image.live_brokers() {
        racks.entry(b.registration.rack.as_deref()).or_default().push(b.registration.broker_id);
    }
    let longest = racks.values().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|i| racks.values().filter_map(move |ids| ids.get(i).copied())).collect()
}

/// The brokers hosting a replica of any partition, for tests and checks.
pub fn hosting_brokers(image: &MetadataImage) -> BTreeSet<BrokerId> {
    image
        .topics
        .values()
        .flat_map(|t| t.partitions.values().flat_map(|p| p.replicas.iter().copied()))
        .collect()
}

#[path = "elections.rs"]
mod elections;
#[path = "failover.rs"]
mod failover;
#[path = "reassignments.rs"]
mod reassignments;
pub use elections::{ELECTABLE_SILENCE_HEARTBEATS, Election, PREFERRED_ELECTIONS_MAX};
use failover::{Restart, leaderless_to, restarted_records, unclean_elections};
pub use reassignments::{REASSIGNMENTS_MAX, Reassignment};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "logic_tests.rs"]
mod tests;
