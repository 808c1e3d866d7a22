//! The broker's own settings. With no file and no flags, a single node listens on
//! 127.0.0.1:9092 and keeps its data in `./weir-data`. A TOML file (names follow Kafka's, with
//! `_` for `.`) and command-line flags override the defaults; anything invalid is refused at
//! start-up with a message.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::topic::{ConfigError, TopicConfig};
use crate::log::producers::PRODUCER_ID_EXPIRATION_MS_DEFAULT;

/// Kafka's `socket.request.max.bytes` default: the largest request frame accepted.
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: usize = 100 << 20;
/// Kafka's default `queued.max.request.bytes`: no limit.
pub const QUEUED_MAX_REQUEST_BYTES_UNLIMITED: i64 = -1;
/// Kafka's default `max.connections` and `max.connections.per.ip`: no limit in effect.
pub const MAX_CONNECTIONS_DEFAULT: usize = i32::MAX as usize;
/// A week between scrub passes: at the default rate, one pass reads about 4.8 TB.
pub const LOG_SCRUB_INTERVAL_MS_DEFAULT: u64 = 7 * 24 * 3_600_000;
/// The shortest time between scrub passes: each writes its checkpoint.
pub const LOG_SCRUB_INTERVAL_MS_MIN: u64 = 1_000;
/// 8 MiB/s: little beside a disk's sequential bandwidth, and a whole pass over a terabyte in
/// under a day and a half.
pub const LOG_SCRUB_BYTES_PER_SEC_DEFAULT: u64 = 8 << 20;

/// Kafka's `offsets.retention.minutes` default: seven days.
pub const OFFSETS_RETENTION_MINUTES_DEFAULT: i64 = 7 * 24 * 60;
/// The longest `offsets.retention.minutes` taken: its milliseconds fit an `i64` many times over.
pub const OFFSETS_RETENTION_MINUTES_MAX: i64 = i32::MAX as i64;

/// The longest `offset.metadata.max.bytes` taken: a commit's metadata is stored as a string
/// of at most this many bytes.
pub const OFFSET_METADATA_MAX_BYTES_MAX: i32 = i16::MAX as i32;

