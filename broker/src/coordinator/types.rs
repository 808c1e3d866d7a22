//! The coordinator's vocabulary: ids that must never be confused with one another, the clock
//! reading every call takes, and the small value types shared by requests and state.
//!
//! Group, member and instance ids are all strings on the wire; here each has its own type so a
//! member id can never be passed where a `group.instance.id` is meant.

use std::fmt;

use bytes::Bytes;

use crate::io::Instant;
use crate::model::TimestampMs;

macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub String);

        impl $name {
            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> $name {
                $name(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> $name {
                $name(s)
            }
        }
    };
}

string_id!(
    /// A consumer group's id (`group.id`).
    GroupId
);
string_id!(
    /// A member's id within a group, assigned by the coordinator (`<client.id>-<uuid>`). The
    /// empty id means "unknown": a member joining for the first time.
    MemberId
);
string_id!(
    /// A static member's stable identity (`group.instance.id`, KIP-345).
    InstanceId
);

impl MemberId {
    /// The unknown member id (Kafka's `UNKNOWN_MEMBER_ID`, the empty string).
    pub fn unknown() -> MemberId {
        MemberId(String::new())
    }

    /// Whether this is the unknown (empty) member id.
    pub fn is_unknown(&self) -> bool {
        self.0.is_empty()
    }
}

/// A group's generation: incremented each time a rebalance completes its join phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(pub i32);

impl Generation {
    /// "No generation" on the wire: simple consumers and admin clients commit with it.
    pub const NONE: Generation = Generation(-1);
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A caller-chosen handle for one request. Replies name it, because JoinGroup and SyncGroup are
/// answered only once the rebalance has progressed — possibly during a later call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// The coordinator's handle for one batch of records it asked the caller to persist; the caller
/// reports the outcome with [`super::GroupCoordinator::persisted`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PersistId(pub u64);

/// The clock reading every call takes: monotonic time for timeouts, wall time for the
/// timestamps Kafka stores (commit time, the time a group became empty) and offset retention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Monotonic time: session, rebalance and join timeouts.
    pub mono: Instant,
    /// Wall time: stored timestamps and offset expiry.
    pub wall: TimestampMs,
}

impl Now {
    /// Builds a reading.
    pub fn new(mono: Instant, wall_ms: i64) -> Now {
        Now { mono, wall: TimestampMs(wall_ms) }
    }
}

/// One group protocol a member supports: its name (an assignor, for consumers) and the opaque
/// metadata the leader needs (for consumers, the subscription).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol {
    /// The protocol's name, e.g. `range`.
    pub name: String,
    /// Opaque protocol metadata.
    pub metadata: Bytes,
}

impl Protocol {
    /// Builds one.
    pub fn new(name: impl Into<String>, metadata: impl Into<Bytes>) -> Protocol {
        Protocol { name: name.into(), metadata: metadata.into() }
    }
}

/// The states of a classic group (Kafka's `ClassicGroupState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupState {
    /// No members; offsets may still be committed by simple consumers and admin clients.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has (or can fetch) its assignment.
    Stable,
    /// Being deleted (or its deletion is being persisted); nothing else may touch it.
    Dead,
}

impl GroupState {
    /// The name Kafka uses in DescribeGroups and ListGroups.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
