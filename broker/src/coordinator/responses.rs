//! Typed outputs: the responses the server encodes for each group API, what the read-only
//! calls return, and [`Output`], the effects every mutating call hands back to its caller.

use bytes::Bytes;

use super::error::GroupError;
use super::record::Record;
use super::types::{Generation, GroupId, GroupState, InstanceId, MemberId, PersistId, RequestId};
use crate::model::{LeaderEpoch, Offset, TimestampMs, TopicPartition};

/// What the caller must do after a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// Send this response to the client whose request carried this id. The request may be from
    /// an earlier call (JoinGroup and SyncGroup wait for the rebalance).
    Reply(RequestId, Response),
    /// Append these records to `__consumer_offsets` as one batch, in the order the `Persist`
    /// outputs were produced, then report with `persisted(id, ..)`. Replies that depend on
    /// the batch (offset commits, the leader's assignment, deletions) are held until then.
    Persist {
        /// The handle to report the outcome with.
        id: PersistId,
        /// The records, in order.
        records: Vec<Record>,
    },
}

/// A response to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// JoinGroup.
    Join(JoinResponse),
    /// SyncGroup.
    Sync(SyncResponse),
    /// Heartbeat.
    Heartbeat(HeartbeatResponse),
    /// LeaveGroup.
    Leave(LeaveResponse),
    /// OffsetCommit.
    Commit(CommitResponse),
    /// DeleteGroups.
    DeleteGroups(DeleteGroupsResponse),
    /// OffsetDelete.
    DeleteOffsets(DeleteOffsetsResponse),
}

impl Response {
    /// The response a write-dependent reply becomes when its records could not be persisted:
    /// every part that had succeeded now carries `error`.
    pub(crate) fn failed(self, error: GroupError) -> Response {
        let fail = |e: &mut Option<GroupError>| {
            if e.is_none() {
                *e = Some(error);
            }
        };
        match self {
            Response::Commit(mut r) => {
                r.partitions.iter_mut().for_each(|p| fail(&mut p.error));
                Response::Commit(r)
            }
            Response::DeleteGroups(mut r) => {
                r.groups.iter_mut().for_each(|(_, e)| fail(e));
                Response::DeleteGroups(r)
            }
            Response::DeleteOffsets(mut r) => {
                if r.error.is_none() {
                    r.partitions.iter_mut().for_each(|p| fail(&mut p.error));
                }
                Response::DeleteOffsets(r)
            }
            Response::Leave(mut r) => {
                fail(&mut r.error);
                Response::Leave(r)
            }
            Response::Heartbeat(mut r) => {
                fail(&mut r.error);
                Response::Heartbeat(r)
            }
            Response::Join(r) => Response::Join(JoinResponse::error(r.member_id, error)),
            Response::Sync(_) => Response::Sync(SyncResponse::error(error)),
        }
    }
}

/// One member as the leader sees it in its JoinGroup response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    /// The member.
    pub member_id: MemberId,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<InstanceId>,
    /// Its metadata for the chosen protocol.
    pub metadata: Bytes,
}

/// JoinGroup's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResponse {
    /// The error, if any.
    pub error: Option<GroupError>,
    /// The generation joined, or [`Generation::NONE`] on error.
    pub generation: Generation,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The chosen protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id (empty on error).
    pub leader: MemberId,
    /// KIP-814 (v9+): the static leader rejoined without a rebalance and must not assign.
    pub skip_assignment: bool,
    /// The member's id: new members learn theirs here (also with MEMBER_ID_REQUIRED).
    pub member_id: MemberId,
    /// Every member with its metadata — for the leader only; empty for followers.
    pub members: Vec<JoinedMember>,
}

impl JoinResponse {
    /// An error response.
    pub fn error(member_id: MemberId, error: GroupError) -> JoinResponse {
        JoinResponse {
            error: Some(error),
            generation: Generation::NONE,
            protocol_type: None,
            protocol_name: None,
            leader: MemberId::unknown(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        }
    }
}

/// SyncGroup's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResponse {
    /// The error, if any.
    pub error: Option<GroupError>,
    /// The group's protocol type (v5+).
    pub protocol_type: Option<String>,
    /// The chosen protocol (v5+).
    pub protocol_name: Option<String>,
    /// The member's assignment, as the leader wrote it.
    pub assignment: Bytes,
}

impl SyncResponse {
    /// An error response.
    pub fn error(error: GroupError) -> SyncResponse {
        SyncResponse {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// Heartbeat's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// The error, if any: REBALANCE_IN_PROGRESS tells the member to rejoin.
    pub error: Option<GroupError>,
}

/// One member's outcome in LeaveGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftMember {
    /// The member id as requested.
    pub member_id: MemberId,
    /// The instance id as requested.
    pub instance_id: Option<InstanceId>,
    /// The error, if any.
    pub error: Option<GroupError>,
}

/// LeaveGroup's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveResponse {
    /// A request-level error (the group is being deleted, or the write failed).
    pub error: Option<GroupError>,
    /// Per-member outcomes, in request order.
    pub members: Vec<LeftMember>,
}

/// One partition's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionResult {
    /// The partition.
    pub partition: TopicPartition,
    /// The error, if any.
    pub error: Option<GroupError>,
}

/// OffsetCommit's response: one result per requested partition, in request order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitResponse {
    /// Per-partition outcomes.
    pub partitions: Vec<PartitionResult>,
}

/// DeleteGroups' response: one result per requested group, in request order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteGroupsResponse {
    /// Per-group outcomes.
    pub groups: Vec<(GroupId, Option<GroupError>)>,
}

/// OffsetDelete's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteOffsetsResponse {
    /// A group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP).
    pub error: Option<GroupError>,
    /// Per-partition outcomes, in request order (empty with a group-level error).
    pub partitions: Vec<PartitionResult>,
}

/// A committed offset: what OffsetFetch returns, and when it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The committed offset.
    pub offset: Offset,
    /// The committed leader epoch, or none.
    pub leader_epoch: LeaderEpoch,
    /// The client's metadata.
    pub metadata: String,
    /// When the commit was accepted (coordinator wall time).
    pub commit_timestamp: TimestampMs,
    /// When it expires, if its commit gave a retention time (OffsetCommit v2–v4); else it
    /// expires by `offsets.retention.minutes`.
    pub expire_timestamp: Option<TimestampMs>,
}

/// One member in DescribeGroups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    /// The member.
    pub member_id: MemberId,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<InstanceId>,
    /// Its client id.
    pub client_id: String,
    /// Its address.
    pub client_host: String,
    /// Its metadata for the chosen protocol (Stable groups only, as in Kafka).
    pub metadata: Bytes,
    /// Its current assignment.
    pub assignment: Bytes,
}

/// One group in DescribeGroups. A group that does not exist is described as Dead with no
/// members, as Kafka does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedGroup {
    /// The group.
    pub group_id: GroupId,
    /// Its state.
    pub state: GroupState,
    /// Its protocol type (empty for simple groups).
    pub protocol_type: String,
    /// The chosen protocol (Stable groups only).
    pub protocol_data: String,
    /// Its generation (not on the wire; for tests and operators).
    pub generation: Generation,
    /// Its members, in member-id order.
    pub members: Vec<DescribedMember>,
}

/// One group in ListGroups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group.
    pub group_id: GroupId,
    /// Its protocol type (empty for simple groups).
    pub protocol_type: String,
    /// Its state.
    pub state: GroupState,
}
