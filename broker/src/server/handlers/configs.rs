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
use crate::config::topic::{ConfigType, Described, Source, Synonym};
use crate::config::{ConfigChange, ConfigOp, TopicConfig};
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

/// DescribeConfigs `config_type` values (v3+), Kafka's `ConfigType` codes.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

fn type_code(kind: ConfigType) -> i8 {
    match kind {
        ConfigType::Boolean => TYPE_BOOLEAN,
        ConfigType::String => TYPE_STRING,
        ConfigType::Int => TYPE_INT,
        ConfigType::Long => TYPE_LONG,
        ConfigType::Double => TYPE_DOUBLE,
        ConfigType::List => TYPE_LIST,
    }
}

fn source_code(source: Source) -> i8 {
    match source {
        Source::Topic => SOURCE_TOPIC,
        Source::Broker => SOURCE_STATIC_BROKER,
        Source::Default => SOURCE_DEFAULT,
    }
}

/// What a DescribeConfigs asks to be told beside names and values.
struct Detail {
    synonyms: bool,
    documentation: bool,
}

impl Detail {
    /// One setting's entry; broker settings are read-only (static in Weir).
    fn entry(&self, d: Described, read_only: bool) -> DescribeConfigsResourceResult {
        let mut e = DescribeConfigsResourceResult::default();
        e.name = StrBytes::from_static_str(d.name);
        e.value = Some(StrBytes::from_string(d.value));
        e.config_source = source_code(d.source);
        e.read_only = read_only;
        if self.synonyms {
            e.synonyms = d
                .synonyms
                .into_iter()
                .map(|s| {
                    let mut synonym = describe_configs_response::DescribeConfigsSynonym::default();
                    synonym.name = StrBytes::from_static_str(s.name);
                    synonym.value = Some(StrBytes::from_string(s.value));
                    synonym.source = source_code(s.source);
                    synonym
                })
                .collect();
        }
        // Versions before 3 carry neither; their encoding leaves both out.
        e.config_type = type_code(d.kind);
        if self.documentation {
            e.documentation = Some(StrBytes::from_static_str(d.doc));
        }
        e
    }
}

/// Answers DescribeConfigs, with each setting's type (v3+), and its synonyms and
/// documentation when asked.
pub fn describe(broker: &Arc<Broker>, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let detail =
        Detail { synonyms: request.include_synonyms, documentation: request.include_documentation };
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        // No keys, or none listed, as in Kafka: every setting.
        let wanted = |d: &Described| {
            resource
                .configuration_keys
                .as_ref()
                .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == d.name))
        };
        let described = match resource.resource_type {
            RESOURCE_TOPIC => match broker.topic_config(resource.resource_name.as_str()) {
                Some(config) => Ok((config.describe(), false)),
                None => Err((ResponseError::UnknownTopicOrPartition, None)),
            },
            RESOURCE_BROKER => broker_settings(broker, resource.resource_name.as_str())
                .map(|settings| (settings, true))
                .map_err(|why| (ResponseError::InvalidRequest, Some(why))),
            _ => Err((
                ResponseError::InvalidRequest,
                Some("only topic and broker configs exist".to_owned()),
            )),
        };
        match described {
            Ok((settings, read_only)) => {
                result.configs = settings
                    .into_iter()
                    .filter(|d| wanted(d))
                    .map(|d| detail.entry(d, read_only))
                    .collect();
            }
            Err((error, message)) => {
                result.error_code = code(error);
                result.error_message = message.map(StrBytes::from_string);
            }
        }
        response.results.push(result);
    }
    response
}

/// Every setting of a topic as CreateTopics (v5+) reports it.
pub(super) fn created_configs(
    config: &TopicConfig,
) -> Vec<create_topics_response::CreatableTopicConfigs> {
    config
        .describe()
        .into_iter()
        .map(|d| {
            let mut c = create_topics_response::CreatableTopicConfigs::default();
            c.name = StrBytes::from_static_str(d.name);
            c.value = Some(StrBytes::from_string(d.value));
            c.config_source = source_code(d.source);
            c
        })
        .collect()
}

/// A broker's own setting. Weir does not tell one set in the configuration file from one left
/// at its default: both are static, and both are reported so (STATIC_BROKER_CONFIG).
fn setting(
    name: &'static str,
    value: impl ToString,
    kind: ConfigType,
    doc: &'static str,
) -> Described {
    let value = value.to_string();
    let synonym = Synonym { name, value: value.clone(), source: Source::Broker };
    Described { name, value, source: Source::Broker, kind, doc, synonyms: vec![synonym] }
}

