//! A partition's part in replication on this broker: leader (with the sans-IO
//! [`LeaderReplica`] tracking followers, the ISR and the high watermark), follower of another
//! broker in some leader epoch, or not yet assigned. The catalog sets the role from the
//! committed metadata; produce, the leader's fetch handler and the follower's fetcher feed
//! it; `acks=all` waits on it.

use std::sync::MutexGuard;

use bytes::Bytes;

use super::damage::KnownDamage;
use super::{Acks, CompletionError, Partition, ProduceError};
use crate::controller::records::{BrokerEpoch, BrokerId, NO_LEADER};
use crate::io::Instant;
use crate::log::batch::parse_header;
use crate::log::{FlushPolicy, ReadError, Repair};
use crate::model::{LeaderEpoch, Offset};
use crate::replication::{
    AckStatus, Assignment, IsrProposal, LeaderConfig, LeaderReplica, LogEnds, ReplicationError,
};

/// What this broker is for the partition.
#[derive(Clone, Debug)]
pub enum Role {
    /// Not assigned yet (just opened).
    Unassigned,
    /// It leads in `epoch`.
    Leader {
        /// The leader epoch.
        epoch: LeaderEpoch,
        /// Followers, ISR and high watermark.
        replica: LeaderReplica,
    },
    /// It follows `leader` (−1: none yet) in `epoch`.
    Follower {
        /// The leader.
        leader: BrokerId,
        /// The leader epoch.
        epoch: LeaderEpoch,
    },
}

/// The role and the high watermark a follower last learned.
#[derive(Clone, Debug)]
pub struct ReplicaState {
    role: Role,
    /// The high watermark when not leading.
    follower_high_watermark: Offset,
    /// When the ISR change in flight was last sent.
    isr_asked_at: Option<Instant>,
    /// Where a read met a damaged batch since this broker took the lead (see
    /// [`Partition::damage_found`]).
    damage_seen: Option<Offset>,
    /// Where reads met damaged batches in this log, in any role: kept across role changes,
    /// forgotten once a cut removes them (see [`Partition::lasting_damage`]).
    pub(super) damage_known: KnownDamage,
}

/// How long an ISR change may go without its outcome reaching the image before it is sent
/// again.
pub const ISR_RESEND_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

impl ReplicaState {
    pub(super) fn new(high_watermark: Offset, damage_known: KnownDamage) -> ReplicaState {
        ReplicaState {
            role: Role::Unassigned,
            follower_high_watermark: high_watermark,
            isr_asked_at: None,
            damage_seen: None,
            damage_known,
        }
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> Offset {
        match &self.role {
            Role::Leader { replica, .. } => replica.high_watermark(),
            _ => self.follower_high_watermark,
        }
    }

    /// While this broker leads: its leader epoch, high watermark and the epoch's first offset.
    pub fn leading(&self) -> Option<Leading> {
        match &self.role {
            Role::Leader { epoch, replica } => Some(Leading {
                epoch: *epoch,
                high_watermark: replica.high_watermark(),
                epoch_start: replica.epoch_start(),
            }),
            _ => None,
        }
    }
}

/// A leader's view of its partition at one instant (see [`ReplicaState::leading`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leading {
    /// The leader epoch it leads in.
    pub epoch: LeaderEpoch,
    /// Its high watermark.
    pub high_watermark: Offset,
    /// The first offset of its epoch.
    pub epoch_start: Offset,
}

/// The partition as the controller committed it, for this broker to take its role from.
#[derive(Clone, Copy, Debug)]
pub struct Committed<'a> {
    /// The leader (−1: none).
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// The assignment.
    pub assignment: Assignment<'a>,
}

/// What a role change asks the caller to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Nothing changed that needs action.
    Unchanged,
    /// This broker now leads a new epoch: record the epoch in the log.
    BecameLeader(LeaderEpoch),
    /// This broker now follows `leader` in `epoch`: start a fetcher.
    BecameFollower {
        /// The leader.
        leader: BrokerId,
        /// The epoch.
        epoch: LeaderEpoch,
    },
}

impl Partition {
    pub(super) fn replica_state(&self) -> MutexGuard<'_, ReplicaState> {
        self.replica.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The role now.
    pub fn role(&self) -> Role {
        self.replica_state().role.clone()
    }

