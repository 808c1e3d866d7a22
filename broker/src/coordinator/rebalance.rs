//! The rebalance protocol's steps, shared by every request and timer that moves a group:
//! preparing a rebalance, completing the join phase (choosing leader, protocol and the next
//! generation), handing out assignments, and removing members that time out.
//!
//! This follows Kafka's `GroupMetadataManager` (classic groups, 3.7–4.x) step by step; the
//! method names are Kafka's so the two can be read side by side. [`Rebalancer`] holds what
//! those steps need besides the group itself — config, timers, id generator — so a group can
//! be borrowed mutably from the coordinator's map alongside it.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::config::CoordinatorConfig;
use super::effects::Effects;
use super::error::GroupError;
use super::group::{Group, JoinTimer};
use super::ids::IdGenerator;
use super::record::Record;
use super::responses::{JoinResponse, Response, SyncResponse};
use super::timers::{TimerKey, Timers};
use super::types::{GroupState, MemberId};

/// Config, timers and ids: everything a rebalance step touches besides the group.
#[derive(Debug)]
pub struct Rebalancer {
    /// Settings.
    pub config: CoordinatorConfig,
    /// Every deadline.
    pub timers: Timers,
    /// Member id generator.
    pub ids: IdGenerator,
}

impl Rebalancer {
    /// Restarts `member`'s session timeout.
    pub fn reschedule_heartbeat(&mut self, group: &Group, member: &MemberId, fx: &Effects) {
        if let Some(m) = group.members.get(member) {
            let key = TimerKey::Heartbeat(group.id.clone(), member.clone());
            self.timers.schedule_in(key, fx.now.mono, i64::from(m.session_timeout_ms));
        }
    }

    /// The JoinGroup response for `member` in the current generation; the leader's lists every
    /// member when `with_members`.
    pub fn join_response(group: &Group, member: &MemberId, with_members: bool) -> JoinResponse {
        let is_leader = group.leader.as_ref() == Some(member);
        JoinResponse {
            error: None,
            generation: group.generation,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol_name.clone(),
            leader: group.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member.clone(),
            members: if with_members && is_leader { group.joined_members() } else { Vec::new() },
        }
    }

    /// Removes a member and answers its parked requests with UNKNOWN_MEMBER_ID, so a client
    /// still waiting rejoins (Kafka answers the parked JoinGroup; Weir answers a parked
    /// SyncGroup too, so that every request gets exactly one reply).
    pub fn remove_member(&mut self, group: &mut Group, member: &MemberId, fx: &mut Effects) {
        self.timers.cancel(&TimerKey::Heartbeat(group.id.clone(), member.clone()));
        if let Some(m) = group.remove(member) {
            if let Some(parked) = m.awaiting_join {
                let response =
                    JoinResponse::error(MemberId::unknown(), GroupError::UnknownMemberId);
                fx.reply(parked.request, Response::Join(response));
            }
            if let Some(request) = m.awaiting_sync {
                fx.reply(request, Response::Sync(SyncResponse::error(GroupError::UnknownMemberId)));
            }
        }
    }

    /// Starts a rebalance if the state allows one, else tries to finish the join phase.
    pub fn maybe_prepare_rebalance_or_complete_join(
        &mut self,
        group: &mut Group,
        fx: &mut Effects,
    ) {
        if group.can_rebalance() {
            self.prepare_rebalance(group, fx);
        } else {
            self.maybe_complete_join_phase(group, fx);
        }
    }

