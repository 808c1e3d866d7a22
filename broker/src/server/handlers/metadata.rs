//! Metadata: the brokers, and each topic's partitions with leader, epoch, replicas and ISR.
//! Unknown topics are created when the client allows it and `auto.create.topics.enable` is on.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::code;
use crate::catalog::{CatalogError, Topic};
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
    let (host, port) = broker.advertised();
    let mut me = MetadataResponseBroker::default();
    me.node_id = BrokerId(config.node_id);
    me.host = StrBytes::from_string(host);
    me.port = port;
    me.rack = config.rack.clone().map(StrBytes::from_string);
    response.brokers = vec![me];
    response.cluster_id = Some(StrBytes::from_string(config.cluster_id.clone()));
    response.controller_id = BrokerId(config.node_id);
    // Before v1 an empty list meant every topic.
    let all = match &request.topics {
        None => true,
        Some(topics) => topics.is_empty() && version == 0,
    };
    if all {
        response.topics = broker.catalog.all().iter().map(|t| describe(broker, t)).collect();
        return response;
    }
    let allow_create =
        (version < 4 || request.allow_auto_topic_creation) && config.auto_create_topics_enable;
    for wanted in request.topics.unwrap_or_default() {
        response.topics.push(lookup(broker, wanted.name, wanted.topic_id, allow_create).await);
    }
    response
}

async fn lookup(
    broker: &Arc<Broker>,
    name: Option<TopicName>,
    id: Uuid,
    allow_create: bool,
) -> MetadataResponseTopic {
    if let Some(name) = name {
        let name = name.0.to_string();
        if let Some(topic) = broker.catalog.get(&name) {
            return describe(broker, &topic);
        }
        if allow_create {
            match broker.catalog.create(&name, -1, -1, &[], false).await {
                Ok(Some(topic)) => return describe(broker, &topic),
                Ok(None) | Err(CatalogError::Exists(_)) => {
                    if let Some(topic) = broker.catalog.get(&name) {
                        return describe(broker, &topic);
                    }
                }
                Err(CatalogError::BadName(_)) => {
                    return failed(Some(name), ResponseError::InvalidTopicException);
                }
                Err(error) => {
                    tracing::warn!(topic = name, "auto-create failed: {error}");
                    return failed(Some(name), ResponseError::UnknownTopicOrPartition);
                }
            }
        }
        return failed(Some(name), ResponseError::UnknownTopicOrPartition);
    }
    match broker.catalog.by_id(TopicId(*id.as_bytes())) {
        Some(topic) => describe(broker, &topic),
        None => {
            let mut topic = failed(None, ResponseError::UnknownTopicId);
            topic.topic_id = id;
            topic
        }
    }
}

fn failed(name: Option<String>, error: ResponseError) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.error_code = code(error);
    topic.name = name.map(|n| TopicName(StrBytes::from_string(n)));
    topic
}

/// A topic as Metadata reports it.
pub fn describe(broker: &Broker, topic: &Arc<Topic>) -> MetadataResponseTopic {
    let me = BrokerId(broker.config.node_id);
    let mut out = MetadataResponseTopic::default();
    out.name = Some(TopicName(StrBytes::from_string(topic.name.clone())));
    out.topic_id = Uuid::from_bytes(topic.id.0);
    out.is_internal = topic.internal;
    out.partitions = (0..topic.partition_count())
        .filter_map(|index| topic.partition(index))
        .map(|partition| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = partition.tp.partition.0;
            p.leader_id = me;
            p.leader_epoch = partition.leader_epoch().0;
            p.replica_nodes = vec![me];
            p.isr_nodes = vec![me];
            p
        })
        .collect();
    out
}
