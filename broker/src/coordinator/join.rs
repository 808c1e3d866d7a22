//! JoinGroup: new members (MEMBER_ID_REQUIRED first, KIP-394), rejoining members, and static
//! members replacing their previous incarnation (KIP-345).
//!
//! Follows Kafka's `classicGroupJoinToClassicGroup` and the methods it calls. A JoinGroup is
//! answered at once only when it fails or changes nothing; otherwise it is parked on the
//! member until the join phase completes.

use super::codec::STRING_BYTES_MAX;
use super::coordinator::GroupCoordinator;
use super::effects::{Completion, Effects, StaticReplace};
use super::error::GroupError;
use super::group::Group;
use super::member::{Member, ParkedJoin};
use super::rebalance::Rebalancer;
use super::record::Record;
use super::requests::JoinRequest;
use super::responses::{JoinResponse, Output, Response};
use super::timers::TimerKey;
use super::types::{GroupState, MemberId, Now, RequestId};

/// JoinGroup v4 and later require a known member id (KIP-394).
const JOIN_VERSION_MEMBER_ID_REQUIRED: i16 = 4;

impl GroupCoordinator {
    /// Handles JoinGroup. Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT, INVALID_REQUEST,
    /// UNKNOWN_MEMBER_ID, GROUP_MAX_SIZE_REACHED, COORDINATOR_NOT_AVAILABLE,
    /// INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED (with the member id to rejoin with),
    /// FENCED_INSTANCE_ID, and REBALANCE_IN_PROGRESS for a JoinGroup superseded by a newer one
    /// from the same member.
    pub fn join(&mut self, request: RequestId, mut req: JoinRequest, now: Now) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        if let Err(e) = self.validate_join(&req) {
            fail(&mut fx, request, req.member_id, e);
            return self.finish(fx);
        }
        if req.version == 0 {
            // v0 has no rebalance timeout; Kafka uses the session timeout.
            req.rebalance_timeout_ms = req.session_timeout_ms;
        }
        let unknown = req.member_id.is_unknown();
        if !self.groups.contains_key(&req.group_id) {
            if !unknown {
                fail(&mut fx, request, req.member_id, GroupError::UnknownMemberId);
                return self.finish(fx);
            }
            let group = Group::new(req.group_id.clone(), now.wall);
            self.groups.insert(req.group_id.clone(), group);
        }
        if let Some(group) = self.groups.get_mut(&req.group_id) {
            let max = self.rb.config.group_members_max;
            if !accept_joining_member(group, &req.member_id, max) {
                self.rb.remove_member(group, &req.member_id, &mut fx);
                fail(&mut fx, request, MemberId::unknown(), GroupError::GroupMaxSizeReached);
            } else if unknown {
                self.rb.join_new_member(group, request, req, &mut fx);
            } else {
                self.rb.join_existing_member(group, request, req, &mut fx);
            }
        }
        self.finish(fx)
    }

    fn validate_join(&self, req: &JoinRequest) -> Result<(), GroupError> {
        validate_group_id(req.group_id.as_str())?;
        let config = &self.rb.config;
        if req.session_timeout_ms < config.session_timeout_ms_min
            || req.session_timeout_ms > config.session_timeout_ms_max
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        let strings = [
            req.member_id.as_str(),
            req.instance_id.as_ref().map_or("", |i| i.as_str()),
            &req.client_id,
            &req.client_host,
            &req.protocol_type,
        ];
        let protocols_fit = req
            .protocols
            .iter()
            .all(|p| p.name.len() <= STRING_BYTES_MAX && i32::try_from(p.metadata.len()).is_ok());
        if strings.iter().any(|s| s.len() > STRING_BYTES_MAX) || !protocols_fit {
            return Err(GroupError::InvalidRequest);
        }
        Ok(())
    }
}

/// Refuses an empty group id or one too long to persist.
pub(super) fn validate_group_id(id: &str) -> Result<(), GroupError> {
    if id.is_empty() {
        return Err(GroupError::InvalidGroupId);
    }
    validate_stored_group_id(id)
}

/// Refuses a group id too long to persist. The empty id is a group's for OffsetCommit and
/// DeleteGroups, as in Kafka (a group that only stores offsets, committed by a client without
/// a group id of its own); members must have a name.
pub(super) fn validate_stored_group_id(id: &str) -> Result<(), GroupError> {
    if id.len() > STRING_BYTES_MAX {
        return Err(GroupError::InvalidGroupId);
    }
    Ok(())
}

