//! Scenario: a Metadata request that may create topics, naming `__consumer_offsets` before any
//! group exists, creates it as FindCoordinator would: `offsets.topic.num.partitions`
//! partitions, compacted. Before, it was made as any auto-created topic (`num.partitions`,
//! `cleanup.policy=delete`), for good: groups would then live in one partition, and retention
//! would delete their committed offsets.

use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// Metadata's version here (topics by name, auto-creation asked for).
const METADATA_VERSION: i16 = 9;

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { auto_create_topics: true, ..ClusterSpec::combined(1) };
    let mut c = Cluster::new_settled(seed, spec)?;
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(TopicName(StrBytes::from_static_str("__consumer_offsets")));
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![wanted]);
    request.allow_auto_topic_creation = true;
    let addr = c.addr(0);
    c.client_call(Duration::from_secs(20), move |env| async move {
        let mut client = Client::new(env, addr, "admin");
        client.call(&request, METADATA_VERSION, Duration::from_secs(15)).await
    })
    .ok_or("Metadata got no answer")?
    .map_err(|e| format!("Metadata failed: {e}"))?;
    let made = c.run_until(Duration::from_secs(10), |c| {
        c.committed_image().is_some_and(|i| i.topic("__consumer_offsets").is_some())
    });
    ensure(made, || "Metadata did not create __consumer_offsets".to_string())?;
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("__consumer_offsets").ok_or("no offsets topic")?;
    let partitions = topic.partitions.len() as i32;
    ensure(partitions == OFFSETS_TOPIC_PARTITIONS, || {
        format!(
            "{partitions} partitions, want offsets.topic.num.partitions {OFFSETS_TOPIC_PARTITIONS}"
        )
    })?;
    let policy = topic.configs.get("cleanup.policy");
    ensure(policy.is_some_and(|p| p == "compact"), || format!("cleanup.policy {policy:?}"))?;
    c.watch_verdict()
}

#[test]
fn metadata_creates_the_offsets_topic_with_its_own_settings() {
    for_each_seed("metadata_creates_the_offsets_topic_with_its_own_settings", 0..2, scenario);
}
