//! AlterPartitionReassignments and ListPartitionReassignments (`kafka-reassign-partitions`):
//! moving partitions' replicas to other brokers, and what is being moved. The controller
//! decides (see `controller/reassignments.rs`); this broker asks it and reads its own image.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::admin::{Deadline, Refusal, controller_error};
use super::code;
use crate::controller::logic::{ControllerError, REASSIGNMENTS_MAX, Reassignment};
use crate::controller::rpc::{Request, Response};
use crate::node::Broker;

/// Answers AlterPartitionReassignments: starts, replaces or cancels (no replicas given) each
/// named partition's reassignment (see `ControllerLogic::alter_reassignments`). Per partition:
/// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (no replica, one named twice, an
/// unregistered broker, or a cancel that would leave no replica in sync),
/// NO_REASSIGNMENT_IN_PROGRESS for a cancel of none, INVALID_REPLICATION_FACTOR for another
/// size where v1's `allow_replication_factor_change` is false, INVALID_REQUEST for a partition
/// named twice (Kafka's controller would take the last; its admin client cannot send that);
/// REQUEST_TIMED_OUT where the controller did not answer in time (a change it could not commit
/// is asked again until then; if none got through, every partition asked for answers so). More than
/// [`REASSIGNMENTS_MAX`] partitions are refused whole (INVALID_REQUEST).
pub async fn alter(
    broker: &Arc<Broker>,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let mut response = AlterPartitionReassignmentsResponse::default();
    let allow_resize = version == 0 || request.allow_replication_factor_change;
    response.allow_replication_factor_change = allow_resize;
    let named: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    if named > REASSIGNMENTS_MAX {
        response.error_code = code(ResponseError::InvalidRequest);
        response.error_message = Some(StrBytes::from_string(format!(
            "{named} partitions named; at most {REASSIGNMENTS_MAX} at a time"
        )));
        return response;
    }
    let mut seen: BTreeMap<(String, i32), usize> = BTreeMap::new();
    for t in &request.topics {
        for p in &t.partitions {
            *seen.entry((t.name.0.to_string(), p.partition_index)).or_default() += 1;
        }
    }
    let changes: Vec<Reassignment> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Reassignment {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                target: p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
            })
        })
        .filter(|c| seen.get(&(c.topic.clone(), c.partition)) == Some(&1))
        .collect();
    let mut refusals: BTreeMap<(String, i32), Refusal> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| {
            (k.clone(), Some((ResponseError::InvalidRequest, "partition named twice".to_owned())))
        })
        .collect();
    if !changes.is_empty() {
        let deadline = Deadline::of(broker, request.timeout_ms);
        let keys: Vec<(String, i32)> =
            changes.iter().map(|c| (c.topic.clone(), c.partition)).collect();
        let change =
            Request::AlterReassignments { changes, allow_replication_factor_change: allow_resize };
        let refused: Vec<(String, i32, ControllerError)> =
            match broker.change_within(change, deadline.left(broker)).await {
                Ok(Response::PartlyDone { refused, .. }) => refused,
                Ok(_) => Vec::new(),
                Err(error) => keys.iter().map(|(t, p)| (t.clone(), *p, error.clone())).collect(),
            };
        for key in keys {
            refusals.insert(key, None);
        }
        for (topic, partition, error) in refused {
            let refusal = Some((controller_error(&error), error.to_string()));
            refusals.insert((topic, partition), refusal);
        }
    }
    for t in &request.topics {
        let mut result = ReassignableTopicResponse::default();
        result.name = t.name.clone();
        let mut listed = BTreeSet::new();
        for p in t.partitions.iter().filter(|p| listed.insert(p.partition_index)) {
            let mut out = ReassignablePartitionResponse::default();
            out.partition_index = p.partition_index;
            let key = (t.name.0.to_string(), p.partition_index);
            if let Some(Some((error, why))) = refusals.get(&key) {
                out.error_code = code(*error);
                out.error_message = Some(StrBytes::from_string(why.clone()));
            }
            result.partitions.push(out);
        }
        response.responses.push(result);
    }
    response
}

/// Answers ListPartitionReassignments from this broker's metadata: every partition being
/// reassigned among those named (every one, when none is), with its replicas and those being
/// added and removed. A named topic or partition that does not exist is not listed, as by
/// Kafka (so a plan naming a topic deleted since can still be verified).
pub fn list(
    broker: &Arc<Broker>,
    request: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let mut response = ListPartitionReassignmentsResponse::default();
    let Some(membership) = broker.membership() else {
        response.error_code = code(ResponseError::NotController);
        return response;
    };
    let image = membership.image();
    let named: Option<Vec<(String, Vec<i32>)>> = request.topics.as_ref().map(|topics| {
        topics.iter().map(|t| (t.name.0.to_string(), t.partition_indexes.clone())).collect()
    });
    let asked: Vec<(String, Vec<i32>)> = match named {
        Some(named) => named,
        None => image
            .topics
            .values()
            .map(|t| (t.name.clone(), t.partitions.keys().copied().collect()))
            .collect(),
    };
    for (topic, partitions) in asked {
        let mut out = OngoingTopicReassignment::default();
        out.name = TopicName(StrBytes::from_string(topic.clone()));
        for index in partitions {
            let Some(p) = image.partition(&topic, index).filter(|p| p.reassigning()) else {
                continue;
            };
            let mut ongoing = OngoingPartitionReassignment::default();
            ongoing.partition_index = index;
            ongoing.replicas = p.replicas.iter().map(|&b| BrokerId(b)).collect();
            ongoing.adding_replicas = p.adding.iter().map(|&b| BrokerId(b)).collect();
            ongoing.removing_replicas = p.removing.iter().map(|&b| BrokerId(b)).collect();
            out.partitions.push(ongoing);
        }
        if !out.partitions.is_empty() {
            response.topics.push(out);
        }
    }
    response
}
