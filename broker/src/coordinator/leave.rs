//! LeaveGroup: members leaving on their own (by member id) and administrators removing static
//! members (by instance id alone, KIP-345). A departure rebalances the group; the last one
//! leaves it Empty, which is persisted before the reply.

use super::coordinator::GroupCoordinator;
use super::effects::Effects;
use super::error::GroupError;
use super::join::validate_group_id;
use super::requests::LeaveRequest;
use super::responses::{LeaveResponse, LeftMember, Output, Response};
use super::timers::TimerKey;
use super::types::{GroupState, Now, RequestId};

impl GroupCoordinator {
    /// Handles LeaveGroup. Request-level errors: INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE;
    /// per member: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID. The reply waits for any record the
    /// departure causes.
    pub fn leave(&mut self, request: RequestId, req: LeaveRequest, now: Now) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        let response = self.handle_leave(req, &mut fx);
        fx.reply_when_durable(request, Response::Leave(response));
        self.finish(fx)
    }

    fn handle_leave(&mut self, req: LeaveRequest, fx: &mut Effects) -> LeaveResponse {
        if let Err(e) = validate_group_id(req.group_id.as_str()) {
            return LeaveResponse { error: Some(e), members: Vec::new() };
        }
        let outcome = |m: &super::requests::LeavingMember, error| LeftMember {
            member_id: m.member_id.clone(),
            instance_id: m.instance_id.clone(),
            error,
        };
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            let members =
                req.members.iter().map(|m| outcome(m, Some(GroupError::UnknownMemberId))).collect();
            return LeaveResponse { error: None, members };
        };
        if g.is(GroupState::Dead) {
            return LeaveResponse {
                error: Some(GroupError::CoordinatorNotAvailable),
                members: Vec::new(),
            };
        }
        let mut members = Vec::with_capacity(req.members.len());
        let mut anyone_left = false;
        for leaving in &req.members {
            let result = if leaving.member_id.is_unknown() {
                match leaving.instance_id.as_ref().and_then(|i| g.static_members.get(i)).cloned() {
                    Some(id) => {
                        self.rb.remove_member(g, &id, fx);
                        Ok(())
                    }
                    None => Err(GroupError::UnknownMemberId),
                }
            } else if g.pending_members.remove(&leaving.member_id) {
                let key = TimerKey::Heartbeat(g.id.clone(), leaving.member_id.clone());
                self.rb.timers.cancel(&key);
                Ok(())
            } else {
                g.validate_member(&leaving.member_id, leaving.instance_id.as_ref()).map(|()| {
                    self.rb.remove_member(g, &leaving.member_id, fx);
                })
            };
            if result.is_ok() {
                tracing::info!(group = %g.id, member = %leaving.member_id, reason = ?leaving.reason, "member left");
            }
            anyone_left |= result.is_ok();
            members.push(outcome(leaving, result.err()));
        }
        if anyone_left {
            match g.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.rb.maybe_prepare_rebalance_or_complete_join(g, fx);
                }
                GroupState::PreparingRebalance => self.rb.maybe_complete_join_phase(g, fx),
                GroupState::Empty | GroupState::Dead => {}
            }
        }
        LeaveResponse { error: None, members }
    }
}