fn fail(fx: &mut Effects, request: RequestId, member_id: MemberId, error: GroupError) {
    fx.reply(request, Response::Join(JoinResponse::error(member_id, error)));
}

/// `group.max.size`: while rebalancing, counts members that rejoined (so the last to rejoin
/// of an oversized group are the ones refused); otherwise counts members.
fn accept_joining_member(group: &Group, member: &MemberId, max: usize) -> bool {
    match group.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            group.members.get(member).is_some_and(|m| m.awaiting_join.is_some())
                || group.awaiting_join_count() < max
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.members.contains_key(member) || group.members.len() < max
        }
    }
}

impl Rebalancer {
    fn join_new_member(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        fx: &mut Effects,
    ) {
        let names: Vec<&str> = req.protocols.iter().map(|p| p.name.as_str()).collect();
        if g.is(GroupState::Dead) {
            return fail(fx, request, MemberId::unknown(), GroupError::CoordinatorNotAvailable);
        }
        if !g.supports_protocols(&req.protocol_type, &names) {
            return fail(fx, request, MemberId::unknown(), GroupError::InconsistentGroupProtocol);
        }
        let prefix = req.instance_id.as_ref().map_or(req.client_id.as_str(), |i| i.as_str());
        let new_id = self.ids.member_id(prefix);
        if let Some(instance) = &req.instance_id {
            match g.static_members.get(instance).cloned() {
                Some(old_id) => self.replace_static_member(g, old_id, new_id, request, req, fx),
                None => self.add_member_then_rebalance(g, new_id, request, req, fx),
            }
        } else if req.version >= JOIN_VERSION_MEMBER_ID_REQUIRED {
            // KIP-394: hand out the id and wait for the member to come back with it; until then
            // it is pending, and forgotten if it does not return within its session timeout.
            g.pending_members.insert(new_id.clone());
            let key = TimerKey::Heartbeat(g.id.clone(), new_id.clone());
            self.timers.schedule_in(key, fx.now.mono, i64::from(req.session_timeout_ms));
            fail(fx, request, new_id, GroupError::MemberIdRequired);
        } else {
            self.add_member_then_rebalance(g, new_id, request, req, fx);
        }
    }

