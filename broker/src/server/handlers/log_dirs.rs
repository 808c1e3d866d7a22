//! DescribeLogDirs: the partitions this broker holds in its data folder, with their sizes (what
//! `kafka-log-dirs --describe` prints, and admin tools show as topic sizes).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::node::Broker;

/// Answers DescribeLogDirs: one log directory, the data folder as configured, listing each
/// open partition held here that the request names (every one for a request naming no topics:
/// `topics` null; none for an empty list), with its bytes on disk and how far its log end lies
/// behind its high watermark (Kafka's `offset_lag`; 0 here, where a follower's high watermark
/// never passes what it holds). A partition not held here is left out, as Kafka does, and so
/// is one that could not open (its requests answer KAFKA_STORAGE_ERROR). The volume's total
/// and usable bytes (v4) are not measured: -1, the protocol's "unknown". The names asked for
/// are borrowed from the request, each once, so the answer's work stays within its size.
pub fn describe(broker: &Broker, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let wanted: Option<BTreeMap<&str, BTreeSet<i32>>> = request.topics.as_ref().map(|topics| {
        let mut wanted: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
        for topic in topics {
            wanted.entry(topic.topic.0.as_str()).or_default().extend(&topic.partitions);
        }
        wanted
    });
    let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for partition in broker.catalog.partitions() {
        let (name, index) = (&partition.tp.topic, partition.tp.partition.0);
        if wanted
            .as_ref()
            .is_some_and(|w| !w.get(name.as_str()).is_some_and(|p| p.contains(&index)))
        {
            continue;
        }
        // The high watermark first: read after the log end, an append between the two would
        // show as lag.
        let high_watermark = partition.high_watermark().0;
        let end = partition.log.log_end_offset().0;
        let mut out = DescribeLogDirsPartition::default();
        out.partition_index = index;
        out.partition_size = i64::try_from(partition.log.size_bytes()).unwrap_or(i64::MAX);
        out.offset_lag = (high_watermark - end).max(0);
        topics.entry(name.clone()).or_default().push(out);
    }
    let mut dir = DescribeLogDirsResult::default();
    dir.log_dir = StrBytes::from_string(broker.config.data_dir.display().to_string());
    dir.topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            let mut topic = DescribeLogDirsTopic::default();
            topic.name = TopicName(StrBytes::from_string(name));
            topic.partitions = partitions;
            topic
        })
        .collect();
    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![dir];
    response
}
