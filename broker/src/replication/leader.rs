//! The leader's side of one partition's replication, sans-IO: what each follower has fetched,
//! the in-sync replica set (ISR), the high watermark, when an `acks=all` produce may be
//! answered, and which ISR change to ask the controller for.
//!
//! Inputs are the leader's own log end and durable end, each follower fetch (a fetch from offset
//! `o` means the follower holds every record below `o`; under `flush.policy=ack` a follower
//! fetches past a batch only once it has synced it, so `o` is also its durable end), the clock,
//! and ISR changes the controller committed. Outputs are the high watermark, answers to
//! `acks=all`, and ISR proposals. The shell does the I/O.
//!
//! The rules, after Kafka's (KIP-497 for the ISR in flight):
//! - The high watermark is the least end among the leader and every member of the *maximal*
//!   ISR: the committed ISR plus a member being added, and still including a member being
//!   removed until its removal commits. It never goes back, and it moves only while the
//!   committed ISR has at least `min.insync.replicas` members.
//! - `acks=all` is refused before the append when the ISR is below the minimum
//!   (NOT_ENOUGH_REPLICAS); it is answered once the high watermark passes the batch, or with
//!   NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum meanwhile.
//! - A follower leaves the ISR when it has not caught up to the leader's log end for
//!   `replica.lag.time.max.ms`; it joins when it has caught up to the high watermark and to the
//!   start of the current leader epoch, and its log starts no earlier than the leader's (so that
//!   records deleted before it joined stay deleted if it leads). One change is in flight at a
//!   time.
//! - The low watermark, which DeleteRecords waits for, is the least log start offset among the
//!   leader and every member of the maximal ISR: once it has passed an offset, any replica that
//!   may be elected has deleted the records below it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::controller::records::{BrokerEpoch, BrokerId};
use crate::io::Instant;
use crate::model::Offset;

/// The partition's replication settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    /// `min.insync.replicas`.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max: Duration,
    /// `flush.policy=ack`: the leader's own part of the high watermark is its durable end.
    pub durable_acks: bool,
}

/// How long after the controller refused to add a follower to the ISR the leader waits before
/// it asks again.
pub const ISR_ADD_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);

/// What the leader knows of one follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower holds every record below this offset (its last fetch offset).
    pub fetched: Offset,
    /// The last time a fetch of it reached the leader's log end.
    pub caught_up_at: Instant,
    /// The controller refused to add it to the ISR, and it has not fetched since: it is not
    /// proposed again until it does (a dead follower that looked caught up would otherwise be
    /// proposed over and over, each proposal holding back the high watermark while in flight).
    pub refused: bool,
    /// When the controller last refused to add it: it is not proposed again within
    /// [`ISR_ADD_RETRY_BACKOFF`] of that either, fetch or not (a follower whose log cannot take
    /// writes, out of room, fetches all the while, and each refusal costs a metadata commit).
    pub refused_at: Option<Instant>,
    /// The log start offset its last fetch reported (durable on the follower: it adopts the
    /// leader's start, checkpointed, before it says so). Zero until it has fetched.
    pub log_start: Offset,
    /// The broker epoch of the run whose fetches this state counts (KIP-903), if its fetches
    /// name one. A fetch from another run starts the state afresh: a broker that restarted,
    /// perhaps on a new disk, holds what its new run fetched, not what its old one did.
    pub epoch: Option<BrokerEpoch>,
}

impl FollowerState {
    /// A follower the leader has not heard from yet, given a full lag allowance from `now`.
    fn new(now: Instant) -> FollowerState {
        FollowerState {
            fetched: Offset(0),
            caught_up_at: now,
            refused: false,
            refused_at: None,
            log_start: Offset(0),
            epoch: None,
        }
    }
}

/// Where an `acks=all` produce stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckStatus {
    /// Every in-sync replica has the batch: answer success.
    Done,
    /// Not yet.
    Waiting,
    /// The ISR fell below `min.insync.replicas` while waiting: NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    NotEnoughReplicasAfterAppend,
}

