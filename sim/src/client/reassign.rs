//! Partition reassignment calls: AlterPartitionReassignments and ListPartitionReassignments,
//! as Kafka's `kafka-reassign-partitions` tool makes them.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest,
};

use super::admin::name;
use super::error::codes;
use super::{Client, ClientError, REQUEST_TIMEOUT, versions};

/// A partition by topic name and index.
pub type PartitionKey = (String, i32);

/// A partition being reassigned, as ListPartitionReassignments lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ongoing {
    /// Every replica.
    pub replicas: Vec<i32>,
    /// Those being added.
    pub adding: Vec<i32>,
    /// Those being removed.
    pub removing: Vec<i32>,
}

impl Client {
    /// Asks for reassignments: each (topic, partition, target), a target of `None` cancelling
    /// the one in progress. The error code answered for each partition.
    pub async fn alter_reassignments(
        &mut self,
        changes: &[(&str, i32, Option<Vec<i32>>)],
    ) -> Result<BTreeMap<PartitionKey, i16>, ClientError> {
        let mut request = AlterPartitionReassignmentsRequest::default();
        request.timeout_ms = REQUEST_TIMEOUT.as_millis() as i32;
        let mut by_topic: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
        for (topic, partition, target) in changes {
            let mut p = ReassignablePartition::default();
            p.partition_index = *partition;
            p.replicas = target.as_ref().map(|t| t.iter().map(|&b| BrokerId(b)).collect());
            by_topic.entry(topic).or_default().push(p);
        }
        request.topics = by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                let mut t = ReassignableTopic::default();
                t.name = name(topic);
                t.partitions = partitions;
                t
            })
            .collect();
        let version = versions::ALTER_PARTITION_REASSIGNMENTS;
        let response = self.call(&request, version, REQUEST_TIMEOUT).await?;
        if response.error_code != codes::NONE {
            return Err(ClientError::Kafka(response.error_code));
        }
        let mut out = BTreeMap::new();
        for t in &response.responses {
            for p in &t.partitions {
                out.insert((t.name.0.to_string(), p.partition_index), p.error_code);
            }
        }
        Ok(out)
    }

    /// The partitions being reassigned, among every partition.
    pub async fn list_reassignments(
        &mut self,
    ) -> Result<BTreeMap<PartitionKey, Ongoing>, ClientError> {
        let mut request = ListPartitionReassignmentsRequest::default();
        request.timeout_ms = REQUEST_TIMEOUT.as_millis() as i32;
        request.topics = None;
        let version = versions::LIST_PARTITION_REASSIGNMENTS;
        let response = self.call(&request, version, REQUEST_TIMEOUT).await?;
        if response.error_code != codes::NONE {
            return Err(ClientError::Kafka(response.error_code));
        }
        let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect();
        let mut out = BTreeMap::new();
        for t in &response.topics {
            for p in &t.partitions {
                let ongoing = Ongoing {
                    replicas: ids(&p.replicas),
                    adding: ids(&p.adding_replicas),
                    removing: ids(&p.removing_replicas),
                };
                out.insert((t.name.0.to_string(), p.partition_index), ongoing);
            }
        }
        Ok(out)
    }
}