/// The settings of the broker named `name`: none for the empty name (Kafka's cluster-wide
/// dynamic defaults, which Weir does not have); this broker's for its id; otherwise refused,
/// as Kafka does, since a broker's settings are described by that broker.
fn broker_settings(broker: &Broker, name: &str) -> Result<Vec<Described>, String> {
    let c = &broker.config;
    if name.is_empty() {
        return Ok(Vec::new());
    }
    let Ok(id) = name.parse::<i32>() else {
        return Err(format!("broker id must be an integer, but it is {name:?}"));
    };
    if id != c.node_id {
        return Err(format!("unexpected broker id {id}: this is broker {}", c.node_id));
    }
    use ConfigType::{Boolean, Int, Long};
    let mut out = vec![
        setting("node.id", c.node_id, Int, "This broker's id."),
        setting(
            "num.partitions",
            c.num_partitions,
            Int,
            "Partitions of a topic created without a count.",
        ),
        setting(
            "auto.create.topics.enable",
            c.auto_create_topics_enable,
            Boolean,
            "Whether a topic named by a producer or by a metadata request is created if missing.",
        ),
        setting(
            "socket.request.max.bytes",
            c.socket_request_max_bytes,
            Int,
            "The largest request accepted, in bytes.",
        ),
        setting(
            "connections.max.idle.ms",
            c.connections_max_idle_ms,
            Long,
            "How long an idle connection is kept, in ms.",
        ),
        setting(
            "queued.max.request.bytes",
            c.queued_max_request_bytes,
            Long,
            "The most bytes of requests read but not yet answered, over all connections.",
        ),
        setting("max.connections", c.max_connections, Int, "The most connections open at once."),
        setting(
            "max.connections.per.ip",
            c.max_connections_per_ip,
            Int,
            "The most connections open at once from one address.",
        ),
        setting(
            "offsets.topic.num.partitions",
            c.offsets_topic_num_partitions,
            Int,
            "Partitions of the committed-offsets topic.",
        ),
        setting(
            "offsets.topic.segment.bytes",
            c.offsets_topic_segment_bytes,
            Int,
            "Segment size of the committed-offsets topic.",
        ),
        setting(
            "group.initial.rebalance.delay.ms",
            c.group_initial_rebalance_delay_ms,
            Int,
            "How long a new group waits for more members before its first rebalance, in ms.",
        ),
        setting(
            "group.min.session.timeout.ms",
            c.group_min_session_timeout_ms,
            Int,
            "The shortest session a consumer may ask for, in ms.",
        ),
        setting(
            "group.max.session.timeout.ms",
            c.group_max_session_timeout_ms,
            Int,
            "The longest session a consumer may ask for, in ms.",
        ),
        setting("group.max.size", c.group_max_size, Int, "The most members a group may have."),
        setting(
            "offsets.retention.minutes",
            c.offsets_retention_minutes,
            Int,
            "How long the committed offsets of an empty group are kept, in minutes.",
        ),
        setting(
            "offsets.retention.check.interval.ms",
            c.offsets_retention_check_interval_ms,
            Long,
            "How often expired committed offsets are looked for, in ms.",
        ),
        setting(
            "offset.metadata.max.bytes",
            c.offset_metadata_max_bytes,
            Int,
            "The longest metadata string a committed offset may carry.",
        ),
        setting(
            "producer.id.expiration.ms",
            c.producer_id_expiration_ms,
            Int,
            "How long an idle producer's sequence state is kept, in ms.",
        ),
        setting(
            "log.retention.check.interval.ms",
            c.log_retention_check_interval_ms,
            Long,
            "How often logs are checked for segments to delete or compact, in ms.",
        ),
        setting(
            "log.flush.offset.checkpoint.interval.ms",
            c.log_checkpoint_interval_ms,
            Int,
            "How often each log's recovery point is written down, in ms.",
        ),
        setting(
            "replica.high.watermark.checkpoint.interval.ms",
            c.replica_high_watermark_checkpoint_interval_ms,
            Long,
            "How often each partition's high watermark is written down, in ms.",
        ),
    ];
    out.extend(c.topic_config().describe_defaults());
    Ok(out)
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
