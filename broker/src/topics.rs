//! Topic names: Kafka's rules for them and the internal topics' names. Topics themselves live
//! in the metadata log (see `controller`).

/// Longest topic name Kafka allows.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
/// The internal topic holding consumer-group offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`): only the first is made here, but the
/// others' names are kept from clients too.
pub const INTERNAL_TOPICS: [&str; 3] =
    [OFFSETS_TOPIC, "__transaction_state", "__share_group_state"];

/// Whether `name` is an internal topic's: clients may read its records but not write or
/// delete them, nor delete the topic, nor change its partition count. Other names beginning
/// with `__` are ordinary topics, as in Kafka.
pub fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
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
}
