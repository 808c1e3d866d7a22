//! Scenario: CreateTopics (v5+) answers every setting of the topic it created, with each one's
//! source, as Kafka's does (the Java admin client's `CreateTopicsResult.config`); a
//! validate-only request answers the settings the topic would have. Before, none were given.

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Kafka's config sources.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

/// Creates `name` (one partition, one replica) with `setting` at CreateTopics `version`.
fn create(
    c: &mut Cluster,
    version: i16,
    name: &'static str,
    setting: (&'static str, &'static str),
    validate_only: bool,
) -> Result<CreatableTopicResult, String> {
    let mut config = CreatableTopicConfig::default();
    config.name = StrBytes::from_static_str(setting.0);
    config.value = Some(StrBytes::from_static_str(setting.1));
    let mut topic = CreatableTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(name));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    topic.configs = vec![config];
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    request.timeout_ms = 10_000;
    request.validate_only = validate_only;
    let addr = c.addr(0);
    let response: CreateTopicsResponse = c
        .client_call(Duration::from_secs(20), move |env| async move {
            Client::new(env, addr, "admin").call(&request, version, Duration::from_secs(15)).await
        })
        .ok_or("CreateTopics got no answer")?
        .map_err(|e| format!("CreateTopics v{version} failed: {e}"))?;
    let result = response.topics.into_iter().next().ok_or("no topic answered")?;
    ensure(result.error_code == 0, || format!("{name}: error {}", result.error_code))?;
    Ok(result)
}

/// `name`'s (value, source) in `result`.
fn setting(result: &CreatableTopicResult, name: &str) -> Option<(String, i8)> {
    let configs = result.configs.as_ref()?;
    let c = configs.iter().find(|c| c.name.as_str() == name)?;
    Some((c.value.as_deref().unwrap_or("null").to_owned(), c.config_source))
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    let made = create(&mut c, 7, "made", ("retention.ms", "1000"), false)?;
    let got = (setting(&made, "retention.ms"), setting(&made, "cleanup.policy"));
    let want =
        (Some(("1000".to_owned(), SOURCE_TOPIC)), Some(("delete".to_owned(), SOURCE_DEFAULT)));
    ensure(got == want, || format!("created: {got:?}, want {want:?}"))?;
    let checked = create(&mut c, 5, "checked", ("segment.bytes", "2048"), true)?;
    let got = setting(&checked, "segment.bytes");
    ensure(got == Some(("2048".to_owned(), SOURCE_TOPIC)), || format!("validated: {got:?}"))?;
    // Version 4 carries no settings.
    let old = create(&mut c, 4, "old", ("retention.ms", "1000"), false)?;
    ensure(old.configs.as_ref().is_none_or(Vec::is_empty), || format!("v4: {:?}", old.configs))?;
    c.watch_verdict()
}

#[test]
fn create_topics_reports_the_topics_settings() {
    for_each_seed("create_topics_reports_the_topics_settings", 0..2, scenario);
}
