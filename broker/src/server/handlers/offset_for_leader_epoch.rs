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
use crate::log::epochs::EpochCache;
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
                        let (epoch, end) = end_offset_for(
                            &partition.log.epochs(),
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

/// Kafka's `LeaderEpochFileCache.endOffsetFor`: the largest epoch at or below `requested` and
/// where it ends; (−1, −1) when `requested` is newer than every epoch or undefined.
pub fn end_offset_for(
    cache: &EpochCache,
    requested: LeaderEpoch,
    log_end: Offset,
) -> (LeaderEpoch, Offset) {
    let undefined = (LeaderEpoch(-1), Offset(-1));
    let entries = cache.entries();
    if requested.0 < 0 {
        return undefined;
    }
    if let Some((latest, _)) = cache.latest()
        && latest == requested
    {
        return (latest, log_end);
    }
    let Some(&(_, higher_start)) = entries.iter().find(|(epoch, _)| *epoch > requested) else {
        return undefined;
    };
    match entries.iter().rev().find(|(epoch, _)| *epoch <= requested) {
        Some(&(floor, _)) => (floor, higher_start),
        None => (requested, higher_start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafkas_end_offset_rules() {
        let mut cache = EpochCache::default();
        cache.assign(LeaderEpoch(1), Offset(0));
        cache.assign(LeaderEpoch(3), Offset(10));
        let end = Offset(25);
        assert_eq!(end_offset_for(&cache, LeaderEpoch(3), end), (LeaderEpoch(3), end));
        assert_eq!(end_offset_for(&cache, LeaderEpoch(2), end), (LeaderEpoch(1), Offset(10)));
        assert_eq!(end_offset_for(&cache, LeaderEpoch(1), end), (LeaderEpoch(1), Offset(10)));
        assert_eq!(end_offset_for(&cache, LeaderEpoch(0), end), (LeaderEpoch(0), Offset(0)));
        assert_eq!(end_offset_for(&cache, LeaderEpoch(9), end), (LeaderEpoch(-1), Offset(-1)));
    }
}
