//! Produce: one batch per partition, appended in order, acknowledged per `acks` once durable
//! as the topic's flush policy requires — on the leader for `acks=1`, on every in-sync replica
//! for `acks=all` (refused up front with NOT_ENOUGH_REPLICAS when the ISR is below
//! `min.insync.replicas`). As in Kafka, only `acks=all` is bounded by the request's
//! `timeout_ms` (REQUEST_TIMED_OUT past it): an `acks=1` append is answered once its sync is
//! done, never timed out after it was written. acks=0 gets no response at all; a partition
//! that fails closes the connection instead, as Kafka does, so that the producer asks for
//! metadata again rather than go on sending into the void. A batch refused for its records'
//! timestamps names them in `record_errors` (v8+).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::metadata::{LeaderHints, image_of};
use super::{absent_error, code, leadership_error, partition_exists};
use crate::catalog::Topic;
use crate::io::timeout;
use crate::log::AppendError;
use crate::log::batch::{self, Compression};
use crate::model::TopicId;
use crate::node::Broker;
use crate::partition::{Acks, Completion, CompletionError, ProduceError};
use crate::protocol::Response;
use crate::server::Reply;

/// The first Produce version that may carry zstd-compressed batches (KIP-110); Kafka refuses
/// them in older ones with UNSUPPORTED_COMPRESSION_TYPE.
const ZSTD_VERSION_MIN: i16 = 7;

/// Whether `records` begins with a v2 batch header that names zstd (whatever else is wrong
/// with the batch is the append's to find).
fn zstd(records: &[u8]) -> bool {
    batch::parse_header(records).is_ok_and(|h| h.compression() == Compression::Zstd)
}

/// One partition's outcome: its response, and the wait before it may be sent.
struct Pending {
    response: PartitionProduceResponse,
    completion: Option<Completion>,
}