/// Why a broker configuration was refused.
#[derive(Clone, Debug, thiserror::Error)]
pub enum BrokerConfigError {
    /// The file could not be parsed.
    #[error("configuration file: {0}")]
    Parse(#[from] toml::de::Error),
    /// A default topic setting is invalid.
    #[error("topic_defaults: {0}")]
    TopicDefault(#[from] ConfigError),
    /// A setting is out of range.
    #[error("{name}: {rule}")]
    Invalid {
        /// The setting.
        name: &'static str,
        /// What is wrong.
        rule: &'static str,
    },
}

/// Everything a broker node is configured with.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// `node.id`.
    pub node_id: i32,
    /// The client listener.
    pub listener: SocketAddr,
    /// The host name given to clients in Metadata (the listener's IP if empty).
    pub advertised_host: String,
    /// The port given to clients (the listener's port if 0).
    pub advertised_port: u16,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Where the node keeps its data.
    pub data_dir: PathBuf,
    /// `socket.request.max.bytes`.
    pub socket_request_max_bytes: usize,
    /// `queued.max.request.bytes`: the bytes of the requests being read and handled on all
    /// client connections together, or -1 (the default, as in Kafka) for no limit. A
    /// connection whose next frame does not fit waits, unread, until enough is given back; a
    /// frame larger than this takes all of it.
    pub queued_max_request_bytes: i64,
    /// `connections.max.idle.ms`: a client connection on which nothing was read or written for
    /// this long, and that is owed no response, is closed.
    pub connections_max_idle_ms: u64,
    /// `max.connections`: once this many client connections are open, the listener accepts
    /// no more until one closes (replicas' connections to their leaders count too).
    pub max_connections: usize,
    /// `max.connections.per.ip`: a connection from an address with this many open is closed
    /// as soon as it is accepted.
    pub max_connections_per_ip: usize,
    /// `num.partitions`: partitions of an auto-created topic, and of CreateTopics without a
    /// count.
    pub num_partitions: i32,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// Defaults for topic settings (Kafka's topic config names, e.g. `"retention.ms"`).
    pub topic_defaults: BTreeMap<String, String>,
    /// `offsets.topic.num.partitions`.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes`: the `segment.bytes` of `__consumer_offsets` when it is
    /// created. Small segments let compaction reach commits sooner (only sealed segments are
    /// cleaned).
    pub offsets_topic_segment_bytes: i64,
    /// `group.initial.rebalance.delay.ms`.
    pub group_initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms`.
    pub group_min_session_timeout_ms: i64,
    /// `group.max.session.timeout.ms`.
    pub group_max_session_timeout_ms: i64,
    /// `group.max.size`: members per consumer group; a join beyond it is refused with
    /// GROUP_MAX_SIZE_REACHED.
    pub group_max_size: i32,
    /// `offsets.retention.minutes`: how long a group's committed offsets are kept once it is
    /// empty (a simple consumer's, from their commit).
    pub offsets_retention_minutes: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets, and offsets of
    /// deleted topics, are looked for.
    pub offsets_retention_check_interval_ms: i64,
    /// `offset.metadata.max.bytes`: the longest metadata string a commit may carry (at most
    /// 32767).
    pub offset_metadata_max_bytes: i32,
    /// `log.retention.check.interval.ms`: how often retention and compaction run.
    pub log_retention_check_interval_ms: i64,
    /// How often recovery points are checkpointed (`log.flush.offset.checkpoint.interval.ms`).
    pub log_checkpoint_interval_ms: i64,
    /// How often a partition whose high watermark moved records it
    /// (`replica.high.watermark.checkpoint.interval.ms`): a small file, no index. A leader
    /// restarted while its ISR is below `min.insync.replicas` serves up to the value it
    /// recorded, so this bounds how many acknowledged records stay unseen until a follower
    /// rejoins.
    pub replica_high_watermark_checkpoint_interval_ms: i64,
    /// The cluster id reported to clients.
    pub cluster_id: String,
    /// `process.roles`: `"broker"`, `"controller"`, or both.
    pub process_roles: Vec<Role>,
    /// The listener controllers use for Raft and brokers' requests (none on a single node).
    pub controller_listener: Option<SocketAddr>,
    /// Where the broker's metrics are served over HTTP, in Prometheus' text format
    /// (`GET /metrics`; see [`crate::server::metrics`]). None: not served.
    pub metrics_listener: Option<SocketAddr>,
    /// `controller.quorum.voters`: `"id@host:port"` for every controller. Empty: this node
    /// alone (it must then be a controller).
    pub controller_quorum_voters: Vec<String>,
    /// `default.replication.factor`.
    pub default_replication_factor: i32,
    /// `broker.heartbeat.interval.ms`.
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms`: a broker silent this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: a follower that has not caught up with its leader's log end
    /// for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// The byte rate at which this broker's followers that are out of the ISR copy from their
    /// leaders, together (0, the default: no limit), so that a follower catching up from far
    /// behind does not take the leader's capacity from its clients. In-sync followers are never
    /// held back. A limit below the rate at which this broker's partitions are written would
    /// keep a restarted replica out of the ISR for good, so there is none unless one is set
    /// (Kafka's replication throttles are off by default too).
    pub replica_catch_up_bytes_per_sec: u64,
    /// `auto.leader.rebalance.enable`: the active controller gives each partition's leadership
    /// back to its preferred replica (the first of its assignment) once that replica is live
    /// and in sync again, so that leadership moved by failovers spreads back over the brokers.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`: how often it looks.
    pub leader_imbalance_check_interval_seconds: u64,
    /// Time from the end of one scrub pass, which reads and checks every hosted partition's
    /// log below its high watermark to find damage on disk early, to the start of the next (0:
    /// no scrub). See `scrub`.
    pub log_scrub_interval_ms: u64,
    /// The byte rate a scrub pass reads at, so that it takes little of the disk from clients.
    pub log_scrub_bytes_per_sec: u64,
    /// `producer.id.expiration.ms`: how long a partition remembers an idempotent producer
    /// after its newest batch's timestamp; looked at with each recovery-point checkpoint
    /// (`log_checkpoint_interval_ms`). A producer forgotten may start at any sequence again.
    pub producer_id_expiration_ms: i64,
}

/// A node's role (`process.roles`).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Serves clients and hosts partitions.
    Broker,
    /// Votes in the metadata quorum.
    Controller,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 1,
            listener: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised_host: String::new(),
            advertised_port: 0,
            rack: None,
            data_dir: PathBuf::from("weir-data"),
            socket_request_max_bytes: SOCKET_REQUEST_MAX_BYTES_DEFAULT,
            queued_max_request_bytes: QUEUED_MAX_REQUEST_BYTES_UNLIMITED,
            connections_max_idle_ms: 600_000,
            max_connections: MAX_CONNECTIONS_DEFAULT,
            max_connections_per_ip: MAX_CONNECTIONS_DEFAULT,
            num_partitions: 1,
            auto_create_topics_enable: true,
            topic_defaults: BTreeMap::new(),
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            group_initial_rebalance_delay_ms: 3_000,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: i32::MAX,
            offsets_retention_minutes: OFFSETS_RETENTION_MINUTES_DEFAULT,
            offsets_retention_check_interval_ms: 600_000,
            offset_metadata_max_bytes: 4_096,
            log_retention_check_interval_ms: 300_000,
            log_checkpoint_interval_ms: 60_000,
            replica_high_watermark_checkpoint_interval_ms: 5_000,
            cluster_id: "weir-cluster".to_owned(),
            process_roles: vec![Role::Broker, Role::Controller],
            controller_listener: None,
            metrics_listener: None,
            controller_quorum_voters: Vec::new(),
            default_replication_factor: 1,
            broker_heartbeat_interval_ms: 500,
            broker_session_timeout_ms: 2_000,
            replica_lag_time_max_ms: 30_000,
            replica_catch_up_bytes_per_sec: 0,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            log_scrub_interval_ms: LOG_SCRUB_INTERVAL_MS_DEFAULT,
            log_scrub_bytes_per_sec: LOG_SCRUB_BYTES_PER_SEC_DEFAULT,
            producer_id_expiration_ms: PRODUCER_ID_EXPIRATION_MS_DEFAULT,
        }
    }
}