/// Why the leader refuses something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    /// NOT_ENOUGH_REPLICAS: the ISR is smaller than `min.insync.replicas`.
    #[error("the ISR has {isr} members, fewer than min.insync.replicas {min}")]
    NotEnoughReplicas {
        /// ISR members now.
        isr: usize,
        /// The minimum.
        min: usize,
    },
    /// The fetching broker holds no replica of the partition.
    #[error("broker {0} is not a replica of this partition")]
    NotAReplica(BrokerId),
}

/// An ISR change for the controller to commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrProposal {
    /// The ISR asked for.
    pub isr: BTreeSet<BrokerId>,
    /// The partition epoch it is based on (the controller refuses a stale one).
    pub partition_epoch: i32,
    /// Each member added, with the broker epoch of the run whose fetches made it eligible:
    /// the controller refuses the change if that is no longer the broker's current run.
    pub joining: Vec<(BrokerId, BrokerEpoch)>,
}

/// The partition as the controller committed it when this broker became its leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment<'a> {
    /// Every replica, the leader included.
    pub replicas: &'a [BrokerId],
    /// The in-sync replicas.
    pub isr: &'a [BrokerId],
    /// The partition epoch (bumped by every change the controller commits).
    pub partition_epoch: i32,
    /// First offset of this leader epoch.
    pub epoch_start: Offset,
}

/// Where the leader's own log stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEnds {
    /// The offset after the last record.
    pub log_end: Offset,
    /// Everything below it is durable.
    pub durable_end: Offset,
    /// The high watermark the log recorded.
    pub high_watermark: Offset,
}

/// The leader's replication state for one partition in one leader epoch.
#[derive(Clone, Debug)]
pub struct LeaderReplica {
    config: LeaderConfig,
    leader: BrokerId,
    /// First offset of the current leader epoch.
    epoch_start: Offset,
    partition_epoch: i32,
    isr: BTreeSet<BrokerId>,
    /// An ISR change sent to the controller and not yet committed.
    pending: Option<IsrProposal>,
    followers: BTreeMap<BrokerId, FollowerState>,
    log_end: Offset,
    durable_end: Offset,
    high_watermark: Offset,
    /// The leader's own log start offset as checkpointed, as last told.
    log_start: Offset,
}

impl LeaderReplica {
    /// The state of broker `leader` that just became leader of a partition assigned as
    /// `assignment`, with its log at `ends`, its high watermark already advanced as far as
    /// they allow. Every follower gets a full lag allowance from `now`.
    pub fn new(
        config: LeaderConfig,
        leader: BrokerId,
        assignment: Assignment<'_>,
        ends: LogEnds,
        now: Instant,
    ) -> LeaderReplica {
        let LogEnds { log_end, durable_end, high_watermark } = ends;
        let followers = assignment
            .replicas
            .iter()
            .filter(|&&r| r != leader)
            .map(|&r| (r, FollowerState::new(now)))
            .collect();
        let mut isr: BTreeSet<BrokerId> = assignment.isr.iter().copied().collect();
        isr.insert(leader);
        let mut replica = LeaderReplica {
            config,
            leader,
            epoch_start: assignment.epoch_start,
            partition_epoch: assignment.partition_epoch,
            isr,
            pending: None,
            followers,
            log_end,
            durable_end: durable_end.min(log_end),
            high_watermark: high_watermark.min(log_end),
            log_start: Offset(0),
        };
        // What the ends already allow (a leader alone in its ISR with a synced tail past the
        // high watermark it was given): otherwise the first reads of the new epoch would show
        // a high watermark below one acknowledged before.
        replica.advance();
        replica
    }

    /// Adopts changed settings (the topic's configuration changed).
    pub fn set_config(&mut self, config: LeaderConfig) {
        self.config = config;
    }

    /// The controller refused the ISR change in flight: forgets it, so that the next
    /// [`LeaderReplica::propose`] may ask again, but not to add a follower it refused until that
    /// follower fetches again, nor within [`ISR_ADD_RETRY_BACKOFF`] of `now`. Returns the new
    /// high watermark if it moved (a member being added no longer bounds it).
    pub fn on_refused(&mut self, now: Instant) -> Option<Offset> {
        if let Some(pending) = self.pending.take() {
            for joining in pending.isr.difference(&self.isr) {
                if let Some(f) = self.followers.get_mut(joining) {
                    f.refused = true;
                    f.refused_at = Some(now);
                }
            }
        }
        self.advance()
    }

