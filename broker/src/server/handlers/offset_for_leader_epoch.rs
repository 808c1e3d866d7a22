//! OffsetForLeaderEpoch: for a leader epoch, the end offset of that epoch in this log (the
//! start of the next epoch, or the log end for the latest), from the leader-epoch cache. Clients
//! use it to detect a truncated log after a leader change. (Kafka trims its cache when the log
//! start moves, so it answers an epoch that ended below the log start with the log start; Weir
//! answers where the epoch ended, which followers cut back to before fetching from the leader's
//! log start.)

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{code, led_at_epoch};
use crate::model::{LeaderEpoch, Offset};
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
            match answer(broker, out.topic.0.as_str(), &part) {
                Err(error) => p.error_code = code(error),
                Ok((epoch, end)) => {
                    p.leader_epoch = epoch.0;
                    p.end_offset = end.0;
                }
            }
            out.partitions.push(p);
        }
        response.topics.push(out);
    }
    response
}

/// Where `part`'s requested epoch ends in the log this broker leads, or why it cannot say.
/// The leader's epoch is read once, for the check of the request's current epoch and for the
/// answer, which treats it as recorded even in the moment before it is.
fn answer(
    broker: &Broker,
    topic: &str,
    part: &OffsetForLeaderPartition,
) -> Result<(LeaderEpoch, Offset), ResponseError> {
    let (partition, leading) =
        led_at_epoch(broker, topic, part.partition, part.current_leader_epoch)?;
    Ok(partition.log.end_offset_for(LeaderEpoch(part.leader_epoch), leading.epoch))
}