    /// Moves the group to PreparingRebalance: parked SyncGroups learn REBALANCE_IN_PROGRESS,
    /// an empty group waits `initial_rebalance_delay_ms` for more members, any other group
    /// waits for its members to rejoin (at most the rebalance timeout).
    pub fn prepare_rebalance(&mut self, group: &mut Group, fx: &mut Effects) {
        if group.is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_error(group, GroupError::RebalanceInProgress, fx);
        }
        group.pending_sync.clear();
        self.timers.cancel(&TimerKey::Sync(group.id.clone()));
        let initial = group.is(GroupState::Empty);
        if initial {
            let delay_ms = i64::from(self.config.initial_rebalance_delay_ms);
            let remaining_ms = (group.rebalance_timeout_ms() - delay_ms).max(0);
            self.timers.schedule_in(TimerKey::Join(group.id.clone()), fx.now.mono, delay_ms);
            group.join_timer = Some(JoinTimer::Initial { delay_ms, remaining_ms });
        }
        group.transition_to(GroupState::PreparingRebalance, fx.now.wall);
        tracing::debug!(group = %group.id, generation = %group.generation, "preparing rebalance");
        if !initial {
            if group.has_all_members_joined() {
                self.complete_join(group, fx);
            } else {
                let timeout_ms = group.rebalance_timeout_ms();
                self.timers.schedule_in(TimerKey::Join(group.id.clone()), fx.now.mono, timeout_ms);
                group.join_timer = Some(JoinTimer::Complete);
            }
        }
    }

    /// Completes the join phase if everyone has rejoined — except during the initial
    /// rebalance, which always waits for its delay.
    pub fn maybe_complete_join_phase(&mut self, group: &mut Group, fx: &mut Effects) {
        if group.is(GroupState::PreparingRebalance)
            && group.previous_state != GroupState::Empty
            && group.has_all_members_joined()
        {
            self.complete_join(group, fx);
        }
    }

    /// The join timer fired.
    pub fn on_join_timer(&mut self, group: &mut Group, fx: &mut Effects) {
        if !group.is(GroupState::PreparingRebalance) {
            return;
        }
        match group.join_timer.take() {
            Some(JoinTimer::Initial { delay_ms, remaining_ms })
                if group.new_member_added && remaining_ms != 0 =>
            {
                group.new_member_added = false;
                let new_delay_ms =
                    i64::from(self.config.initial_rebalance_delay_ms).min(remaining_ms);
                let new_remaining_ms = (remaining_ms - delay_ms).max(0);
                self.timers.schedule_in(
                    TimerKey::Join(group.id.clone()),
                    fx.now.mono,
                    new_delay_ms,
                );
                group.join_timer = Some(JoinTimer::Initial {
                    delay_ms: new_delay_ms,
                    remaining_ms: new_remaining_ms,
                });
            }
            _ => self.complete_join(group, fx),
        }
    }

    /// Ends the join phase: drops dynamic members that did not rejoin, keeps or elects a
    /// leader, starts the next generation and answers every parked JoinGroup (the leader's
    /// with all members' metadata). A group left with nobody becomes Empty and is persisted.
    pub fn complete_join(&mut self, group: &mut Group, fx: &mut Effects) {
        self.timers.cancel(&TimerKey::Join(group.id.clone()));
        group.join_timer = None;
        let gone: Vec<MemberId> = group
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && !m.is_static())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.remove_member(group, id, fx);
        }
        if !gone.is_empty() {
            tracing::info!(group = %group.id, ?gone, "removed members that did not rejoin");
        }
        if group.is(GroupState::Dead) {
            return;
        }
        if !group.maybe_elect_new_joined_leader() && !group.members.is_empty() {
            // Only static members that have not rejoined are left: wait for their sessions.
            let timeout_ms = group.rebalance_timeout_ms();
            self.timers.schedule_in(TimerKey::Join(group.id.clone()), fx.now.mono, timeout_ms);
            group.join_timer = Some(JoinTimer::Complete);
            return;
        }
        group.init_next_generation(fx.now.wall);
        if group.is(GroupState::Empty) {
            fx.persist(Record::Group { group: group.id.clone(), value: Some(group.metadata()) });
            return;
        }
        tracing::info!(group = %group.id, generation = %group.generation, members = group.members.len(), "join phase complete");
        let ids: Vec<MemberId> = group.members.keys().cloned().collect();
        for id in &ids {
            let parked = group.members.get_mut(id).and_then(|m| {
                m.is_new = false;
                m.awaiting_join.take()
            });
            if let Some(parked) = parked {
                let response = Self::join_response(group, id, true);
                fx.reply(parked.request, Response::Join(response));
            }
            self.reschedule_heartbeat(group, id, fx);
            group.pending_sync.insert(id.clone());
        }
        let timeout_ms = group.rebalance_timeout_ms();
        self.timers.schedule_in(TimerKey::Sync(group.id.clone()), fx.now.mono, timeout_ms);
    }

    /// Clears every assignment and answers parked SyncGroups with `error`.
    pub fn reset_and_propagate_error(
        &mut self,
        group: &mut Group,
        error: GroupError,
        fx: &mut Effects,
    ) {
        for m in group.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.propagate(group, Some(error), fx);
    }

    /// Installs the leader's assignment and answers parked SyncGroups with it.
    pub fn set_and_propagate(
        &mut self,
        group: &mut Group,
        assignment: &BTreeMap<MemberId, Bytes>,
        fx: &mut Effects,
    ) {
        for m in group.members.values_mut() {
            m.assignment = assignment.get(&m.id).cloned().unwrap_or_default();
        }
        self.propagate(group, None, fx);
    }

    fn propagate(&mut self, group: &mut Group, error: Option<GroupError>, fx: &mut Effects) {
        let (protocol_type, protocol_name) = match error {
            None => (group.protocol_type.clone(), group.protocol_name.clone()),
            Some(_) => (None, None),
        };
        let parked: Vec<_> = group
            .members
            .values_mut()
            .filter_map(|m| m.awaiting_sync.take().map(|r| (m.id.clone(), r, m.assignment.clone())))
            .collect();
        for (id, request, assignment) in parked {
            let response = SyncResponse {
                error,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                assignment,
            };
            fx.reply(request, Response::Sync(response));
            // A member parked in SyncGroup could not heartbeat: its session restarts now.
            self.reschedule_heartbeat(group, &id, fx);
        }
    }

    /// Removes a failed member and moves the group on.
    pub fn remove_member_and_update(
        &mut self,
        group: &mut Group,
        member: &MemberId,
        fx: &mut Effects,
    ) {
        self.remove_member(group, member, fx);
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(group, fx);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(group, fx),
            _ => {}
        }
    }

    /// A member's (or pending member's) session timer fired.
    pub fn expire_heartbeat(&mut self, group: &mut Group, member: &MemberId, fx: &mut Effects) {
        if group.is(GroupState::Dead) {
            return;
        }
        if group.pending_members.remove(member) {
            tracing::info!(group = %group.id, %member, "pending member expired");
            // Not during the initial rebalance delay, which waits its time out, as in Kafka's
            // original coordinator (its initial delayed join completes only when it expires).
            self.maybe_complete_join_phase(group, fx);
            return;
        }
        if group.members.get(member).is_some_and(|m| !m.has_satisfied_heartbeat()) {
            tracing::info!(group = %group.id, %member, "session expired; removing member");
            self.remove_member_and_update(group, member, fx);
        }
    }

    /// The sync timer fired: members that never sent SyncGroup are removed and the group
    /// rebalances.
    pub fn expire_pending_sync(&mut self, group: &mut Group, fx: &mut Effects) {
        let syncing = matches!(group.state, GroupState::CompletingRebalance | GroupState::Stable);
        if !syncing || group.pending_sync.is_empty() {
            return;
        }
        let late: Vec<MemberId> = group.pending_sync.iter().cloned().collect();
        tracing::info!(group = %group.id, ?late, "removing members that did not sync");
        for id in &late {
            self.remove_member(group, id, fx);
        }
        self.prepare_rebalance(group, fx);
    }
}
