//! Scenario: DescribeConfigs tells what Kafka's does beside names and values. Each setting's
//! type (v3+); its synonyms when asked (the topic's own value, then the broker setting that
//! gives every topic its default, under Kafka's broker name); its documentation when asked.
//! A broker is described under its own id only: the empty name is Kafka's cluster-wide
//! defaults (none in Weir), and another id or a name that is no id is INVALID_REQUEST. The
//! broker's defaults for topics carry Kafka's names (`log.retention.ms`). Version 1 answers
//! synonyms but no types, which that version cannot carry.

use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Kafka's resource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Kafka's config sources.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's config types.
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_LIST: i8 = 7;
/// INVALID_REQUEST.
const INVALID_REQUEST: i16 = 42;

/// DescribeConfigs of one resource at `version`, asking for synonyms and documentation.
fn describe(
    c: &mut Cluster,
    version: i16,
    resource_type: i8,
    name: String,
) -> Result<DescribeConfigsResult, String> {
    describe_asking(c, version, resource_type, name, true)
}

/// DescribeConfigs of one resource at `version`, asking for synonyms and documentation (v3+)
/// or not.
fn describe_asking(
    c: &mut Cluster,
    version: i16,
    resource_type: i8,
    name: String,
    detail: bool,
) -> Result<DescribeConfigsResult, String> {
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = resource_type;
    resource.resource_name = StrBytes::from_string(name);
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    request.include_synonyms = detail;
    request.include_documentation = detail && version >= 3;
    let addr = c.addr(0);
    let response: DescribeConfigsResponse = c
        .client_call(Duration::from_secs(20), move |env| async move {
            Client::new(env, addr, "admin").call(&request, version, Duration::from_secs(15)).await
        })
        .ok_or("DescribeConfigs got no answer")?
        .map_err(|e| format!("DescribeConfigs v{version} failed: {e}"))?;
    response.results.into_iter().next().ok_or_else(|| "no result".to_owned())
}

/// One setting's (value, source, type, documentation given, synonyms as name=value@source).
fn setting(
    result: &DescribeConfigsResult,
    name: &str,
) -> Result<(String, i8, i8, bool, Vec<String>), String> {
    let e = result
        .configs
        .iter()
        .find(|e| e.name.as_str() == name)
        .ok_or_else(|| format!("{name} not described"))?;
    let synonyms = e
        .synonyms
        .iter()
        .map(|s| format!("{}={}@{}", s.name, s.value.as_deref().unwrap_or("null"), s.source))
        .collect();
    let value = e.value.as_deref().unwrap_or("null").to_owned();
    let documented = e.documentation.as_ref().is_some_and(|d| !d.is_empty());
    Ok((value, e.config_source, e.config_type, documented, synonyms))
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_replicated_topic(0, "t", 1, 1, &[("retention.ms", "1000")])
        .map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(1));

    let topic = describe(&mut c, 4, RESOURCE_TOPIC, "t".into())?;
    ensure(topic.error_code == 0, || format!("topic: {}", topic.error_code))?;
    let retention = setting(&topic, "retention.ms")?;
    let want = (
        "1000".to_owned(),
        SOURCE_TOPIC,
        TYPE_LONG,
        true,
        vec![
            format!("retention.ms=1000@{SOURCE_TOPIC}"),
            format!("log.retention.ms=604800000@{SOURCE_DEFAULT}"),
        ],
    );
    ensure(retention == want, || format!("retention.ms: {retention:?}"))?;
    let policy = setting(&topic, "cleanup.policy")?;
    let want = (
        "delete".to_owned(),
        SOURCE_DEFAULT,
        TYPE_LIST,
        true,
        vec![format!("log.cleanup.policy=delete@{SOURCE_DEFAULT}")],
    );
    ensure(policy == want, || format!("cleanup.policy: {policy:?}"))?;
    let max_bytes = setting(&topic, "max.message.bytes")?;
    ensure(
        max_bytes.2 == TYPE_INT
            && max_bytes.4 == [format!("message.max.bytes=1048588@{SOURCE_DEFAULT}")],
        || format!("max.message.bytes: {max_bytes:?}"),
    )?;

    // Version 1 carries synonyms but neither types nor documentation.
    // Not asked for, neither synonyms nor documentation are given; the type is.
    let plain = describe_asking(&mut c, 4, RESOURCE_TOPIC, "t".into(), false)?;
    let retention = setting(&plain, "retention.ms")?;
    ensure(retention == ("1000".to_owned(), SOURCE_TOPIC, TYPE_LONG, false, Vec::new()), || {
        format!("retention.ms, not asked for detail: {retention:?}")
    })?;

    let old = describe(&mut c, 1, RESOURCE_TOPIC, "t".into())?;
    let retention = setting(&old, "retention.ms")?;
    ensure(retention.2 == 0 && !retention.3 && retention.4.len() == 2, || {
        format!("v1 retention.ms: {retention:?}")
    })?;

    let id = node_id(0);
    let own = describe(&mut c, 4, RESOURCE_BROKER, id.to_string())?;
    ensure(own.error_code == 0, || format!("broker {id}: {}", own.error_code))?;
    let default = setting(&own, "log.retention.ms")?;
    let want = (
        "604800000".to_owned(),
        SOURCE_DEFAULT,
        TYPE_LONG,
        true,
        vec![format!("log.retention.ms=604800000@{SOURCE_DEFAULT}")],
    );
    ensure(default == want, || format!("log.retention.ms: {default:?}"))?;
    let node = setting(&own, "node.id")?;
    ensure(
        node.0 == id.to_string() && node.1 == SOURCE_STATIC_BROKER && node.2 == TYPE_INT,
        || format!("node.id: {node:?}"),
    )?;
    ensure(own.configs.iter().all(|e| e.read_only), || "a broker setting is writable".into())?;

    let cluster_wide = describe(&mut c, 4, RESOURCE_BROKER, String::new())?;
    ensure(cluster_wide.error_code == 0 && cluster_wide.configs.is_empty(), || {
        format!("the empty name: {} {:?}", cluster_wide.error_code, cluster_wide.configs)
    })?;
    for name in [(id + 7).to_string(), "one".to_owned()] {
        let other = describe(&mut c, 4, RESOURCE_BROKER, name.clone())?;
        ensure(other.error_code == INVALID_REQUEST && other.configs.is_empty(), || {
            format!("broker {name:?}: {} with {} settings", other.error_code, other.configs.len())
        })?;
    }
    c.watch_verdict()
}

#[test]
fn describe_configs_reports_types_synonyms_and_docs() {
    for_each_seed("describe_configs_reports_types_synonyms_and_docs", 0..2, scenario);
}
