//! Metadata: the brokers, and each topic's partitions with leader, epoch, replicas and ISR.
//! Unknown topics are created when the client allows it and `auto.create.topics.enable` is on.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{authorized, code};
use crate::controller::image::{BrokerImage, MetadataImage, TopicImage};
use crate::controller::logic::ControllerError;
use crate::controller::records::NO_LEADER;
use crate::model::TopicId;
use crate::node::Broker;

/// Answers Metadata.
pub async fn handle(
    broker: &Arc<Broker>,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let mut response = MetadataResponse::default();
    let config = &broker.config;
    response.cluster_id = Some(StrBytes::from_string(config.cluster_id.clone()));
    // Before v1 an empty list meant every topic.
    let all = match &request.topics {
        None => true,
        Some(topics) => topics.is_empty() && version == 0,
    };
    let allow_create =
        (version < 4 || request.allow_auto_topic_creation) && config.auto_create_topics_enable;
    let mut topics = Vec::new();
    if !all {
        for wanted in request.topics.unwrap_or_default() {
            topics.push(lookup(broker, wanted.name, wanted.topic_id, allow_create).await);
        }
    }
    let image = image_of(broker);
    response.brokers = brokers(broker, &image);
    response.controller_id = controller_id(broker, &response.brokers);
    response.topics = if all {
        image.topics.values().map(|t| describe(t, &image)).collect()
    } else {
        topics
            .into_iter()
            .map(|t| match t {
                Found::Topic(id) => image.topics.get(&id).map_or_else(
                    || failed(None, ResponseError::UnknownTopicOrPartition),
                    |t| describe(t, &image),
                ),
                Found::Failed(topic) => topic,
            })
            .collect()
    };
    if version >= 8 {
        let topic =
            authorized::if_asked(request.include_topic_authorized_operations, authorized::TOPIC);
        for t in &mut response.topics {
            t.topic_authorized_operations = topic;
        }
    }
    // Dropped from the answer after v10 (DescribeCluster reports it since).
    if (8..=10).contains(&version) {
        response.cluster_authorized_operations = authorized::if_asked(
            request.include_cluster_authorized_operations,
            authorized::CLUSTER,
        );
    }
    response
}

/// The image this broker serves from.
pub fn image_of(broker: &Broker) -> Arc<MetadataImage> {
    broker.membership().map(|m| m.image()).unwrap_or_default()
}

/// The controller id clients are told: the quorum's leader when it is one of `brokers` (those
/// clients are told of), else this broker, which forwards their changes to it. Java's admin
/// client waits until the controller id is among the brokers, so a leader that is a controller
/// only, or a fenced broker, would hold its topic changes until they timed out; Kafka names a
/// live broker too.
pub fn controller_id(broker: &Broker, brokers: &[MetadataResponseBroker]) -> BrokerId {
    let leader = broker.controller.as_ref().and_then(|c| c.leader());
    told_controller(leader, broker.config.node_id, brokers)
}

/// [`controller_id`] of the quorum's `leader`, for broker `me`.
fn told_controller(leader: Option<i32>, me: i32, brokers: &[MetadataResponseBroker]) -> BrokerId {
    match leader.filter(|&l| brokers.iter().any(|b| b.node_id.0 == l)) {
        Some(leader) => BrokerId(leader),
        None => BrokerId(me),
    }
}

/// Where clients told NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH should go (KIP-951,
/// Produce v10+ and Fetch v16+): each such partition's leader and leader epoch as this
/// broker's metadata has them, and the endpoints of those leaders that are live brokers, so
/// that a client can go there without asking for metadata first.
pub struct LeaderHints {
    image: Arc<MetadataImage>,
    endpoints: BTreeMap<i32, MetadataResponseBroker>,
}

impl LeaderHints {
    /// Hints from `broker`'s metadata.
    pub fn new(broker: &Broker) -> LeaderHints {
        LeaderHints { image: image_of(broker), endpoints: BTreeMap::new() }
    }

    /// The leader and its epoch (−1 where unknown) of partition `index` of the topic with id
    /// `id` (or, without one, named `name`), if an answer with `error_code` sends its client
    /// elsewhere; the leader's endpoint is kept for [`LeaderHints::endpoints`].
    pub fn hint(
        &mut self,
        id: Option<TopicId>,
        name: &str,
        index: i32,
        error_code: i16,
    ) -> Option<(i32, i32)> {
        let elsewhere = error_code == ResponseError::NotLeaderOrFollower.code()
            || error_code == ResponseError::FencedLeaderEpoch.code();
        if !elsewhere {
            return None;
        }
        let topic = match id {
            Some(id) => self.image.topics.get(&id),
            None => self.image.topic(name),
        }?;
        let Some(partition) = topic.partitions.get(&index) else { return Some((-1, -1)) };
        let leader = self.image.brokers.get(&partition.leader).filter(|b| !b.fenced);
        if let Some(b) = leader {
            self.endpoints.insert(partition.leader, listed(b));
        }
        Some((partition.leader, partition.leader_epoch))
    }

    /// The endpoints of the leaders hinted, each made by `make` from (id, host, port, rack).
    pub fn endpoints<E>(
        self,
        make: impl Fn(BrokerId, StrBytes, i32, Option<StrBytes>) -> E,
    ) -> Vec<E> {
        self.endpoints.into_values().map(|b| make(b.node_id, b.host, b.port, b.rack)).collect()
    }
}