/// Answers Produce.
pub async fn handle(broker: &Arc<Broker>, request: ProduceRequest, version: i16) -> Reply {
    let acks = request.acks;
    let mode = if acks == -1 { Acks::All } else { Acks::Leader };
    let clock = Arc::clone(&broker.env.clock);
    let deadline = clock.now() + Duration::from_millis(request.timeout_ms.max(0) as u64);
    let mut topics = Vec::new();
    for data in request.topic_data {
        // From v13 a topic is named by its id only: the cluster's metadata gives its name, so
        // that one hosted elsewhere is answered NOT_LEADER_OR_FOLLOWER, as by name.
        let (topic, name) = if version >= 13 {
            let id = TopicId(*data.topic_id.as_bytes());
            let name = image_of(broker).topics.get(&id).map(|t| t.name.clone());
            (broker.catalog.by_id(id), name)
        } else {
            (broker.catalog.get(data.name.0.as_str()), Some(data.name.0.to_string()))
        };
        let mut partitions = Vec::new();
        for part in data.partition_data {
            let pending = if !(-1..=1).contains(&acks) {
                failed(part.index, ResponseError::InvalidRequiredAcks, None)
            } else {
                let name = name.as_deref();
                let records = part.records;
                append(broker, name, topic.as_ref(), part.index, records, mode, version).await
            };
            partitions.push(pending);
        }
        // A copy: the name as decoded is a slice of the request's frame, and would keep the
        // whole frame, records and all, allocated until the answer is sent.
        let name = TopicName(StrBytes::from_string(data.name.0.to_string()));
        topics.push((name, data.topic_id, topic.is_some(), partitions));
    }
    if acks == 0 {
        // Nothing is waited for: the syncs go on without the answer that is never sent. A
        // partition the append refused closes the connection instead.
        let failed = topics.iter().flat_map(|t| &t.3).any(|p| p.response.error_code != 0);
        return Reply::Silent(Some(Box::pin(async move { failed })));
    }
    let broker = Arc::clone(broker);
    let done = async move {
        let mut response = ProduceResponse::default();
        for (name, id, known, partitions) in topics {
            let mut out = TopicProduceResponse::default();
            out.name = name;
            // The request's id, echoed from v13 (a client matches the answer by it).
            out.topic_id = if known || version >= 13 { id } else { Uuid::nil() };
            for mut pending in partitions {
                if let Some(completion) = pending.completion.take() {
                    let left = deadline.saturating_duration_since(clock.now());
                    let waited = match mode {
                        Acks::All => timeout(&*clock, left, completion).await,
                        Acks::Leader => Ok(completion.await),
                    };
                    let error = match waited {
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
        if version >= 10 {
            hint_leaders(&broker, &mut response, version);
        }
        response
    };
    Reply::Later(Box::pin(async move { Some(Response::Produce(done.await)) }))
}

/// Appends one partition's records. `name` is the topic's, `None` for an id the cluster does
/// not know.
async fn append(
    broker: &Broker,
    name: Option<&str>,
    topic: Option<&Arc<Topic>>,
    index: i32,
    records: Option<bytes::Bytes>,
    acks: Acks,
    version: i16,
) -> Pending {
    // As Kafka checks a request's records once it knows the partition exists, before it looks
    // for the partition's leader.
    let exists = || name.is_some_and(|name| partition_exists(broker, name, index));
    if version < ZSTD_VERSION_MIN && records.as_deref().is_some_and(zstd) && exists() {
        let message = format!("Produce v{version} may not carry zstd batches (v7 or later may)");
        return failed(index, ResponseError::UnsupportedCompressionType, Some(&message));
    }
    let Some(topic) = topic else {
        // Not hosted here: led by another broker, or unknown.
        let error = match name {
            Some(name) => leadership_error(broker, name, index)
                .unwrap_or(ResponseError::UnknownTopicOrPartition),
            None => ResponseError::UnknownTopicId,
        };
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
        // Not retriable, as in Kafka: sending it again would not give it records.
        return failed(index, ResponseError::InvalidRecord, Some("no records"));
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
            let mut pending = failed(index, error_code(&error), Some(&message));
            pending.response.record_errors = record_errors(&error);
            pending
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

/// Tells each partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH where its
/// leader is, with the leaders' endpoints (KIP-951), so that the producer sends there without
/// asking for metadata first.
fn hint_leaders(broker: &Broker, response: &mut ProduceResponse, version: i16) {
    let mut hints = LeaderHints::new(broker);
    for topic in &mut response.responses {
        let id = (version >= 13).then(|| TopicId(*topic.topic_id.as_bytes()));
        for p in &mut topic.partition_responses {
            if let Some((leader, epoch)) = hints.hint(id, &topic.name.0, p.index, p.error_code) {
                p.current_leader.leader_id = BrokerId(leader);
                p.current_leader.leader_epoch = epoch;
            }
        }
    }
    response.node_endpoints = hints.endpoints(|node_id, host, port, rack| {
        let mut node = NodeEndpoint::default();
        (node.node_id, node.host, node.port, node.rack) = (node_id, host, port, rack);
        node
    });
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
        AppendError::TimestampOutOfRange { .. } => ResponseError::InvalidTimestamp,
        AppendError::DiskFull | AppendError::OutOfDescriptors | AppendError::Offline(_) => {
            ResponseError::KafkaStorageError
        }
        AppendError::StaleEpoch { .. } | AppendError::OutOfOrder { .. } => {
            ResponseError::NotLeaderOrFollower
        }
    }
}

/// The records a refusal names, as the answer's `record_errors` (Produce v8+; earlier
/// versions carry none).
fn record_errors(error: &AppendError) -> Vec<BatchIndexAndErrorMessage> {
    let AppendError::TimestampOutOfRange { records, lower, upper, .. } = error else {
        return Vec::new();
    };
    let message = StrBytes::from_string(format!(
        "timestamp out of range: it must lie within [{lower}, {upper}]"
    ));
    records
        .iter()
        .map(|&index| {
            let mut record = BatchIndexAndErrorMessage::default();
            record.batch_index = i32::try_from(index).unwrap_or(i32::MAX);
            record.batch_index_error_message = Some(message.clone());
            record
        })
        .collect()
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