    /// The high watermark: consumers read below it, and `acks=all` waits for it.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// The first offset of this leader epoch.
    pub fn epoch_start(&self) -> Offset {
        self.epoch_start
    }

    /// The partition epoch of the last change adopted.
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// The committed ISR.
    pub fn isr(&self) -> &BTreeSet<BrokerId> {
        &self.isr
    }

    /// Whether the partition is assigned to other replicas than the leader.
    pub fn has_followers(&self) -> bool {
        !self.followers.is_empty()
    }

    /// What the leader knows of `follower`.
    pub fn follower(&self, follower: BrokerId) -> Option<FollowerState> {
        self.followers.get(&follower).copied()
    }

    /// The ISR change in flight, if any.
    pub fn pending(&self) -> Option<&IsrProposal> {
        self.pending.as_ref()
    }

    /// The leader appended: its log now ends at `log_end`. Returns the new high watermark if
    /// it moved.
    pub fn on_append(&mut self, log_end: Offset) -> Option<Offset> {
        self.log_end = self.log_end.max(log_end);
        self.advance()
    }

    /// The leader's log is durable up to `durable_end`.
    pub fn on_durable(&mut self, durable_end: Offset) -> Option<Offset> {
        self.durable_end = self.durable_end.max(durable_end.min(self.log_end));
        self.advance()
    }

    /// `follower`, in the run with broker epoch `epoch` (if its fetch names one), fetched from
    /// `offset` at `now`. Returns the new high watermark if it moved. The caller passes only
    /// fetches of the follower's current run (an older run's, still held in a long poll, would
    /// otherwise swing the state back and forth).
    pub fn on_fetch(
        &mut self,
        follower: BrokerId,
        (epoch, offset): (Option<BrokerEpoch>, Offset),
        now: Instant,
    ) -> Result<Option<Offset>, ReplicationError> {
        let log_end = self.log_end;
        let state =
            self.followers.get_mut(&follower).ok_or(ReplicationError::NotAReplica(follower))?;
        if epoch.is_some() && epoch != state.epoch {
            // Another run: what the last one fetched, and the start it reported, are gone.
            state.epoch = epoch;
            state.log_start = Offset(0);
        }
        // A follower that truncated (a new leader epoch) may fetch from lower than before.
        state.fetched = offset.min(log_end);
        state.refused = false;
        if offset >= log_end {
            state.caught_up_at = now;
        }
        Ok(self.advance())
    }

    /// `follower` reported its log start offset `start` in a fetch. Returns whether it moved.
    /// It only moves forward: a follower's start never goes back (it is checkpointed before it
    /// is reported), but a long poll of an older fetch, still held, may report an older one,
    /// and re-evaluating the two in turn must not make it swing (each swing wakes the other).
    pub fn on_follower_log_start(&mut self, follower: BrokerId, start: Offset) -> bool {
        match self.followers.get_mut(&follower) {
            Some(f) if start > f.log_start => {
                f.log_start = start;
                true
            }
            _ => false,
        }
    }

    /// The leader's own log start offset, as checkpointed, moved to `start` (retention or
    /// DeleteRecords).
    pub fn on_log_start(&mut self, start: Offset) {
        self.log_start = start;
    }

    /// The least log start offset among the leader and the maximal ISR.
    pub fn low_watermark(&self) -> Offset {
        self.maximal_isr()
            .iter()
            .filter(|&&r| r != self.leader)
            .map(|r| self.followers.get(r).map_or(Offset(0), |f| f.log_start))
            .fold(self.log_start, Offset::min)
    }

    /// Refuses an `acks=all` produce up front when the ISR is below the minimum.
    pub fn check_acks_all(&self) -> Result<(), ReplicationError> {
        if self.isr.len() < self.config.min_insync_replicas {
            return Err(ReplicationError::NotEnoughReplicas {
                isr: self.isr.len(),
                min: self.config.min_insync_replicas,
            });
        }
        Ok(())
    }