    /// Whether this broker leads the partition now, as its own role says. The committed
    /// metadata can name it leader a moment before the role is taken (the catalog applies
    /// changes one partition at a time): until then its high watermark is a follower's.
    pub fn leads(&self) -> bool {
        matches!(self.replica_state().role, Role::Leader { .. })
    }

    /// A read of this partition's log met a damaged batch at `offset` (one that fails its
    /// checks on every read: a latent sector error). While this broker leads, that asks for
    /// leadership to move to another in-sync replica, whose copy serves the batch to consumers
    /// and to followers catching up past it (see [`Partition::damage_while_leading`]).
    pub fn damage_found(&self, offset: Offset) {
        self.note_damage(offset);
        let mut state = self.replica_state();
        if matches!(state.role, Role::Leader { .. }) && state.damage_seen.is_none() {
            tracing::error!(partition = %self.tp, %offset, "damaged data in the log led here");
            state.damage_seen = Some(offset);
        }
    }

    /// Where a read met damage since this broker took the lead, or where the rebuild of its
    /// producer state passed over damage while a retry of the damaged batch may still come (it
    /// is refused here, where another replica may hold the batch: see [`Partition::produce`]),
    /// while it still leads.
    pub fn damage_while_leading(&self) -> Option<Offset> {
        let state = self.replica_state();
        if !matches!(state.role, Role::Leader { .. }) {
            return None;
        }
        state.damage_seen.or_else(|| self.producer_damage())
    }

    /// Records that this log holds a damaged batch at `offset` (met by a read or a compaction
    /// pass, in any role), without asking for leadership to move: see
    /// [`Partition::lasting_damage`].
    pub fn note_damage(&self, offset: Offset) {
        let start = self.log.log_start_offset();
        self.replica_state().damage_known.note(offset, start);
    }

    /// A read no client waits on met damage at `offset` here: another replica's read of a
    /// batch to repair its own copy with (see `fetcher::REPAIR_RACK_ID`), or the scrub's (see
    /// [`crate::scrub`]). Damage found so for the first time asks for leadership to move, as
    /// any read's does ([`Partition::damage_found`]): the controller then prefers a replica not
    /// known to be damaged, whose copy repairs the others. Damage known before is only noted:
    /// leadership already moved for it, or had nowhere better to go, and moving it again at
    /// every such read would hand it back and forth between damaged copies.
    ///
    /// `resume`, where the read that met it goes on past the damage, if known: damage noted at
    /// any offset from `offset` up to it is the same batch's (noted by a read from elsewhere in
    /// it, or from another offset of a compaction gap before it).
    pub fn damage_found_in_background(&self, offset: Offset, resume: Option<Offset>) {
        let end = resume.filter(|&r| r > offset).unwrap_or(Offset(offset.0.saturating_add(1)));
        if self.replica_state().damage_known.within(offset, end).is_some() {
            self.note_damage(offset);
        } else {
            self.damage_found(offset);
        }
    }

    /// Where this log is known to hold a damaged batch, in any role: a read or a compaction
    /// pass met it, or the rebuild of the producer state passed over it. Until the batch is
    /// repaired from the leader's copy ([`Partition::repair`]), while the broker runs, the
    /// controller is told in every heartbeat not to prefer this replica as leader: it would
    /// hand the partition over again at the first read of the batch. Forgotten once repaired or
    /// no longer in the log (cut, or deleted by retention); kept across a restart by the
    /// known-damage checkpoint ([`super::damage`]). Damage the producer state's rebuild passed
    /// over stays reported after a repair: the state still lacks what the batch held.
    pub fn lasting_damage(&self) -> Option<Offset> {
        let (start, end) = (self.log.log_start_offset(), self.log.log_end_offset());
        let known = self.replica_state().damage_known.within(start, end);
        let passed = self.producer_damage_passed().filter(|&at| at >= start && at < end);
        known.or(passed)
    }

    /// Forgets damage known at or past `end`: the log was cut there.
    pub(super) fn forget_damage_from(&self, end: Offset) {
        self.replica_state().damage_known.forget_from(end);
    }

