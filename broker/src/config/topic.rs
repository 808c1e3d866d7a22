//! Topic configuration with Kafka's names and defaults. A topic stores only its overrides;
//! every other key takes the broker's default. Invalid names and values are refused with a
//! message that says why, and nothing changes.

use std::collections::{BTreeMap, BTreeSet};

use crate::log::{CleanupPolicy, FlushPolicy, LogConfig, TimestampPolicy};

/// Why a topic configuration was refused (Kafka's INVALID_CONFIG).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not a topic configuration Weir knows.
    #[error("unknown topic config {0:?}")]
    UnknownName(String),
    /// The value does not parse or is out of range.
    #[error("invalid value {value:?} for {name}: {rule}")]
    InvalidValue {
        /// The configuration name.
        name: String,
        /// The value given.
        value: String,
        /// What a valid value looks like.
        rule: &'static str,
    },
    /// Settings valid one by one that contradict each other.
    #[error("{0}")]
    Conflict(&'static str),
    /// APPEND or SUBTRACT of a setting whose value is not a list.
    #[error("{0} is not a list: only a list value may be appended to or subtracted from")]
    NotAList(String),
}

/// One change of an IncrementalAlterConfigs, as Kafka's AlterConfigOp names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOp {
    /// Sets the value.
    Set(String),
    /// Removes the override: the broker's default is in force again.
    Delete,
    /// Adds the comma-separated items to a list value (those it does not hold yet).
    Append(String),
    /// Removes the comma-separated items from a list value.
    Subtract(String),
}

/// [`ConfigOp`] applied to one setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigChange {
    /// The setting's name.
    pub name: String,
    /// What to do to it.
    pub op: ConfigOp,
}

/// Settings whose value is a comma-separated list (APPEND and SUBTRACT apply to these only).
const LIST_KEYS: &[&str] = &["cleanup.policy"];

/// The items of a comma-separated list value.
fn items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// A value's type, as DescribeConfigs reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` or `false`.
    Boolean,
    /// Text.
    String,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A number with a fraction.
    Double,
    /// A comma-separated list.
    List,
}

/// How a key is checked, its default, and how DescribeConfigs describes it.
struct Key {
    name: &'static str,
    default: &'static str,
    check: fn(&str) -> Result<(), &'static str>,
    /// The broker setting that gives every topic its default (Kafka's synonym).
    broker_name: &'static str,
    kind: ConfigType,
    doc: &'static str,
}

/// A 32-bit setting (Kafka's INT) at least `$min`.
macro_rules! int_min {
    ($min:expr, $rule:literal) => {
        |v: &str| match v.parse::<i32>() {
            Ok(n) if n >= $min => Ok(()),
            _ => Err($rule),
        }
    };
}

macro_rules! long_min {
    ($min:expr, $rule:literal) => {
        |v: &str| match v.parse::<i64>() {
            Ok(n) if n >= $min => Ok(()),
            _ => Err($rule),
        }
    };
}

