//! DescribeProducers (`kafka-transactions describe-producers`, the Java admin client's
//! `describeProducers`): the idempotent producers a partition's leader holds state for, with
//! each one's epoch, last sequence and last timestamp. Weir has no transactions, so no
//! producer has a coordinator epoch or an open transaction (both −1, as Kafka answers for an
//! idempotent producer). Only the leader answers: a follower's state may lag.

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{code, led_partition};
use crate::node::Broker;

/// Answers DescribeProducers.
pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut response = DescribeProducersResponse::default();
    for wanted in request.topics {
        let mut out = TopicResponse::default();
        for &index in &wanted.partition_indexes {
            let mut p = PartitionResponse::default();
            p.partition_index = index;
            match led_partition(broker, wanted.name.0.as_str(), index) {
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
