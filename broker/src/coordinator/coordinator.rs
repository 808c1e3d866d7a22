//! [`GroupCoordinator`]: every group and committed offset of one coordinator, and the plumbing
//! every call shares — turning a call's effects into outputs, settling persisted batches in log
//! order, firing timers, and unloading a partition's groups on loss of its leadership.

use std::collections::BTreeMap;

use super::config::CoordinatorConfig;
use super::effects::{Completion, Effects, PendingWrites, StaticReplace};
use super::error::{GroupError, PersistError};
use super::group::Group;
use super::ids::IdGenerator;
use super::offsets::OffsetStore;
use super::rebalance::Rebalancer;
use super::record::Record;
use super::responses::{JoinResponse, Output, Response, SyncResponse};
use super::timers::{TimerKey, Timers};
use super::types::{GroupId, GroupState, MemberId, Now, PersistId};
use crate::io::Instant;
use crate::model::TopicId;

/// The classic group coordinator for the groups of the `__consumer_offsets` partitions a broker
/// leads, as a sans-IO state machine.
///
/// The caller's contract:
/// - every mutating call takes the time and a caller-chosen, unique [`super::RequestId`], and
///   returns [`Output`]s: replies (possibly to earlier requests) and record batches to
///   persist. Every request gets exactly one reply, eventually;
/// - every `Output::Persist` batch is appended to `__consumer_offsets` in the order produced,
///   and its fate reported with [`GroupCoordinator::persisted`] (reports may come in any
///   order; batches settle in issue order, so an unreported batch holds back later ones);
/// - the caller arms a timer for [`GroupCoordinator::next_deadline`] (re-read after every
///   call) and calls [`GroupCoordinator::tick`] when it passes;
/// - on taking over a partition it calls [`GroupCoordinator::load`] with the partition's
///   records, and on losing it [`GroupCoordinator::unload_groups`] for its groups.
///
/// Reads (`describe_groups`, `list_groups`, `fetch_offsets`) answer at once.
#[derive(Debug)]
pub struct GroupCoordinator {
    pub(super) groups: BTreeMap<GroupId, Group>,
    pub(super) offsets: OffsetStore,
    pub(super) pending: PendingWrites,
    pub(super) rb: Rebalancer,
    /// The cluster's topics, once known (see [`GroupCoordinator::set_live_topics`]).
    pub(super) live_topics: Option<BTreeMap<String, TopicId>>,
}

impl GroupCoordinator {
    /// A coordinator with no groups. `id_seed` seeds member-id generation (draw it from
    /// `Env::entropy`).
    pub fn new(config: CoordinatorConfig, id_seed: u64) -> GroupCoordinator {
        GroupCoordinator {
            groups: BTreeMap::new(),
            offsets: OffsetStore::default(),
            pending: PendingWrites::default(),
            rb: Rebalancer { config, timers: Timers::default(), ids: IdGenerator::new(id_seed) },
            live_topics: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.rb.config
    }

    /// When [`GroupCoordinator::tick`] next has work, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.rb.timers.next()
    }

