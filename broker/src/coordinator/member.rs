//! One member of a classic group (Kafka's `ClassicGroupMember`): its identity, timeouts,
//! protocols, current assignment, and the JoinGroup/SyncGroup requests parked on it.

use bytes::Bytes;

use super::types::{InstanceId, MemberId, Protocol, RequestId};

/// A JoinGroup request waiting for the join phase to complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParkedJoin {
    /// The request to answer.
    pub request: RequestId,
    /// Its API version.
    pub version: i16,
}

/// A group member.
#[derive(Clone, Debug)]
pub struct Member {
    /// The member's id.
    pub id: MemberId,
    /// Its `group.instance.id`, if static.
    pub instance_id: Option<InstanceId>,
    /// Its client id.
    pub client_id: String,
    /// Its address.
    pub client_host: String,
    /// How long it may take to rejoin.
    pub rebalance_timeout_ms: i32,
    /// How long it may go without heartbeating.
    pub session_timeout_ms: i32,
    /// The protocol type it joined with.
    pub protocol_type: String,
    /// Its protocols, most preferred first.
    pub protocols: Vec<Protocol>,
    /// Its assignment in the current generation (empty until the leader's is persisted).
    pub assignment: Bytes,
    /// Its JoinGroup waiting for the join phase.
    pub awaiting_join: Option<ParkedJoin>,
    /// Its SyncGroup waiting for the leader's assignment.
    pub awaiting_sync: Option<RequestId>,
    /// Joined but not yet through a completed join phase: may be expired even while its
    /// JoinGroup is parked.
    pub is_new: bool,
    /// Order of joining, for deterministic leader choice.
    pub joined_seq: u64,
}

impl Member {
    /// Whether this is a static member (KIP-345).
    pub fn is_static(&self) -> bool {
        self.instance_id.is_some()
    }

    /// Whether a missed heartbeat is excused: members parked in a rebalance cannot heartbeat
    /// (their sockets wait for the response), except new ones, which are expired regardless.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }

    /// The member's metadata for `protocol`, if it supports it.
    pub fn metadata(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols.iter().find(|p| p.name == protocol).map(|p| &p.metadata)
    }

    /// Whether the member supports `protocol`.
    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }

    /// Whether `protocols` are exactly the member's (names, metadata and order).
    pub fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    /// The member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols.iter().map(|p| p.name.as_str()).find(|name| candidates.contains(name))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn member(protocols: &[&str]) -> Member {
        Member {
            id: MemberId::from("m"),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 1,
            session_timeout_ms: 1,
            protocol_type: "consumer".into(),
            protocols: protocols.iter().map(|p| Protocol::new(*p, Bytes::new())).collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            joined_seq: 0,
        }
    }

    #[test]
    fn votes_for_its_most_preferred_candidate() {
        let m = member(&["sticky", "range", "roundrobin"]);
        assert_eq!(m.vote(&["roundrobin", "range"]), Some("range"));
        assert_eq!(m.vote(&["other"]), None);
    }

    #[test]
    fn heartbeat_excused_only_while_parked_and_not_new() {
        let mut m = member(&["range"]);
        assert!(!m.has_satisfied_heartbeat());
        m.awaiting_sync = Some(RequestId(1));
        assert!(m.has_satisfied_heartbeat());
        m.is_new = true;
        assert!(!m.has_satisfied_heartbeat());
    }
}
