//! Conversions shared by the group handlers, between wire strings and the coordinator's types.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::GroupId as WireGroupId;
use kafka_protocol::protocol::StrBytes;

use super::coordinator_error;
use crate::coordinator::GroupId;
use crate::node::Broker;

/// A wire string as an owned string.
pub fn string(s: &StrBytes) -> String {
    s.as_str().to_owned()
}

/// A nullable wire string as an optional owned string.
pub fn from_opt(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(string)
}

/// A wire group id as the coordinator's.
pub fn group_id(id: &WireGroupId) -> GroupId {
    GroupId(id.0.as_str().to_owned())
}

/// Why this broker cannot serve a request of `group`'s members (JoinGroup, SyncGroup,
/// Heartbeat, LeaveGroup, OffsetDelete): an empty group id is INVALID_GROUP_ID wherever it is
/// sent, before whether this broker coordinates it, as Kafka checks them; otherwise
/// [`coordinator_error`]. (Commits, fetches, descriptions and deletions accept the empty id,
/// as Kafka's do for groups that only store offsets.)
pub fn member_group_error(broker: &Broker, group: &str) -> Option<ResponseError> {
    if group.is_empty() {
        return Some(ResponseError::InvalidGroupId);
    }
    coordinator_error(broker, group)
}

/// The code for "the coordinator could not answer": clients retry elsewhere.
pub fn unavailable() -> i16 {
    ResponseError::CoordinatorNotAvailable.code()
}