    /// Fires every timer due at `now`: completes join phases after the initial delay or the
    /// rebalance timeout, removes members whose session expired or who never synced, and
    /// expires offsets.
    pub fn tick(&mut self, now: Now) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        while let Some(key) = self.rb.timers.pop_due(now.mono) {
            match key {
                TimerKey::Heartbeat(group, member) => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        self.rb.expire_heartbeat(g, &member, &mut fx);
                    }
                }
                TimerKey::Join(group) => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        self.rb.on_join_timer(g, &mut fx);
                    }
                }
                TimerKey::Sync(group) => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        self.rb.expire_pending_sync(g, &mut fx);
                    }
                }
                TimerKey::OffsetExpiry => {
                    self.expire_offsets(&mut fx);
                    let interval = self.rb.config.offsets_retention_check_interval_ms.max(1);
                    self.rb.timers.schedule_in(TimerKey::OffsetExpiry, now.mono, interval);
                }
            }
        }
        self.finish(fx)
    }

    /// Reports the fate of persist batch `id`. Batches settle in the order they were issued:
    /// once every earlier batch is settled, a durable batch's records are replayed into memory
    /// and the replies waiting for it are released; a failed batch's waiting replies carry the
    /// mapped error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) and a failed leader
    /// assignment sends the group back to rebalancing. Unknown ids are ignored.
    pub fn persisted(
        &mut self,
        id: PersistId,
        result: Result<(), PersistError>,
        now: Now,
    ) -> Vec<Output> {
        let mut fx = Effects::new(now);
        if self.pending.report(id, result) {
            while let Some((write, result)) = self.pending.pop_settled() {
                if result.is_ok() {
                    for record in &write.records {
                        self.replay_durable(record, now);
                    }
                }
                for completion in write.completions {
                    self.complete(completion, result, &mut fx);
                }
            }
        }
        self.finish(fx)
    }

    /// Gives up the groups `gone` picks (the coordinator lost, or must load again, the
    /// `__consumer_offsets` partitions that keep them): their parked JoinGroup and SyncGroup
    /// requests are answered NOT_COORDINATOR and their state, offsets and timers are forgotten;
    /// every other group carries on untouched. Their records in batches still waiting to
    /// become durable are no longer replayed into memory once those settle (a load of their
    /// partition, taken after the batches settled, reads what was written); the replies
    /// waiting for those batches are answered as the batches settle, as the outcome of the
    /// write they waited for.
    pub fn unload_groups(&mut self, gone: impl Fn(&GroupId) -> bool) -> Vec<Output> {
        let mut out = Vec::new();
        let not_coordinator = GroupError::NotCoordinator;
        self.pending.forget_records(&gone);
        let ids: Vec<GroupId> = self.groups.keys().filter(|id| gone(id)).cloned().collect();
        for id in ids {
            let Some(group) = self.groups.remove(&id) else { continue };
            for m in group.members.values() {
                if let Some(parked) = m.awaiting_join {
                    let response = JoinResponse::error(m.id.clone(), not_coordinator);
                    out.push(Output::Reply(parked.request, Response::Join(response)));
                }
                if let Some(request) = m.awaiting_sync {
                    let response = SyncResponse::error(not_coordinator);
                    out.push(Output::Reply(request, Response::Sync(response)));
                }
            }
            self.rb.timers.cancel_group(&id);
        }
        self.offsets.remove_groups(&gone);
        out
    }

    /// Turns a call's effects into outputs: immediate replies first, then the batch to
    /// persist (whose completions wait for it), or — with nothing to persist — the
    /// completions at once.
    pub(super) fn finish(&mut self, mut fx: Effects) -> Vec<Output> {
        if fx.records.is_empty() {
            let completions = std::mem::take(&mut fx.completions);
            for completion in completions {
                self.complete(completion, Ok(()), &mut fx);
            }
        }
        if !fx.records.is_empty() {
            let records = std::mem::take(&mut fx.records);
            let completions = std::mem::take(&mut fx.completions);
            let id = self.pending.issue(records.clone(), completions);
            fx.outputs.push(Output::Persist { id, records });
        }
        fx.outputs
    }

    /// Arms the periodic offset expiry check if it is not armed.
    pub(super) fn arm_offset_expiry(&mut self, now: Now) {
        if !self.rb.timers.is_armed(&TimerKey::OffsetExpiry) {
            let interval = self.rb.config.offsets_retention_check_interval_ms.max(1);
            self.rb.timers.schedule_in(TimerKey::OffsetExpiry, now.mono, interval);
        }
    }

    /// Applies a durable record to memory. Offsets are exactly the replay of the durable log;
    /// live group metadata is already ahead of its records, except that a group tombstone
    /// finally removes a group being deleted.
    fn replay_durable(&mut self, record: &Record, now: Now) {
        match record {
            Record::Offset { group, partition, value: Some(value) } => {
                if !self.groups.contains_key(group) {
                    // As in Kafka's replay: offsets imply a (simple) group.
                    self.groups.insert(group.clone(), Group::new(group.clone(), now.wall));
                }
                self.offsets.put(group, partition.clone(), value.clone());
            }
            Record::Offset { group, partition, value: None } => {
                self.offsets.remove(group, partition);
            }
            Record::Group { group, value: None } => {
                if self.groups.get(group).is_some_and(|g| g.is(GroupState::Dead)) {
                    self.groups.remove(group);
                    self.rb.timers.cancel_group(group);
                }
            }
            Record::Group { value: Some(_), .. } => {}
        }
    }

    fn complete(
        &mut self,
        completion: Completion,
        result: Result<(), PersistError>,
        fx: &mut Effects,
    ) {
        match completion {
            Completion::Reply(request, response) => match result {
                Ok(()) => fx.reply(request, response),
                Err(e) => {
                    let commit = matches!(response, Response::Commit(_));
                    let error = if commit { e.commit_error() } else { e.group_error() };
                    fx.reply(request, response.failed(error))
                }
            },
            Completion::LeaderSync { group, generation, assignment } => {
                let Some(g) = self.groups.get_mut(&group) else { return };
                if !g.is(GroupState::CompletingRebalance) || g.generation != generation {
                    return;
                }
                match result {
                    Ok(()) => {
                        self.rb.set_and_propagate(g, &assignment, fx);
                        g.transition_to(GroupState::Stable, fx.now.wall);
                        tracing::info!(group = %g.id, %generation, "group stable");
                    }
                    Err(e) => {
                        self.rb.reset_and_propagate_error(g, e.group_error(), fx);
                        self.rb.maybe_prepare_rebalance_or_complete_join(g, fx);
                    }
                }
            }
            Completion::StaticReplace(replace) => self.complete_static_replace(replace, result, fx),
            Completion::Delete { group, state_since } => {
                let g = self.groups.get_mut(&group).filter(|g| g.is(GroupState::Dead));
                if let (Err(_), Some(g)) = (result, g) {
                    g.state = GroupState::Empty;
                    g.previous_state = GroupState::Dead;
                    g.state_since = state_since;
                }
            }
        }
    }

    fn complete_static_replace(
        &mut self,
        r: StaticReplace,
        result: Result<(), PersistError>,
        fx: &mut Effects,
    ) {
        let Some(g) = self.groups.get_mut(&r.group) else { return };
        let still_waiting = g
            .members
            .get(&r.new_id)
            .is_some_and(|m| m.awaiting_join.is_some_and(|p| p.request == r.request));
        if !still_waiting {
            // A rebalance answered the JoinGroup meanwhile; nothing is left to do.
            return;
        }
        let response = match result {
            Ok(()) => {
                if let Some(m) = g.members.get_mut(&r.new_id) {
                    m.awaiting_join = None;
                }
                let is_leader = g.leader.as_ref() == Some(&r.new_id);
                let mut response = Rebalancer::join_response(g, &r.new_id, r.version >= 9);
                if r.version >= 9 {
                    // KIP-814: the leader gets the members but must not reassign.
                    response.skip_assignment = is_leader;
                } else {
                    response.leader = r.leader_before.clone().unwrap_or_default();
                }
                response
            }
            Err(e) => {
                // Undo: the old member id holds the instance id again.
                if let Some(m) = g.members.get_mut(&r.new_id) {
                    m.protocols = r.old_protocols;
                    m.rebalance_timeout_ms = r.old_rebalance_timeout_ms;
                    m.session_timeout_ms = r.old_session_timeout_ms;
                    m.awaiting_join = None;
                }
                g.replace_static_member(&r.new_id, r.old_id.clone());
                self.rb.timers.cancel(&TimerKey::Heartbeat(g.id.clone(), r.new_id.clone()));
                self.rb.reschedule_heartbeat(g, &r.old_id, fx);
                let mut response = JoinResponse::error(MemberId::unknown(), e.group_error());
                response.generation = g.generation;
                response.protocol_type = g.protocol_type.clone();
                response.protocol_name = g.protocol_name.clone();
                response.leader = r.leader_before.unwrap_or_default();
                tracing::warn!(group = %g.id, instance = %r.instance_id, "static member replacement not persisted; reverted");
                response
            }
        };
        fx.reply(r.request, Response::Join(response));
    }
}
