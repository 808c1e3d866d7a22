//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, for topics (every Kafka topic
//! setting Weir honours) and brokers (described; the broker's own settings are static — they
//! come from its configuration file — so altering them is refused with a message, except
//! deleting a dynamic setting Weir never holds, which changes nothing and is answered so).

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::admin::controller_error;
use super::code;
use crate::config::topic::Source;
use crate::config::{ConfigChange, ConfigOp};
use crate::controller::logic::ControllerError;
use crate::controller::rpc::Request;
use crate::node::Broker;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// DescribeConfigs `config_source` values.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// IncrementalAlterConfigs operations (Kafka's AlterConfigOp codes).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;
/// Kafka's dynamic broker settings for replication throttles, which Weir does not honour, so
/// none is ever set: `kafka-reassign-partitions` deletes them from every broker of a plan once
/// its moves are done (`--verify`, `--cancel`), and a delete of one is a change that changes
/// nothing.
const BROKER_NEVER_SET: &[&str] = &[
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

fn entry(name: &str, value: String, source: i8, read_only: bool) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = StrBytes::from_string(name.to_owned());
    e.value = Some(StrBytes::from_string(value));
    e.config_source = source;
    e.read_only = read_only;
    e
}

/// Answers DescribeConfigs.
pub fn describe(broker: &Arc<Broker>, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        // No keys, or none listed, as in Kafka: every setting.
        let wanted = |name: &str| {
            resource
                .configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == name))
        };
        match resource.resource_type {
            RESOURCE_TOPIC => match broker.topic_config(resource.resource_name.as_str()) {
                Some(config) => {
                    for (name, value, source) in config.all() {
                        if wanted(name) {
                            let source = match source {
                                Source::Topic => SOURCE_TOPIC,
                                Source::Broker => SOURCE_STATIC_BROKER,
                                Source::Default => SOURCE_DEFAULT,
                            };
                            result.configs.push(entry(name, value, source, false));
                        }
                    }
                }
                None => result.error_code = code(ResponseError::UnknownTopicOrPartition),
            },
            RESOURCE_BROKER => {
                for (name, value) in broker_settings(broker) {
                    if wanted(&name) {
                        result.configs.push(entry(&name, value, SOURCE_STATIC_BROKER, true));
                    }
                }
            }
            _ => {
                result.error_code = code(ResponseError::InvalidRequest);
                result.error_message =
                    Some(StrBytes::from_static_str("only topic and broker configs exist"));
            }
        }
        response.results.push(result);
    }
    response
}

fn broker_settings(broker: &Broker) -> Vec<(String, String)> {
    let c = &broker.config;
    let mut out = vec![
        ("node.id".to_owned(), c.node_id.to_string()),
        ("num.partitions".to_owned(), c.num_partitions.to_string()),
        ("auto.create.topics.enable".to_owned(), c.auto_create_topics_enable.to_string()),
        ("socket.request.max.bytes".to_owned(), c.socket_request_max_bytes.to_string()),
        ("connections.max.idle.ms".to_owned(), c.connections_max_idle_ms.to_string()),
        ("queued.max.request.bytes".to_owned(), c.queued_max_request_bytes.to_string()),
        ("max.connections".to_owned(), c.max_connections.to_string()),
        ("max.connections.per.ip".to_owned(), c.max_connections_per_ip.to_string()),
        ("offsets.topic.num.partitions".to_owned(), c.offsets_topic_num_partitions.to_string()),
        ("offsets.topic.segment.bytes".to_owned(), c.offsets_topic_segment_bytes.to_string()),
        (
            "group.initial.rebalance.delay.ms".to_owned(),
            c.group_initial_rebalance_delay_ms.to_string(),
        ),
        ("group.min.session.timeout.ms".to_owned(), c.group_min_session_timeout_ms.to_string()),
        ("group.max.session.timeout.ms".to_owned(), c.group_max_session_timeout_ms.to_string()),
        ("group.max.size".to_owned(), c.group_max_size.to_string()),
        ("offsets.retention.minutes".to_owned(), c.offsets_retention_minutes.to_string()),
        (
            "offsets.retention.check.interval.ms".to_owned(),
            c.offsets_retention_check_interval_ms.to_string(),
        ),
        ("offset.metadata.max.bytes".to_owned(), c.offset_metadata_max_bytes.to_string()),
        ("producer.id.expiration.ms".to_owned(), c.producer_id_expiration_ms.to_string()),
        (
            "log.retention.check.interval.ms".to_owned(),
            c.log_retention_check_interval_ms.to_string(),
        ),
        (
            "log.flush.offset.checkpoint.interval.ms".to_owned(),
            c.log_checkpoint_interval_ms.to_string(),
        ),
        (
            "replica.high.watermark.checkpoint.interval.ms".to_owned(),
            c.replica_high_watermark_checkpoint_interval_ms.to_string(),
        ),
    ];
    for (name, value, _) in c.topic_config().all() {
        out.push((format!("log.default.{name}"), value));
    }
    out
}

/// Builds one resource's answer (AlterConfigs and IncrementalAlterConfigs have distinct but
/// identical types).
macro_rules! answer {
    ($ty:ty, $resource_type:expr, $name:expr, $outcome:expr) => {{
        let mut r = <$ty>::default();
        r.resource_type = $resource_type;
        r.resource_name = $name;
        if let Err((error, message)) = $outcome {
            r.error_code = code(error);
            r.error_message = Some(StrBytes::from_string(message));
        }
        r
    }};
}

