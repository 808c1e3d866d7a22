//! The records the coordinator asks to have appended to the compacted internal topic
//! `__consumer_offsets`, and their byte encoding.
//!
//! The coordinator never writes anything itself: it emits [`Record`]s, the caller appends them
//! and reports back, and on fail-over [`super::GroupCoordinator::load`] replays them. Keys and
//! values use exactly Kafka's layouts (OffsetCommitKey v1; OffsetCommitValue v3, or v1 when the
//! offset has its own expiry time; GroupMetadataKey v2 / GroupMetadataValue v3; classic
//! big-endian encoding with an `i16` version first), so Kafka's own tools could read the topic —
//! though only Weir needs to.
//! Compaction keeps the newest value per key; a key with no value is a tombstone.

use bytes::Bytes;

use super::codec::{DecodeError, EncodeError, Reader, Writer};
use super::responses::CommittedOffset;
use super::types::{Generation, GroupId, InstanceId, MemberId};
use crate::model::{LeaderEpoch, Offset, PartitionIndex, TimestampMs, TopicPartition};

/// OffsetCommitKey version (v0 and v1 share a layout; Kafka writes 1).
const OFFSET_KEY_VERSION: i16 = 1;
/// GroupMetadataKey version.
const GROUP_KEY_VERSION: i16 = 2;
/// OffsetCommitValue version: offset, leader epoch, metadata, commit timestamp.
const OFFSET_VALUE_VERSION: i16 = 3;
/// OffsetCommitValue version with an expiry time: offset, metadata, commit timestamp, expire
/// timestamp (no leader epoch). Kafka writes it for a commit that gives a retention time.
const OFFSET_VALUE_EXPIRING_VERSION: i16 = 1;
/// An OffsetCommitValue v1 expire timestamp that means none.
const NO_EXPIRY: i64 = -1;
/// GroupMetadataValue version: v2 plus static members' instance ids.
const GROUP_VALUE_VERSION: i16 = 3;

/// One member in a group's persisted metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadata {
    /// The member.
    pub member_id: MemberId,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<InstanceId>,
    /// Its client id.
    pub client_id: String,
    /// Its address.
    pub client_host: String,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its metadata for the group's protocol.
    pub subscription: Bytes,
    /// Its assignment.
    pub assignment: Bytes,
}

/// A group's persisted metadata: written when the leader's assignment is accepted, when the
/// group becomes empty and when a static member is replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMetadata {
    /// The protocol type; empty for simple groups.
    pub protocol_type: String,
    /// The generation.
    pub generation: Generation,
    /// The chosen protocol.
    pub protocol: Option<String>,
    /// The leader.
    pub leader: Option<MemberId>,
    /// Wall time of the group's last state change (offset expiry of empty groups counts from
    /// it), if known.
    pub current_state_timestamp: Option<TimestampMs>,
    /// The members and their assignments.
    pub members: Vec<MemberMetadata>,
}

/// One `__consumer_offsets` record: a key and, unless it is a tombstone, a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A group's committed offset for one partition; `None` deletes it.
    Offset {
        /// The group.
        group: GroupId,
        /// The partition.
        partition: TopicPartition,
        /// The offset, or `None` for a tombstone.
        value: Option<CommittedOffset>,
    },
    /// A group's metadata; `None` deletes the group.
    Group {
        /// The group.
        group: GroupId,
        /// The metadata, or `None` for a tombstone.
        value: Option<GroupMetadata>,
    },
}

impl Record {
    /// The group this record belongs to.
    pub fn group(&self) -> &GroupId {
        match self {
            Record::Offset { group, .. } | Record::Group { group, .. } => group,
        }
    }