const KEYS: &[Key] = &[
    Key {
        name: "cleanup.policy",
        default: "delete",
        check: check_cleanup_policy,
        broker_name: "log.cleanup.policy",
        kind: ConfigType::List,
        doc: "What happens to old segments: delete them (retention), compact them (keep the newest record per key), or both.",
    },
    Key {
        name: "retention.ms",
        default: "604800000",
        check: long_min!(-1, "an integer >= -1 (-1: keep forever)"),
        broker_name: "log.retention.ms",
        kind: ConfigType::Long,
        doc: "How long a segment is kept after its newest record, in ms (-1: forever), under the delete policy.",
    },
    Key {
        name: "retention.bytes",
        default: "-1",
        check: long_min!(-1, "an integer >= -1 (-1: no limit)"),
        broker_name: "log.retention.bytes",
        kind: ConfigType::Long,
        doc: "The most bytes a partition keeps before its oldest segments are deleted (-1: no limit), under the delete policy.",
    },
    Key {
        name: "segment.bytes",
        default: "1073741824",
        check: check_segment_bytes,
        broker_name: "log.segment.bytes",
        kind: ConfigType::Int,
        doc: "The size at which the active segment is closed and a new one started.",
    },
    Key {
        name: "segment.ms",
        default: "604800000",
        check: long_min!(1, "an integer >= 1"),
        broker_name: "log.roll.ms",
        kind: ConfigType::Long,
        doc: "The age at which the active segment is closed and a new one started, in ms.",
    },
    Key {
        name: "segment.index.bytes",
        default: "10485760",
        check: int_min!(8, "an integer from 8 to 2147483647"),
        broker_name: "log.index.size.max.bytes",
        kind: ConfigType::Int,
        doc: "The most bytes a segment's offset index may take; the segment rolls when it is full.",
    },
    Key {
        name: "index.interval.bytes",
        default: "4096",
        check: int_min!(0, "an integer from 0 to 2147483647"),
        broker_name: "log.index.interval.bytes",
        kind: ConfigType::Int,
        doc: "How many bytes of records lie between two entries of the offset index.",
    },
    Key {
        name: "max.message.bytes",
        default: "1048588",
        check: check_max_message_bytes,
        broker_name: "message.max.bytes",
        kind: ConfigType::Int,
        doc: "The largest record batch the topic accepts, in bytes.",
    },
    Key {
        name: "min.insync.replicas",
        default: "1",
        check: int_min!(1, "an integer from 1 to 2147483647"),
        broker_name: "min.insync.replicas",
        kind: ConfigType::Int,
        doc: "How many in-sync replicas an acks=all write needs; with fewer, such writes are refused.",
    },
    Key {
        name: "delete.retention.ms",
        default: "86400000",
        check: long_min!(0, "an integer >= 0"),
        broker_name: "log.cleaner.delete.retention.ms",
        kind: ConfigType::Long,
        doc: "How long tombstones are kept once compaction reaches them, in ms.",
    },
    Key {
        name: "min.cleanable.dirty.ratio",
        default: "0.5",
        check: check_ratio,
        broker_name: "log.cleaner.min.cleanable.ratio",
        kind: ConfigType::Double,
        doc: "The share of a compacted log not yet cleaned at which the cleaner takes it up.",
    },
    Key {
        name: "min.compaction.lag.ms",
        default: "0",
        check: long_min!(0, "an integer >= 0"),
        broker_name: "log.cleaner.min.compaction.lag.ms",
        kind: ConfigType::Long,
        doc: "The least time a record stays uncompacted, in ms.",
    },
    Key {
        name: "max.compaction.lag.ms",
        default: "9223372036854775807",
        check: long_min!(1, "an integer >= 1"),
        broker_name: "log.cleaner.max.compaction.lag.ms",
        kind: ConfigType::Long,
        doc: "The most time a record may stay uncompacted, in ms, whatever the dirty ratio.",
    },
    Key {
        name: "message.timestamp.before.max.ms",
        default: "9223372036854775807",
        check: long_min!(0, "an integer >= 0"),
        broker_name: "log.message.timestamp.before.max.ms",
        kind: ConfigType::Long,
        doc: "How far before the broker's clock a CreateTime timestamp may lie, in ms.",
    },
    Key {
        name: "message.timestamp.after.max.ms",
        default: "3600000",
        check: long_min!(0, "an integer >= 0"),
        broker_name: "log.message.timestamp.after.max.ms",
        kind: ConfigType::Long,
        doc: "How far after the broker's clock a CreateTime timestamp may lie, in ms.",
    },
    Key {
        name: "message.timestamp.type",
        default: "CreateTime",
        check: check_timestamp_type,
        broker_name: "log.message.timestamp.type",
        kind: ConfigType::String,
        doc: "Whether records keep the producer's timestamp (CreateTime) or get the broker's (LogAppendTime).",
    },
    Key {
        name: "flush.policy",
        default: "ack",
        check: check_flush_policy,
        broker_name: "log.flush.policy",
        kind: ConfigType::String,
        doc: "ack: a write is acknowledged once synced to disk; interval: synced by flush.ms and flush.messages, as Kafka does.",
    },
    Key {
        name: "flush.ms",
        default: "9223372036854775807",
        check: long_min!(0, "an integer >= 0"),
        broker_name: "log.flush.interval.ms",
        kind: ConfigType::Long,
        doc: "Under the interval policy, the longest time written records wait to be synced, in ms.",
    },
    Key {
        name: "flush.messages",
        default: "9223372036854775807",
        check: long_min!(1, "an integer >= 1"),
        broker_name: "log.flush.interval.messages",
        kind: ConfigType::Long,
        doc: "Under the interval policy, how many records may be written before a sync.",
    },
    Key {
        name: "unclean.leader.election.enable",
        default: "false",
        check: check_bool,
        broker_name: "unclean.leader.election.enable",
        kind: ConfigType::Boolean,
        doc: "Whether a replica outside the in-sync set may become leader when none in it is left, losing records.",
    },
    Key {
        name: "compression.type",
        default: "producer",
        check: check_compression,
        broker_name: "compression.type",
        kind: ConfigType::String,
        doc: "How batches are stored: producer keeps them as the producer compressed them.",
    },
];

