//! DescribeProducers (`kafka-transactions describe-producers`, the Java admin client's
//! `describeProducers`): the idempotent producers a replica of a partition holds state for,
//! with each one's epoch, last sequence and last timestamp. As in Kafka, any replica answers
//! (the tool's `--broker-id` asks a follower), and a partition named twice is answered once.
//! Weir has no transactions, so no producer has a coordinator epoch or an open transaction
//! (both −1, as Kafka answers for an idempotent producer).

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{absent_error, code, partition_exists};
use crate::node::Broker;
use crate::partition::Partition;

/// The replica of `topic`/`partition` this broker holds, or why there is none: its log failed
/// to open (KAFKA_STORAGE_ERROR), the partition is elsewhere (NOT_LEADER_OR_FOLLOWER), or the
/// cluster has no such partition.
fn hosted(broker: &Broker, topic: &str, partition: i32) -> Result<Arc<Partition>, ResponseError> {
    if let Some(hosted) = broker.catalog.partition(topic, partition) {
        return Ok(hosted);
    }
    match absent_error(broker, topic, partition) {
        ResponseError::KafkaStorageError => Err(ResponseError::KafkaStorageError),
        _ if partition_exists(broker, topic, partition) => Err(ResponseError::NotLeaderOrFollower),
        error => Err(error),
    }
}

/// Answers DescribeProducers.
pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut response = DescribeProducersResponse::default();
    let mut answered = BTreeSet::new();
    for wanted in request.topics {
        let mut out = TopicResponse::default();
        for &index in &wanted.partition_indexes {
            if !answered.insert((wanted.name.0.clone(), index)) {
                continue;
            }
            let mut p = PartitionResponse::default();
            p.partition_index = index;
            match hosted(broker, wanted.name.0.as_str(), index) {
                Err(error) => p.error_code = code(error),
                Ok(partition) => {
                    p.active_producers = partition
                        .active_producers()
                        .await
                        .into_iter()
                        .map(|producer| {
                            let mut state = ProducerState::default();
                            state.producer_id = ProducerId(producer.id.0);
                            state.producer_epoch = i32::from(producer.epoch.0);
                            state.last_sequence = producer.last_sequence.0;
                            state.last_timestamp = producer.last_timestamp.0;
                            state.coordinator_epoch = -1;
                            state.current_txn_start_offset = -1;
                            state
                        })
                        .collect();
                }
            }
            out.partitions.push(p);
        }
        out.name = wanted.name;
        response.topics.push(out);
    }
    response
}