    /// Whether this is a tombstone (a key with no value).
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Record::Offset { value: None, .. } | Record::Group { value: None, .. })
    }

    /// The record's key bytes.
    pub fn encode_key(&self) -> Result<Bytes, EncodeError> {
        let mut w = Writer::default();
        match self {
            Record::Offset { group, partition, .. } => {
                w.i16(OFFSET_KEY_VERSION);
                w.str(group.as_str())?;
                w.str(&partition.topic)?;
                w.i32(partition.partition.0);
            }
            Record::Group { group, .. } => {
                w.i16(GROUP_KEY_VERSION);
                w.str(group.as_str())?;
            }
        }
        Ok(w.finish())
    }

    /// The record's value bytes, or `None` for a tombstone.
    pub fn encode_value(&self) -> Result<Option<Bytes>, EncodeError> {
        let mut w = Writer::default();
        match self {
            Record::Offset { value: Some(v), .. } => match v.expire_timestamp {
                None => {
                    w.i16(OFFSET_VALUE_VERSION);
                    w.i64(v.offset.0);
                    w.i32(v.leader_epoch.0);
                    w.str(&v.metadata)?;
                    w.i64(v.commit_timestamp.0);
                }
                // As Kafka's: the layout with an expiry has no room for the leader epoch.
                Some(expire) => {
                    w.i16(OFFSET_VALUE_EXPIRING_VERSION);
                    w.i64(v.offset.0);
                    w.str(&v.metadata)?;
                    w.i64(v.commit_timestamp.0);
                    w.i64(expire.0);
                }
            },
            Record::Group { value: Some(v), .. } => encode_group(&mut w, v)?,
            Record::Offset { value: None, .. } | Record::Group { value: None, .. } => {
                return Ok(None);
            }
        }
        Ok(Some(w.finish()))
    }

    /// Decodes a record from its key and value bytes (`None` for a tombstone). Keys of other
    /// versions (Kafka's KIP-848 and transaction records) are [`DecodeError::UnknownVersion`];
    /// a loader may skip them.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Record, DecodeError> {
        let mut k = Reader::new(key);
        let version = k.i16()?;
        let record = match version {
            0 | 1 => {
                let group = GroupId(k.str()?);
                let partition =
                    TopicPartition { topic: k.str()?, partition: PartitionIndex(k.i32()?) };
                let value = value.map(decode_offset).transpose()?;
                Record::Offset { group, partition, value }
            }
            GROUP_KEY_VERSION => {
                let group = GroupId(k.str()?);
                let value = value.map(decode_group).transpose()?;
                Record::Group { group, value }
            }
            version => return Err(DecodeError::UnknownVersion { what: "key", version }),
        };
        k.end()?;
        Ok(record)
    }
}

fn encode_group(w: &mut Writer, v: &GroupMetadata) -> Result<(), EncodeError> {
    w.i16(GROUP_VALUE_VERSION);
    w.str(&v.protocol_type)?;
    w.i32(v.generation.0);
    w.opt_str(v.protocol.as_deref())?;
    w.opt_str(v.leader.as_ref().map(MemberId::as_str))?;
    w.i64(v.current_state_timestamp.map_or(-1, |t| t.0));
    let count = i32::try_from(v.members.len()).map_err(|_| EncodeError(v.members.len()))?;
    w.i32(count);
    for m in &v.members {
        w.str(m.member_id.as_str())?;
        w.opt_str(m.instance_id.as_ref().map(InstanceId::as_str))?;
        w.str(&m.client_id)?;
        w.str(&m.client_host)?;
        w.i32(m.rebalance_timeout_ms);
        w.i32(m.session_timeout_ms);
        w.bytes(&m.subscription)?;
        w.bytes(&m.assignment)?;
    }
    Ok(())
}

fn decode_offset(value: &[u8]) -> Result<CommittedOffset, DecodeError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    let v = match version {
        OFFSET_VALUE_VERSION => CommittedOffset {
            offset: Offset(r.i64()?),
            leader_epoch: LeaderEpoch(r.i32()?),
            metadata: r.str()?,
            commit_timestamp: TimestampMs(r.i64()?),
            expire_timestamp: None,
        },
        OFFSET_VALUE_EXPIRING_VERSION => CommittedOffset {
            offset: Offset(r.i64()?),
            leader_epoch: LeaderEpoch::NONE,
            metadata: r.str()?,
            commit_timestamp: TimestampMs(r.i64()?),
            // As Kafka reads it: −1 is no expiry time (Weir never writes it).
            expire_timestamp: Some(TimestampMs(r.i64()?)).filter(|t| t.0 != NO_EXPIRY),
        },
        version => {
            return Err(DecodeError::UnknownVersion { what: "offset commit value", version });
        }
    };
    r.end()?;
    Ok(v)
}

