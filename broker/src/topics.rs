//! The topics this broker hosts: names, ids, partition counts and configuration overrides,
//! kept in a checkpoint file that is replaced atomically on every change. The file is the
//! source of truth: a partition folder it does not name is an orphan of an interrupted create or
//! delete, removed at start-up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::io::Disk;
use crate::log::checkpoint;
use crate::model::TopicId;

/// The folder, inside the data folder, holding the broker's own metadata.
pub const META_DIR: &str = "meta";
/// The file listing the topics.
pub const TOPICS_FILE: &str = "topics.checkpoint";
const TOPICS_KIND: u8 = 10;
const TOPICS_VERSION: u8 = 1;
/// Longest topic name Kafka allows.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
/// The internal topic holding consumer-group offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// One topic as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// The name.
    pub name: String,
    /// The id, as 32 hex digits.
    pub id: String,
    /// How many partitions.
    pub partitions: i32,
    /// Configuration overrides.
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TopicsFile {
    topics: Vec<TopicRecord>,
}

/// Why a topic name is refused (Kafka's INVALID_TOPIC_EXCEPTION).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopicNameError {
    /// Empty, `.` or `..`.
    #[error("topic name {0:?} is not allowed")]
    Reserved(String),
    /// Longer than 249 bytes.
    #[error("topic name is longer than {TOPIC_NAME_BYTES_MAX} bytes")]
    TooLong,
    /// Has a character other than ASCII letters, digits, `.`, `_` and `-`.
    #[error("topic name {0:?} may contain only ASCII letters, digits, '.', '_' and '-'")]
    BadCharacter(String),
}

/// Checks a topic name against Kafka's rules.
pub fn validate_name(name: &str) -> Result<(), TopicNameError> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(TopicNameError::Reserved(name.to_owned()));
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(TopicNameError::TooLong);
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return Err(TopicNameError::BadCharacter(name.to_owned()));
    }
    Ok(())
}

/// Reads the topic list; empty if there is none yet.
pub async fn load(disk: &dyn Disk) -> Result<Vec<TopicRecord>, std::io::Error> {
    let dir = Path::new(META_DIR);
    disk.create_dir(dir).await?;
    match checkpoint::read(disk, dir, TOPICS_FILE, TOPICS_KIND).await {
        Ok(Some((_, body))) => {
            let text =
                std::str::from_utf8(&body).map_err(|_| invalid("topic list is not UTF-8"))?;
            let file: TopicsFile =
                toml::from_str(text).map_err(|_| invalid("topic list does not parse"))?;
            Ok(file.topics)
        }
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(invalid_owned(e)),
    }
}

/// Replaces the topic list durably.
pub async fn save(disk: &dyn Disk, topics: Vec<TopicRecord>) -> Result<(), std::io::Error> {
    let text = toml::to_string(&TopicsFile { topics })
        .map_err(|_| invalid("topic list does not serialise"))?;
    let framed = checkpoint::encode(TOPICS_KIND, TOPICS_VERSION, text.as_bytes());
    let dir = PathBuf::from(META_DIR);
    disk.create_dir(&dir).await?;
    disk.sync_dir(Path::new("")).await?;
    checkpoint::write_atomic(disk, &dir, TOPICS_FILE, framed).await
}

fn invalid(what: &'static str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

fn invalid_owned(e: checkpoint::CheckpointError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

/// Formats a topic id for the topic list.
pub fn id_to_hex(id: TopicId) -> String {
    id.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a topic id from the topic list.
pub fn id_from_hex(text: &str) -> Option<TopicId> {
    if text.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(TopicId(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafkas_rules() {
        assert!(validate_name("orders.v2_eu-1").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name("..").is_err());
        assert!(validate_name("a/b").is_err());
        assert!(validate_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn ids_round_trip() {
        let id = TopicId([7; 16]);
        assert_eq!(id_from_hex(&id_to_hex(id)), Some(id));
        assert_eq!(id_from_hex("zz"), None);
    }
}