/// Answers AlterConfigs: the given set replaces every override of the topic.
pub async fn alter(broker: &Arc<Broker>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in request.resources {
        let changes: Vec<ConfigChange> = resource
            .configs
            .iter()
            .map(|c| ConfigChange {
                name: c.name.to_string(),
                op: c.value.as_ref().map_or(ConfigOp::Delete, |v| ConfigOp::Set(v.to_string())),
            })
            .collect();
        let outcome = apply(
            broker,
            resource.resource_type,
            &resource.resource_name,
            &changes,
            false,
            request.validate_only,
        )
        .await;
        response.responses.push(answer!(
            alter_configs_response::AlterConfigsResourceResponse,
            resource.resource_type,
            resource.resource_name,
            outcome
        ));
    }
    response
}

/// Answers IncrementalAlterConfigs (SET, DELETE, APPEND and SUBTRACT for list values). The
/// controller applies the changes to the overrides it holds, so changes of different settings
/// sent through different brokers at once all take effect.
pub async fn incremental_alter(
    broker: &Arc<Broker>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in request.resources {
        let outcome = match changes_of(&resource.configs) {
            Ok(changes) => {
                apply(
                    broker,
                    resource.resource_type,
                    &resource.resource_name,
                    &changes,
                    true,
                    request.validate_only,
                )
                .await
            }
            Err(refusal) => Err(refusal),
        };
        response.responses.push(answer!(
            incremental_alter_configs_response::AlterConfigsResourceResponse,
            resource.resource_type,
            resource.resource_name,
            outcome
        ));
    }
    response
}

/// The most settings one resource of an IncrementalAlterConfigs may change (a topic has
/// fewer than 20 settings).
pub const CONFIG_CHANGES_MAX: usize = 1_000;

/// The changes one resource of an IncrementalAlterConfigs asks for. As in Kafka, a setting
/// named twice, an unknown operation, or a missing value for an operation other than DELETE
/// is INVALID_REQUEST; so are more than [`CONFIG_CHANGES_MAX`] changes.
fn changes_of(
    configs: &[incremental_alter_configs_request::AlterableConfig],
) -> Result<Vec<ConfigChange>, (ResponseError, String)> {
    let refuse = |why: String| Err((ResponseError::InvalidRequest, why));
    if configs.len() > CONFIG_CHANGES_MAX {
        return refuse(format!("{} changes: at most {CONFIG_CHANGES_MAX}", configs.len()));
    }
    let mut names = BTreeSet::new();
    let mut changes = Vec::with_capacity(configs.len());
    for c in configs {
        let name = c.name.to_string();
        if !names.insert(name.clone()) {
            return refuse(format!("{name} is named more than once"));
        }
        let value = || {
            c.value.as_ref().map(|v| v.to_string()).ok_or_else(|| {
                (
                    ResponseError::InvalidRequest,
                    format!("no value for {name}: only DELETE takes none"),
                )
            })
        };
        let op = match c.config_operation {
            OP_SET => ConfigOp::Set(value()?),
            OP_DELETE => ConfigOp::Delete,
            OP_APPEND => ConfigOp::Append(value()?),
            OP_SUBTRACT => ConfigOp::Subtract(value()?),
            other => return refuse(format!("unknown operation {other}")),
        };
        changes.push(ConfigChange { name, op });
    }
    Ok(changes)
}

/// Whether every change deletes one of `names` (settings Weir never holds: a change that
/// changes nothing).
fn only_deletes_of(changes: &[ConfigChange], names: &[&str]) -> bool {
    changes.iter().all(|c| c.op == ConfigOp::Delete && names.contains(&c.name.as_str()))
}

async fn apply(
    broker: &Arc<Broker>,
    resource_type: i8,
    name: &StrBytes,
    changes: &[ConfigChange],
    incremental: bool,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    match resource_type {
        RESOURCE_TOPIC => {
            let fail = |error: ControllerError| (controller_error(&error), error.to_string());
            let request = if incremental {
                Request::AlterConfigsIncremental {
                    name: name.to_string(),
                    changes: changes.to_vec(),
                    validate_only,
                }
            } else {
                if broker.topic_config(name.as_str()).is_none() {
                    return Err(fail(ControllerError::UnknownTopic(name.to_string())));
                }
                let mut config = broker.config.topic_config();
                config.apply_incremental(changes).map_err(|e| fail(e.into()))?;
                Request::AlterConfigs {
                    name: name.to_string(),
                    configs: config.overrides().clone(),
                    validate_only,
                }
            };
            broker.change(request).await.map(|_| ()).map_err(fail)
        }
        RESOURCE_BROKER => {
            let id = broker.config.node_id;
            if !name.is_empty() && name.as_str() != id.to_string() {
                // As Kafka: a broker's settings are altered on that broker.
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unexpected broker id {name}: this is broker {id}"),
                ));
            }
            if incremental && only_deletes_of(changes, BROKER_NEVER_SET) {
                return Ok(());
            }
            Err((
                ResponseError::InvalidRequest,
                "broker settings are static: set them in the broker's configuration file"
                    .to_owned(),
            ))
        }
        _ => Err((ResponseError::InvalidRequest, "only topic and broker configs exist".to_owned())),
    }
}