    /// Where an `acks=all` produce whose batch ends before `end` stands.
    pub fn ack_status(&self, end: Offset) -> AckStatus {
        if self.high_watermark >= end {
            AckStatus::Done
        } else if self.isr.len() < self.config.min_insync_replicas {
            AckStatus::NotEnoughReplicasAfterAppend
        } else {
            AckStatus::Waiting
        }
    }

    /// The ISR change to ask the controller for now, if any: drop followers that lagged too
    /// long, or add one that caught up. Nothing while a change is in flight.
    pub fn propose(&mut self, now: Instant) -> Option<IsrProposal> {
        if self.pending.is_some() {
            return None;
        }
        let lagging: BTreeSet<BrokerId> = self
            .isr
            .iter()
            .copied()
            .filter(|&r| r != self.leader)
            .filter(|r| {
                self.followers.get(r).is_some_and(|f| {
                    now.saturating_duration_since(f.caught_up_at) > self.config.replica_lag_time_max
                })
            })
            .collect();
        let mut epochs = Vec::new();
        let isr: BTreeSet<BrokerId> = if !lagging.is_empty() {
            self.isr.difference(&lagging).copied().collect()
        } else {
            let ready = self.high_watermark.max(self.epoch_start);
            let (joining, state) = self.followers.iter().find(|(r, f)| {
                !self.isr.contains(r)
                    && !f.refused
                    && f.refused_at
                        .is_none_or(|at| now.saturating_duration_since(at) >= ISR_ADD_RETRY_BACKOFF)
                    && f.fetched >= ready
                    && f.log_start >= self.log_start
            })?;
            epochs.extend(state.epoch.map(|e| (*joining, e)));
            let mut isr = self.isr.clone();
            isr.insert(*joining);
            isr
        };
        let proposal = IsrProposal { isr, partition_epoch: self.partition_epoch, joining: epochs };
        self.pending = Some(proposal.clone());
        Some(proposal)
    }

    /// The controller committed `isr` at `partition_epoch` (the image changed). Returns the new
    /// high watermark if it moved.
    pub fn on_isr_committed(&mut self, isr: &[BrokerId], partition_epoch: i32) -> Option<Offset> {
        if partition_epoch >= self.partition_epoch {
            self.isr = isr.iter().copied().collect();
            self.isr.insert(self.leader);
            self.partition_epoch = partition_epoch;
        }
        // The change in flight is settled once anything newer than its base is committed (it,
        // or a change that makes it stale); until then it still counts in the maximal ISR.
        if self.pending.as_ref().is_some_and(|p| partition_epoch > p.partition_epoch) {
            self.pending = None;
        }
        self.advance()
    }

    /// Adopts the replica list the controller committed within this leader epoch (a
    /// reassignment adds replicas, and drops replicas once the ISR holds every replica it moves
    /// to): a replica added is followed from nothing fetched, one dropped is forgotten. Returns
    /// the new high watermark if it moved. Call after [`LeaderReplica::on_isr_committed`] with
    /// the same change, so that a dropped replica is out of the ISR first.
    pub fn on_replicas_committed(&mut self, replicas: &[BrokerId], now: Instant) -> Option<Offset> {
        self.followers.retain(|r, _| replicas.contains(r));
        for &r in replicas.iter().filter(|&&r| r != self.leader) {
            self.followers.entry(r).or_insert_with(|| FollowerState::new(now));
        }
        self.advance()
    }

    /// Members whose ends bound the high watermark: the committed ISR plus any member being
    /// added (one being removed still counts until its removal commits).
    fn maximal_isr(&self) -> BTreeSet<BrokerId> {
        let mut out = self.isr.clone();
        if let Some(p) = &self.pending {
            out.extend(p.isr.iter().copied());
        }
        out
    }

    fn advance(&mut self) -> Option<Offset> {
        if self.isr.len() < self.config.min_insync_replicas {
            return None;
        }
        let own = if self.config.durable_acks { self.durable_end } else { self.log_end };
        let candidate = self
            .maximal_isr()
            .iter()
            .filter(|&&r| r != self.leader)
            .map(|r| self.followers.get(r).map_or(Offset(0), |f| f.fetched))
            .fold(own, Offset::min);
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            Some(candidate)
        } else {
            None
        }
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
