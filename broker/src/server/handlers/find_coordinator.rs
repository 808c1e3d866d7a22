//! FindCoordinator: a group's coordinator is the leader of its `__consumer_offsets` partition.
//! Transactional coordinators are not offered (transactions are not supported): a transactional
//! id is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients take as fatal at once,
//! where a retriable error would leave a transactional producer retrying until its
//! `max.block.ms`. Other key types are INVALID_REQUEST, as in Kafka.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::code;
use super::metadata::image_of;
use crate::controller::logic::ControllerError;
use crate::controller::records::NO_LEADER;
use crate::groups::partition_for;
use crate::node::Broker;
use crate::topics::OFFSETS_TOPIC;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The coordinator of `group`: the leader of its `__consumer_offsets` partition (the topic is
/// created on first use, as Kafka does). Returns (node, host, port) or the error to give.
async fn coordinator_of(broker: &Arc<Broker>, group: &str) -> Result<(i32, String, i32), i16> {
    let mut image = image_of(broker);
    if image.topic(OFFSETS_TOPIC).is_none() {
        match create_offsets_topic(broker).await {
            Ok(()) | Err(ControllerError::TopicExists(_)) => image = image_of(broker),
            Err(e) => {
                tracing::warn!("creating {OFFSETS_TOPIC} failed: {e}");
                return Err(code(ResponseError::CoordinatorNotAvailable));
            }
        }
    }
    let Some(topic) = image.topic(OFFSETS_TOPIC) else {
        return Err(code(ResponseError::CoordinatorNotAvailable));
    };
    let partition = partition_for(group, topic.partitions.len() as i32);
    let leader = topic.partitions.get(&partition).map_or(NO_LEADER, |p| p.leader);
    match image.brokers.get(&leader).filter(|b| b.is_live()) {
        Some(b) => Ok((leader, b.registration.host.clone(), i32::from(b.registration.port))),
        None => Err(code(ResponseError::CoordinatorNotAvailable)),
    }
}

/// Creates `__consumer_offsets` with its own settings (`offsets.topic.num.partitions`,
/// compacted, `offsets.topic.segment.bytes`), whoever asks first: FindCoordinator, or a
/// Metadata request that may create topics. Unlike other topics, it takes as many replicas as
/// brokers are live, up to `default_replication_factor`, so that groups work on a cluster
/// smaller than the default (Kafka refuses to make it until `offsets.topic.replication.factor`
/// brokers are up).
pub(super) async fn create_offsets_topic(broker: &Arc<Broker>) -> Result<(), ControllerError> {
    let live = image_of(broker).live_brokers().count().max(1) as i32;
    let configs = [
        ("cleanup.policy".to_owned(), "compact".to_owned()),
        ("segment.bytes".to_owned(), broker.config.offsets_topic_segment_bytes.to_string()),
    ];
    let replication = broker.config.default_replication_factor.clamp(1, live);
    let partitions = broker.config.offsets_topic_num_partitions;
    broker.create_topic(OFFSETS_TOPIC, partitions, replication, &configs, false).await
}

/// The coordinator of one key: groups have one; transactions are not supported.
async fn lookup(broker: &Arc<Broker>, key_type: i8, key: &str) -> Result<(i32, String, i32), i16> {
    match key_type {
        KEY_TYPE_GROUP => coordinator_of(broker, key).await,
        KEY_TYPE_TRANSACTION => Err(code(ResponseError::TransactionalIdAuthorizationFailed)),
        _ => Err(code(ResponseError::InvalidRequest)),
    }
}

/// Answers FindCoordinator (single key before v4, batched keys from v4).
pub async fn handle(
    broker: &Arc<Broker>,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    if version < 4 {
        match lookup(broker, request.key_type, request.key.as_str()).await {
            Ok((node, host, port)) => {
                response.node_id = BrokerId(node);
                response.host = StrBytes::from_string(host);
                response.port = port;
            }
            Err(error) => {
                response.error_code = error;
                response.node_id = BrokerId(-1);
                if request.key_type == KEY_TYPE_TRANSACTION {
                    response.error_message =
                        Some(StrBytes::from_static_str("transactions are not supported"));
                }
            }
        }
        return response;
    }
    for key in request.coordinator_keys {
        let mut c = Coordinator::default();
        let found = lookup(broker, request.key_type, key.as_str()).await;
        c.key = key;
        match found {
            Ok((node, host, port)) => {
                c.node_id = BrokerId(node);
                c.host = StrBytes::from_string(host);
                c.port = port;
            }
            Err(error) => {
                c.error_code = error;
                c.node_id = BrokerId(-1);
                if request.key_type == KEY_TYPE_TRANSACTION {
                    c.error_message =
                        Some(StrBytes::from_static_str("transactions are not supported"));
                }
            }
        }
        response.coordinators.push(c);
    }
    response
}
