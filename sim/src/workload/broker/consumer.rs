//! A consumer task: a member of [`super::GROUP`] that joins (the leader deals partitions round
//! robin), reads its partitions from the committed offsets, heartbeats, commits now and then,
//! sometimes rewinds a partition and commits the lower offset, and sometimes leaves and joins
//! again as a new member. Every assignment, fetch, commit and committed-offset read goes into
//! the history.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use weir::io::{Env, Instant};

use super::setup::ConsumerSpec;
use super::{GROUP, LiveGuard, Shared};
use crate::checker::history::{Assignment, OffsetRead, Tp};
use crate::client::assignment::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, round_robin,
};
use crate::client::group::{Joined, MemberConfig};
use crate::client::{Client, ClientError, codes};

/// `session.timeout.ms` (the broker's minimum).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// How long the coordinator waits for members to rejoin.
pub const REBALANCE_TIMEOUT: Duration = Duration::from_secs(6);
/// Between heartbeats.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// Longest pause between commits.
pub const COMMIT_INTERVAL_MS_MAX: u64 = 2_000;
/// How long a fetch waits for records.
pub const FETCH_WAIT: Duration = Duration::from_millis(300);
/// Pause after a failed call.
pub const BACKOFF: Duration = Duration::from_millis(200);
/// Longest stay in the group before leaving for a while (drawn anew at every join).
pub const STAY_MS_MAX: u64 = 40_000;
/// Longest time between rewinds of a partition (each followed by a commit of the lower offset).
pub const REWIND_INTERVAL_MS_MAX: u64 = 15_000;
/// Longest absence after leaving.
pub const ABSENCE_MS_MAX: u64 = 3_000;
/// Most records a rewind goes back.
pub const REWIND_RECORDS_MAX: u64 = 20;

/// What the member does after its poll loop ends.
enum Next {
    /// Join again with the same member id.
    Rejoin,
    /// Join again as a new member.
    Restart,
    /// Stop consuming.
    Stop,
}

struct Member {
    env: Env,
    client: Client,
    shared: Shared,
    name: String,
    config: MemberConfig,
    member_id: String,
    generation: i32,
    assigned: Vec<Tp>,
    positions: BTreeMap<Tp, i64>,
    committed: BTreeMap<Tp, i64>,
}

/// Runs a consumer until told to stop, then commits and leaves.
pub(crate) async fn run(env: Env, shared: Shared, spec: ConsumerSpec) {
    let _live = LiveGuard::new(&shared.consumers_live);
    let config = MemberConfig {
        group: GROUP.to_owned(),
        session_timeout: SESSION_TIMEOUT,
        rebalance_timeout: REBALANCE_TIMEOUT,
    };
    let mut m = Member {
        client: Client::new(env.clone(), shared.broker, &spec.name),
        env,
        shared,
        name: spec.name,
        config,
        member_id: String::new(),
        generation: -1,
        assigned: Vec::new(),
        positions: BTreeMap::new(),
        committed: BTreeMap::new(),
    };
    while !m.stopping() {
        if !m.join().await {
            m.env.clock.sleep(BACKOFF).await;
            continue;
        }
        match m.consume().await {
            Next::Rejoin => {}
            Next::Restart => m.member_id.clear(),
            Next::Stop => break,
        }
    }
    if !m.member_id.is_empty() {
        m.commit().await;
        let _ = m.client.leave_group(GROUP, &m.member_id).await;
    }
}

impl Member {
    fn stopping(&self) -> bool {
        self.shared.stop_consuming.load(Ordering::Relaxed)
    }

    /// A random instant up to `ms_max` from now.
    fn after(&self, ms_max: u64) -> Instant {
        self.env.clock.now() + Duration::from_millis(self.env.entropy.below(ms_max))
    }

    fn anomaly(&self, what: String) {
        self.shared.with_history(|h| h.anomalies.push(format!("{}: {what}", self.name)));
    }

    /// Joins and syncs a generation and loads committed positions. False to try again.
    async fn join(&mut self) -> bool {
        if let Ok(c) = self.client.find_coordinator(GROUP).await
            && (c.host != self.shared.broker.ip().to_string()
                || c.port != i32::from(self.shared.broker.port()))
        {
            self.anomaly(format!("FindCoordinator named {}:{}", c.host, c.port));
        }
        let topics: Vec<String> = self.shared.topics.iter().map(|t| t.name.clone()).collect();
        let Ok(subscription) = encode_subscription(&topics) else { return false };
        let joined = match self.client.join_group(&self.config, &self.member_id, subscription).await
        {
            Ok(joined) => joined,
            Err(e) => return self.membership_error(&e),
        };
        self.member_id = joined.member_id.clone();
        let assignments = if joined.is_leader() { self.assign(&joined) } else { Vec::new() };
        let sent = self.shared.with_history(|h| h.tick());
        let bytes = match self.client.sync_group(&self.config, &joined, assignments).await {
            Ok(bytes) => bytes,
            Err(e) => return self.membership_error(&e),
        };
        let partitions = match decode_assignment(&bytes) {
            Ok(partitions) => partitions,
            Err(e) => {
                self.anomaly(format!("undecodable assignment: {e}"));
                return false;
            }
        };
        self.shared.with_history(|h| {
            let at = h.tick();
            h.assignments.push(Assignment {
                group: GROUP.to_owned(),
                generation: joined.generation,
                member: joined.member_id.clone(),
                partitions: partitions.clone(),
                sent,
                at,
            });
        });
        self.generation = joined.generation;
        self.assigned = partitions;
        self.positions.clear();
        self.committed.clear();
        self.load_positions().await
    }

