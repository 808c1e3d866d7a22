//! Committed offsets: OffsetCommit (with Kafka's member and generation checks), OffsetFetch,
//! OffsetDelete and retention.
//!
//! The store holds exactly what the durable log says: a commit becomes visible (and is
//! acknowledged) only once its record is persisted, so a fetch never shows an offset a
//! coordinator fail-over could lose, and offsets never change except by a commit, a deletion
//! or expiry.

use std::collections::{BTreeMap, BTreeSet};

use super::codec::STRING_BYTES_MAX;
use super::coordinator::GroupCoordinator;
use super::effects::Effects;
use super::error::GroupError;
use super::group::Group;
use super::join::{validate_group_id, validate_stored_group_id};
use super::record::Record;
use super::requests::{CommitRequest, DeleteOffsetsRequest};
use super::responses::{
    CommitResponse, CommittedOffset, DeleteOffsetsResponse, Output, PartitionResult, Response,
};
use super::types::{Generation, GroupId, GroupState, InstanceId, MemberId, Now, RequestId};
use crate::model::{LeaderEpoch, TimestampMs, TopicId, TopicPartition};

/// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for a missing group (older: ILLEGAL_GENERATION).
const COMMIT_VERSION_GROUP_ID_NOT_FOUND: i16 = 9;

/// Durable committed offsets, by group and partition.
#[derive(Clone, Debug, Default)]
pub struct OffsetStore {
    by_group: BTreeMap<GroupId, BTreeMap<TopicPartition, CommittedOffset>>,
}

impl OffsetStore {
    /// Sets an offset.
    pub fn put(&mut self, group: &GroupId, partition: TopicPartition, value: CommittedOffset) {
        self.by_group.entry(group.clone()).or_default().insert(partition, value);
    }

    /// Deletes an offset.
    pub fn remove(&mut self, group: &GroupId, partition: &TopicPartition) {
        if let Some(offsets) = self.by_group.get_mut(group) {
            offsets.remove(partition);
            if offsets.is_empty() {
                self.by_group.remove(group);
            }
        }
    }

    /// Forgets every offset of the groups `gone` picks.
    pub fn remove_groups(&mut self, gone: impl Fn(&GroupId) -> bool) {
        self.by_group.retain(|group, _| !gone(group));
    }

    /// A group's offsets, if it has any.
    pub fn group(&self, group: &GroupId) -> Option<&BTreeMap<TopicPartition, CommittedOffset>> {
        self.by_group.get(group)
    }
}