fn check_cleanup_policy(v: &str) -> Result<(), &'static str> {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    let ok = !parts.is_empty() && parts.iter().all(|p| matches!(*p, "delete" | "compact"));
    if ok { Ok(()) } else { Err("delete, compact, or delete,compact") }
}

fn check_segment_bytes(v: &str) -> Result<(), &'static str> {
    match v.parse::<i64>() {
        Ok(n) if (1024..=i64::from(i32::MAX)).contains(&n) => Ok(()),
        _ => Err("an integer from 1024 to 2147483647"),
    }
}

fn check_max_message_bytes(v: &str) -> Result<(), &'static str> {
    match v.parse::<i64>() {
        Ok(n) if (0..=i64::from(i32::MAX)).contains(&n) => Ok(()),
        _ => Err("an integer from 0 to 2147483647"),
    }
}

fn check_ratio(v: &str) -> Result<(), &'static str> {
    match v.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(()),
        _ => Err("a number from 0 to 1"),
    }
}

fn check_timestamp_type(v: &str) -> Result<(), &'static str> {
    if matches!(v, "CreateTime" | "LogAppendTime") {
        Ok(())
    } else {
        Err("CreateTime or LogAppendTime")
    }
}

fn check_flush_policy(v: &str) -> Result<(), &'static str> {
    if matches!(v, "ack" | "interval") { Ok(()) } else { Err("ack or interval") }
}

fn check_bool(v: &str) -> Result<(), &'static str> {
    if matches!(v, "true" | "false") { Ok(()) } else { Err("true or false") }
}

fn check_compression(v: &str) -> Result<(), &'static str> {
    // Batches are stored as the producer compressed them; recompressing is not offered.
    if v == "producer" { Ok(()) } else { Err("producer (batches are stored as sent)") }
}

/// One setting as DescribeConfigs shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Described {
    /// Its name.
    pub name: &'static str,
    /// The value in force.
    pub value: String,
    /// Where that value comes from.
    pub source: Source,
    /// Its type.
    pub kind: ConfigType,
    /// What it does.
    pub doc: &'static str,
    /// Every place that gives it a value, the one in force first (Kafka's synonyms).
    pub synonyms: Vec<Synonym>,
}

/// One place that gives a setting a value, under the name it has there.
#[derive(Clone, Debug, PartialEq)]
pub struct Synonym {
    /// The name there: the topic's setting, or the broker's.
    pub name: &'static str,
    /// The value there.
    pub value: String,
    /// Where it is.
    pub source: Source,
}

/// A topic's overrides on top of broker-wide defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicConfig {
    /// Broker-wide defaults for keys the topic does not override (`log.*` settings).
    defaults: BTreeMap<String, String>,
    /// The topic's own settings.
    overrides: BTreeMap<String, String>,
}

/// Where a value comes from (DescribeConfigs' `config_source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Set on the topic.
    Topic,
    /// Set in the broker's configuration.
    Broker,
    /// Kafka's default.
    Default,
}

impl TopicConfig {
    /// A configuration with broker-wide defaults (already validated) and no overrides.
    pub fn with_defaults(defaults: BTreeMap<String, String>) -> TopicConfig {
        TopicConfig { defaults, overrides: BTreeMap::new() }
    }

