//! One classic group's state (Kafka's `ClassicGroup`): members, the state machine, the chosen
//! protocol and leader, and the bookkeeping of who has (re)joined and who still owes a
//! SyncGroup. The protocol flow that drives it lives in `join.rs`, `rebalance.rs` and
//! `sync.rs`; this file only keeps the data consistent.
//!
//! Members are kept in a `BTreeMap` by id; where Kafka picks "some member" out of a hash map
//! (a new leader, a tie in the protocol vote) Weir picks deterministically: the earliest
//! joined member, the alphabetically first protocol.

use std::collections::{BTreeMap, BTreeSet};

use super::error::GroupError;
use super::member::Member;
use super::record::{GroupMetadata, MemberMetadata};
use super::responses::JoinedMember;
use super::subscription::{self, CONSUMER_PROTOCOL_TYPE};
use super::types::{Generation, GroupId, GroupState, InstanceId, MemberId};
use crate::model::TimestampMs;

/// What the group's join timer does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinTimer {
    /// The initial rebalance of an empty group: extended by `delay_ms` while new members keep
    /// arriving, until `remaining_ms` of the rebalance timeout is used up.
    Initial {
        /// The delay just waited.
        delay_ms: i64,
        /// The rebalance timeout left for further extensions.
        remaining_ms: i64,
    },
    /// The rebalance timeout: complete the join phase with whoever rejoined.
    Complete,
}

/// A classic consumer group.
#[derive(Clone, Debug)]
pub struct Group {
    /// The group's id.
    pub id: GroupId,
    /// Its state.
    pub state: GroupState,
    /// The state before the last transition (an initial rebalance is one from Empty).
    pub previous_state: GroupState,
    /// Wall time of the last transition (Kafka's `currentStateTimestamp`).
    pub state_since: Option<TimestampMs>,
    /// The protocol type, set by the first member; `None` for simple groups.
    pub protocol_type: Option<String>,
    /// The protocol chosen for the current generation.
    pub protocol_name: Option<String>,
    /// The current generation.
    pub generation: Generation,
    /// The leader, who computes the assignment.
    pub leader: Option<MemberId>,
    /// The members.
    pub members: BTreeMap<MemberId, Member>,
    /// Static members: instance id → current member id.
    pub static_members: BTreeMap<InstanceId, MemberId>,
    /// Member ids handed out with MEMBER_ID_REQUIRED whose owners have not joined yet.
    pub pending_members: BTreeSet<MemberId>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pub pending_sync: BTreeSet<MemberId>,
    /// A member joined during the initial rebalance: extend the delay.
    pub new_member_added: bool,
    /// Topics the members subscribe to (consumer groups with readable metadata only).
    pub subscribed_topics: Option<BTreeSet<String>>,
    /// What the armed join timer does.
    pub join_timer: Option<JoinTimer>,
    next_joined_seq: u64,
}

impl Group {
    /// A new, empty group.
    pub fn new(id: GroupId, now: TimestampMs) -> Group {
        Group {
            id,
            state: GroupState::Empty,
            previous_state: GroupState::Dead,
            state_since: Some(now),
            protocol_type: None,
            protocol_name: None,
            generation: Generation(0),
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeSet::new(),
            pending_sync: BTreeSet::new(),
            new_member_added: false,
            subscribed_topics: None,
            join_timer: None,
            next_joined_seq: 0,
        }
    }

    /// Whether the group is in `state`.
    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    /// Moves to `state`. Only Kafka's valid transitions are allowed; anything else is a bug.
    pub fn transition_to(&mut self, state: GroupState, now: TimestampMs) {
        use GroupState::*;
        let valid = match state {
            Empty => self.state == PreparingRebalance,
            PreparingRebalance => matches!(self.state, Stable | CompletingRebalance | Empty),
            CompletingRebalance => self.state == PreparingRebalance,
            Stable => self.state == CompletingRebalance,
            Dead => true,
        };
        assert!(valid, "group {}: invalid transition {} -> {}", self.id, self.state, state);
        self.previous_state = self.state;
        self.state = state;
        self.state_since = Some(now);
    }