fn decode_group(value: &[u8]) -> Result<GroupMetadata, DecodeError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if version != GROUP_VALUE_VERSION {
        return Err(DecodeError::UnknownVersion { what: "group metadata value", version });
    }
    let protocol_type = r.str()?;
    let generation = Generation(r.i32()?);
    let protocol = r.opt_str()?;
    let leader = r.opt_str()?.map(MemberId);
    let timestamp = r.i64()?;
    // A member takes at least 2+2+2+2+4+4+4+4 bytes.
    let count = r.count(24)?;
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        members.push(MemberMetadata {
            member_id: MemberId(r.str()?),
            instance_id: r.opt_str()?.map(InstanceId),
            client_id: r.str()?,
            client_host: r.str()?,
            rebalance_timeout_ms: r.i32()?,
            session_timeout_ms: r.i32()?,
            subscription: r.bytes()?,
            assignment: r.bytes()?,
        });
    }
    r.end()?;
    Ok(GroupMetadata {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp: (timestamp >= 0).then_some(TimestampMs(timestamp)),
        members,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn round_trip(record: &Record) -> Record {
        let key = record.encode_key().unwrap();
        let value = record.encode_value().unwrap();
        Record::decode(&key, value.as_deref()).unwrap()
    }

    #[test]
    fn offset_commit_matches_kafkas_layout() {
        let record = Record::Offset {
            group: GroupId::from("g"),
            partition: TopicPartition::new("t", 7),
            value: Some(CommittedOffset {
                offset: Offset(42),
                leader_epoch: LeaderEpoch(3),
                metadata: "m".into(),
                commit_timestamp: TimestampMs(1_000),
                expire_timestamp: None,
            }),
        };
        // OffsetCommitKey v1: version, group, topic, partition.
        let key = record.encode_key().unwrap();
        assert_eq!(&key[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        let value = record.encode_value().unwrap().unwrap();
        assert_eq!(&value[..2], &[0, 3]);
        assert_eq!(value.len(), 2 + 8 + 4 + 3 + 8);
        assert_eq!(round_trip(&record), record);
    }

    /// An offset committed with a retention time is written as Kafka writes it, in
    /// OffsetCommitValue v1, which has an expire timestamp and no leader epoch.
    #[test]
    fn an_expiring_offset_commit_matches_kafkas_layout() {
        let record = Record::Offset {
            group: GroupId::from("g"),
            partition: TopicPartition::new("t", 7),
            value: Some(CommittedOffset {
                offset: Offset(42),
                leader_epoch: LeaderEpoch(-1),
                metadata: "m".into(),
                commit_timestamp: TimestampMs(1_000),
                expire_timestamp: Some(TimestampMs(61_000)),
            }),
        };
        let value = record.encode_value().unwrap().unwrap();
        let mut want = vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 42, 0, 1, b'm'];
        want.extend_from_slice(&1_000i64.to_be_bytes());
        want.extend_from_slice(&61_000i64.to_be_bytes());
        assert_eq!(&value[..], &want[..]);
        assert_eq!(round_trip(&record), record);
        let key = record.encode_key().unwrap();
        // As Kafka reads it, an expire timestamp of −1 is none.
        let mut unset = want.clone();
        let at = unset.len() - 8;
        unset[at..].copy_from_slice(&(-1i64).to_be_bytes());
        let read = Record::decode(&key, Some(&unset)).unwrap();
        assert!(
            matches!(read, Record::Offset { value: Some(v), .. } if v.expire_timestamp.is_none())
        );
        // Any other value version is refused, not misread.
        let mut other = want.clone();
        other[1] = 2;
        assert!(matches!(
            Record::decode(&key, Some(&other)),
            Err(DecodeError::UnknownVersion { version: 2, .. })
        ));
    }

    #[test]
    fn group_metadata_and_tombstones_round_trip() {
        let record = Record::Group {
            group: GroupId::from("group"),
            value: Some(GroupMetadata {
                protocol_type: "consumer".into(),
                generation: Generation(4),
                protocol: Some("range".into()),
                leader: Some(MemberId::from("a-1")),
                current_state_timestamp: Some(TimestampMs(99)),
                members: vec![MemberMetadata {
                    member_id: MemberId::from("a-1"),
                    instance_id: Some(InstanceId::from("i")),
                    client_id: "a".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 45_000,
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"asg"),
                }],
            }),
        };
        assert_eq!(round_trip(&record), record);
        let tombstone = Record::Group { group: GroupId::from("group"), value: None };
        assert!(tombstone.is_tombstone());
        assert_eq!(tombstone.encode_value().unwrap(), None);
        assert_eq!(round_trip(&tombstone), tombstone);
    }

    #[test]
    fn unknown_versions_and_garbage_are_errors() {
        assert!(matches!(
            Record::decode(&[0, 3, 0, 0], None),
            Err(DecodeError::UnknownVersion { what: "key", version: 3 })
        ));
        assert!(Record::decode(&[0, 2, 0, 5, b'g'], None).is_err());
        assert!(Record::decode(&[0, 2, 0, 1, b'g'], Some(&[0, 3, 0xff])).is_err());
    }
}
