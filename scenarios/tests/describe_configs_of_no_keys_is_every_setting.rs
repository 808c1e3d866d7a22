//! Scenario: DescribeConfigs of a topic with an empty list of keys describes every setting, as
//! Kafka's does (no list at all does too); a list of keys describes those. Before, an empty
//! list described nothing.

use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// DescribeConfigs' version here.
const VERSION: i16 = 1;
/// Kafka's resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

/// The names DescribeConfigs of topic `t` with `keys` answers.
fn described(c: &mut Cluster, keys: Option<Vec<&'static str>>) -> Result<Vec<String>, String> {
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = RESOURCE_TOPIC;
    resource.resource_name = StrBytes::from_static_str("t");
    resource.configuration_keys =
        keys.map(|keys| keys.into_iter().map(StrBytes::from_static_str).collect());
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    let addr = c.addr(0);
    let response: DescribeConfigsResponse = c
        .client_call(Duration::from_secs(20), move |env| async move {
            Client::new(env, addr, "admin").call(&request, VERSION, Duration::from_secs(15)).await
        })
        .ok_or("DescribeConfigs got no answer")?
        .map_err(|e| format!("DescribeConfigs failed: {e}"))?;
    let result = response.results.first().ok_or("no result")?;
    ensure(result.error_code == 0, || format!("DescribeConfigs answered {}", result.error_code))?;
    Ok(result.configs.iter().map(|c| c.name.to_string()).collect())
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(1));
    let all = described(&mut c, None)?;
    ensure(all.iter().any(|n| n == "cleanup.policy"), || format!("no keys: {all:?}"))?;
    let empty = described(&mut c, Some(Vec::new()))?;
    ensure(empty == all, || format!("an empty list of keys gave {empty:?}, no list {all:?}"))?;
    let one = described(&mut c, Some(vec!["retention.ms"]))?;
    ensure(one == ["retention.ms"], || format!("one key gave {one:?}"))?;
    c.watch_verdict()
}

#[test]
fn describe_configs_of_no_keys_is_every_setting() {
    for_each_seed("describe_configs_of_no_keys_is_every_setting", 0..2, scenario);
}