    /// Where this log is known to hold damage below `upper` (the high watermark, below which
    /// the leader serves every batch): each offset a read or a compaction pass met damage at,
    /// and the last offset of the damaged batch the producer state's rebuild passed over. What
    /// a follower asks its leader to repair ([`Partition::repair`]).
    pub fn damage_to_repair(&self, upper: Offset) -> Vec<Offset> {
        let (start, end) = (self.log.log_start_offset(), self.log.log_end_offset().min(upper));
        let mut offsets = self.replica_state().damage_known.offsets();
        offsets.extend(self.producer_damage_passed());
        offsets.range(start..end.max(start)).copied().collect()
    }

    /// Writes `copy`, the leader's intact copy of a batch this log is known to hold damaged
    /// (see [`Partition::damage_to_repair`]), over this log's damaged one ([`Log::repair`]),
    /// and forgets the damage known in that batch, as in a batch found to read intact. Damage
    /// noted at an offset in a gap compaction left before the batch (where a read from it met
    /// the batch first) is forgotten too once a read from there meets the batch intact. A
    /// damaged batch right after a repaired one, which the read that noted this one walked past
    /// without a word, is noted, so that it is asked about too. The producer state is left as
    /// it is: if its rebuild passed over the batch, it still lacks what the batch held. The
    /// caller holds the follow lock and still follows.
    ///
    /// [`Log::repair`]: crate::log::Log::repair
    pub async fn repair(&self, copy: Bytes) -> Result<Repair, ReadError> {
        let repair = self.log.repair(copy).await?;
        let (base, last) = match repair {
            Repair::Repaired { base, last } | Repair::Intact { base, last } => (base, last),
            Repair::Earlier(_) | Repair::Mismatch(_) => return Ok(repair),
        };
        self.replica_state().damage_known.forget(base, last);
        let end = self.log.log_end_offset();
        let before: Vec<Offset> =
            self.replica_state().damage_known.offsets().range(..base).copied().collect();
        for at in before {
            let Ok(read) = self.log.read(at, 1, end).await else { continue };
            if parse_header(&read.records).is_ok_and(|h| h.base_offset() == base.0) {
                self.replica_state().damage_known.forget(at, at);
            }
        }
        let after = Offset(last.0 + 1);
        if let Err(ReadError::Corrupt { offset, .. }) = self.log.read(after, 1, end).await {
            self.note_damage(offset);
        }
        Ok(repair)
    }

    /// Whether this broker leads with another replica in the committed ISR.
    pub(super) fn isr_has_others(&self) -> bool {
        match &self.replica_state().role {
            Role::Leader { replica, .. } => replica.isr().len() > 1,
            _ => false,
        }
    }

    /// Whether this broker leads a partition assigned to other replicas too, in the ISR or not.
    pub(super) fn has_followers(&self) -> bool {
        match &self.replica_state().role {
            Role::Leader { replica, .. } => replica.has_followers(),
            _ => false,
        }
    }

    /// Whether this broker follows `leader` in `epoch` now (a fetcher checks before it writes).
    pub fn follows(&self, leader: BrokerId, epoch: LeaderEpoch) -> bool {
        matches!(self.replica_state().role, Role::Follower { leader: l, epoch: e } if l == leader && e == epoch)
    }

    fn leader_config(&self, min_insync_replicas: usize, lag: std::time::Duration) -> LeaderConfig {
        LeaderConfig {
            min_insync_replicas: min_insync_replicas.max(1),
            replica_lag_time_max: lag,
            durable_acks: self.log.config().flush_policy == FlushPolicy::Ack,
        }
    }

