//! Committed offsets: OffsetCommit (as a group member) and OffsetFetch (single-group form).

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest};
use kafka_protocol::protocol::StrBytes;

use super::admin::name;
use super::error::codes;
use super::{Client, ClientError, REQUEST_TIMEOUT, versions};

/// A topic and partition.
pub type Tp = (String, i32);

impl Client {
    /// Commits `offsets` for `group` as `member_id` of `generation`; each partition's error code.
    pub async fn offset_commit(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        offsets: &BTreeMap<Tp, i64>,
    ) -> Result<BTreeMap<Tp, i16>, ClientError> {
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        request.generation_id_or_member_epoch = generation;
        request.member_id = StrBytes::from_string(member_id.to_owned());
        for ((topic, partition), &offset) in offsets {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = *partition;
            p.committed_offset = offset;
            p.committed_leader_epoch = -1;
            match request.topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(p),
                None => {
                    let mut t = OffsetCommitRequestTopic::default();
                    t.name = name(topic);
                    t.partitions.push(p);
                    request.topics.push(t);
                }
            }
        }
        let response = self.call(&request, versions::OFFSET_COMMIT, REQUEST_TIMEOUT).await?;
        let mut out = BTreeMap::new();
        for t in &response.topics {
            for p in &t.partitions {
                out.insert((t.name.0.to_string(), p.partition_index), p.error_code);
            }
        }
        if out.len() != offsets.len() {
            return Err(ClientError::Malformed("a partition is missing from the commit answer"));
        }
        Ok(out)
    }

    /// The committed offset of each of `partitions` for `group` (-1: none).
    pub async fn offset_fetch(
        &mut self,
        group: &str,
        partitions: &[Tp],
    ) -> Result<BTreeMap<Tp, i64>, ClientError> {
        let mut topics: Vec<OffsetFetchRequestTopic> = Vec::new();
        for (topic, partition) in partitions {
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partition_indexes.push(*partition),
                None => {
                    let mut t = OffsetFetchRequestTopic::default();
                    t.name = name(topic);
                    t.partition_indexes.push(*partition);
                    topics.push(t);
                }
            }
        }
        let mut request = OffsetFetchRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        request.topics = Some(topics);
        let response = self.call(&request, versions::OFFSET_FETCH, REQUEST_TIMEOUT).await?;
        if response.error_code != codes::NONE {
            return Err(ClientError::Kafka(response.error_code));
        }
        let mut out = BTreeMap::new();
        for t in &response.topics {
            for p in &t.partitions {
                if p.error_code != codes::NONE {
                    return Err(ClientError::Kafka(p.error_code));
                }
                out.insert((t.name.0.to_string(), p.partition_index), p.committed_offset);
            }
        }
        if out.len() != partitions.len() {
            return Err(ClientError::Malformed("a partition is missing from the offsets answer"));
        }
        Ok(out)
    }
}
