//! Rebuilding the coordinator from `__consumer_offsets` when it takes over a partition (start-up
//! or fail-over).
//!
//! Records are replayed in log order, newest value per key winning, tombstones deleting. Like
//! Kafka, a group comes back with its last persisted generation, protocol, leader and members
//! (with their assignments): a Stable group stays Stable, and its members keep heartbeating to
//! the new coordinator without a rebalance — each gets a fresh session timeout from the load,
//! and those that have gone away are expired as usual.

use std::collections::BTreeSet;

use super::coordinator::GroupCoordinator;
use super::effects::Effects;
use super::group::Group;
use super::member::Member;
use super::record::{GroupMetadata, Record};
use super::responses::Output;
use super::types::{GroupId, GroupState, MemberId, Now, Protocol};

impl GroupCoordinator {
    /// Replays `records` (in log order: one `__consumer_offsets` partition's) into this
    /// coordinator, then restarts the session timer of every member of the groups they
    /// restore. Meant for groups this coordinator does not hold: a fresh coordinator's, or
    /// those [`GroupCoordinator::unload_groups`] gave up. Other groups are left as they are.
    pub fn load(&mut self, records: impl IntoIterator<Item = Record>, now: Now) -> Vec<Output> {
        let mut fx = Effects::new(now);
        let mut loaded = BTreeSet::new();
        for record in records {
            if !loaded.contains(record.group()) {
                loaded.insert(record.group().clone());
            }
            self.replay_loaded(record, now);
        }
        for id in loaded {
            let Some(g) = self.groups.get_mut(&id) else { continue };
            let members: Vec<MemberId> = g.members.keys().cloned().collect();
            for m in &members {
                self.rb.reschedule_heartbeat(g, m, &fx);
            }
            if g.members.len() > self.rb.config.group_members_max {
                // group.max.size was lowered: rebalance so the excess members are refused.
                self.rb.prepare_rebalance(g, &mut fx);
            }
        }
        self.arm_offset_expiry(now);
        self.finish(fx)
    }

    fn replay_loaded(&mut self, record: Record, now: Now) {
        match record {
            Record::Offset { group, partition, value: Some(value) } => {
                if !self.groups.contains_key(&group) {
                    // Offsets without group metadata: a simple consumer's group.
                    self.groups.insert(group.clone(), Group::new(group.clone(), now.wall));
                }
                self.offsets.put(&group, partition, value);
            }
            Record::Offset { group, partition, value: None } => {
                self.offsets.remove(&group, &partition)
            }
            Record::Group { group, value: None } => {
                self.groups.remove(&group);
                self.rb.timers.cancel_group(&group);
            }
            Record::Group { group, value: Some(metadata) } => {
                self.rb.timers.cancel_group(&group);
                let restored = restore_group(group.clone(), metadata, now);
                self.groups.insert(group, restored);
            }
        }
    }
}

/// A group as its metadata record describes it: Stable with its members, or Empty.
fn restore_group(id: GroupId, v: GroupMetadata, now: Now) -> Group {
    let mut g = Group::new(id, now.wall);
    let protocol_name = v.protocol.clone().unwrap_or_default();
    for m in v.members {
        g.add(Member {
            id: m.member_id,
            instance_id: m.instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            // Records from before rebalance timeouts existed carry −1.
            rebalance_timeout_ms: if m.rebalance_timeout_ms < 0 {
                m.session_timeout_ms
            } else {
                m.rebalance_timeout_ms
            },
            session_timeout_ms: m.session_timeout_ms,
            protocol_type: v.protocol_type.clone(),
            protocols: vec![Protocol::new(protocol_name.clone(), m.subscription)],
            assignment: m.assignment,
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            joined_seq: 0,
        });
    }
    g.state = if g.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
    g.previous_state = GroupState::Dead;
    g.state_since = v.current_state_timestamp;
    g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
    g.protocol_name = v.protocol;
    g.generation = v.generation;
    g.leader = v.leader.filter(|l| g.members.contains_key(l));
    if g.leader.is_none() {
        g.leader = g.members.keys().next().cloned();
    }
    g.subscribed_topics = g.compute_subscribed_topics();
    g
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