    /// Handles a failed join or sync: forgets the member id if the coordinator did. Always
    /// false (join again).
    fn membership_error(&mut self, error: &ClientError) -> bool {
        tracing::debug!("{}: membership: {error}", self.name);
        if error.code() == Some(codes::UNKNOWN_MEMBER_ID) {
            self.member_id.clear();
        }
        false
    }

    /// The leader's assignment: every member's subscription, dealt round robin.
    fn assign(&self, joined: &Joined) -> Vec<(String, bytes::Bytes)> {
        let mut subscriptions = BTreeMap::new();
        for (member, metadata) in &joined.members {
            match decode_subscription(metadata) {
                Ok(topics) => {
                    subscriptions.insert(member.clone(), topics);
                }
                Err(e) => self.anomaly(format!("member {member}'s subscription: {e}")),
            }
        }
        let counts: BTreeMap<String, i32> =
            self.shared.topics.iter().map(|t| (t.name.clone(), t.partitions)).collect();
        round_robin(&subscriptions, &counts)
            .into_iter()
            .filter_map(|(member, tps)| encode_assignment(&tps).ok().map(|b| (member, b)))
            .collect()
    }

    /// Positions from the committed offsets (0 where none: the log never loses its start).
    async fn load_positions(&mut self) -> bool {
        if self.assigned.is_empty() {
            return true;
        }
        let sent = self.shared.with_history(|h| h.tick());
        let Ok(offsets) = self.client.offset_fetch(GROUP, &self.assigned).await else {
            return false;
        };
        self.shared.with_history(|h| {
            let received = h.tick();
            for (tp, &offset) in &offsets {
                let read =
                    OffsetRead { group: GROUP.to_owned(), tp: tp.clone(), offset, sent, received };
                h.offset_reads.push(read);
            }
        });
        for tp in &self.assigned {
            let committed = offsets.get(tp).copied().unwrap_or(-1);
            self.positions.insert(tp.clone(), committed.max(0));
            if committed >= 0 {
                self.committed.insert(tp.clone(), committed);
            }
        }
        true
    }

    /// Polls until the generation ends or the member is told to stop.
    async fn consume(&mut self) -> Next {
        let mut next_heartbeat = self.env.clock.now() + HEARTBEAT_INTERVAL;
        let mut next_commit = self.next_commit();
        let leave_at = self.after(STAY_MS_MAX);
        let mut next_rewind = self.after(REWIND_INTERVAL_MS_MAX);
        loop {
            if self.stopping() {
                return Next::Stop;
            }
            if self.env.clock.now() >= next_heartbeat {
                if let Some(next) = self.heartbeat().await {
                    return next;
                }
                next_heartbeat = self.env.clock.now() + HEARTBEAT_INTERVAL;
            }
            if self.env.clock.now() >= leave_at {
                return self.leave().await;
            }
            if self.env.clock.now() >= next_rewind {
                next_rewind = self.after(REWIND_INTERVAL_MS_MAX);
                // Commit the lower offset at once, before a fetch moves past it again.
                self.rewind();
                if let Some(next) = self.commit().await {
                    return next;
                }
            }
            if self.assigned.is_empty() {
                self.env.clock.sleep(FETCH_WAIT).await;
            } else {
                self.fetch().await;
            }
            if self.env.clock.now() >= next_commit {
                if let Some(next) = self.commit().await {
                    return next;
                }
                next_commit = self.next_commit();
            }
        }
    }

    fn next_commit(&self) -> Instant {
        self.after(COMMIT_INTERVAL_MS_MAX)
    }

    /// A heartbeat; `Some` when the generation is over.
    async fn heartbeat(&mut self) -> Option<Next> {
        match self.client.heartbeat(GROUP, self.generation, &self.member_id).await {
            Ok(()) => None,
            Err(ClientError::Kafka(codes::REBALANCE_IN_PROGRESS)) => {
                // As Kafka's consumer does on revocation: commit, then rejoin.
                Some(self.commit().await.unwrap_or(Next::Rejoin))
            }
            Err(ClientError::Kafka(codes::ILLEGAL_GENERATION)) => Some(Next::Rejoin),
            Err(ClientError::Kafka(codes::UNKNOWN_MEMBER_ID)) => Some(Next::Restart),
            Err(e) => {
                tracing::debug!("{}: heartbeat: {e}", self.name);
                None
            }
        }
    }

    /// Commits, leaves, stays away a while; then joins as a new member.
    async fn leave(&mut self) -> Next {
        self.commit().await;
        let _ = self.client.leave_group(GROUP, &self.member_id).await;
        self.env.clock.sleep_until(self.after(ABSENCE_MS_MAX)).await;
        Next::Restart
    }

    /// Moves one partition's position back a little.
    fn rewind(&mut self) {
        let at = self.env.entropy.below(self.assigned.len().max(1) as u64) as usize;
        let Some(tp) = self.assigned.get(at) else { return };
        if let Some(position) = self.positions.get_mut(tp)
            && *position > 0
        {
            let back = 1 + self.env.entropy.below((*position as u64).min(REWIND_RECORDS_MAX));
            *position -= back as i64;
        }
    }
}

mod poll;