impl GroupCoordinator {
    /// Handles OffsetCommit; the reply waits until the offsets are durable. Errors (for every
    /// partition): INVALID_GROUP_ID, GROUP_ID_NOT_FOUND / ILLEGAL_GENERATION (no such group),
    /// COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
    /// REBALANCE_IN_PROGRESS, or the persist error; per partition: UNKNOWN_TOPIC_OR_PARTITION
    /// (see [`OffsetCommit::topic_id`]), OFFSET_METADATA_TOO_LARGE, INVALID_REQUEST.
    pub fn commit(&mut self, request: RequestId, req: CommitRequest, now: Now) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        let partitions = match self.validate_commit(&req, &mut fx) {
            Ok(()) => self.commit_offsets(&req, &mut fx),
            Err(e) => req
                .offsets
                .iter()
                .map(|o| PartitionResult { partition: o.partition.clone(), error: Some(e) })
                .collect(),
        };
        fx.reply_when_durable(request, Response::Commit(CommitResponse { partitions }));
        self.finish(fx)
    }

    fn validate_commit(&mut self, req: &CommitRequest, fx: &mut Effects) -> Result<(), GroupError> {
        validate_stored_group_id(req.group_id.as_str())?;
        if !self.groups.contains_key(&req.group_id) {
            if req.generation.0 >= 0 {
                return Err(if req.version >= COMMIT_VERSION_GROUP_ID_NOT_FOUND {
                    GroupError::GroupIdNotFound
                } else {
                    GroupError::IllegalGeneration
                });
            }
            // A simple consumer or admin client: the group exists from now on, memberless.
            tracing::info!(group = %req.group_id, "creating a simple group by offset commit");
            let group = Group::new(req.group_id.clone(), fx.now.wall);
            self.groups.insert(req.group_id.clone(), group);
        }
        let g = self.groups.get(&req.group_id).ok_or(GroupError::GroupIdNotFound)?;
        validate_offset_commit(g, &req.member_id, req.instance_id.as_ref(), req.generation)?;
        if matches!(g.state, GroupState::Stable | GroupState::PreparingRebalance) {
            // A commit from a member counts as a heartbeat.
            self.rb.reschedule_heartbeat(g, &req.member_id, fx);
        }
        Ok(())
    }

    fn commit_offsets(&mut self, req: &CommitRequest, fx: &mut Effects) -> Vec<PartitionResult> {
        let metadata_max = self.rb.config.offset_metadata_bytes_max.min(STRING_BYTES_MAX);
        let mut results = Vec::with_capacity(req.offsets.len());
        for o in &req.offsets {
            let metadata = o.metadata.clone().unwrap_or_default();
            let moved = match (&self.live_topics, o.topic_id) {
                (Some(live), Some(id)) => live.get(&o.partition.topic) != Some(&id),
                _ => false,
            };
            let error = if moved {
                // Deleted (or made again) since the commit was checked: its offsets were
                // tombstoned, and this commit would outlive them, a position in a log that no
                // longer exists.
                Some(GroupError::UnknownTopicOrPartition)
            } else if metadata.len() > metadata_max {
                Some(GroupError::OffsetMetadataTooLarge)
            } else if o.partition.topic.len() > STRING_BYTES_MAX {
                Some(GroupError::InvalidRequest)
            } else {
                // Never before the epoch (a negative retention expires the offset at the next
                // check), and never past the end of time, where Kafka's sum would wrap round.
                let expire_timestamp =
                    req.retention_ms.map(|ms| TimestampMs(fx.now.wall.0.saturating_add(ms).max(0)));
                let value = CommittedOffset {
                    offset: o.offset,
                    // The layout that holds an expiry time has no leader epoch (and the
                    // versions that give one, v2–v4, carry none): held as the log holds it.
                    leader_epoch: if expire_timestamp.is_some() {
                        LeaderEpoch::NONE
                    } else {
                        o.leader_epoch
                    },
                    metadata,
                    commit_timestamp: fx.now.wall,
                    expire_timestamp,
                };
                let partition = o.partition.clone();
                fx.persist(Record::Offset {
                    group: req.group_id.clone(),
                    partition,
                    value: Some(value),
                });
                None
            };
            results.push(PartitionResult { partition: o.partition.clone(), error });
        }
        results
    }

    /// OffsetFetch: the durable offset of each of `partitions` (`None` if never committed), or
    /// with `partitions = None` every committed offset of the group. A missing group has none.
    pub fn fetch_offsets(
        &self,
        group: &GroupId,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<(TopicPartition, Option<CommittedOffset>)> {
        let live = self.groups.get(group).is_some_and(|g| !g.is(GroupState::Dead));
        let offsets = self.offsets.group(group).filter(|_| live);
        match partitions {
            Some(wanted) => wanted
                .iter()
                .map(|tp| (tp.clone(), offsets.and_then(|o| o.get(tp)).cloned()))
                .collect(),
            None => offsets
                .map(|o| o.iter().map(|(tp, v)| (tp.clone(), Some(v.clone()))).collect())
                .unwrap_or_default(),
        }
    }

    /// Handles OffsetDelete; the reply waits for the tombstones. Errors: INVALID_GROUP_ID,
    /// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with members); per partition
    /// GROUP_SUBSCRIBED_TO_TOPIC.
    pub fn delete_offsets(
        &mut self,
        request: RequestId,
        req: DeleteOffsetsRequest,
        now: Now,
    ) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        let response = match self.validate_offset_delete(&req.group_id) {
            Err(e) => DeleteOffsetsResponse { error: Some(e), partitions: Vec::new() },
            Ok(g) => {
                let pending = self.pending.pending_offsets(&req.group_id);
                let committed = self.offsets.group(&req.group_id);
                let mut partitions = Vec::with_capacity(req.partitions.len());
                for tp in &req.partitions {
                    let error = if g.is_subscribed_to(&tp.topic) {
                        Some(GroupError::GroupSubscribedToTopic)
                    } else {
                        if committed.is_some_and(|c| c.contains_key(tp)) || pending.contains(tp) {
                            let group = req.group_id.clone();
                            fx.persist(Record::Offset {
                                group,
                                partition: tp.clone(),
                                value: None,
                            });
                        }
                        None
                    };
                    partitions.push(PartitionResult { partition: tp.clone(), error });
                }
                DeleteOffsetsResponse { error: None, partitions }
            }
        };
        fx.reply_when_durable(request, Response::DeleteOffsets(response));
        self.finish(fx)
    }

    fn validate_offset_delete(&self, group: &GroupId) -> Result<&Group, GroupError> {
        validate_group_id(group.as_str())?;
        let g = self.groups.get(group).ok_or(GroupError::GroupIdNotFound)?;
        match g.state {
            GroupState::Dead => Err(GroupError::GroupIdNotFound),
            GroupState::Empty => Ok(g),
            _ if g.uses_consumer_protocol() => Ok(g),
            _ => Err(GroupError::NonEmptyGroup),
        }
    }

    /// The periodic retention check (Kafka's `cleanupGroupMetadata`): tombstones expired
    /// offsets, and deletes Empty groups left without offsets. A commit still being written
    /// counts as an offset that has not expired, as in Kafka: a tombstone issued now would be
    /// written after it and erase a commit its client is told succeeded.
    ///
    /// The offsets of a topic gone from the cluster (see [`GroupCoordinator::set_live_topics`])
    /// count as expired whatever their age, in every group: the tombstones a deletion issues
    /// (see [`GroupCoordinator::remove_topic_offsets`]) may have failed, or missed groups
    /// still loading or a broker that was down, and this check catches them.
    pub(super) fn expire_offsets(&mut self, fx: &mut Effects) {
        let retention_ms = self.rb.config.offsets_retention_ms;
        let now = fx.now.wall;
        let mut empty_groups = Vec::new();
        let pending = self.pending.pending_offsets_by_group();
        let none = BTreeSet::new();
        let gone = |topic: &str| self.live_topics.as_ref().is_some_and(|l| !l.contains_key(topic));
        for (id, g) in &self.groups {
            if g.is(GroupState::Dead) {
                continue;
            }
            let in_flight = pending.get(id).unwrap_or(&none);
            let mut all_expired = in_flight.is_empty();
            let mut expired = Vec::new();
            if let Some(offsets) = self.offsets.group(id) {
                let base = ExpiryBase::of(g);
                for (tp, o) in offsets {
                    // As in Kafka: an offset committed with its own retention time expires
                    // then, any other `offsets.retention.minutes` after its base.
                    let aged = |base: ExpiryBase| {
                        let due = match o.expire_timestamp {
                            Some(at) => now >= at,
                            None => now.0.saturating_sub(base.start(o).0) >= retention_ms,
                        };
                        !g.is_subscribed_to(&tp.topic) && due
                    };
                    if in_flight.contains(tp) {
                        // Its newer value is being written.
                        all_expired = false;
                    } else if gone(&tp.topic) || base.is_some_and(aged) {
                        expired.push(tp.clone());
                    } else {
                        all_expired = false;
                    }
                }
            }
            if all_expired && g.is(GroupState::Empty) {
                // The deletion tombstones every offset anyway.
                empty_groups.push(id.clone());
            } else {
                for partition in expired {
                    fx.persist(Record::Offset { group: id.clone(), partition, value: None });
                }
            }
        }
        for id in empty_groups {
            tracing::info!(group = %id, "deleting empty group whose offsets all expired");
            self.begin_delete(&id, fx);
        }
    }
}