    fn join_existing_member(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        fx: &mut Effects,
    ) {
        let id = req.member_id.clone();
        let names: Vec<&str> = req.protocols.iter().map(|p| p.name.as_str()).collect();
        if g.is(GroupState::Dead) {
            return fail(fx, request, id, GroupError::CoordinatorNotAvailable);
        }
        if !g.supports_protocols(&req.protocol_type, &names) {
            return fail(fx, request, id, GroupError::InconsistentGroupProtocol);
        }
        if g.pending_members.contains(&id) {
            if req.instance_id.is_some() {
                // Pending ids are only handed to dynamic members; Kafka treats this as a bug.
                return fail(fx, request, id, GroupError::UnknownServerError);
            }
            return self.add_member_then_rebalance(g, id, request, req, fx);
        }
        if let Err(e) = g.validate_member(&id, req.instance_id.as_ref()) {
            return fail(fx, request, id, e);
        }
        let (is_leader, matches) = match g.members.get(&id) {
            Some(m) => (g.leader.as_ref() == Some(&id), m.matches(&req.protocols)),
            None => return fail(fx, request, id, GroupError::UnknownMemberId),
        };
        match g.state {
            GroupState::PreparingRebalance => {
                self.update_member_then_rebalance(g, request, req, fx)
            }
            GroupState::CompletingRebalance if matches => {
                // It probably missed the JoinGroup response: send the current one again.
                let response = Rebalancer::join_response(g, &id, true);
                fx.reply(request, Response::Join(response));
            }
            GroupState::Stable if !is_leader && matches => {
                let response = Rebalancer::join_response(g, &id, false);
                fx.reply(request, Response::Join(response));
            }
            // A leader's JoinGroup in Stable forces a rebalance (e.g. topic metadata changed),
            // as does changed metadata.
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member_then_rebalance(g, request, req, fx);
            }
            GroupState::Empty | GroupState::Dead => {
                fail(fx, request, id, GroupError::UnknownMemberId)
            }
        }
    }

    /// Records the member's new protocols and timeouts, parks its JoinGroup, and rebalances.
    fn update_member_then_rebalance(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        fx: &mut Effects,
    ) {
        let Some(m) = g.members.get_mut(&req.member_id) else { return };
        m.protocols = req.protocols;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.session_timeout_ms = req.session_timeout_ms;
        let parked = ParkedJoin { request, version: req.version };
        if let Some(old) = m.awaiting_join.replace(parked).filter(|old| old.request != request) {
            supersede(fx, old.request, &req.member_id);
        }
        self.maybe_prepare_rebalance_or_complete_join(g, fx);
    }

    fn add_member_then_rebalance(
        &mut self,
        g: &mut Group,
        id: MemberId,
        request: RequestId,
        req: JoinRequest,
        fx: &mut Effects,
    ) {
        let member = Member {
            id: id.clone(),
            instance_id: req.instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type,
            protocols: req.protocols,
            assignment: Default::default(),
            awaiting_join: Some(ParkedJoin { request, version: req.version }),
            awaiting_sync: None,
            is_new: true,
            joined_seq: 0,
        };
        if g.is(GroupState::PreparingRebalance) && g.previous_state == GroupState::Empty {
            g.new_member_added = true;
        }
        g.add(member);
        // A new member's socket is muted while its JoinGroup is parked, so a session timeout
        // cannot tell whether it left; bound how long it may stay parked instead.
        let key = TimerKey::Heartbeat(g.id.clone(), id);
        self.timers.schedule_in(
            key,
            fx.now.mono,
            i64::from(self.config.new_member_join_timeout_ms),
        );
        self.maybe_prepare_rebalance_or_complete_join(g, fx);
    }

    /// KIP-345: a static member rejoined with an unknown member id. The new id takes over the
    /// instance id (the old one is fenced); a Stable group whose chosen protocol would not
    /// change keeps its generation and assignment, so no rebalance happens.
    fn replace_static_member(
        &mut self,
        g: &mut Group,
        old_id: MemberId,
        new_id: MemberId,
        request: RequestId,
        req: JoinRequest,
        fx: &mut Effects,
    ) {
        let leader_before = g.leader.clone();
        let Some(old) = g.replace_static_member(&old_id, new_id.clone()) else {
            return fail(fx, request, MemberId::unknown(), GroupError::UnknownServerError);
        };
        if let Some(parked) = old.awaiting_join {
            fail(fx, parked.request, old_id.clone(), GroupError::FencedInstanceId);
        }
        if let Some(sync) = old.awaiting_sync {
            let response = super::responses::SyncResponse::error(GroupError::FencedInstanceId);
            fx.reply(sync, Response::Sync(response));
        }
        self.timers.cancel(&TimerKey::Heartbeat(g.id.clone(), old_id.clone()));
        self.reschedule_heartbeat(g, &new_id, fx);
        let Some(m) = g.members.get_mut(&new_id) else { return };
        let old_protocols = std::mem::replace(&mut m.protocols, req.protocols);
        let old_rebalance_timeout_ms =
            std::mem::replace(&mut m.rebalance_timeout_ms, req.rebalance_timeout_ms);
        let old_session_timeout_ms =
            std::mem::replace(&mut m.session_timeout_ms, req.session_timeout_ms);
        m.awaiting_join = Some(ParkedJoin { request, version: req.version });
        match g.state {
            GroupState::Stable if g.select_protocol() == g.protocol_name => {
                tracing::info!(group = %g.id, %new_id, "static member replaced without rebalance");
                fx.persist(Record::Group { group: g.id.clone(), value: Some(g.metadata()) });
                fx.on_durable(Completion::StaticReplace(StaticReplace {
                    group: g.id.clone(),
                    instance_id: req.instance_id.unwrap_or_default(),
                    old_id,
                    new_id,
                    request,
                    version: req.version,
                    old_protocols,
                    old_rebalance_timeout_ms,
                    old_session_timeout_ms,
                    leader_before,
                }));
            }
            GroupState::Stable => self.maybe_prepare_rebalance_or_complete_join(g, fx),
            // The leader may already be assigning to the old id: only a rebalance fixes that.
            GroupState::CompletingRebalance => self.prepare_rebalance(g, fx),
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(g, fx),
            GroupState::Empty | GroupState::Dead => {
                if let Some(m) = g.members.get_mut(&new_id) {
                    m.awaiting_join = None;
                }
                fail(fx, request, new_id, GroupError::UnknownServerError);
            }
        }
    }
}

/// Answers a JoinGroup replaced by a newer one from the same member (Kafka drops it; Weir
/// answers every request once).
fn supersede(fx: &mut Effects, request: RequestId, member: &MemberId) {
    fail(fx, request, member.clone(), GroupError::RebalanceInProgress);
}

#[cfg(test)]
#[path = "join_tests.rs"]
mod tests;
