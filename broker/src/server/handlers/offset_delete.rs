//! OffsetDelete: removes committed offsets of partitions a group no longer consumes.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::group_common::{group_id, member_group_error, unavailable};
use super::partition_exists;
use crate::coordinator::{self, DeleteOffsetsRequest, Response};
use crate::model::TopicPartition;
use crate::node::Broker;

/// Answers OffsetDelete. Partitions the cluster does not have are UNKNOWN_TOPIC_OR_PARTITION
/// and never reach the coordinator, as in Kafka (`kafka-consumer-groups --delete-offsets` of a
/// misspelt topic is told so, not told it succeeded).
pub async fn handle(broker: &Arc<Broker>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let (partitions, unknown): (Vec<TopicPartition>, Vec<TopicPartition>) = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| TopicPartition::new(t.name.0.as_str(), p.partition_index))
        })
        .partition(|tp| partition_exists(broker, &tp.topic, tp.partition.0));
    let req = DeleteOffsetsRequest { group_id: group_id(&request.group_id), partitions };
    let mut out = OffsetDeleteResponse::default();
    let mut results: Vec<(TopicPartition, i16)> =
        unknown.into_iter().map(|tp| (tp, ResponseError::UnknownTopicOrPartition.code())).collect();
    let group = [req.group_id.clone()];
    if let Some(error) = member_group_error(broker, &req.group_id.0) {
        out.error_code = error.code();
    } else {
        match broker.groups.call(&group, |c, id, now| c.delete_offsets(id, req, now)).await {
            Ok(Response::DeleteOffsets(deleted)) => {
                out.error_code = coordinator::error_code(deleted.error);
                results.extend(
                    deleted
                        .partitions
                        .into_iter()
                        .map(|r| (r.partition, coordinator::error_code(r.error))),
                );
            }
            Ok(_) => out.error_code = unavailable(),
            Err(refused) => out.error_code = refused.code(),
        }
    }
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let mut current: Option<OffsetDeleteResponseTopic> = None;
    for (partition, error) in results {
        if current.as_ref().is_none_or(|t| t.name.0.as_str() != partition.topic) {
            out.topics.extend(current.take());
            let mut topic = OffsetDeleteResponseTopic::default();
            topic.name = TopicName(StrBytes::from_string(partition.topic.clone()));
            current = Some(topic);
        }
        let mut p = OffsetDeleteResponsePartition::default();
        p.partition_index = partition.partition.0;
        p.error_code = error;
        if let Some(topic) = current.as_mut() {
            topic.partitions.push(p);
        }
    }
    out.topics.extend(current);
    out
}
