//! ListOffsets: earliest (log start), latest (high watermark, which is also the last stable
//! offset until transactions exist), max timestamp, and the first offset at or after a time,
//! each with the leader epoch of the batch that holds it (the partition's own for the latest).
//! An answer at or past the high watermark, which a leader change may take back, is not
//! given: offset −1, as Kafka's; or OFFSET_NOT_AVAILABLE while a new leader's high watermark
//! is still below where its epoch began.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::{code, led_at_epoch};
use crate::log::ReadError;
use crate::node::Broker;

/// The special timestamps of ListOffsets.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
/// The replica id of a consumer's request.
const CONSUMER: i32 = -1;

/// The least version that knows each special timestamp, as Kafka's table; `None` for a
/// negative timestamp no version knows.
fn least_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST | EARLIEST => Some(0),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        at if at >= 0 => Some(0),
        _ => None,
    }
}

/// Answers ListOffsets. As in Kafka, a partition named twice is answered once, with
/// INVALID_REQUEST, and a special timestamp its version does not know is UNSUPPORTED_VERSION.
pub async fn handle(
    broker: &Arc<Broker>,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut seen = BTreeSet::new();
    let twice: BTreeSet<(&str, i32)> = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.as_str(), p.partition_index)))
        .filter(|&tp| !seen.insert(tp))
        .collect();
    let mut answered = BTreeSet::new();
    // As in Kafka, only a consumer's request (replica id −1) is cut at the high watermark;
    // brokers and tools are answered up to the log end.
    let client = request.replica_id.0 == CONSUMER;
    let mut response = ListOffsetsResponse::default();
    for wanted in &request.topics {
        let mut out = ListOffsetsTopicResponse::default();
        out.name = wanted.name.clone();
        for part in &wanted.partitions {
            if !answered.insert((wanted.name.0.as_str(), part.partition_index)) {
                continue;
            }
            let mut p = ListOffsetsPartitionResponse::default();
            p.partition_index = part.partition_index;
            p.timestamp = -1;
            p.offset = -1;
            p.leader_epoch = -1;
            let refusal = if twice.contains(&(wanted.name.0.as_str(), part.partition_index)) {
                Some(ResponseError::InvalidRequest)
            } else if least_version(part.timestamp).is_none_or(|least| version < least) {
                Some(ResponseError::UnsupportedVersion)
            } else {
                None
            };
            if let Some(error) = refusal {
                p.error_code = code(error);
            } else if let Err(error) =
                answer(broker, wanted.name.0.as_str(), part, client, &mut p).await
            {
                p.error_code = code(match error {
                    // Before v5, Kafka's clients do not know OFFSET_NOT_AVAILABLE.
                    ResponseError::OffsetNotAvailable if version < 5 => {
                        ResponseError::LeaderNotAvailable
                    }
                    error => error,
                });
            }
            if version < 4 {
                // The field exists from v4; before, it must keep its default.
                p.leader_epoch = -1;
            }
            out.partitions.push(p);
        }
        response.topics.push(out);
    }
    response
}

/// Fills in `p`'s offset, timestamp and leader epoch (that of the batch holding the offset,
/// or the partition's own for the latest offset, as Kafka's), or says why not.
///
/// A new leader whose high watermark is still below the start of its epoch (its followers
/// have not fetched yet) could answer an offset below one the previous leader gave. Like
/// Kafka's, it answers OFFSET_NOT_AVAILABLE instead, which clients retry: for the latest
/// offset always, and for a time (or the maximum timestamp) whose answer it would not give.
async fn answer(
    broker: &Arc<Broker>,
    topic: &str,
    part: &ListOffsetsPartition,
    client: bool,
    p: &mut ListOffsetsPartitionResponse,
) -> Result<(), ResponseError> {
    // The epoch, high watermark and epoch start of one instant.
    let (partition, leading) =
        led_at_epoch(broker, topic, part.partition_index, part.current_leader_epoch)?;
    let epoch = leading.epoch.0;
    let unsettled = client && leading.epoch_start > leading.high_watermark;
    let cut = if client { leading.high_watermark } else { partition.log.log_end_offset() };
    let found = match part.timestamp {
        LATEST if unsettled => return Err(ResponseError::OffsetNotAvailable),
        LATEST => Ok(Some((cut, -1))),
        // Nothing is tiered: Kafka answers offset −1 then.
        LATEST_TIERED => return Ok(()),
        EARLIEST | EARLIEST_LOCAL => Ok(Some((partition.log.log_start_offset(), -1))),
        MAX_TIMESTAMP => partition.log.offset_of_max_timestamp().await,
        at => partition.log.offset_for_timestamp(at).await,
    };
    match found {
        // A record not yet below the high watermark is not offered to a consumer (the maximum
        // timestamp's included); the log's bounds are.
        Ok(Some((offset, timestamp)))
            if offset < cut || matches!(part.timestamp, LATEST | EARLIEST | EARLIEST_LOCAL) =>
        {
            p.offset = offset.0;
            p.timestamp = timestamp;
            p.leader_epoch = if part.timestamp == LATEST {
                epoch
            } else {
                partition.log.epoch_for(offset).map_or(-1, |e| e.0)
            };
            Ok(())
        }
        Ok(_) if unsettled => Err(ResponseError::OffsetNotAvailable),
        Ok(_) => Ok(()),
        // The lookup met a batch damaged on disk that may hold the answer (see fetch).
        Err(error @ ReadError::Corrupt { .. }) => {
            tracing::error!(partition = %partition.tp, "list offsets found damaged data: {error}");
            Err(ResponseError::CorruptMessage)
        }
        Err(error) => {
            tracing::warn!(partition = %partition.tp, "list offsets failed: {error}");
            Err(ResponseError::KafkaStorageError)
        }
    }
}
