//! Cluster and topic calls: Metadata, CreateTopics, CreatePartitions, IncrementalAlterConfigs,
//! DeleteTopics, DeleteRecords, ElectLeaders, InitProducerId, ListOffsets and FindCoordinator.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    ElectLeadersRequest, FindCoordinatorRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::error::codes;
use super::{Client, ClientError, REQUEST_TIMEOUT, versions};

/// ListOffsets' special timestamp for the high watermark.
pub const LATEST: i64 = -1;
/// ListOffsets' special timestamp for the log start offset.
pub const EARLIEST: i64 = -2;
/// ListOffsets' special timestamp for the record with the largest timestamp.
pub const MAX_TIMESTAMP: i64 = -3;
/// ListOffsets' special timestamp for the end of the tiered part of the log.
pub const LATEST_TIERED: i64 = -5;

/// A producer's identity for idempotent produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProducerIdentity {
    /// The producer id.
    pub id: i64,
    /// The producer epoch.
    pub epoch: i16,
}

/// Where a group's coordinator is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinator {
    /// Its node id.
    pub node_id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
}

/// One partition as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    /// Its leader's node id (-1: none).
    pub leader: i32,
    /// Its leader epoch.
    pub leader_epoch: i32,
    /// The partition's error code.
    pub error_code: i16,
    /// The replicas it names offline (on brokers fenced or not registered).
    pub offline: Vec<i32>,
}

/// The cluster as one broker's Metadata answer describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// The controller id the broker names.
    pub controller_id: i32,
    /// Every broker listed, by node id, at its advertised address (hosts that are not IP
    /// addresses are left out: the simulator has no names).
    pub brokers: BTreeMap<i32, SocketAddr>,
    /// Topics answered without error: each partition by index.
    pub topics: BTreeMap<String, BTreeMap<i32, PartitionView>>,
}

impl ClusterView {
    /// The address of the leader of `topic`/`partition`, if it has one that is listed.
    pub fn leader_addr(&self, topic: &str, partition: i32) -> Option<(i32, SocketAddr)> {
        let leader = self.topics.get(topic)?.get(&partition)?.leader;
        self.brokers.get(&leader).map(|&addr| (leader, addr))
    }
}

pub(super) fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

impl Client {
    /// The partition count of each named topic the broker knows (topics it reports with an
    /// error are left out). Never asks for auto-creation.
    pub async fn partition_counts(
        &mut self,
        topics: &[&str],
    ) -> Result<BTreeMap<String, i32>, ClientError> {
        let mut request = MetadataRequest::default();
        request.topics = Some(
            topics
                .iter()
                .map(|t| {
                    let mut wanted = MetadataRequestTopic::default();
                    wanted.name = Some(name(t));
                    wanted
                })
                .collect(),
        );
        request.allow_auto_topic_creation = false;
        let response = self.call(&request, versions::METADATA, REQUEST_TIMEOUT).await?;
        Ok(response
            .topics
            .iter()
            .filter(|t| t.error_code == codes::NONE)
            .filter_map(|t| Some((t.name.as_ref()?.0.to_string(), t.partitions.len() as i32)))
            .collect())
    }