impl GroupCoordinator {
    /// Tombstones every offset, committed or being written, of the `topics` that were deleted
    /// (or recreated under a new id), in every group held here: Kafka's `onPartitionsDeleted`.
    /// A topic made again under the same name starts with no committed offsets, rather than
    /// with positions in a log that no longer exists, which a consumer group would resume
    /// from, skipping the new topic's first records or reading past its end.
    pub fn remove_topic_offsets(&mut self, topics: &BTreeSet<String>, now: Now) -> Vec<Output> {
        let mut fx = Effects::new(now);
        let mut pending = self.pending.pending_offsets_by_group();
        for (id, g) in &self.groups {
            if g.is(GroupState::Dead) {
                continue;
            }
            let mut gone = pending.remove(id).unwrap_or_default();
            if let Some(offsets) = self.offsets.group(id) {
                gone.extend(offsets.keys().cloned());
            }
            gone.retain(|tp| topics.contains(&tp.topic));
            for partition in gone {
                fx.persist(Record::Offset { group: id.clone(), partition, value: None });
            }
        }
        self.finish(fx)
    }

    /// Takes in the cluster's topics (names and ids), from a metadata image no older than any
    /// a commit held here was checked against (the image only moves forward): a committed
    /// offset of any other topic belongs to a topic deleted since, and the retention check
    /// tombstones it (see [`GroupCoordinator::expire_offsets`]); a commit checked against an
    /// older image in which the topic had another id (or existed) is refused.
    pub fn set_live_topics(&mut self, topics: BTreeMap<String, TopicId>) {
        self.live_topics = Some(topics);
    }
}

