//! SyncGroup and Heartbeat.
//!
//! SyncGroup from the leader carries every member's assignment: it is persisted with the
//! group's metadata first, and only once durable handed to every member parked in SyncGroup
//! (followers that sync before the leader simply wait). Heartbeats keep a member's session
//! alive and tell it, with REBALANCE_IN_PROGRESS, when to rejoin.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::coordinator::GroupCoordinator;
use super::effects::{Completion, Effects};
use super::error::GroupError;
use super::group::Group;
use super::join::validate_group_id;
use super::record::Record;
use super::requests::{HeartbeatRequest, SyncRequest};
use super::responses::{HeartbeatResponse, Output, Response, SyncResponse};
use super::timers::TimerKey;
use super::types::{GroupState, Now, RequestId};

impl GroupCoordinator {
    /// Handles SyncGroup. Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
    /// COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL,
    /// REBALANCE_IN_PROGRESS (rejoin), and NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE when
    /// the leader's assignment could not be persisted.
    pub fn sync(&mut self, request: RequestId, req: SyncRequest, now: Now) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        if let Err(e) = self.handle_sync(request, req, &mut fx) {
            fx.reply(request, Response::Sync(SyncResponse::error(e)));
        }
        self.finish(fx)
    }

    fn handle_sync(
        &mut self,
        request: RequestId,
        req: SyncRequest,
        fx: &mut Effects,
    ) -> Result<(), GroupError> {
        validate_group_id(req.group_id.as_str())?;
        if req.assignments.iter().any(|(_, a)| i32::try_from(a.len()).is_err()) {
            return Err(GroupError::InvalidRequest);
        }
        let g = self.groups.get_mut(&req.group_id).ok_or(GroupError::UnknownMemberId)?;
        validate_sync(g, &req)?;
        let id = req.member_id.clone();
        match g.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::CompletingRebalance => {
                let Some(m) = g.members.get_mut(&id) else {
                    return Err(GroupError::UnknownMemberId);
                };
                if let Some(old) = m.awaiting_sync.replace(request).filter(|old| *old != request) {
                    // Superseded by this one: Kafka drops it; Weir answers every request once.
                    fx.reply(
                        old,
                        Response::Sync(SyncResponse::error(GroupError::RebalanceInProgress)),
                    );
                }
                self.remove_pending_sync(&req.group_id, &id);
                let Some(g) = self.groups.get(&req.group_id) else { return Ok(()) };
                if g.leader.as_ref() == Some(&id) {
                    tracing::info!(group = %g.id, generation = %g.generation, "assignment received from leader");
                    let mut assignment: BTreeMap<_, _> =
                        g.members.keys().map(|m| (m.clone(), Bytes::new())).collect();
                    for (member, bytes) in req.assignments {
                        if let Some(slot) = assignment.get_mut(&member) {
                            *slot = bytes;
                        }
                    }
                    let mut metadata = g.metadata();
                    for m in &mut metadata.members {
                        m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
                    }
                    fx.persist(Record::Group { group: g.id.clone(), value: Some(metadata) });
                    fx.on_durable(Completion::LeaderSync {
                        group: g.id.clone(),
                        generation: g.generation,
                        assignment,
                    });
                }
                Ok(())
            }
            GroupState::Stable => {
                let response = SyncResponse {
                    error: None,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol_name.clone(),
                    assignment: g
                        .members
                        .get(&id)
                        .map(|m| m.assignment.clone())
                        .unwrap_or_default(),
                };
                self.remove_pending_sync(&req.group_id, &id);
                fx.reply(request, Response::Sync(response));
                Ok(())
            }
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
        }
    }

    /// Notes that `member` synced; the sync timer stops once everyone has.
    fn remove_pending_sync(
        &mut self,
        group: &crate::coordinator::GroupId,
        member: &crate::coordinator::MemberId,
    ) {
        if let Some(g) = self.groups.get_mut(group) {
            g.pending_sync.remove(member);
            if g.pending_sync.is_empty() {
                self.rb.timers.cancel(&TimerKey::Sync(group.clone()));
            }
        }
    }

    /// Handles Heartbeat. Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
    /// COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, and REBALANCE_IN_PROGRESS while the
    /// group waits for its members to rejoin.
    pub fn heartbeat(
        &mut self,
        request: RequestId,
        req: HeartbeatRequest,
        now: Now,
    ) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        let error = self.handle_heartbeat(&req, &fx).err();
        fx.reply(request, Response::Heartbeat(HeartbeatResponse { error }));
        self.finish(fx)
    }

    fn handle_heartbeat(&mut self, req: &HeartbeatRequest, fx: &Effects) -> Result<(), GroupError> {
        validate_group_id(req.group_id.as_str())?;
        let g = self.groups.get(&req.group_id).ok_or(GroupError::UnknownMemberId)?;
        if g.is(GroupState::Dead) {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        g.validate_member(&req.member_id, req.instance_id.as_ref())?;
        if req.generation != g.generation {
            return Err(GroupError::IllegalGeneration);
        }
        match g.state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => {
                self.rb.reschedule_heartbeat(g, &req.member_id, fx);
                Err(GroupError::RebalanceInProgress)
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                // Members may heartbeat between their JoinGroup and SyncGroup responses.
                self.rb.reschedule_heartbeat(g, &req.member_id, fx);
                Ok(())
            }
        }
    }
}

/// Kafka's `validateSyncGroup`, plus its "group is empty" check.
fn validate_sync(g: &Group, req: &SyncRequest) -> Result<(), GroupError> {
    if g.is(GroupState::Empty) {
        return Err(GroupError::UnknownMemberId);
    }
    if g.is(GroupState::Dead) {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    g.validate_member(&req.member_id, req.instance_id.as_ref())?;
    if req.generation != g.generation {
        return Err(GroupError::IllegalGeneration);
    }
    let inconsistent = |ours: Option<&str>, theirs: Option<&str>| matches!((ours, theirs), (Some(a), Some(b)) if a != b);
    if inconsistent(g.protocol_type.as_deref(), req.protocol_type.as_deref())
        || inconsistent(g.protocol_name.as_deref(), req.protocol_name.as_deref())
    {
        return Err(GroupError::InconsistentGroupProtocol);
    }
    Ok(())
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
