//! OffsetForLeaderEpoch: for a leader epoch, the end offset of that epoch in this log (the
//! start of the next epoch, or the log end for the latest), from the leader-epoch cache. Clients
//! use it to detect a truncated log after a leader change. (Kafka trims its cache when the log
//! start moves, so it answers an epoch that ended below the log start with the log start; Weir
//! answers where the epoch ended, which followers cut back to before fetching from the leader's
//! log start.)

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
                        let requested = LeaderEpoch(part.leader_epoch);
                        // The leader's own epoch ends at the log end, as the newest epoch does,
                        // also in the moment after it took the role and before the epoch is in
                        // the history (nothing is written in it before it is).
                        let (epoch, end) = match partition.leading() {
                            Some(leading) if leading.epoch == requested => {
                                (requested, partition.log.log_end_offset())
                            }
                            _ => partition.log.end_offset_for(requested),
                        };
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