/// What an offset's age counts from (Kafka's `offsetExpirationCondition`).
#[derive(Clone, Copy)]
enum ExpiryBase {
    /// Its commit: simple groups, and a Stable consumer group's topics nobody subscribes to.
    Commit,
    /// When the group became Empty (or, if unknown, the commit).
    Emptied(Option<TimestampMs>),
}

impl ExpiryBase {
    /// What `g`'s offsets' ages count from, or `None` if they do not expire now.
    fn of(g: &Group) -> Option<ExpiryBase> {
        if g.protocol_type.is_none() {
            Some(ExpiryBase::Commit)
        } else if g.is(GroupState::Empty) {
            Some(ExpiryBase::Emptied(g.state_since))
        } else if g.uses_consumer_protocol()
            && g.subscribed_topics.is_some()
            && g.is(GroupState::Stable)
        {
            Some(ExpiryBase::Commit)
        } else {
            None
        }
    }

    fn start(self, o: &CommittedOffset) -> TimestampMs {
        match self {
            ExpiryBase::Commit | ExpiryBase::Emptied(None) => o.commit_timestamp,
            ExpiryBase::Emptied(Some(since)) => since,
        }
    }
}

/// Kafka's `ClassicGroup.validateOffsetCommit` (non-transactional).
fn validate_offset_commit(
    g: &Group,
    member: &MemberId,
    instance: Option<&InstanceId>,
    generation: Generation,
) -> Result<(), GroupError> {
    if g.is(GroupState::Dead) {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if generation.0 < 0 && g.is(GroupState::Empty) {
        // An admin client or a consumer without group management.
        return Ok(());
    }
    if generation.0 >= 0 || !member.is_unknown() || instance.is_some() {
        g.validate_member(member, instance)?;
        if generation != g.generation {
            return Err(GroupError::IllegalGeneration);
        }
    } else if !g.is(GroupState::Empty) {
        return Err(GroupError::UnknownMemberId);
    }
    if g.is(GroupState::CompletingRebalance) {
        // A member of the new generation committing before it has its assignment.
        return Err(GroupError::RebalanceInProgress);
    }
    Ok(())
}

#[cfg(test)]
#[path = "offsets_tests.rs"]
mod tests;
