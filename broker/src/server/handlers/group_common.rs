//! Conversions shared by the group handlers, between wire strings and the coordinator's types.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::GroupId as WireGroupId;
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::GroupId;

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

/// The code for "the coordinator could not answer": clients retry elsewhere.
pub fn unavailable() -> i16 {
    ResponseError::CoordinatorNotAvailable.code()
}
