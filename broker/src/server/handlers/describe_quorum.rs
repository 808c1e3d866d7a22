//! DescribeQuorum (`kafka-metadata-quorum describe --status` / `--replication`, the Java admin
//! client's `describeMetadataQuorum`): the metadata quorum as its leader describes it — the
//! leader, its epoch (the Raft term) and high watermark (the commit index), and each voter's
//! log end offset, when the leader last heard from it and when it was last caught up. Offsets
//! are Raft indexes: a log end offset is the index of the log's last entry (its length, as
//! Kafka counts offsets from 0), the high watermark the index of the last committed one.
//!
//! Any broker answers, asking the quorum's leader as it asks for changes (Kafka's brokers
//! forward the request to the active controller); without a leader within [`QUORUM_WAIT`] the
//! partition is NOT_LEADER_OR_FOLLOWER, which clients retry. As in Kafka, a request for anything
//! but partition 0 of `__cluster_metadata`, alone, is UNKNOWN_TOPIC_OR_PARTITION for every
//! partition it names. Brokers, which take the metadata by requests of their own rather than
//! by Raft fetches, are not listed as observers, and voters have no directory ids (nil).

use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::protocol::StrBytes;

use super::code;
use crate::controller::rpc::{QuorumStatus, Request, Response};
use crate::node::Broker;

/// The metadata log's topic, as Kafka names it.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// How long a broker waits for the quorum's leader to answer.
pub const QUORUM_WAIT: Duration = Duration::from_secs(5);
/// The listener name the voters' endpoints are given under (v2).
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// Answers DescribeQuorum.
pub async fn handle(
    broker: &Broker,
    request: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let mut response = DescribeQuorumResponse::default();
    response.error_message = None;
    let wanted = match request.topics.as_slice() {
        [topic] if topic.topic_name.0.as_str() == METADATA_TOPIC => {
            matches!(topic.partitions.as_slice(), [p] if p.partition_index == 0)
        }
        _ => false,
    };
    if !wanted {
        response.topics = request
            .topics
            .into_iter()
            .map(|asked| {
                let mut topic = TopicData::default();
                topic.topic_name = asked.topic_name;
                topic.partitions = asked
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut out = unanswered(ResponseError::UnknownTopicOrPartition);
                        out.partition_index = p.partition_index;
                        out
                    })
                    .collect();
                topic
            })
            .collect();
        return response;
    }
    let answer = match broker.membership() {
        Some(membership) => membership.query(&Request::DescribeQuorum, QUORUM_WAIT).await.ok(),
        None => None,
    };
    let (partition, answered) = match answer {
        Some(Response::Quorum(status)) => (described(&status), true),
        _ => {
            let mut out = unanswered(ResponseError::NotLeaderOrFollower);
            out.error_message = Some(StrBytes::from_static_str("no quorum leader answered"));
            (out, false)
        }
    };
    let mut topic = TopicData::default();
    topic.topic_name =
        kafka_protocol::messages::TopicName(StrBytes::from_static_str(METADATA_TOPIC));
    topic.partitions = vec![partition];
    response.topics = vec![topic];
    if version >= 2 && answered {
        response.nodes = nodes(broker);
    }
    response
}

/// Partition 0 of the metadata log, answered with `error`.
fn unanswered(error: ResponseError) -> PartitionData {
    let mut out = PartitionData::default();
    out.error_code = code(error);
    out.error_message = None;
    out.leader_id = BrokerId(-1);
    out.leader_epoch = -1;
    out.high_watermark = -1;
    out
}

/// Partition 0 of the metadata log as the quorum's leader described it.
fn described(status: &QuorumStatus) -> PartitionData {
    let mut out = PartitionData::default();
    out.error_message = None;
    out.leader_id = BrokerId(status.leader);
    out.leader_epoch = i32::try_from(status.term).unwrap_or(i32::MAX);
    out.high_watermark = i64::try_from(status.committed).unwrap_or(i64::MAX);
    out.current_voters = status
        .voters
        .iter()
        .map(|v| {
            let mut voter = ReplicaState::default();
            voter.replica_id = BrokerId(v.id);
            voter.log_end_offset = v.log_end;
            voter.last_fetch_timestamp = v.last_heard_ms;
            voter.last_caught_up_timestamp = v.caught_up_ms;
            voter
        })
        .collect();
    out
}

/// The voters' controller endpoints (v2), as this broker's configuration names them (checked
/// as the node started: a node with voters it cannot read does not start).
fn nodes(broker: &Broker) -> Vec<Node> {
    let voters = broker.config.voters().unwrap_or_default();
    voters
        .into_iter()
        .map(|(id, addr)| {
            let mut node = Node::default();
            node.node_id = BrokerId(id);
            node.listeners = addr
                .into_iter()
                .map(|addr| {
                    let mut listener = Listener::default();
                    listener.name = StrBytes::from_static_str(CONTROLLER_LISTENER);
                    listener.host = StrBytes::from_string(addr.ip().to_string());
                    listener.port = addr.port();
                    listener
                })
                .collect();
            node
        })
        .collect()
}
