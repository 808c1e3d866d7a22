//! The consumer protocol's embedded bytes — a member's subscription (JoinGroup metadata) and
//! its assignment (SyncGroup) — each an `i16` version followed by the versioned struct, and the
//! round-robin assignor the group leader runs.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

use super::admin::name;
use super::offsets::Tp;
use super::versions;

/// Why embedded consumer-protocol bytes could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolBytesError {
    /// Fewer than the two bytes of the version.
    #[error("no version prefix")]
    NoVersion,
    /// The struct failed to decode or encode.
    #[error("consumer protocol bytes: {0}")]
    Codec(String),
}

fn versioned<T: Encodable>(value: &T, version: i16) -> Result<Bytes, ProtocolBytesError> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    value.encode(&mut buf, version).map_err(|e| ProtocolBytesError::Codec(e.to_string()))?;
    Ok(buf.freeze())
}

/// Reads the version prefix and decodes at that version, capped at the newest the crate knows
/// (newer versions only append fields, which a lower version's decoder leaves unread).
fn unversioned<T: Decodable + Message>(bytes: &Bytes) -> Result<T, ProtocolBytesError> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Err(ProtocolBytesError::NoVersion);
    }
    let version = buf.get_i16().clamp(T::VERSIONS.min, T::VERSIONS.max);
    T::decode(&mut buf, version).map_err(|e| ProtocolBytesError::Codec(e.to_string()))
}

/// A subscription to `topics`.
pub fn encode_subscription(topics: &[String]) -> Result<Bytes, ProtocolBytesError> {
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = topics.iter().map(|t| StrBytes::from_string(t.clone())).collect();
    versioned(&s, versions::SUBSCRIPTION)
}

/// The topics of a subscription.
pub fn decode_subscription(bytes: &Bytes) -> Result<Vec<String>, ProtocolBytesError> {
    let s: ConsumerProtocolSubscription = unversioned(bytes)?;
    Ok(s.topics.iter().map(|t| t.to_string()).collect())
}

/// An assignment of `partitions`.
pub fn encode_assignment(partitions: &[Tp]) -> Result<Bytes, ProtocolBytesError> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic.as_str()).or_default().push(*partition);
    }
    let mut a = ConsumerProtocolAssignment::default();
    a.assigned_partitions = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            let mut t = AssignedTopic::default();
            t.topic = name(topic);
            t.partitions = partitions;
            t
        })
        .collect();
    versioned(&a, versions::ASSIGNMENT)
}

/// The partitions of an assignment. Empty bytes are an empty assignment (Kafka sends them to
/// members the leader left out).
pub fn decode_assignment(bytes: &Bytes) -> Result<Vec<Tp>, ProtocolBytesError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let a: ConsumerProtocolAssignment = unversioned(bytes)?;
    let mut out: Vec<Tp> = a
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |&p| (t.topic.0.to_string(), p)))
        .collect();
    out.sort();
    Ok(out)
}

/// Round-robin assignment: every partition of every subscribed topic (counts from
/// `partition_counts`), in (topic, partition) order, dealt to the members subscribed to its
/// topic, in member-id order. Every member appears in the result, possibly with nothing.
pub fn round_robin(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<Tp>> {
    let mut out: BTreeMap<String, Vec<Tp>> =
        subscriptions.keys().map(|m| (m.clone(), Vec::new())).collect();
    let members: Vec<&String> = subscriptions.keys().collect();
    let mut turn = 0usize;
    for (topic, &count) in partition_counts {
        let eligible: Vec<usize> = (0..members.len())
            .filter(|&i| {
                members
                    .get(i)
                    .and_then(|m| subscriptions.get(*m))
                    .is_some_and(|t| t.contains(topic))
            })
            .collect();
        let Some(&first) = eligible.first() else { continue };
        for partition in 0..count {
            let at = eligible.iter().copied().find(|&i| i >= turn).unwrap_or(first);
            if let Some(member) = members.get(at) {
                out.entry((*member).clone()).or_default().push((topic.clone(), partition));
            }
            turn = at + 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_and_assignment_round_trip() {
        let topics = vec!["a".to_owned(), "b".to_owned()];
        let bytes = encode_subscription(&topics).unwrap_or_default();
        assert_eq!(decode_subscription(&bytes), Ok(topics));
        let parts = vec![("a".to_owned(), 0), ("a".to_owned(), 2), ("b".to_owned(), 1)];
        let bytes = encode_assignment(&parts).unwrap_or_default();
        assert_eq!(decode_assignment(&bytes), Ok(parts));
        assert_eq!(decode_assignment(&Bytes::new()), Ok(Vec::new()));
    }

    #[test]
    fn round_robin_deals_each_partition_once() {
        let subs: BTreeMap<String, Vec<String>> = [
            ("m1".to_owned(), vec!["a".to_owned()]),
            ("m2".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
        ]
        .into();
        let counts: BTreeMap<String, i32> = [("a".to_owned(), 3), ("b".to_owned(), 2)].into();
        let out = round_robin(&subs, &counts);
        let mut all: Vec<Tp> = out.values().flatten().cloned().collect();
        all.sort();
        assert_eq!(all.len(), 5);
        all.dedup();
        assert_eq!(all.len(), 5);
        assert!(out["m1"].iter().all(|(t, _)| t == "a"));
    }
}