    /// Takes the role the committed metadata gives broker `me`: leader (a new [`LeaderReplica`]
    /// for a new epoch, or the committed ISR adopted within the same one) or follower.
    pub fn apply_committed(
        &self,
        me: BrokerId,
        committed: Committed<'_>,
        min_insync_replicas: usize,
        lag: std::time::Duration,
        now: Instant,
    ) -> Transition {
        self.set_leader_epoch(committed.leader_epoch);
        let config = self.leader_config(min_insync_replicas, lag);
        let mut state = self.replica_state();
        let mut moved = None;
        let transition = match &mut state.role {
            Role::Leader { epoch, replica } if *epoch == committed.leader_epoch => {
                if committed.leader == me {
                    replica.set_config(config);
                    let assignment = committed.assignment;
                    moved = replica.on_isr_committed(assignment.isr, assignment.partition_epoch);
                    if assignment.partition_epoch >= replica.partition_epoch() {
                        moved = replica.on_replicas_committed(assignment.replicas, now).or(moved);
                    }
                    Transition::Unchanged
                } else {
                    // Same epoch, another leader: cannot happen from a sane controller; step
                    // down.
                    state.damage_seen = None;
                    state.role =
                        Role::Follower { leader: committed.leader, epoch: committed.leader_epoch };
                    Transition::BecameFollower {
                        leader: committed.leader,
                        epoch: committed.leader_epoch,
                    }
                }
            }
            Role::Follower { leader, epoch }
                if *epoch == committed.leader_epoch && *leader == committed.leader =>
            {
                Transition::Unchanged
            }
            _ if committed.leader == me => {
                let end = self.log.log_end_offset();
                let hw = state.high_watermark().min(end);
                let ends = LogEnds {
                    log_end: end,
                    durable_end: self.log.durable_offset(),
                    high_watermark: hw,
                };
                let assignment = Assignment { epoch_start: end, ..committed.assignment };
                let replica = LeaderReplica::new(config, me, assignment, ends, now);
                if replica.high_watermark() > hw {
                    moved = Some(replica.high_watermark());
                }
                state.role = Role::Leader { epoch: committed.leader_epoch, replica };
                state.damage_seen = None;
                Transition::BecameLeader(committed.leader_epoch)
            }
            _ => {
                let hw = state.high_watermark();
                state.follower_high_watermark = hw;
                state.damage_seen = None;
                state.role =
                    Role::Follower { leader: committed.leader, epoch: committed.leader_epoch };
                if committed.leader == NO_LEADER {
                    Transition::Unchanged
                } else {
                    Transition::BecameFollower {
                        leader: committed.leader,
                        epoch: committed.leader_epoch,
                    }
                }
            }
        };
        drop(state);
        if let Some(hw) = moved {
            self.log.set_high_watermark(hw);
        }
        self.notify();
        transition
    }

    /// Refuses a produce unless this broker leads, and an `acks=all` one while the ISR is
    /// below `min.insync.replicas`; returns the epoch it leads in.
    pub(super) fn check_leader(&self, acks: Acks) -> Result<LeaderEpoch, ProduceError> {
        match &self.replica_state().role {
            Role::Leader { replica, epoch } => {
                if acks == Acks::All {
                    replica.check_acks_all()?;
                }
                Ok(*epoch)
            }
            _ => Err(ProduceError::NotLeader),
        }
    }

    /// Feeds the log's own end and durable end to the leader's state; persists and announces a
    /// moved high watermark.
    pub fn local_progress(&self) {
        let (end, durable) = (self.log.log_end_offset(), self.log.durable_offset());
        let moved = match &mut self.replica_state().role {
            Role::Leader { replica, .. } => {
                let a = replica.on_append(end);
                let b = replica.on_durable(durable);
                b.or(a)
            }
            _ => None,
        };
        if let Some(hw) = moved {
            self.log.set_high_watermark(hw);
        }
        // Followers long-poll for new data, not only for a moved high watermark.
        self.notify();
    }

    /// A follower `follower`, in the run with broker epoch `epoch` (if named; only its current
    /// run's fetches come here), whose log starts at `log_start` fetched from `offset`: the
    /// leader's high watermark to tell it.
    pub fn follower_fetched(
        &self,
        (follower, epoch): (BrokerId, Option<BrokerEpoch>),
        (offset, log_start): (Offset, Offset),
        now: Instant,
    ) -> Result<Offset, FollowerFetchError> {
        let (moved, started, hw) = match &mut self.replica_state().role {
            Role::Leader { replica, .. } => {
                let moved = replica.on_fetch(follower, (epoch, offset), now)?;
                let started = replica.on_follower_log_start(follower, log_start);
                (moved, started, replica.high_watermark())
            }
            _ => return Err(FollowerFetchError::NotLeader),
        };
        if let Some(hw) = moved {
            self.log.set_high_watermark(hw);
        }
        if moved.is_some() || started {
            self.notify();
        }
        Ok(hw)
    }

