//! Typed inputs mirroring the Kafka group APIs (not their wire structs: the server's handlers
//! translate versions, nullable fields and batching into these).

use bytes::Bytes;

use super::types::{Generation, GroupId, InstanceId, MemberId, Protocol};
use crate::model::{LeaderEpoch, Offset, TopicId, TopicPartition};

/// JoinGroup (API key 11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRequest {
    /// The request's API version: v4+ dynamic members must first obtain a member id
    /// (MEMBER_ID_REQUIRED, KIP-394); v0 has no rebalance timeout; v9+ lets a static leader
    /// skip assignment (KIP-814).
    pub version: i16,
    /// The group.
    pub group_id: GroupId,
    /// The member's id; empty when joining for the first time.
    pub member_id: MemberId,
    /// `group.instance.id` for static members (KIP-345).
    pub instance_id: Option<InstanceId>,
    /// The client's `client.id` (from the request header); prefixes generated member ids.
    pub client_id: String,
    /// The client's address, as DescribeGroups shows it.
    pub client_host: String,
    /// How long the member may go without heartbeating.
    pub session_timeout_ms: i32,
    /// How long the member may take to rejoin during a rebalance (v1+; v0 uses the session
    /// timeout).
    pub rebalance_timeout_ms: i32,
    /// The protocol type, `consumer` for Kafka consumers.
    pub protocol_type: String,
    /// The protocols the member supports, most preferred first.
    pub protocols: Vec<Protocol>,
    /// Why the member is joining (v8+), for logs only.
    pub reason: Option<String>,
}

/// SyncGroup (API key 14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncRequest {
    /// The group.
    pub group_id: GroupId,
    /// The generation the member joined.
    pub generation: Generation,
    /// The member.
    pub member_id: MemberId,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<InstanceId>,
    /// The protocol type the member believes in (v5+); checked when present.
    pub protocol_type: Option<String>,
    /// The protocol name the member believes in (v5+); checked when present.
    pub protocol_name: Option<String>,
    /// The leader's assignment for every member; empty from followers.
    pub assignments: Vec<(MemberId, Bytes)>,
}

/// Heartbeat (API key 12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// The group.
    pub group_id: GroupId,
    /// The generation the member believes is current.
    pub generation: Generation,
    /// The member.
    pub member_id: MemberId,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<InstanceId>,
}

/// One member leaving, by member id, or by instance id alone with an empty member id (the
/// admin client's way to remove static members, KIP-345).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeavingMember {
    /// The member id; empty to remove the static member with `instance_id`.
    pub member_id: MemberId,
    /// The `group.instance.id`.
    pub instance_id: Option<InstanceId>,
    /// Why it leaves, for logs only.
    pub reason: Option<String>,
}

/// LeaveGroup (API key 13). v0–2 carry one member; v3+ a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveRequest {
    /// The group.
    pub group_id: GroupId,
    /// The members leaving.
    pub members: Vec<LeavingMember>,
}

/// One partition's offset in an OffsetCommit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommit {
    /// The partition.
    pub partition: TopicPartition,
    /// The next offset the group should consume.
    pub offset: Offset,
    /// The leader epoch of the last consumed record (v6+), or none.
    pub leader_epoch: LeaderEpoch,
    /// Free-form client metadata; `None` is stored as empty.
    pub metadata: Option<String>,
    /// The topic's id in the metadata image the commit was checked against, if known: a
    /// commit is refused if the coordinator has seen the topic deleted or made again since.
    pub topic_id: Option<TopicId>,
}

/// OffsetCommit (API key 8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRequest {
    /// The request's API version: for a missing group, v9+ answers GROUP_ID_NOT_FOUND where
    /// older versions answer ILLEGAL_GENERATION.
    pub version: i16,
    /// The group.
    pub group_id: GroupId,
    /// The member's generation, or [`Generation::NONE`] for simple consumers and admin clients.
    pub generation: Generation,
    /// The member, or empty for simple consumers and admin clients.
    pub member_id: MemberId,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<InstanceId>,
    /// How long to keep these offsets, from the commit (OffsetCommit v2–v4's
    /// `retention_time_ms` when not −1, the broker's default): they then expire at that time
    /// instead of `offsets.retention.minutes` after their base (the commit, or when the group
    /// emptied). Either way only while the group's offsets may expire — it is simple, Empty,
    /// or a Stable consumer group that knows its subscriptions — and never those of a topic
    /// the group subscribes to. A retention past the end of time never expires (Kafka's sum
    /// would wrap round and expire it at once); a negative one expires at the next check.
    pub retention_ms: Option<i64>,
    /// The offsets.
    pub offsets: Vec<OffsetCommit>,
}

/// OffsetDelete (API key 47).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteOffsetsRequest {
    /// The group.
    pub group_id: GroupId,
    /// The partitions whose committed offsets to delete.
    pub partitions: Vec<TopicPartition>,
}