impl BrokerConfig {
    /// Parses a TOML file's contents over the defaults, and validates the result.
    pub fn from_toml(text: &str) -> Result<BrokerConfig, BrokerConfigError> {
        let config: BrokerConfig = toml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<(), BrokerConfigError> {
        for (name, value) in &self.topic_defaults {
            TopicConfig::validate(name, value)?;
        }
        self.topic_config().check_consistent()?;
        let voters = self.voters()?;
        let is_voter = voters.contains_key(&self.node_id);
        let shares_a_port = |other: Option<SocketAddr>| {
            self.metrics_listener
                .is_some_and(|m| m.port() != 0 && other.is_some_and(|o| o.port() == m.port()))
        };
        let checks: [(&'static str, bool, &'static str); 27] = [
            ("node_id", self.node_id >= 0, "must not be negative"),
            (
                "process_roles",
                !self.process_roles.is_empty(),
                "must name broker, controller or both",
            ),
            (
                "controller_quorum_voters",
                is_voter == self.has_role(Role::Controller),
                "must list this node if and only if it is a controller",
            ),
            (
                "controller_listener",
                !self.has_role(Role::Controller)
                    || voters.len() == 1
                    || self.controller_listener.is_some(),
                "a controller in a quorum of several needs a controller_listener",
            ),
            (
                "broker_session_timeout_ms",
                self.broker_session_timeout_ms > self.broker_heartbeat_interval_ms
                    && self.broker_heartbeat_interval_ms >= 1,
                "must exceed broker_heartbeat_interval_ms (at least 1)",
            ),
            ("replica_lag_time_max_ms", self.replica_lag_time_max_ms >= 1, "must be at least 1"),
            ("num_partitions", self.num_partitions >= 1, "must be at least 1"),
            (
                "offsets_topic_num_partitions",
                self.offsets_topic_num_partitions >= 1,
                "must be at least 1",
            ),
            (
                "offsets_topic_segment_bytes",
                (1024..=i64::from(i32::MAX)).contains(&self.offsets_topic_segment_bytes),
                "must be from 1024 to 2147483647",
            ),
            (
                "socket_request_max_bytes",
                self.socket_request_max_bytes >= 1024,
                "must be at least 1024",
            ),
            (
                "queued_max_request_bytes",
                self.queued_max_request_bytes == QUEUED_MAX_REQUEST_BYTES_UNLIMITED
                    || self.queued_max_request_bytes >= 1024,
                "must be -1 (no limit) or at least 1024",
            ),
            ("connections_max_idle_ms", self.connections_max_idle_ms >= 1, "must be at least 1"),
            (
                "metrics_listener",
                !shares_a_port(Some(self.listener)) && !shares_a_port(self.controller_listener),
                "must not use the port of listener or controller_listener",
            ),
            ("max_connections", self.max_connections >= 1, "must be at least 1"),
            ("max_connections_per_ip", self.max_connections_per_ip >= 1, "must be at least 1"),
            (
                "group_min_session_timeout_ms",
                self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms,
                "must not exceed group_max_session_timeout_ms",
            ),
            ("group_max_size", self.group_max_size >= 1, "must be at least 1"),
            (
                "offsets_retention_minutes",
                (1..=OFFSETS_RETENTION_MINUTES_MAX).contains(&self.offsets_retention_minutes),
                "must be from 1 to 2147483647",
            ),
            (
                "offsets_retention_check_interval_ms",
                self.offsets_retention_check_interval_ms >= 1,
                "must be at least 1",
            ),
            (
                "offset_metadata_max_bytes",
                (0..=OFFSET_METADATA_MAX_BYTES_MAX).contains(&self.offset_metadata_max_bytes),
                "must be from 0 to 32767",
            ),
            (
                "log_retention_check_interval_ms",
                self.log_retention_check_interval_ms >= 1,
                "must be at least 1",
            ),
            (
                "log_checkpoint_interval_ms",
                self.log_checkpoint_interval_ms >= 1,
                "must be at least 1",
            ),
            (
                "replica_high_watermark_checkpoint_interval_ms",
                self.replica_high_watermark_checkpoint_interval_ms >= 1,
                "must be at least 1",
            ),
            ("log_scrub_bytes_per_sec", self.log_scrub_bytes_per_sec >= 1, "must be at least 1"),
            (
                "producer_id_expiration_ms",
                self.producer_id_expiration_ms >= 1,
                "must be at least 1",
            ),
            (
                "log_scrub_interval_ms",
                self.log_scrub_interval_ms == 0
                    || self.log_scrub_interval_ms >= LOG_SCRUB_INTERVAL_MS_MIN,
                "must be 0 (no scrub) or at least 1000",
            ),
            (
                "leader_imbalance_check_interval_seconds",
                self.leader_imbalance_check_interval_seconds >= 1,
                "must be at least 1",
            ),
        ];
        for (name, ok, rule) in checks {
            if !ok {
                return Err(BrokerConfigError::Invalid { name, rule });
            }
        }
        Ok(())
    }

    /// Whether this node has `role`.
    pub fn has_role(&self, role: Role) -> bool {
        self.process_roles.contains(&role)
    }

    /// The voters of the metadata quorum, by id, with their controller listeners. With none
    /// configured, this node alone, reached in-process.
    pub fn voters(&self) -> Result<BTreeMap<i32, Option<SocketAddr>>, BrokerConfigError> {
        if self.controller_quorum_voters.is_empty() {
            return Ok(BTreeMap::from([(self.node_id, self.controller_listener)]));
        }
        let bad = BrokerConfigError::Invalid {
            name: "controller_quorum_voters",
            rule: "each entry must be id@host:port with a numeric id and an IP address",
        };
        let mut out = BTreeMap::new();
        for voter in &self.controller_quorum_voters {
            let (id, addr) = voter.split_once('@').ok_or_else(|| bad.clone())?;
            let id: i32 = id.parse().map_err(|_| bad.clone())?;
            let addr: SocketAddr = addr.parse().map_err(|_| bad.clone())?;
            out.insert(id, Some(addr));
        }
        Ok(out)
    }

    /// The host and port clients are told to connect to.
    pub fn advertised(&self) -> (String, i32) {
        let host = if self.advertised_host.is_empty() {
            self.listener.ip().to_string()
        } else {
            self.advertised_host.clone()
        };
        let port =
            if self.advertised_port == 0 { self.listener.port() } else { self.advertised_port };
        (host, i32::from(port))
    }

    /// How often the active controller gives leadership back to preferred replicas, if it does.
    pub fn leader_rebalance_interval(&self) -> Option<std::time::Duration> {
        self.auto_leader_rebalance_enable
            .then(|| std::time::Duration::from_secs(self.leader_imbalance_check_interval_seconds))
    }

    /// A topic configuration carrying this broker's defaults.
    pub fn topic_config(&self) -> TopicConfig {
        TopicConfig::with_defaults(self.topic_defaults.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let config = BrokerConfig::from_toml("").unwrap_or_default();
        assert_eq!(config.listener, SocketAddr::from(([127, 0, 0, 1], 9092)));
        assert_eq!(config.advertised(), ("127.0.0.1".to_owned(), 9092));
        let config = BrokerConfig::from_toml(
            "node_id = 3\nlistener = \"127.0.0.1:19093\"\n[topic_defaults]\n\"retention.ms\" = \"1000\"\n",
        );
        assert!(
            matches!(config, Ok(ref c) if c.node_id == 3 && c.topic_config().log_config().retention_ms == 1000)
        );
    }

    #[test]
    fn the_metrics_listener_has_a_port_of_its_own() {
        let taken = BrokerConfig::from_toml("metrics_listener = \"127.0.0.1:9644\"");
        assert!(
            taken.as_ref().is_ok_and(|c| c.metrics_listener
                == Some(SocketAddr::from(([127, 0, 0, 1], 9644)))),
            "{taken:?}"
        );
        assert!(BrokerConfig::from_toml("").is_ok_and(|c| c.metrics_listener.is_none()));
        for clash in [
            "metrics_listener = \"127.0.0.1:9092\"",
            "metrics_listener = \"0.0.0.0:9092\"",
            "controller_listener = \"127.0.0.1:9093\"\nmetrics_listener = \"127.0.0.1:9093\"",
        ] {
            let refused = BrokerConfig::from_toml(clash);
            assert!(
                matches!(refused, Err(BrokerConfigError::Invalid { name: "metrics_listener", .. })),
                "{clash}: {refused:?}"
            );
        }
        assert!(BrokerConfig::from_toml("metrics_listener = \"127.0.0.1:0\"").is_ok());
        assert!(BrokerConfig::from_toml("metrics_listener = \"not an address\"").is_err());
    }

    #[test]
    fn invalid_settings_are_refused() {
        assert!(BrokerConfig::from_toml("no_such = 1").is_err());
        assert!(BrokerConfig::from_toml("num_partitions = 0").is_err());
        assert!(BrokerConfig::from_toml("[topic_defaults]\n\"retention.ms\" = \"soon\"").is_err());
        for interval in [
            "log_checkpoint_interval_ms",
            "replica_high_watermark_checkpoint_interval_ms",
            "log_scrub_bytes_per_sec",
            "max_connections",
            "max_connections_per_ip",
        ] {
            let refused = BrokerConfig::from_toml(&format!("{interval} = 0"));
            assert!(
                matches!(refused, Err(BrokerConfigError::Invalid { name, .. }) if name == interval),
                "{interval} = 0: {refused:?}"
            );
            let taken = BrokerConfig::from_toml(&format!("{interval} = 2500"));
            assert!(taken.is_ok(), "{interval} = 2500: {taken:?}");
        }
        for bytes in [1023, 0, -2] {
            let refused = BrokerConfig::from_toml(&format!("queued_max_request_bytes = {bytes}"));
            assert!(
                matches!(
                    refused,
                    Err(BrokerConfigError::Invalid { name: "queued_max_request_bytes", .. })
                ),
                "queued_max_request_bytes = {bytes}: {refused:?}"
            );
        }
        for bytes in [-1, 1024] {
            let taken = BrokerConfig::from_toml(&format!("queued_max_request_bytes = {bytes}"));
            assert!(taken.is_ok_and(|c| c.queued_max_request_bytes == bytes));
        }
        for bytes in [1023, 1 << 31] {
            let refused =
                BrokerConfig::from_toml(&format!("offsets_topic_segment_bytes = {bytes}"));
            assert!(
                matches!(refused, Err(BrokerConfigError::Invalid { name, .. }) if name == "offsets_topic_segment_bytes"),
                "offsets_topic_segment_bytes = {bytes}: {refused:?}"
            );
        }
        for bad in [
            "group_max_size = 0",
            "offsets_retention_minutes = 0",
            "offsets_retention_minutes = 2147483648",
            "offsets_retention_check_interval_ms = 0",
            "offset_metadata_max_bytes = -1",
            "offset_metadata_max_bytes = 32768",
            "producer_id_expiration_ms = 0",
        ] {
            let refused = BrokerConfig::from_toml(bad);
            let named = bad.split(' ').next().unwrap_or_default();
            assert!(
                matches!(refused, Err(BrokerConfigError::Invalid { name, .. }) if name == named),
                "{bad}: {refused:?}"
            );
        }
        let taken = BrokerConfig::from_toml("offsets_retention_minutes = 2147483647");
        assert!(taken.is_ok_and(|c| c.offsets_retention_minutes == 2_147_483_647));
        let refused = BrokerConfig::from_toml("log_scrub_interval_ms = 999");
        assert!(
            matches!(
                refused,
                Err(BrokerConfigError::Invalid { name: "log_scrub_interval_ms", .. })
            ),
            "{refused:?}"
        );
        let off = BrokerConfig::from_toml("log_scrub_interval_ms = 0");
        assert!(off.is_ok_and(|c| c.log_scrub_interval_ms == 0), "0 turns the scrub off");
        let taken = BrokerConfig::from_toml("offsets_topic_segment_bytes = 1024");
        assert!(taken.is_ok_and(|c| c.offsets_topic_segment_bytes == 1024));
        let refused = BrokerConfig::from_toml("leader_imbalance_check_interval_seconds = 0");
        assert!(
            matches!(refused, Err(BrokerConfigError::Invalid { name, .. }) if name == "leader_imbalance_check_interval_seconds"),
            "{refused:?}"
        );
        let every =
            |text: &str| BrokerConfig::from_toml(text).map(|c| c.leader_rebalance_interval());
        assert!(matches!(every(""), Ok(Some(d)) if d.as_secs() == 300));
        assert!(
            matches!(every("leader_imbalance_check_interval_seconds = 30"), Ok(Some(d)) if d.as_secs() == 30)
        );
        assert!(matches!(every("auto_leader_rebalance_enable = false"), Ok(None)));
    }
}
