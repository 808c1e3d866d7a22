//! ListOffsets: earliest (log start), latest (high watermark, which is also the last stable
//! offset until transactions exist), max timestamp, and the first offset at or after a time.
//! An answer at or past the high watermark, which a leader change may take back, is not
//! given: offset −1, as Kafka's.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::{code, led_partition};
use crate::log::ReadError;
use crate::node::Broker;

/// The special timestamps of ListOffsets.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Answers ListOffsets.
pub async fn handle(
    broker: &Arc<Broker>,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    for wanted in request.topics {
        let mut out = ListOffsetsTopicResponse::default();
        out.name = wanted.name;
        for part in wanted.partitions {
            let mut p = ListOffsetsPartitionResponse::default();
            p.partition_index = part.partition_index;
            p.timestamp = -1;
            p.offset = -1;
            p.leader_epoch = -1;
            let partition = led_partition(broker, out.name.0.as_str(), part.partition_index);
            let partition = match partition {
                Ok(partition) => partition,
                Err(error) => {
                    p.error_code = code(error);
                    out.partitions.push(p);
                    continue;
                }
            };
            let epoch = partition.leader_epoch().0;
            if part.current_leader_epoch >= 0 && part.current_leader_epoch != epoch {
                let fenced = part.current_leader_epoch < epoch;
                p.error_code = code(if fenced {
                    ResponseError::FencedLeaderEpoch
                } else {
                    ResponseError::UnknownLeaderEpoch
                });
                out.partitions.push(p);
                continue;
            }
            let found = match part.timestamp {
                LATEST => Ok(Some((partition.high_watermark(), -1))),
                // Nothing is tiered: Kafka answers offset −1 then.
                LATEST_TIERED => Ok(None),
                EARLIEST | EARLIEST_LOCAL => Ok(Some((partition.log.log_start_offset(), -1))),
                MAX_TIMESTAMP => partition.log.offset_of_max_timestamp().await,
                at => partition.log.offset_for_timestamp(at).await,
            };
            match found {
                Ok(Some((offset, timestamp))) => {
                    let hw = partition.high_watermark();
                    // A record not yet below the high watermark is not offered (the
                    // maximum timestamp's included); the log's bounds are.
                    if offset < hw || matches!(part.timestamp, LATEST | EARLIEST | EARLIEST_LOCAL) {
                        p.offset = offset.0;
                        p.timestamp = timestamp;
                        // The field exists from v4; before, it must keep its default. With no
                        // offset given, it stays −1, as Kafka's.
                        if version >= 4 {
                            p.leader_epoch = epoch;
                        }
                    }
                }
                Ok(None) => {}
                // The lookup met a batch damaged on disk that may hold the answer (see fetch).
                Err(error @ ReadError::Corrupt { .. }) => {
                    tracing::error!(partition = %partition.tp, "list offsets found damaged data: {error}");
                    p.error_code = code(ResponseError::CorruptMessage);
                }
                Err(error) => {
                    tracing::warn!(partition = %partition.tp, "list offsets failed: {error}");
                    p.error_code = code(ResponseError::KafkaStorageError);
                }
            }
            out.partitions.push(p);
        }
        response.topics.push(out);
    }
    response
}
