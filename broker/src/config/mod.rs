//! Configuration: the broker's own settings (from a TOML file and flags) and topic settings
//! (Kafka's names, defaults and validation rules).

pub mod broker;
pub mod topic;

pub use broker::{BrokerConfig, Role};
pub use topic::{ConfigChange, ConfigError, ConfigOp, TopicConfig};
