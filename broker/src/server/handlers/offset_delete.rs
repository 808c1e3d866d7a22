//! OffsetDelete: removes committed offsets of partitions a group no longer consumes.

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::coordinator_error;
use super::group_common::{group_id, unavailable};
use crate::coordinator::{self, DeleteOffsetsRequest, Response};
use crate::model::TopicPartition;
use crate::node::Broker;

/// Answers OffsetDelete.
pub async fn handle(broker: &Arc<Broker>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let partitions: Vec<TopicPartition> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| TopicPartition::new(t.name.0.as_str(), p.partition_index))
        })
        .collect();
    let req = DeleteOffsetsRequest { group_id: group_id(&request.group_id), partitions };
    let mut out = OffsetDeleteResponse::default();
    if let Some(error) = coordinator_error(broker, &req.group_id.0) {
        out.error_code = error.code();
        return out;
    }
    let group = [req.group_id.clone()];
    match broker.groups.call(&group, |c, id, now| c.delete_offsets(id, req, now)).await {
        Ok(Response::DeleteOffsets(deleted)) => {
            out.error_code = coordinator::error_code(deleted.error);
            let mut current: Option<OffsetDeleteResponseTopic> = None;
            for result in deleted.partitions {
                if current.as_ref().is_none_or(|t| t.name.0.as_str() != result.partition.topic) {
                    out.topics.extend(current.take());
                    let mut topic = OffsetDeleteResponseTopic::default();
                    topic.name = TopicName(StrBytes::from_string(result.partition.topic.clone()));
                    current = Some(topic);
                }
                let mut p = OffsetDeleteResponsePartition::default();
                p.partition_index = result.partition.partition.0;
                p.error_code = coordinator::error_code(result.error);
                if let Some(topic) = current.as_mut() {
                    topic.partitions.push(p);
                }
            }
            out.topics.extend(current);
        }
        Ok(_) => out.error_code = unavailable(),
        Err(refused) => out.error_code = refused.code(),
    }
    out
}
