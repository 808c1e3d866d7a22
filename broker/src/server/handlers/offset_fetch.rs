//! OffsetFetch: committed offsets of one group (before v8) or several (v8+), all partitions or
//! the ones asked for. A partition without a commit gets offset −1.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::*;
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::coordinator_error;
use super::group_common::group_id;
use crate::coordinator::{CommittedOffset, GroupId};
use crate::model::TopicPartition;
use crate::node::Broker;

/// One partition's committed offset, or none.
type Fetched = (TopicPartition, Option<CommittedOffset>);

/// The group's committed offsets, or why this broker cannot answer for it (see
/// [`coordinator_error`]; checked again as the offsets are read).
fn fetch(
    broker: &Broker,
    group: &GroupId,
    wanted: Option<Vec<TopicPartition>>,
) -> Result<Vec<Fetched>, ResponseError> {
    if let Some(error) = coordinator_error(broker, &group.0) {
        return Err(error);
    }
    broker
        .groups
        .read_group(group, |c| c.fetch_offsets(group, wanted.as_deref()))
        .ok_or(ResponseError::NotCoordinator)
}

fn wanted<'a>(topics: impl Iterator<Item = (&'a TopicName, &'a Vec<i32>)>) -> Vec<TopicPartition> {
    topics
        .flat_map(|(name, parts)| {
            parts.iter().map(move |p| TopicPartition::new(name.0.as_str(), *p))
        })
        .collect()
}

/// One topic's partitions and their committed offsets.
type TopicOffsets = (String, Vec<(i32, Option<CommittedOffset>)>);

/// Groups fetched partitions by topic, in order.
fn by_topic(fetched: Vec<Fetched>) -> Vec<TopicOffsets> {
    let mut out: Vec<TopicOffsets> = Vec::new();
    for (tp, committed) in fetched {
        match out.last_mut() {
            Some((topic, parts)) if *topic == tp.topic => parts.push((tp.partition.0, committed)),
            _ => out.push((tp.topic, vec![(tp.partition.0, committed)])),
        }
    }
    out
}

/// Answers OffsetFetch.
pub async fn handle(
    broker: &Arc<Broker>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let mut out = OffsetFetchResponse::default();
    if version < 8 {
        let asked = request
            .topics
            .as_ref()
            .map(|ts| wanted(ts.iter().map(|t| (&t.name, &t.partition_indexes))));
        let fetched = match fetch(broker, &group_id(&request.group_id), asked) {
            Ok(fetched) => fetched,
            Err(error) => {
                // Before v2 the error travels per partition: on each partition asked for.
                out.error_code = error.code();
                for t in request.topics.iter().flatten() {
                    let mut topic = OffsetFetchResponseTopic::default();
                    topic.name = t.name.clone();
                    for &index in &t.partition_indexes {
                        let mut p = OffsetFetchResponsePartition::default();
                        p.partition_index = index;
                        p.committed_offset = -1;
                        p.error_code = error.code();
                        topic.partitions.push(p);
                    }
                    out.topics.push(topic);
                }
                return out;
            }
        };
        for (name, parts) in by_topic(fetched) {
            let mut topic = OffsetFetchResponseTopic::default();
            topic.name = TopicName(StrBytes::from_string(name));
            for (index, committed) in parts {
                let mut p = OffsetFetchResponsePartition::default();
                p.partition_index = index;
                p.committed_offset = committed.as_ref().map_or(-1, |c| c.offset.0);
                if version >= 5 {
                    p.committed_leader_epoch = committed.as_ref().map_or(-1, |c| c.leader_epoch.0);
                }
                p.metadata =
                    Some(StrBytes::from_string(committed.map(|c| c.metadata).unwrap_or_default()));
                topic.partitions.push(p);
            }
            out.topics.push(topic);
        }
        return out;
    }
    for group in &request.groups {
        let asked = group
            .topics
            .as_ref()
            .map(|ts| wanted(ts.iter().map(|t| (&t.name, &t.partition_indexes))));
        let mut result = OffsetFetchResponseGroup::default();
        result.group_id = group.group_id.clone();
        let fetched = match fetch(broker, &group_id(&group.group_id), asked) {
            Ok(fetched) => fetched,
            Err(error) => {
                result.error_code = error.code();
                out.groups.push(result);
                continue;
            }
        };
        for (name, parts) in by_topic(fetched) {
            let mut topic = OffsetFetchResponseTopics::default();
            topic.name = TopicName(StrBytes::from_string(name));
            for (index, committed) in parts {
                let mut p = OffsetFetchResponsePartitions::default();
                p.partition_index = index;
                p.committed_offset = committed.as_ref().map_or(-1, |c| c.offset.0);
                p.committed_leader_epoch = committed.as_ref().map_or(-1, |c| c.leader_epoch.0);
                p.metadata =
                    Some(StrBytes::from_string(committed.map(|c| c.metadata).unwrap_or_default()));
                topic.partitions.push(p);
            }
            result.topics.push(topic);
        }
        out.groups.push(result);
    }
    out
}