    /// Whether a rebalance may start from the current state.
    pub fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        )
    }

    /// Adds a member (its parked join already set).
    pub fn add(&mut self, mut member: Member) {
        if let Some(instance) = &member.instance_id {
            self.static_members.insert(instance.clone(), member.id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        member.joined_seq = self.next_joined_seq;
        self.next_joined_seq += 1;
        self.pending_members.remove(&member.id);
        self.members.insert(member.id.clone(), member);
    }

    /// Removes a member (or pending member); a removed leader is succeeded by the earliest
    /// joined remaining member. Returns the member so its parked requests can be answered.
    pub fn remove(&mut self, id: &MemberId) -> Option<Member> {
        let removed = self.members.remove(id);
        if let Some(instance) = removed.as_ref().and_then(|m| m.instance_id.as_ref()) {
            self.static_members.remove(instance);
        }
        if self.leader.as_ref() == Some(id) {
            self.leader = self.earliest(|_| true);
        }
        self.pending_members.remove(id);
        self.pending_sync.remove(id);
        removed
    }

    /// Replaces the static member `old` by a fresh member id `new`, keeping its place,
    /// assignment and leadership (KIP-345). Returns the old member so its parked requests can
    /// be fenced.
    pub fn replace_static_member(&mut self, old: &MemberId, new: MemberId) -> Option<Member> {
        let removed = self.members.remove(old)?;
        let mut member = removed.clone();
        member.id = new.clone();
        member.awaiting_join = None;
        member.awaiting_sync = None;
        member.is_new = false;
        if let Some(instance) = &member.instance_id {
            self.static_members.insert(instance.clone(), new.clone());
        }
        if self.leader.as_ref() == Some(old) {
            self.leader = Some(new.clone());
        }
        if self.pending_sync.remove(old) {
            self.pending_sync.insert(new.clone());
        }
        self.members.insert(new, member);
        Some(removed)
    }

    fn earliest(&self, pred: impl Fn(&Member) -> bool) -> Option<MemberId> {
        self.members.values().filter(|m| pred(m)).min_by_key(|m| m.joined_seq).map(|m| m.id.clone())
    }

    /// Whether every member has rejoined and no member id is still pending.
    pub fn has_all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// How many members have a parked JoinGroup.
    pub fn awaiting_join_count(&self) -> usize {
        self.members.values().filter(|m| m.awaiting_join.is_some()).count()
    }

    /// Keeps the leader if it rejoined, else elects the earliest rejoined member. False when
    /// nobody rejoined.
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = &self.leader else { return false };
        if self.members.get(leader).is_some_and(|m| m.awaiting_join.is_some()) {
            return true;
        }
        match self.earliest(|m| m.awaiting_join.is_some()) {
            Some(new_leader) => {
                self.leader = Some(new_leader);
                true
            }
            None => false,
        }
    }

    /// The largest rebalance timeout among the members (the join and sync phases' deadline).
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members.values().map(|m| i64::from(m.rebalance_timeout_ms)).max().unwrap_or(0)
    }

    /// Whether a member with this protocol type and these protocol names may join.
    pub fn supports_protocols(&self, protocol_type: &str, names: &[&str]) -> bool {
        if self.is(GroupState::Empty) {
            return !protocol_type.is_empty() && !names.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && names.iter().any(|n| self.members.values().all(|m| m.supports(n)))
    }

    /// The protocol every member supports that most members prefer (ties: the
    /// alphabetically first), or `None` for an empty group.
    pub fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|n| self.members.values().all(|m| m.supports(n)))
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(choice) = m.vote(&candidates) {
                *votes.entry(choice).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes.into_iter().find(|(_, n)| *n == best).map(|(name, _)| name.to_owned())
    }

    /// Checks that `member_id` is a member and, for a static member, the current holder of
    /// its instance id.
    pub fn validate_member(
        &self,
        member_id: &MemberId,
        instance_id: Option<&InstanceId>,
    ) -> Result<(), GroupError> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                None => return Err(GroupError::UnknownMemberId),
                Some(current) if current != member_id => return Err(GroupError::FencedInstanceId),
                Some(_) => {}
            }
        }
        if self.members.contains_key(member_id) { Ok(()) } else { Err(GroupError::UnknownMemberId) }
    }

    /// Starts the next generation: Completing if anyone is left, else Empty.
    pub fn init_next_generation(&mut self, now: TimestampMs) {
        self.generation = Generation(self.generation.0.saturating_add(1));
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition_to(GroupState::Empty, now);
        } else {
            self.protocol_name = self.select_protocol();
            self.transition_to(GroupState::CompletingRebalance, now);
        }
        self.subscribed_topics = self.compute_subscribed_topics();
        self.pending_sync.clear();
    }

    /// Every member with its metadata for the chosen protocol, as the leader receives them.
    pub fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata(protocol).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// Whether this is a Kafka consumer group.
    pub fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// The members' subscribed topics, when knowable (consumer groups only).
    pub fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        subscription::union(
            self.members.values().map(|m| m.metadata(protocol).map_or(&[][..], |b| &b[..])),
        )
    }

    /// Whether the group consumes `topic`; unknown subscriptions of a consumer group count as
    /// "everything", as in Kafka.
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    /// The group's metadata record value, with each member's current assignment.
    pub fn metadata(&self) -> GroupMetadata {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        GroupMetadata {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_since,
            members: self
                .members
                .values()
                .map(|m| MemberMetadata {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(protocol).cloned().unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