    /// The cluster as this broker sees it: every topic, or only `topics`. Never asks for
    /// auto-creation.
    pub async fn cluster_view(
        &mut self,
        topics: Option<&[&str]>,
    ) -> Result<ClusterView, ClientError> {
        let mut request = MetadataRequest::default();
        request.topics = topics.map(|names| {
            names
                .iter()
                .map(|t| {
                    let mut wanted = MetadataRequestTopic::default();
                    wanted.name = Some(name(t));
                    wanted
                })
                .collect()
        });
        request.allow_auto_topic_creation = false;
        let response = self.call(&request, versions::METADATA, REQUEST_TIMEOUT).await?;
        let mut view =
            ClusterView { controller_id: response.controller_id.0, ..ClusterView::default() };
        for b in &response.brokers {
            if let Ok(ip) = b.host.parse::<IpAddr>() {
                let port = u16::try_from(b.port).map_err(|_| ClientError::Malformed("bad port"))?;
                view.brokers.insert(b.node_id.0, SocketAddr::new(ip, port));
            }
        }
        for t in response.topics.iter().filter(|t| t.error_code == codes::NONE) {
            let Some(topic) = t.name.as_ref() else { continue };
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let view = PartitionView {
                        leader: p.leader_id.0,
                        leader_epoch: p.leader_epoch,
                        error_code: p.error_code,
                        offline: p.offline_replicas.iter().map(|b| b.0).collect(),
                    };
                    (p.partition_index, view)
                })
                .collect();
            view.topics.insert(topic.0.to_string(), partitions);
        }
        Ok(view)
    }

    /// Asks for leader elections (ElectLeaders): `unclean` false for the preferred replica,
    /// true for any live replica of a partition without a leader; `partitions` by topic and
    /// index, or `None` for every partition. The error code answered for each partition (the
    /// broker is given [`REQUEST_TIMEOUT`]).
    pub async fn elect_leaders(
        &mut self,
        unclean: bool,
        partitions: Option<&[(&str, i32)]>,
    ) -> Result<BTreeMap<(String, i32), i16>, ClientError> {
        let mut request = ElectLeadersRequest::default();
        request.election_type = i8::from(unclean);
        request.timeout_ms = REQUEST_TIMEOUT.as_millis() as i32;
        request.topic_partitions = partitions.map(|asked| {
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for &(topic, partition) in asked {
                by_topic.entry(topic).or_default().push(partition);
            }
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    let mut t = TopicPartitions::default();
                    t.topic = name(topic);
                    t.partitions = partitions;
                    t
                })
                .collect()
        });
        // A second longer than the broker has: an answer sent at its deadline still arrives.
        let wait = REQUEST_TIMEOUT + Duration::from_secs(1);
        let response = self.call(&request, versions::ELECT_LEADERS, wait).await?;
        if response.error_code != codes::NONE {
            return Err(ClientError::Kafka(response.error_code));
        }
        let mut out = BTreeMap::new();
        for result in &response.replica_election_results {
            for p in &result.partition_result {
                out.insert((result.topic.0.to_string(), p.partition_id), p.error_code);
            }
        }
        Ok(out)
    }

    /// Deletes the topic called `topic`. A topic that does not exist is the broker's
    /// UNKNOWN_TOPIC_OR_PARTITION, returned as such.
    pub async fn delete_topic(&mut self, topic: &str) -> Result<(), ClientError> {
        let mut request = DeleteTopicsRequest::default();
        request.topic_names = vec![name(topic)];
        request.timeout_ms = REQUEST_TIMEOUT.as_millis() as i32;
        let response = self.call(&request, versions::DELETE_TOPICS, REQUEST_TIMEOUT).await?;
        let result = response.responses.first().ok_or(ClientError::Malformed("no topic result"))?;
        match result.error_code {
            codes::NONE => Ok(()),
            code => Err(ClientError::Kafka(code)),
        }
    }

    /// Creates a topic with replication factor 1 and the given configs. An existing topic is
    /// success (the workload creates its topics idempotently).
    pub async fn create_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        self.create_replicated_topic(topic, partitions, 1, configs).await
    }

    /// Creates `topic` with `partitions` partitions of `replication` replicas each; Ok if it
    /// was created or already exists.
    pub async fn create_replicated_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        replication: i16,
        configs: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let shape = (partitions, replication);
        self.create_topic_within(topic, shape, configs, REQUEST_TIMEOUT).await
    }

    /// Creates `topic` with `(partitions, replication)`, asking the broker to answer within
    /// `limit` (the request's `timeout_ms`) and waiting that long for the answer.
    pub async fn create_topic_within(
        &mut self,
        topic: &str,
        (partitions, replication): (i32, i16),
        configs: &[(&str, &str)],
        limit: Duration,
    ) -> Result<(), ClientError> {
        let mut wanted = CreatableTopic::default();
        wanted.name = name(topic);
        wanted.num_partitions = partitions;
        wanted.replication_factor = replication;
        wanted.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut config = CreatableTopicConfig::default();
                config.name = StrBytes::from_string((*k).to_owned());
                config.value = Some(StrBytes::from_string((*v).to_owned()));
                config
            })
            .collect();
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![wanted];
        request.timeout_ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
        let response = self.call(&request, versions::CREATE_TOPICS, limit).await?;
        let result = response.topics.first().ok_or(ClientError::Malformed("no topic result"))?;
        match result.error_code {
            codes::NONE | codes::TOPIC_ALREADY_EXISTS => Ok(()),
            code => Err(ClientError::Kafka(code)),
        }
    }

    /// Grows `topic` to `count` partitions, asking the broker to answer within `limit` and
    /// waiting that long.
    pub async fn create_partitions(
        &mut self,
        topic: &str,
        count: i32,
        limit: Duration,
    ) -> Result<(), ClientError> {
        let mut wanted = CreatePartitionsTopic::default();
        wanted.name = name(topic);
        wanted.count = count;
        let mut request = CreatePartitionsRequest::default();
        request.topics = vec![wanted];
        request.timeout_ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
        let response = self.call(&request, versions::CREATE_PARTITIONS, limit).await?;
        let result = response.results.first().ok_or(ClientError::Malformed("no topic result"))?;
        match result.error_code {
            codes::NONE => Ok(()),
            code => Err(ClientError::Kafka(code)),
        }
    }

    /// Sets `topic`'s config `key` to `value` (IncrementalAlterConfigs, which carries no
    /// timeout: the client waits `limit`).
    pub async fn set_topic_config(
        &mut self,
        topic: &str,
        (key, value): (&str, &str),
        limit: Duration,
    ) -> Result<(), ClientError> {
        /// The SET operation.
        const SET: i8 = 0;
        self.alter_topic_config(topic, SET, (key, value), limit).await
    }

    /// Appends `item` to `topic`'s list config `key` (IncrementalAlterConfigs' APPEND).
    pub async fn append_topic_config(
        &mut self,
        topic: &str,
        (key, item): (&str, &str),
        limit: Duration,
    ) -> Result<(), ClientError> {
        /// The APPEND operation.
        const APPEND: i8 = 2;
        self.alter_topic_config(topic, APPEND, (key, item), limit).await
    }

    async fn alter_topic_config(
        &mut self,
        topic: &str,
        operation: i8,
        (key, value): (&str, &str),
        limit: Duration,
    ) -> Result<(), ClientError> {
        /// The resource type of a topic.
        const TOPIC: i8 = 2;
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_string(key.to_owned());
        config.config_operation = operation;
        config.value = Some(StrBytes::from_string(value.to_owned()));
        let mut resource = AlterConfigsResource::default();
        resource.resource_type = TOPIC;
        resource.resource_name = StrBytes::from_string(topic.to_owned());
        resource.configs = vec![config];
        let mut request = IncrementalAlterConfigsRequest::default();
        request.resources = vec![resource];
        let response = self.call(&request, versions::INCREMENTAL_ALTER_CONFIGS, limit).await?;
        let result = response.responses.first().ok_or(ClientError::Malformed("no result"))?;
        match result.error_code {
            codes::NONE => Ok(()),
            code => Err(ClientError::Kafka(code)),
        }
    }

    /// Deletes the records of `topic`/`partition` below `offset` (−1: the high watermark),
    /// asking the broker to answer within `limit` and waiting a second longer (an answer sent
    /// at the broker's deadline still arrives): the low watermark it answers, or its error
    /// code.
    pub async fn delete_records(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        limit: Duration,
    ) -> Result<i64, ClientError> {
        let answers = self.delete_records_of(topic, &[(partition, offset)], limit).await?;
        match answers.get(&partition) {
            Some(Ok(low)) => Ok(*low),
            Some(Err(code)) => Err(ClientError::Kafka(*code)),
            None => Err(ClientError::Malformed("no partition result")),
        }
    }

    /// DeleteRecords of `topic` below each `(partition, offset)` in one request, the broker
    /// given `limit` to answer: each partition's low watermark, or its error code.
    pub async fn delete_records_of(
        &mut self,
        topic: &str,
        below: &[(i32, i64)],
        limit: Duration,
    ) -> Result<BTreeMap<i32, Result<i64, i16>>, ClientError> {
        let mut wanted = DeleteRecordsTopic::default();
        wanted.name = name(topic);
        wanted.partitions = below
            .iter()
            .map(|&(partition, offset)| {
                let mut part = DeleteRecordsPartition::default();
                part.partition_index = partition;
                part.offset = offset;
                part
            })
            .collect();
        let mut request = DeleteRecordsRequest::default();
        request.topics = vec![wanted];
        request.timeout_ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
        let wait = limit + Duration::from_secs(1);
        let response = self.call(&request, versions::DELETE_RECORDS, wait).await?;
        let mut out = BTreeMap::new();
        for p in response.topics.iter().flat_map(|t| &t.partitions) {
            let value =
                if p.error_code == codes::NONE { Ok(p.low_watermark) } else { Err(p.error_code) };
            out.insert(p.partition_index, value);
        }
        Ok(out)
    }

    /// A producer id for an idempotent producer; `current` names the one it replaces (KIP-360).
    pub async fn init_producer_id(
        &mut self,
        current: Option<ProducerIdentity>,
    ) -> Result<ProducerIdentity, ClientError> {
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = None;
        request.transaction_timeout_ms = 60_000;
        request.producer_id = ProducerId(current.map_or(-1, |c| c.id));
        request.producer_epoch = current.map_or(-1, |c| c.epoch);
        let response = self.call(&request, versions::INIT_PRODUCER_ID, REQUEST_TIMEOUT).await?;
        if response.error_code != codes::NONE {
            return Err(ClientError::Kafka(response.error_code));
        }
        if response.producer_id.0 < 0 || response.producer_epoch < 0 {
            return Err(ClientError::Malformed("negative producer id or epoch"));
        }
        Ok(ProducerIdentity { id: response.producer_id.0, epoch: response.producer_epoch })
    }

    /// The offset ListOffsets gives for `timestamp` ([`EARLIEST`], [`LATEST`] or a time) in each
    /// partition of `topic`, or its error code.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partitions: &[i32],
        timestamp: i64,
    ) -> Result<BTreeMap<i32, Result<i64, i16>>, ClientError> {
        let mut wanted = ListOffsetsTopic::default();
        wanted.name = name(topic);
        wanted.partitions = partitions
            .iter()
            .map(|&p| {
                let mut part = ListOffsetsPartition::default();
                part.partition_index = p;
                part.timestamp = timestamp;
                part
            })
            .collect();
        let mut request = ListOffsetsRequest::default();
        request.replica_id = kafka_protocol::messages::BrokerId(-1);
        request.topics = vec![wanted];
        let response = self.call(&request, versions::LIST_OFFSETS, REQUEST_TIMEOUT).await?;
        let mut out = BTreeMap::new();
        for t in &response.topics {
            for p in &t.partitions {
                let value =
                    if p.error_code == codes::NONE { Ok(p.offset) } else { Err(p.error_code) };
                out.insert(p.partition_index, value);
            }
        }
        Ok(out)
    }

    /// The coordinator of `group`.
    pub async fn find_coordinator(&mut self, group: &str) -> Result<Coordinator, ClientError> {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(group.to_owned());
        request.key_type = 0;
        let response = self.call(&request, versions::FIND_COORDINATOR, REQUEST_TIMEOUT).await?;
        if response.error_code != codes::NONE {
            return Err(ClientError::Kafka(response.error_code));
        }
        Ok(Coordinator {
            node_id: response.node_id.0,
            host: response.host.to_string(),
            port: response.port,
        })
    }
}