/// A broker as Metadata lists it.
fn listed(b: &BrokerImage) -> MetadataResponseBroker {
    let mut m = MetadataResponseBroker::default();
    m.node_id = BrokerId(b.registration.broker_id);
    m.host = StrBytes::from_string(b.registration.host.clone());
    m.port = i32::from(b.registration.port);
    m.rack = b.registration.rack.clone().map(StrBytes::from_string);
    m
}

/// Every live broker, as Metadata lists them (this one always, so clients can come back).
pub fn brokers(broker: &Broker, image: &MetadataImage) -> Vec<MetadataResponseBroker> {
    let mut out: Vec<MetadataResponseBroker> =
        image.brokers.values().filter(|b| !b.fenced).map(listed).collect();
    if !out.iter().any(|b| b.node_id.0 == broker.config.node_id) {
        let (host, port) = broker.advertised();
        let mut me = MetadataResponseBroker::default();
        me.node_id = BrokerId(broker.config.node_id);
        me.host = StrBytes::from_string(host);
        me.port = port;
        me.rack = broker.config.rack.clone().map(StrBytes::from_string);
        out.push(me);
    }
    out
}

enum Found {
    Topic(TopicId),
    Failed(MetadataResponseTopic),
}

async fn lookup(
    broker: &Arc<Broker>,
    name: Option<TopicName>,
    id: Uuid,
    allow_create: bool,
) -> Found {
    if let Some(name) = name {
        let name = name.0.to_string();
        if let Some(topic) = image_of(broker).topic(&name) {
            return Found::Topic(topic.id);
        }
        if allow_create {
            let created = if name == crate::topics::OFFSETS_TOPIC {
                super::find_coordinator::create_offsets_topic(broker).await
            } else {
                broker.create_topic(&name, -1, -1, &[], false).await
            };
            match created {
                Ok(()) | Err(ControllerError::TopicExists(_)) => {
                    if let Some(topic) = image_of(broker).topic(&name) {
                        return Found::Topic(topic.id);
                    }
                }
                Err(ControllerError::BadName(_)) => {
                    return Found::Failed(failed(Some(name), ResponseError::InvalidTopicException));
                }
                Err(error) => {
                    tracing::warn!(topic = name, "auto-create failed: {error}");
                    return Found::Failed(failed(Some(name), ResponseError::LeaderNotAvailable));
                }
            }
        }
        return Found::Failed(failed(Some(name), ResponseError::UnknownTopicOrPartition));
    }
    let id = TopicId(*id.as_bytes());
    if image_of(broker).topics.contains_key(&id) {
        return Found::Topic(id);
    }
    let mut topic = failed(None, ResponseError::UnknownTopicId);
    topic.topic_id = Uuid::from_bytes(id.0);
    Found::Failed(topic)
}

fn failed(name: Option<String>, error: ResponseError) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.error_code = code(error);
    topic.name = name.map(|n| TopicName(StrBytes::from_string(n)));
    topic
}

/// A topic as Metadata reports it, from the image: leaders (−1 with LEADER_NOT_AVAILABLE
/// while a partition has none), epochs, replicas and ISR, and as offline (v5+) the replicas
/// on brokers that are fenced or not registered, as Kafka lists them (Kafka also fences a
/// broker until it has caught up after a restart; Weir unfences it as it registers).
pub fn describe(topic: &TopicImage, image: &MetadataImage) -> MetadataResponseTopic {
    let mut out = MetadataResponseTopic::default();
    out.name = Some(TopicName(StrBytes::from_string(topic.name.clone())));
    out.topic_id = Uuid::from_bytes(topic.id.0);
    out.is_internal = crate::topics::is_internal(&topic.name);
    out.partitions = topic
        .partitions
        .values()
        .map(|record| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = record.partition;
            p.leader_id = BrokerId(record.leader);
            if record.leader == NO_LEADER {
                p.error_code = code(ResponseError::LeaderNotAvailable);
            }
            p.leader_epoch = record.leader_epoch;
            p.replica_nodes = record.replicas.iter().copied().map(BrokerId).collect();
            p.isr_nodes = record.isr.iter().copied().map(BrokerId).collect();
            p.offline_replicas = record
                .replicas
                .iter()
                .copied()
                .filter(|id| image.brokers.get(id).is_none_or(|b| b.fenced))
                .map(BrokerId)
                .collect();
            p
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_clients_are_told_of_is_a_broker_they_are_told_of() {
        let brokers: Vec<MetadataResponseBroker> = [1, 2]
            .into_iter()
            .map(|id| {
                let mut b = MetadataResponseBroker::default();
                b.node_id = BrokerId(id);
                b
            })
            .collect();
        assert_eq!(told_controller(Some(2), 1, &brokers), BrokerId(2), "a listed leader");
        // A controller-only leader, or a fenced broker: not among those listed.
        assert_eq!(told_controller(Some(3), 1, &brokers), BrokerId(1), "an unlisted leader");
        assert_eq!(told_controller(None, 2, &brokers), BrokerId(2), "no leader known");
    }
}
