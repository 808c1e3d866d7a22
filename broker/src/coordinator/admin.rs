//! DescribeGroups, ListGroups and DeleteGroups: the administrative view of the groups (and the
//! figures the metrics report of them).
//!
//! Deleting a group is two-phase: the group turns Dead at once (so nothing can join or commit
//! while the tombstones are in flight) and disappears when they are durable; if they cannot
//! be persisted it comes back Empty.

use std::collections::BTreeSet;

use super::coordinator::GroupCoordinator;
use super::effects::{Completion, Effects};
use super::error::GroupError;
use super::join::validate_stored_group_id;
use super::record::Record;
use super::responses::{
    DeleteGroupsResponse, DescribedGroup, DescribedMember, ListedGroup, Output, Response,
};
use super::types::{Generation, GroupId, GroupState, Now, RequestId};
use crate::model::{Offset, TopicPartition};

/// One group as the metrics report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFigures {
    /// The group's id.
    pub id: GroupId,
    /// Its members.
    pub members: usize,
    /// Its committed offsets, by partition (as many as the series limit left room for).
    pub offsets: Vec<(TopicPartition, Offset)>,
}

/// The groups as the metrics report them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupsSummary {
    /// How many groups are in each state but Dead.
    pub states: [(GroupState, usize); 4],
    /// The groups, in id order, with their members and offsets, up to the series limit.
    pub groups: Vec<GroupFigures>,
    /// Series (a group's members, or one of its committed offsets) left out past the limit.
    pub omitted: usize,
}

impl GroupCoordinator {
    /// DescribeGroups: each group's state, protocol and members (metadata only when Stable, as
    /// in Kafka). Unknown groups are described as Dead.
    pub fn describe_groups(&self, ids: &[GroupId]) -> Vec<DescribedGroup> {
        ids.iter()
            .map(|id| match self.groups.get(id) {
                None => DescribedGroup {
                    group_id: id.clone(),
                    state: GroupState::Dead,
                    protocol_type: String::new(),
                    protocol_data: String::new(),
                    generation: Generation::NONE,
                    members: Vec::new(),
                },
                Some(g) => {
                    let stable = g.is(GroupState::Stable);
                    let protocol = g.protocol_name.clone().unwrap_or_default();
                    DescribedGroup {
                        group_id: id.clone(),
                        state: g.state,
                        protocol_type: g.protocol_type.clone().unwrap_or_default(),
                        protocol_data: if stable { protocol.clone() } else { String::new() },
                        generation: g.generation,
                        members: g
                            .members
                            .values()
                            .map(|m| DescribedMember {
                                member_id: m.id.clone(),
                                instance_id: m.instance_id.clone(),
                                client_id: m.client_id.clone(),
                                client_host: m.client_host.clone(),
                                metadata: if stable {
                                    m.metadata(&protocol).cloned().unwrap_or_default()
                                } else {
                                    Default::default()
                                },
                                assignment: m.assignment.clone(),
                            })
                            .collect(),
                    }
                }
            })
            .collect()
    }

    /// The groups not being deleted that `served` picks: how many are in each state, and each
    /// one's members and committed offsets, as one series each, up to `series_max` series.
    pub fn figures(&self, served: impl Fn(&GroupId) -> bool, series_max: usize) -> GroupsSummary {
        let mut summary = GroupsSummary {
            states: [
                (GroupState::Empty, 0),
                (GroupState::PreparingRebalance, 0),
                (GroupState::CompletingRebalance, 0),
                (GroupState::Stable, 0),
            ],
            groups: Vec::new(),
            omitted: 0,
        };
        let mut room = series_max;
        for g in self.groups.values().filter(|g| !g.is(GroupState::Dead) && served(&g.id)) {
            if let Some((_, count)) = summary.states.iter_mut().find(|(s, _)| *s == g.state) {
                *count += 1;
            }
            let offsets = self.offsets.group(&g.id);
            let committed = offsets.map_or(0, |o| o.len());
            if room == 0 {
                summary.omitted += 1 + committed;
                continue;
            }
            room -= 1;
            let taken = committed.min(room);
            room -= taken;
            summary.omitted += committed - taken;
            summary.groups.push(GroupFigures {
                id: g.id.clone(),
                members: g.members.len(),
                offsets: offsets
                    .into_iter()
                    .flatten()
                    .take(taken)
                    .map(|(tp, c)| (tp.clone(), c.offset))
                    .collect(),
            });
        }
        summary
    }

    /// ListGroups: every group (in id order) whose state is in `states`, or all if `states`
    /// is empty. Groups being deleted are not listed.
    pub fn list_groups(&self, states: &[GroupState]) -> Vec<ListedGroup> {
        self.groups
            .values()
            .filter(|g| !g.is(GroupState::Dead))
            .filter(|g| states.is_empty() || states.contains(&g.state))
            .map(|g| ListedGroup {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            })
            .collect()
    }

    /// Handles DeleteGroups; the reply waits for the tombstones. Per group: INVALID_GROUP_ID,
    /// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP.
    pub fn delete_groups(
        &mut self,
        request: RequestId,
        ids: Vec<GroupId>,
        now: Now,
    ) -> Vec<Output> {
        let mut fx = Effects::new(now);
        self.arm_offset_expiry(now);
        let mut groups = Vec::with_capacity(ids.len());
        for id in ids {
            let result = validate_stored_group_id(id.as_str()).and_then(|()| {
                match self.groups.get(&id).map(|g| g.state) {
                    None | Some(GroupState::Dead) => Err(GroupError::GroupIdNotFound),
                    Some(GroupState::Empty) => Ok(()),
                    Some(_) => Err(GroupError::NonEmptyGroup),
                }
            });
            if result.is_ok() {
                self.begin_delete(&id, &mut fx);
            }
            groups.push((id, result.err()));
        }
        fx.reply_when_durable(request, Response::DeleteGroups(DeleteGroupsResponse { groups }));
        self.finish(fx)
    }

    /// Marks an Empty group Dead and persists tombstones for it and for every offset it has —
    /// including commits still on their way to disk, so none resurfaces after a reload.
    pub(super) fn begin_delete(&mut self, id: &GroupId, fx: &mut Effects) {
        let Some(g) = self.groups.get_mut(id) else { return };
        let mut partitions: BTreeSet<_> = self.pending.pending_offsets(id).into_iter().collect();
        if let Some(offsets) = self.offsets.group(id) {
            partitions.extend(offsets.keys().cloned());
        }
        for partition in partitions {
            fx.persist(Record::Offset { group: id.clone(), partition, value: None });
        }
        fx.persist(Record::Group { group: id.clone(), value: None });
        let state_since = g.state_since;
        g.transition_to(GroupState::Dead, fx.now.wall);
        g.pending_members.clear();
        g.join_timer = None;
        self.rb.timers.cancel_group(id);
        fx.on_durable(Completion::Delete { group: id.clone(), state_since });
    }
}
