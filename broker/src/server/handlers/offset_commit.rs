//! OffsetCommit: validated by the group coordinator, answered once the offsets are durable in
//! `__consumer_offsets`. Partitions of unknown topics are refused up front.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::group_common::{from_opt, group_id, string, unavailable};
use super::{coordinator_error, coordinator_error_in, partition_exists};
use crate::coordinator::{
    self, CommitRequest, Generation, InstanceId, MemberId, OffsetCommit, Response,
};
use crate::model::{LeaderEpoch, Offset, TopicPartition};
use crate::node::Broker;

/// OffsetCommit v2–v4's `retention_time_ms` that asks for the broker's own retention
/// (`offsets.retention.minutes`).
const RETENTION_DEFAULT: i64 = -1;

/// Answers OffsetCommit.
pub async fn handle(
    broker: &Arc<Broker>,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let mut errors: BTreeMap<TopicPartition, i16> = BTreeMap::new();
    let mut offsets = Vec::new();
    // One image to check the coordinator and the partitions against, whose deleted topics the
    // coordinator has seen first: their offsets' tombstones are issued before this commit, so
    // they can never erase a commit to a topic made again under the same name.
    let membership = broker.membership();
    let image = membership.as_ref().map(|m| m.image());
    if let Some(image) = &image {
        broker.groups.observe_topics(image);
    }
    let not_coordinator = match (&membership, &image) {
        (Some(membership), Some(image)) => {
            coordinator_error_in(broker, membership, image, request.group_id.0.as_str())
        }
        _ => coordinator_error(broker, request.group_id.0.as_str()),
    };
    for topic in &request.topics {
        for p in &topic.partitions {
            let tp = TopicPartition::new(string(&topic.name.0), p.partition_index);
            // Any partition of the cluster, wherever it lives: the coordinator keeps offsets
            // for partitions other brokers lead. Checked first, as Kafka does: a partition
            // that does not exist is not worth finding the coordinator again for.
            let name = topic.name.0.as_str();
            let exists = match &image {
                Some(image) => image.partition(name, p.partition_index).is_some(),
                None => partition_exists(broker, name, p.partition_index),
            };
            if !exists {
                errors.insert(tp, ResponseError::UnknownTopicOrPartition.code());
                continue;
            }
            if let Some(error) = not_coordinator {
                errors.insert(tp, error.code());
                continue;
            }
            errors.insert(tp.clone(), 0);
            offsets.push(OffsetCommit {
                partition: tp,
                offset: Offset(p.committed_offset),
                leader_epoch: LeaderEpoch(if version >= 6 { p.committed_leader_epoch } else { -1 }),
                metadata: from_opt(&p.committed_metadata),
                topic_id: image.as_ref().and_then(|i| i.topic(name)).map(|t| t.id),
            });
        }
    }
    if !offsets.is_empty() {
        let req = CommitRequest {
            version,
            group_id: group_id(&request.group_id),
            generation: Generation(request.generation_id_or_member_epoch),
            member_id: MemberId(string(&request.member_id)),
            instance_id: from_opt(&request.group_instance_id).map(InstanceId),
            // v2–v4 may give the offsets a retention time; −1 is the broker's default.
            retention_ms: Some(request.retention_time_ms)
                .filter(|&ms| (2..=4).contains(&version) && ms != RETENTION_DEFAULT),
            offsets,
        };
        let group = [req.group_id.clone()];
        match broker.groups.call(&group, |c, id, now| c.commit(id, req, now)).await {
            Ok(Response::Commit(committed)) => {
                for result in committed.partitions {
                    errors.insert(result.partition, coordinator::error_code(result.error));
                }
            }
            other => {
                let code = other.err().map_or_else(unavailable, crate::groups::Unavailable::code);
                errors.values_mut().filter(|e| **e == 0).for_each(|e| *e = code);
            }
        }
    }
    let mut out = OffsetCommitResponse::default();
    let mut topics: BTreeMap<String, Vec<OffsetCommitResponsePartition>> = BTreeMap::new();
    for (tp, error_code) in errors {
        let mut p = OffsetCommitResponsePartition::default();
        p.partition_index = tp.partition.0;
        p.error_code = error_code;
        topics.entry(tp.topic).or_default().push(p);
    }
    for (name, partitions) in topics {
        let mut t = OffsetCommitResponseTopic::default();
        t.name = TopicName(StrBytes::from_string(name));
        t.partitions = partitions;
        out.topics.push(t);
    }
    out
}
