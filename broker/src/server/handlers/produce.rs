//! Produce: one batch per partition, appended in order, acknowledged per `acks` once durable
//! as the topic's flush policy requires — on the leader for `acks=1`, on every in-sync replica
//! for `acks=all` (refused up front with NOT_ENOUGH_REPLICAS when the ISR is below
//! `min.insync.replicas`). A wait longer than the request's `timeout_ms` is answered
//! REQUEST_TIMED_OUT. acks=0 gets no response at all.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{absent_error, code, leadership_error};
use crate::catalog::Topic;
use crate::io::timeout;
use crate::log::AppendError;
use crate::model::TopicId;
use crate::node::Broker;
use crate::partition::{Acks, Completion, CompletionError, ProduceError};
use crate::protocol::Response;
use crate::server::Reply;

/// One partition's outcome: its response, and the wait before it may be sent.
struct Pending {
    response: PartitionProduceResponse,
    completion: Option<Completion>,
}

/// Answers Produce.
pub async fn handle(broker: &Arc<Broker>, request: ProduceRequest, _version: i16) -> Reply {
    let acks = request.acks;
    let mode = if acks == -1 { Acks::All } else { Acks::Leader };
    let clock = Arc::clone(&broker.env.clock);
    let deadline = clock.now() + Duration::from_millis(request.timeout_ms.max(0) as u64);
    let mut topics = Vec::new();
    for data in request.topic_data {
        let topic = if data.name.0.is_empty() {
            broker.catalog.by_id(TopicId(*data.topic_id.as_bytes()))
        } else {
            broker.catalog.get(data.name.0.as_str())
        };
        let mut partitions = Vec::new();
        for part in data.partition_data {
            let pending = if !(-1..=1).contains(&acks) {
                failed(part.index, ResponseError::InvalidRequiredAcks, None)
            } else {
                append(broker, &data.name.0, topic.as_ref(), part.index, part.records, mode).await
            };
            partitions.push(pending);
        }
        // A copy: the name as decoded is a slice of the request's frame, and would keep the
        // whole frame, records and all, allocated until the answer is sent.
        let name = TopicName(StrBytes::from_string(data.name.0.to_string()));
        topics.push((name, data.topic_id, topic.is_some(), partitions));
    }
    let done = async move {
        let mut response = ProduceResponse::default();
        for (name, id, known, partitions) in topics {
            let mut out = TopicProduceResponse::default();
            out.name = name;
            out.topic_id = if known { id } else { Uuid::nil() };
            for mut pending in partitions {
                if let Some(completion) = pending.completion.take() {
                    let left = deadline.saturating_duration_since(clock.now());
                    let error = match timeout(&*clock, left, completion).await {
                        Ok(Ok(())) => None,
                        Ok(Err(error)) => Some(completion_error(&error)),
                        Err(_) => Some(ResponseError::RequestTimedOut),
                    };
                    if let Some(error) = error {
                        pending.response.error_code = code(error);
                        pending.response.base_offset = -1;
                    }
                }
                out.partition_responses.push(pending.response);
            }
            response.responses.push(out);
        }
        response
    };
    if acks == 0 {
        return Reply::Silent(Some(Box::pin(async move {
            done.await;
        })));
    }
    Reply::Later(Box::pin(async move { Some(Response::Produce(done.await)) }))
}

async fn append(
    broker: &Broker,
    name: &str,
    topic: Option<&Arc<Topic>>,
    index: i32,
    records: Option<bytes::Bytes>,
    acks: Acks,
) -> Pending {
    let Some(topic) = topic else {
        // Not hosted here: led by another broker, or unknown.
        let error =
            leadership_error(broker, name, index).unwrap_or(ResponseError::UnknownTopicOrPartition);
        return failed(index, error, None);
    };
    if let Some(error) = leadership_error(broker, &topic.name, index) {
        return failed(index, error, None);
    }
    if topic.internal {
        return failed(
            index,
            ResponseError::InvalidTopicException,
            Some("internal topics are written by the broker"),
        );
    }
    let Some(partition) = topic.partition(index) else {
        return failed(index, absent_error(broker, &topic.name, index), None);
    };
    let Some(records) = records else {
        return failed(index, ResponseError::CorruptMessage, Some("no records"));
    };
    match partition.produce(records, acks).await {
        Ok((produced, completion)) => {
            // Consumers catching up make way for the producers from now on.
            broker.read_ahead.note_write(broker.env.clock.now());
            let mut response = PartitionProduceResponse::default();
            response.index = index;
            response.base_offset = produced.base_offset.0;
            response.log_append_time_ms = produced.log_append_time.unwrap_or(-1);
            response.log_start_offset = produced.log_start.0;
            Pending { response, completion: Some(completion) }
        }
        Err(ProduceError::Append(error)) => {
            let message = error.to_string();
            failed(index, error_code(&error), Some(&message))
        }
        Err(ProduceError::Producer(error)) => {
            let message = error.to_string();
            failed(index, error.response_error(), Some(&message))
        }
        Err(ProduceError::NotLeader) => failed(index, ResponseError::NotLeaderOrFollower, None),
        Err(error @ ProduceError::ProducerStateDamaged { alone, .. }) => {
            // Retriable either way: the client asks for metadata again and follows the new
            // leader, or tries again here until another replica is in sync.
            let message = error.to_string();
            let code = if alone {
                ResponseError::NotEnoughReplicas
            } else {
                ResponseError::NotLeaderOrFollower
            };
            failed(index, code, Some(&message))
        }
        Err(ProduceError::NotEnoughReplicas(error)) => {
            let message = error.to_string();
            failed(index, ResponseError::NotEnoughReplicas, Some(&message))
        }
    }
}

/// Kafka's error for an appended batch that could not be acknowledged.
pub(super) fn completion_error(error: &CompletionError) -> ResponseError {
    tracing::debug!("produce not acknowledged: {error}");
    match error {
        CompletionError::Offline(_) => ResponseError::KafkaStorageError,
        CompletionError::NotEnoughReplicasAfterAppend => {
            ResponseError::NotEnoughReplicasAfterAppend
        }
        CompletionError::NotLeader => ResponseError::NotLeaderOrFollower,
    }
}

/// Kafka's error for a refused append.
fn error_code(error: &AppendError) -> ResponseError {
    match error {
        AppendError::Invalid(batch) => batch.response_error(),
        AppendError::KeylessOnCompacted => ResponseError::InvalidRecord,
        AppendError::DiskFull | AppendError::OutOfDescriptors | AppendError::Offline(_) => {
            ResponseError::KafkaStorageError
        }
        AppendError::StaleEpoch { .. } | AppendError::OutOfOrder { .. } => {
            ResponseError::NotLeaderOrFollower
        }
    }
}

fn failed(index: i32, error: ResponseError, message: Option<&str>) -> Pending {
    let mut response = PartitionProduceResponse::default();
    response.index = index;
    response.error_code = code(error);
    response.base_offset = -1;
    response.log_append_time_ms = -1;
    response.log_start_offset = -1;
    response.error_message = message.map(|m| StrBytes::from_string(m.to_owned()));
    Pending { response, completion: None }
}
