//! The group coordinator: Kafka's classic consumer-group protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups) and committed offsets
//! (OffsetCommit, OffsetFetch, OffsetDelete, retention), as a sans-IO state machine.
//!
//! Why sans-IO (DESIGN.md §3): group membership is a tangle of timeouts and delayed responses —
//! JoinGroup is answered only when the rebalance's join phase ends, SyncGroup only when the
//! leader's assignment is durable. Here every input is a typed request or a clock reading, and
//! every effect comes back as an [`Output`]: a reply (possibly to an earlier request, named by
//! the caller's [`RequestId`]) or a batch of [`Record`]s for `__consumer_offsets`, whose
//! durability the caller reports with [`GroupCoordinator::persisted`]. Deadlines are data
//! ([`GroupCoordinator::next_deadline`], [`GroupCoordinator::tick`]); ids come from a seeded
//! generator. So the whole protocol is deterministic and unit- and property-testable, and the
//! async shell that feeds it sockets, a clock and the log stays thin.
//!
//! Semantics follow Apache Kafka's classic group coordinator (`GroupMetadataManager`,
//! `ClassicGroup`, `OffsetMetadataManager`, 3.7–4.x), including KIP-394 (member id required),
//! KIP-345 (static membership) and KIP-814 (static leader skips assignment). Where Kafka
//! leaves a choice to hash-map order, Weir chooses deterministically; where Kafka drops a
//! superseded request, Weir answers it, so every request gets exactly one reply.
//!
//! Not here: the KIP-848 consumer protocol, transactional offset commits, and finding the
//! coordinator — the caller routes groups to the `__consumer_offsets` partition that owns
//! them.

mod admin;
mod codec;
mod config;
#[allow(clippy::module_inception)]
mod coordinator;
mod effects;
mod error;
mod group;
mod ids;
mod join;
mod leave;
mod load;
mod member;
mod offsets;
mod rebalance;
mod record;
mod requests;
mod responses;
mod subscription;
mod sync;
mod timers;
mod types;

#[cfg(test)]
mod test_support;

pub use admin::{GroupFigures, GroupsSummary};
pub use codec::{DecodeError, EncodeError};
pub use config::CoordinatorConfig;
pub use coordinator::GroupCoordinator;
pub use error::{GroupError, PersistError, error_code};
pub use record::{GroupMetadata, MemberMetadata, Record};
pub use requests::{
    CommitRequest, DeleteOffsetsRequest, HeartbeatRequest, JoinRequest, LeaveRequest,
    LeavingMember, OffsetCommit, SyncRequest,
};
pub use responses::{
    CommitResponse, CommittedOffset, DeleteGroupsResponse, DeleteOffsetsResponse, DescribedGroup,
    DescribedMember, HeartbeatResponse, JoinResponse, JoinedMember, LeaveResponse, LeftMember,
    ListedGroup, Output, PartitionResult, Response, SyncResponse,
};
pub use subscription::{CONSUMER_PROTOCOL_TYPE, encode_v0 as encode_subscription_v0};
pub use types::{
    Generation, GroupId, GroupState, InstanceId, MemberId, Now, PersistId, Protocol, RequestId,
};
