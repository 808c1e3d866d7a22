//! OffsetForLeaderEpoch: for a leader epoch, the end offset of that epoch in this log (the
//! start of the next epoch, or the log end for the latest), from the leader-epoch cache. Clients
//! use it to detect a truncated log after a leader change.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{code, led_partition};
use crate::model::LeaderEpoch;
use crate::node::Broker;

/// Answers OffsetForLeaderEpoch.
pub fn handle(
    broker: &Arc<Broker>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    for wanted in request.topics {
        let mut out = OffsetForLeaderTopicResult::default();
        out.topic = wanted.topic;
        for part in wanted.partitions {
            let mut p = EpochEndOffset::default();
            p.partition = part.partition;
            p.leader_epoch = -1;
            p.end_offset = -1;
            match led_partition(broker, out.topic.0.as_str(), part.partition) {
                Err(error) => p.error_code = code(error),
                Ok(partition) => {
                    let current = partition.leader_epoch().0;
                    if part.current_leader_epoch >= 0 && part.current_leader_epoch != current {
                        let fenced = part.current_leader_epoch < current;
                        p.error_code = code(if fenced {
                            ResponseError::FencedLeaderEpoch
                        } else {
                            ResponseError::UnknownLeaderEpoch
                        });
                    } else {
                        let (epoch, end) = partition.log.epochs().end_offset_for(
                            LeaderEpoch(part.leader_epoch),
                            partition.log.log_end_offset(),
                        );
                        p.leader_epoch = epoch.0;
                        p.end_offset = end.0;
                    }
                }
            }
            out.partitions.push(p);
        }
        response.topics.push(out);
    }
    response
}
