//! Which topics a consumer group is subscribed to, read from its members' protocol metadata.
//!
//! Kafka needs this for two rules: OffsetDelete refuses topics the group still consumes
//! (GROUP_SUBSCRIBED_TO_TOPIC), and a Stable consumer group's offsets for topics nobody
//! subscribes to any more expire by commit time. The metadata of protocol type `consumer` is a
//! ConsumerProtocolSubscription: an `i16` version then, in every version, the topic names
//! first — so, like Kafka, it is read with the v0 layout whatever the version.

use std::collections::BTreeSet;

use super::codec::{DecodeError, Reader};

/// The protocol type of Kafka consumers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The topics in one consumer subscription.
pub fn subscribed_topics(metadata: &[u8]) -> Result<Vec<String>, DecodeError> {
    let mut r = Reader::new(metadata);
    let _version = r.i16()?;
    // A topic name takes at least its 2-byte length.
    let count = r.count(2)?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        topics.push(r.str()?);
    }
    Ok(topics)
}

/// The union of the members' subscriptions, or `None` when it cannot be known (any metadata
/// unreadable). `metadata` yields each member's metadata for the group's protocol.
pub fn union<'a>(metadata: impl IntoIterator<Item = &'a [u8]>) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for m in metadata {
        match subscribed_topics(m) {
            Ok(topics) => all.extend(topics),
            Err(error) => {
                tracing::warn!(%error, "unreadable consumer subscription; treating the group as subscribed to every topic");
                return None;
            }
        }
    }
    Some(all)
}

/// Encodes a v0 subscription (topics, no user data): for tests and tools.
pub fn encode_v0(topics: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_topics_of_any_version() {
        let mut v3 = encode_v0(&["a", "bb"]);
        v3[1] = 3; // a newer version only appends fields
        v3.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(subscribed_topics(&v3).unwrap(), vec!["a".to_owned(), "bb".to_owned()]);
    }

    #[test]
    fn garbage_makes_the_union_unknown() {
        let good = encode_v0(&["a"]);
        assert_eq!(union([&good[..]]), Some(BTreeSet::from(["a".to_owned()])));
        assert_eq!(union([&good[..], &[0, 0, 0x7f][..]]), None);
    }
}