    /// Checks one name and value.
    pub fn validate(name: &str, value: &str) -> Result<(), ConfigError> {
        let key = KEYS
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| ConfigError::UnknownName(name.to_owned()))?;
        (key.check)(value).map_err(|rule| ConfigError::InvalidValue {
            name: name.to_owned(),
            value: value.to_owned(),
            rule,
        })
    }

    /// Applies `changes` (`None` removes an override) if every one is valid; otherwise changes
    /// nothing.
    pub fn apply<'a>(
        &mut self,
        changes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<(), ConfigError> {
        let mut next = self.overrides.clone();
        for (name, value) in changes {
            match value {
                Some(value) => {
                    Self::validate(name, value)?;
                    next.insert(name.to_owned(), value.to_owned());
                }
                // As in Kafka, deleting a setting the topic does not hold changes nothing,
                // whatever its name (tools delete Kafka's settings Weir never holds, such as
                // the replication throttles `kafka-reassign-partitions` clears).
                None => {
                    next.remove(name);
                }
            }
        }
        self.overrides = next;
        Ok(())
    }

    /// Applies `changes` in order (IncrementalAlterConfigs semantics) if every one is valid;
    /// otherwise changes nothing. As in Kafka, APPEND and SUBTRACT start from the topic's
    /// override, or Kafka's default where it has none (not the broker's configured default,
    /// which may differ from node to node), and each item appended must be a valid value by
    /// itself.
    pub fn apply_incremental(&mut self, changes: &[ConfigChange]) -> Result<(), ConfigError> {
        let mut next = self.clone();
        for change in changes {
            let name = change.name.as_str();
            let value = match &change.op {
                ConfigOp::Set(value) => Some(value.clone()),
                ConfigOp::Delete => None,
                ConfigOp::Append(given) | ConfigOp::Subtract(given) => {
                    let key = KEYS
                        .iter()
                        .find(|k| k.name == name)
                        .ok_or_else(|| ConfigError::UnknownName(name.to_owned()))?;
                    if !LIST_KEYS.contains(&name) {
                        return Err(ConfigError::NotAList(name.to_owned()));
                    }
                    let current = next.overrides.get(name).map_or(key.default, String::as_str);
                    let mut list: Vec<&str> = items(current).collect();
                    if matches!(change.op, ConfigOp::Append(_)) {
                        // Each item is checked before it is looked for, so the list stays
                        // as short as the setting's valid values, however many are given.
                        for item in items(given) {
                            Self::validate(name, item)?;
                            if !list.contains(&item) {
                                list.push(item);
                            }
                        }
                    } else {
                        let gone: BTreeSet<&str> = items(given).collect();
                        list.retain(|item| !gone.contains(item));
                    }
                    Some(list.join(","))
                }
            };
            next.apply([(name, value.as_deref())])?;
        }
        *self = next;
        Ok(())
    }

    /// Replaces every override at once (AlterConfigs semantics), if all are valid.
    pub fn replace(&mut self, overrides: BTreeMap<String, String>) -> Result<(), ConfigError> {
        for (name, value) in &overrides {
            Self::validate(name, value)?;
        }
        self.overrides = overrides;
        Ok(())
    }

    /// The topic's overrides.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// The value in force for `name`, and where it comes from.
    pub fn get(&self, name: &str) -> Option<(String, Source)> {
        if let Some(v) = self.overrides.get(name) {
            return Some((v.clone(), Source::Topic));
        }
        if let Some(v) = self.defaults.get(name) {
            return Some((v.clone(), Source::Broker));
        }
        KEYS.iter().find(|k| k.name == name).map(|k| (k.default.to_owned(), Source::Default))
    }

    /// Every topic setting as DescribeConfigs shows it for this topic.
    pub fn describe(&self) -> Vec<Described> {
        KEYS.iter().map(|k| self.described(k, true)).collect()
    }

    /// Every broker-wide default of a topic setting, under its broker name, as DescribeConfigs
    /// shows it for the broker.
    pub fn describe_defaults(&self) -> Vec<Described> {
        KEYS.iter().map(|k| self.described(k, false)).collect()
    }

    /// `k` described; with `topic`, under its topic name, the topic's own value first.
    fn described(&self, k: &Key, topic: bool) -> Described {
        let mut synonyms = Vec::with_capacity(3);
        if let Some(v) = self.overrides.get(k.name).filter(|_| topic) {
            synonyms.push(Synonym { name: k.name, value: v.clone(), source: Source::Topic });
        }
        if let Some(v) = self.defaults.get(k.name) {
            synonyms.push(Synonym {
                name: k.broker_name,
                value: v.clone(),
                source: Source::Broker,
            });
        }
        let default =
            Synonym { name: k.broker_name, value: k.default.to_owned(), source: Source::Default };
        synonyms.push(default);
        // The most specific place that gives a value is the one in force.
        let (value, source) = synonyms
            .first()
            .map_or((k.default.to_owned(), Source::Default), |s| (s.value.clone(), s.source));
        Described {
            name: if topic { k.name } else { k.broker_name },
            value,
            source,
            kind: k.kind,
            doc: k.doc,
            synonyms,
        }
    }

    fn long(&self, name: &str) -> i64 {
        self.get(name).and_then(|(v, _)| v.parse().ok()).unwrap_or(0)
    }

    fn text(&self, name: &str) -> String {
        self.get(name).map(|(v, _)| v).unwrap_or_default()
    }

    /// Refuses settings that contradict each other, as Kafka's `LogConfig.validateValues`
    /// does. Checked where a topic's settings are created or changed, not where committed
    /// ones are read: the broker-wide defaults may differ from node to node.
    pub fn check_consistent(&self) -> Result<(), ConfigError> {
        if self.long("min.compaction.lag.ms") > self.long("max.compaction.lag.ms") {
            return Err(ConfigError::Conflict(
                "min.compaction.lag.ms must not exceed max.compaction.lag.ms",
            ));
        }
        Ok(())
    }

    /// `min.insync.replicas`.
    pub fn min_insync_replicas(&self) -> i64 {
        self.long("min.insync.replicas")
    }

    /// `unclean.leader.election.enable`.
    pub fn unclean_leader_election(&self) -> bool {
        self.text("unclean.leader.election.enable") == "true"
    }

    /// The settings of this topic's partition logs.
    pub fn log_config(&self) -> LogConfig {
        let cleanup = self.text("cleanup.policy");
        let (compact, delete) = (cleanup.contains("compact"), cleanup.contains("delete"));
        LogConfig {
            segment_bytes: self.long("segment.bytes").max(1024) as u64,
            segment_ms: self.long("segment.ms"),
            retention_ms: self.long("retention.ms"),
            retention_bytes: self.long("retention.bytes"),
            cleanup_policy: match (compact, delete) {
                (true, true) => CleanupPolicy::CompactDelete,
                (true, false) => CleanupPolicy::Compact,
                _ => CleanupPolicy::Delete,
            },
            max_message_bytes: self.long("max.message.bytes").max(0) as usize,
            delete_retention_ms: self.long("delete.retention.ms"),
            min_cleanable_dirty_ratio: self
                .get("min.cleanable.dirty.ratio")
                .and_then(|(v, _)| v.parse().ok())
                .unwrap_or(0.5),
            min_compaction_lag_ms: self.long("min.compaction.lag.ms"),
            max_compaction_lag_ms: self.long("max.compaction.lag.ms"),
            timestamp_before_max_ms: self.long("message.timestamp.before.max.ms"),
            timestamp_after_max_ms: self.long("message.timestamp.after.max.ms"),
            timestamp_policy: if self.text("message.timestamp.type") == "LogAppendTime" {
                TimestampPolicy::LogAppendTime
            } else {
                TimestampPolicy::CreateTime
            },
            flush_policy: if self.text("flush.policy") == "interval" {
                FlushPolicy::Interval
            } else {
                FlushPolicy::Ack
            },
            flush_ms: self.long("flush.ms"),
            flush_messages: self.long("flush.messages"),
            index_interval_bytes: self.long("index.interval.bytes").max(0) as u64,
            segment_index_bytes: self.long("segment.index.bytes").max(8) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas_and_overrides_win() {
        let mut config = TopicConfig::default();
        assert_eq!(config.get("retention.ms"), Some(("604800000".into(), Source::Default)));
        config
            .apply([("retention.ms", Some("1000")), ("cleanup.policy", Some("compact,delete"))])
            .unwrap_or_default();
        assert_eq!(config.log_config().retention_ms, 1000);
        assert_eq!(config.log_config().cleanup_policy, CleanupPolicy::CompactDelete);
        assert_eq!(config.get("retention.ms").map(|v| v.1), Some(Source::Topic));
    }

    #[test]
    fn described_with_every_source_in_order() {
        let mut config =
            TopicConfig::with_defaults([("retention.ms".into(), "5000".into())].into());
        config.apply([("retention.ms", Some("1000"))]).unwrap_or_default();
        let synonyms = |d: &Described| {
            d.synonyms.iter().map(|s| (s.name, s.value.clone(), s.source)).collect::<Vec<_>>()
        };
        let find = |all: Vec<Described>, name: &str| all.into_iter().find(|d| d.name == name);
        let topic = find(config.describe(), "retention.ms").expect("retention.ms");
        assert_eq!(
            (topic.value.as_str(), topic.source, topic.kind),
            ("1000", Source::Topic, ConfigType::Long)
        );
        assert_eq!(
            synonyms(&topic),
            [
                ("retention.ms", "1000".to_owned(), Source::Topic),
                ("log.retention.ms", "5000".to_owned(), Source::Broker),
                ("log.retention.ms", "604800000".to_owned(), Source::Default),
            ]
        );
        let broker =
            find(config.describe_defaults(), "log.retention.ms").expect("log.retention.ms");
        assert_eq!((broker.value.as_str(), broker.source), ("5000", Source::Broker));
        assert_eq!(synonyms(&broker).len(), 2, "the broker's defaults know no topic");
        let ratio = find(config.describe(), "min.cleanable.dirty.ratio").expect("ratio");
        assert_eq!((ratio.source, ratio.kind), (Source::Default, ConfigType::Double));
        assert_eq!(synonyms(&ratio)[0].0, "log.cleaner.min.cleanable.ratio");
        assert!(config.describe().iter().all(|d| !d.doc.is_empty()));
    }

    #[test]
    fn lags_and_timestamp_bounds_are_kafkas_and_lags_must_agree() {
        let config = TopicConfig::default();
        let log = config.log_config();
        assert_eq!((log.min_compaction_lag_ms, log.max_compaction_lag_ms), (0, i64::MAX));
        assert_eq!(
            (log.timestamp_before_max_ms, log.timestamp_after_max_ms),
            (i64::MAX, 3_600_000)
        );
        assert_eq!(config.check_consistent(), Ok(()));
        let mut lags =
            TopicConfig::with_defaults([("max.compaction.lag.ms".into(), "5".into())].into());
        assert_eq!(lags.apply([("min.compaction.lag.ms", Some("5"))]), Ok(()));
        assert_eq!(lags.check_consistent(), Ok(()));
        assert_eq!(lags.apply([("min.compaction.lag.ms", Some("6"))]), Ok(()));
        assert!(matches!(lags.check_consistent(), Err(ConfigError::Conflict(_))));
        assert!(TopicConfig::validate("max.compaction.lag.ms", "0").is_err());
        assert!(TopicConfig::validate("message.timestamp.after.max.ms", "-1").is_err());
    }

    #[test]
    fn invalid_changes_change_nothing() {
        let mut config = TopicConfig::default();
        config.apply([("retention.ms", Some("5"))]).unwrap_or_default();
        let before = config.clone();
        let err = config.apply([("segment.ms", Some("10")), ("retention.ms", Some("-7"))]);
        assert!(matches!(err, Err(ConfigError::InvalidValue { .. })));
        assert_eq!(config, before);
        assert_eq!(
            config.apply([("no.such", Some("1"))]),
            Err(ConfigError::UnknownName("no.such".into()))
        );
        for (name, bad) in [
            ("cleanup.policy", "archive"),
            ("flush.policy", "never"),
            ("min.cleanable.dirty.ratio", "2"),
            ("message.timestamp.type", "Now"),
            ("segment.bytes", "10"),
            ("min.insync.replicas", "2147483648"),
            ("segment.index.bytes", "4294967296"),
        ] {
            assert!(TopicConfig::validate(name, bad).is_err(), "{name}={bad}");
        }
    }

    fn change(name: &str, op: ConfigOp) -> ConfigChange {
        ConfigChange { name: name.to_owned(), op }
    }

    #[test]
    fn incremental_changes_apply_in_order_to_the_override_or_kafkas_default() {
        let mut config = TopicConfig::default();
        let appended = config
            .apply_incremental(&[change("cleanup.policy", ConfigOp::Append("compact".into()))]);
        assert_eq!(appended, Ok(()));
        assert_eq!(config.get("cleanup.policy"), Some(("delete,compact".into(), Source::Topic)));
        // Items it already holds are not added twice, wherever they sit in the list.
        let again = [change("cleanup.policy", ConfigOp::Append("delete, compact".into()))];
        assert_eq!(config.apply_incremental(&again), Ok(()));
        assert_eq!(
            config.overrides().get("cleanup.policy").map(String::as_str),
            Some("delete,compact")
        );
        let subtract = [change("cleanup.policy", ConfigOp::Subtract("delete".into()))];
        assert_eq!(config.apply_incremental(&subtract), Ok(()));
        assert_eq!(config.log_config().cleanup_policy, CleanupPolicy::Compact);
        // Without an override, from Kafka's default, whatever this broker's default is.
        let mut compacting =
            TopicConfig::with_defaults([("cleanup.policy".into(), "compact".into())].into());
        let append = [change("cleanup.policy", ConfigOp::Append("compact".into()))];
        assert_eq!(compacting.apply_incremental(&append), Ok(()));
        assert_eq!(compacting.get("cleanup.policy").map(|v| v.0), Some("delete,compact".into()));
        let steps = [
            change("retention.ms", ConfigOp::Set("5".into())),
            change("segment.ms", ConfigOp::Set("7".into())),
            change("retention.ms", ConfigOp::Delete),
        ];
        assert_eq!(config.apply_incremental(&steps), Ok(()));
        let expected: BTreeMap<String, String> =
            [("cleanup.policy".into(), "compact".into()), ("segment.ms".into(), "7".into())].into();
        assert_eq!(config.overrides(), &expected);
    }

    #[test]
    fn an_invalid_incremental_change_changes_nothing() {
        let mut config = TopicConfig::default();
        config.apply([("retention.ms", Some("5"))]).unwrap_or_default();
        let before = config.clone();
        let refusals = [
            (
                change("retention.ms", ConfigOp::Append("6".into())),
                ConfigError::NotAList("retention.ms".into()),
            ),
            (
                change("no.such", ConfigOp::Subtract("x".into())),
                ConfigError::UnknownName("no.such".into()),
            ),
        ];
        for (bad, error) in refusals {
            let changes = [change("segment.ms", ConfigOp::Set("9".into())), bad];
            assert_eq!(config.apply_incremental(&changes), Err(error));
            assert_eq!(config, before);
        }
        // Every item appended is checked by itself, however many are given.
        let many = format!("compact,{}", vec!["bogus"; 10_000].join(","));
        let appended =
            config.apply_incremental(&[change("cleanup.policy", ConfigOp::Append(many))]);
        assert!(matches!(appended, Err(ConfigError::InvalidValue { .. })), "{appended:?}");
        assert_eq!(config, before);
        // Subtracting every item leaves no valid policy.
        let emptied = config
            .apply_incremental(&[change("cleanup.policy", ConfigOp::Subtract("delete".into()))]);
        assert!(matches!(emptied, Err(ConfigError::InvalidValue { .. })), "{emptied:?}");
        assert_eq!(config, before);
    }

    #[test]
    fn a_setting_weir_does_not_hold_can_be_deleted_but_not_set() {
        let mut config = TopicConfig::default();
        config.apply([("retention.ms", Some("5"))]).unwrap_or_default();
        let before = config.clone();
        // The replication throttles `kafka-reassign-partitions` deletes, and any other name.
        for name in ["leader.replication.throttled.replicas", "no.such"] {
            assert_eq!(config.apply([(name, None)]), Ok(()), "{name}");
            let delete = [change(name, ConfigOp::Delete)];
            assert_eq!(config.apply_incremental(&delete), Ok(()), "{name}");
            assert_eq!(config, before);
            let set = config.apply([(name, Some("0:1"))]);
            assert_eq!(set, Err(ConfigError::UnknownName(name.into())), "{name}");
        }
    }
}