    /// Waits, while this broker leads (in the leader epoch it leads in now), until every
    /// replica that may be elected (the leader and the maximal ISR) has a log starting at or
    /// past `start`: records deleted below it then stay deleted whichever of them leads next.
    /// Returns the low watermark reached.
    pub async fn wait_low_watermark(&self, start: Offset) -> Result<Offset, CompletionError> {
        let mut leading = None;
        loop {
            let notified = self.replicated.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let own = self.log.durable_log_start_offset();
            let low = match &mut self.replica_state().role {
                Role::Leader { epoch, replica } if leading.is_none_or(|l| l == *epoch) => {
                    leading = Some(*epoch);
                    replica.on_log_start(own);
                    replica.low_watermark()
                }
                _ => return Err(CompletionError::NotLeader),
            };
            if low >= start {
                return Ok(low);
            }
            if let Some(offline) = self.log.offline() {
                return Err(CompletionError::Offline(offline));
            }
            notified.await;
        }
    }

    /// A follower learned the leader's high watermark `leader_hw`; its own is bounded by what
    /// it holds.
    pub fn follower_high_watermark(&self, leader_hw: Offset) {
        let held = match self.log.config().flush_policy {
            FlushPolicy::Ack => self.log.durable_offset(),
            FlushPolicy::Interval => self.log.log_end_offset(),
        };
        let mut state = self.replica_state();
        if !matches!(state.role, Role::Leader { .. }) {
            state.follower_high_watermark = leader_hw.min(held);
            drop(state);
            self.log.set_high_watermark(leader_hw.min(held));
        }
    }

    /// The ISR change to ask the controller for now (leader only), with the leader epoch it
    /// is made in: a new one, or the one in flight again once [`ISR_RESEND_AFTER`] has passed
    /// without its outcome reaching the image (the last call may have been lost, or may have
    /// committed: asking again is safe either way, as the controller refuses a stale change).
    pub fn isr_proposal(&self, now: Instant) -> Option<(LeaderEpoch, IsrProposal)> {
        let own_start = self.log.durable_log_start_offset();
        let mut state = self.replica_state();
        let state = &mut *state;
        let Role::Leader { epoch, replica } = &mut state.role else { return None };
        replica.on_log_start(own_start);
        if let Some(pending) = replica.pending() {
            let due = state
                .isr_asked_at
                .is_none_or(|at| now.saturating_duration_since(at) >= ISR_RESEND_AFTER);
            if !due {
                return None;
            }
            state.isr_asked_at = Some(now);
            return Some((*epoch, pending.clone()));
        }
        let proposal = replica.propose(now)?;
        state.isr_asked_at = Some(now);
        Some((*epoch, proposal))
    }

    /// The controller refused the ISR change in flight on its current state (not for being
    /// stale: then the image brings what changed, and that settles it): forget it, so that the
    /// next check may ask for another.
    pub fn isr_proposal_refused(&self) {
        let moved = match &mut self.replica_state().role {
            Role::Leader { replica, .. } => replica.on_refused(self.env.clock.now()),
            _ => None,
        };
        if let Some(hw) = moved {
            self.log.set_high_watermark(hw);
            self.notify();
        }
    }

    /// Waits until every in-sync replica holds the offsets below `end`.
    pub(super) async fn wait_replicated(
        &self,
        end: Offset,
        epoch: LeaderEpoch,
    ) -> Result<(), CompletionError> {
        loop {
            let notified = self.replicated.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let status = match &self.replica_state().role {
                Role::Leader { epoch: e, replica } if *e == epoch => replica.ack_status(end),
                _ => return Err(CompletionError::NotLeader),
            };
            match status {
                AckStatus::Done => return Ok(()),
                AckStatus::NotEnoughReplicasAfterAppend => {
                    return Err(CompletionError::NotEnoughReplicasAfterAppend);
                }
                AckStatus::Waiting => {}
            }
            if let Some(offline) = self.log.offline() {
                return Err(CompletionError::Offline(offline));
            }
            notified.await;
        }
    }

    pub(super) fn notify(&self) {
        self.replicated.notify_waiters();
        self.appended.notify_waiters();
    }
}

/// Why a follower's fetch was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FollowerFetchError {
    /// This broker does not lead the partition.
    #[error("not the leader")]
    NotLeader,
    /// The fetcher is no replica of the partition.
    #[error(transparent)]
    Replication(#[from] ReplicationError),
}
