//! Consumer-group members in the cluster swarm: each finds the group's coordinator through a
//! random node (the coordinator is the leader of the group's `__consumer_offsets` partition, so
//! it moves with failovers), joins, syncs, heartbeats and commits positions of its partitions,
//! sometimes a lower one, rejoins when topics come or go (as a consumer subscribed by pattern
//! does), and follows the coordinator wherever it goes: a NOT_COORDINATOR or
//! COORDINATOR_NOT_AVAILABLE answer or a failed call sends it back to FindCoordinator, keeping its
//! member id and generation as Kafka's consumer does.
//!
//! Positions advance by a few records at a time without reading them: the swarm's consumer
//! already reads, and what is checked here is the group's own state. Every assignment, commit and
//! committed-offset read goes into a [`History`], judged at the end by the broker workload's
//! checkers for committed offsets (an acknowledged commit is never lost and an offset changes only
//! by a commit that could have come after) and ownership (one owner per partition per
//! generation), across coordinator failovers.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::io::{Env, Instant};

use crate::checker::history::{Assignment, History, OffsetRead, Outcome, Tp};
use crate::checker::{Findings, commits, ownership};
use crate::client::assignment::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, round_robin,
};
use crate::client::group::{Joined, MemberConfig};
use crate::client::{Client, ClientError, codes};
use crate::world::lock;

/// The group.
pub const GROUP: &str = "swarm-group";
/// Members of the group.
pub const MEMBERS: u32 = 2;
/// `session.timeout.ms` (the broker's minimum).
const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// How long the coordinator waits for members to rejoin.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(6);
/// Between heartbeats.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// Between two steps of the poll loop (positions move, maybe a commit).
const POLL_INTERVAL: Duration = Duration::from_millis(300);
/// Longest pause between commits.
const COMMIT_INTERVAL_MS_MAX: u64 = 2_000;
/// Most records a position moves by in one poll step.
const ADVANCE_MAX: u64 = 5;
/// Longest time between rewinds of a partition (each followed by a commit of the lower offset).
const REWIND_INTERVAL_MS_MAX: u64 = 10_000;
/// Pause after a failed call.
const BACKOFF: Duration = Duration::from_millis(200);

/// The group's history.
#[derive(Default)]
pub struct GroupLedger {
    /// Assignments, commits and committed-offset reads.
    pub history: History,
}

/// Shared between the members and the final check.
pub type SharedGroup = Arc<Mutex<GroupLedger>>;

/// The live topics with their partition counts, as the swarm's admin knows them.
pub type TopicsNow = Arc<dyn Fn() -> BTreeMap<String, i32> + Send + Sync>;

/// What the member does after its poll loop ends.
enum Next {
    /// Join again with the same member id.
    Rejoin,
    /// Join again as a new member.
    Restart,
    /// Stop.
    Stop,
}

struct Member {
    env: Env,
    addrs: Arc<Vec<SocketAddr>>,
    coordinator: Option<Client>,
    group: SharedGroup,
    topics: TopicsNow,
    stop: Arc<AtomicBool>,
    name: String,
    config: MemberConfig,
    member_id: String,
    generation: i32,
    /// The topics of the last join's subscription.
    subscribed: Vec<String>,
    assigned: Vec<Tp>,
    positions: BTreeMap<Tp, i64>,
    committed: BTreeMap<Tp, i64>,
}

/// Runs member `number` until `stop`, then commits and leaves.
pub async fn member(
    env: Env,
    addrs: Arc<Vec<SocketAddr>>,
    group: SharedGroup,
    topics: TopicsNow,
    stop: Arc<AtomicBool>,
    number: u32,
) {
    let config = MemberConfig {
        group: GROUP.to_owned(),
        session_timeout: SESSION_TIMEOUT,
        rebalance_timeout: REBALANCE_TIMEOUT,
    };
    let mut m = Member {
        env,
        addrs,
        coordinator: None,
        group,
        topics,
        stop,
        name: format!("member{number}"),
        config,
        member_id: String::new(),
        generation: -1,
        subscribed: Vec::new(),
        assigned: Vec::new(),
        positions: BTreeMap::new(),
        committed: BTreeMap::new(),
    };
    while !m.stopping() {
        if !m.join().await {
            m.env.clock.sleep(BACKOFF).await;
            continue;
        }
        match m.poll().await {
            Next::Rejoin => {}
            Next::Restart => m.member_id.clear(),
            Next::Stop => break,
        }
    }
    if !m.member_id.is_empty() {
        m.commit().await;
        if let Some(c) = m.coordinator.as_mut() {
            let _ = c.leave_group(GROUP, &m.member_id).await;
        }
    }
}

impl Member {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn with_history<T>(&self, f: impl FnOnce(&mut History) -> T) -> T {
        f(&mut lock(&self.group).history)
    }

    /// A random instant up to `ms_max` from now.
    fn after(&self, ms_max: u64) -> Instant {
        self.env.clock.now() + Duration::from_millis(self.env.entropy.below(ms_max))
    }

    /// The coordinator's client, found through a random node if not known.
    async fn coordinator(&mut self) -> Option<&mut Client> {
        if self.coordinator.is_none() {
            let at = self.env.entropy.below(self.addrs.len() as u64) as usize;
            let mut any = Client::new(self.env.clone(), self.addrs[at], &self.name);
            let found = any.find_coordinator(GROUP).await.ok()?;
            let ip: IpAddr = found.host.parse().ok()?;
            let port = u16::try_from(found.port).ok()?;
            self.coordinator =
                Some(Client::new(self.env.clone(), SocketAddr::new(ip, port), &self.name));
        }
        self.coordinator.as_mut()
    }

    /// Forgets the coordinator when an error says it is not (or no longer) the one.
    fn lost_coordinator(&mut self, error: &ClientError) {
        let moved = matches!(
            error.code(),
            Some(
                codes::NOT_COORDINATOR
                    | codes::COORDINATOR_NOT_AVAILABLE
                    | codes::COORDINATOR_LOAD_IN_PROGRESS
            )
        );
        if moved || matches!(error, ClientError::Call(_)) {
            self.coordinator = None;
        }
    }

    /// Joins and syncs a generation and loads committed positions. False to try again.
    async fn join(&mut self) -> bool {
        let topics: Vec<String> = (self.topics)().into_keys().collect();
        let Ok(subscription) = encode_subscription(&topics) else { return false };
        let (config, member_id) = (self.config.clone(), self.member_id.clone());
        let Some(c) = self.coordinator().await else { return false };
        let joined = match c.join_group(&config, &member_id, subscription).await {
            Ok(joined) => joined,
            Err(e) => return self.membership_error(&e),
        };
        self.subscribed = topics;
        self.member_id = joined.member_id.clone();
        let assignments = if joined.is_leader() { self.assign(&joined) } else { Vec::new() };
        let sent = self.with_history(|h| h.tick());
        let Some(c) = self.coordinator().await else { return false };
        let bytes = match c.sync_group(&config, &joined, assignments).await {
            Ok(bytes) => bytes,
            Err(e) => return self.membership_error(&e),
        };
        let Ok(partitions) = decode_assignment(&bytes) else {
            self.with_history(|h| h.anomalies.push("an undecodable assignment".to_owned()));
            return false;
        };
        self.with_history(|h| {
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

    /// Handles a failed join or sync. Always false (join again).
    fn membership_error(&mut self, error: &ClientError) -> bool {
        tracing::debug!("{}: membership: {error}", self.name);
        if error.code() == Some(codes::UNKNOWN_MEMBER_ID) {
            self.member_id.clear();
        }
        self.lost_coordinator(error);
        false
    }

    /// The leader's assignment: every member's subscription, dealt round robin over the topics
    /// live now.
    fn assign(&self, joined: &Joined) -> Vec<(String, bytes::Bytes)> {
        let subscriptions: BTreeMap<String, Vec<String>> = joined
            .members
            .iter()
            .filter_map(|(member, metadata)| {
                decode_subscription(metadata).ok().map(|topics| (member.clone(), topics))
            })
            .collect();
        round_robin(&subscriptions, &(self.topics)())
            .into_iter()
            .filter_map(|(member, tps)| encode_assignment(&tps).ok().map(|b| (member, b)))
            .collect()
    }

    /// Positions from the committed offsets (0 where none), each read recorded.
    async fn load_positions(&mut self) -> bool {
        if self.assigned.is_empty() {
            return true;
        }
        let assigned = self.assigned.clone();
        let sent = self.with_history(|h| h.tick());
        let Some(c) = self.coordinator().await else { return false };
        let offsets = match c.offset_fetch(GROUP, &assigned).await {
            Ok(offsets) => offsets,
            Err(e) => {
                self.lost_coordinator(&e);
                return false;
            }
        };
        record_reads(&self.group, &offsets, sent);
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
    async fn poll(&mut self) -> Next {
        let mut next_heartbeat = self.env.clock.now() + HEARTBEAT_INTERVAL;
        let mut next_commit = self.after(COMMIT_INTERVAL_MS_MAX);
        let mut next_rewind = self.after(REWIND_INTERVAL_MS_MAX);
        loop {
            if self.stopping() {
                return Next::Stop;
            }
            self.env.clock.sleep(POLL_INTERVAL).await;
            if (self.topics)().into_keys().ne(self.subscribed.iter().cloned()) {
                // As a consumer subscribed by pattern does when metadata shows a topic come or
                // go: commit, then join again with the new subscription.
                return self.commit().await.unwrap_or(Next::Rejoin);
            }
            for tp in &self.assigned {
                let by = self.env.entropy.below(ADVANCE_MAX + 1) as i64;
                *self.positions.entry(tp.clone()).or_insert(0) += by;
            }
            if self.env.clock.now() >= next_heartbeat {
                if let Some(next) = self.heartbeat().await {
                    return next;
                }
                next_heartbeat = self.env.clock.now() + HEARTBEAT_INTERVAL;
            }
            if self.env.clock.now() >= next_rewind {
                next_rewind = self.after(REWIND_INTERVAL_MS_MAX);
                self.rewind();
                next_commit = self.env.clock.now();
            }
            if self.env.clock.now() >= next_commit {
                if let Some(next) = self.commit().await {
                    return next;
                }
                next_commit = self.after(COMMIT_INTERVAL_MS_MAX);
            }
        }
    }

    /// A heartbeat; `Some` when the generation is over.
    async fn heartbeat(&mut self) -> Option<Next> {
        let (generation, member_id) = (self.generation, self.member_id.clone());
        let c = self.coordinator().await?;
        match c.heartbeat(GROUP, generation, &member_id).await {
            Ok(()) => None,
            Err(ClientError::Kafka(codes::REBALANCE_IN_PROGRESS)) => {
                Some(self.commit().await.unwrap_or(Next::Rejoin))
            }
            Err(ClientError::Kafka(codes::ILLEGAL_GENERATION)) => Some(Next::Rejoin),
            Err(ClientError::Kafka(codes::UNKNOWN_MEMBER_ID)) => Some(Next::Restart),
            Err(e) => {
                self.lost_coordinator(&e);
                None
            }
        }
    }

    /// Moves one partition's position back a little.
    fn rewind(&mut self) {
        let at = self.env.entropy.below(self.assigned.len().max(1) as u64) as usize;
        let Some(tp) = self.assigned.get(at) else { return };
        if let Some(position) = self.positions.get_mut(tp)
            && *position > 0
        {
            *position -= 1 + self.env.entropy.below(*position as u64) as i64;
        }
    }

    /// Commits every position that moved since its last commit, each partition's outcome
    /// recorded; `Some` when the answer says the generation is over.
    async fn commit(&mut self) -> Option<Next> {
        let offsets: BTreeMap<Tp, i64> = self
            .positions
            .iter()
            .filter(|(tp, position)| self.committed.get(*tp) != Some(*position))
            .map(|(tp, position)| (tp.clone(), *position))
            .collect();
        if offsets.is_empty() || self.member_id.is_empty() {
            return None;
        }
        let (member, generation) = (self.member_id.clone(), self.generation);
        let started: BTreeMap<Tp, usize> = self.with_history(|h| {
            offsets
                .iter()
                .map(|(tp, &o)| {
                    (tp.clone(), h.start_commit(GROUP, &member, generation, tp.clone(), o))
                })
                .collect()
        });
        let result = match self.coordinator().await {
            Some(c) => c.offset_commit(GROUP, generation, &member, &offsets).await,
            None => Err(ClientError::Kafka(codes::COORDINATOR_NOT_AVAILABLE)),
        };
        let answers = match result {
            Ok(answers) => answers,
            Err(e) => {
                // Only a call that went out may have taken effect.
                let sent = matches!(&e, ClientError::Call(c) if c.is_indeterminate());
                self.with_history(|h| {
                    for &index in started.values() {
                        h.finish_commit(index, |at| {
                            if sent { Outcome::Lost(at) } else { Outcome::NotSent }
                        });
                    }
                });
                self.lost_coordinator(&e);
                return None;
            }
        };
        let mut next = None;
        for (tp, index) in started {
            let code = answers.get(&tp).copied().unwrap_or(codes::UNKNOWN_TOPIC_OR_PARTITION);
            let offset = offsets.get(&tp).copied().unwrap_or(-1);
            self.with_history(|h| {
                h.finish_commit(index, |at| {
                    if code == codes::NONE {
                        Outcome::Ok(at, offset)
                    } else {
                        Outcome::Failed(at, code)
                    }
                })
            });
            match code {
                codes::NONE => {
                    self.committed.insert(tp, offset);
                }
                codes::REBALANCE_IN_PROGRESS | codes::ILLEGAL_GENERATION => {
                    next = Some(Next::Rejoin);
                }
                codes::UNKNOWN_MEMBER_ID => next = Some(Next::Restart),
                codes::NOT_COORDINATOR | codes::COORDINATOR_NOT_AVAILABLE => {
                    self.coordinator = None;
                }
                _ => {}
            }
        }
        next
    }
}

/// Records an OffsetFetch answer sent at `sent`.
fn record_reads(group: &SharedGroup, offsets: &BTreeMap<Tp, i64>, sent: u64) {
    let history = &mut lock(group).history;
    let received = history.tick();
    for (tp, &offset) in offsets {
        let read = OffsetRead { group: GROUP.to_owned(), tp: tp.clone(), offset, sent, received };
        history.offset_reads.push(read);
    }
}

/// The last word on the group once the cluster has settled: every partition of a live topic it
/// ever committed is read back from the coordinator (retrying through NOT_COORDINATOR and the like until
/// `within`), then the commit and ownership checkers run over the whole history.
pub async fn final_read(
    env: Env,
    addrs: Arc<Vec<SocketAddr>>,
    group: SharedGroup,
    topics: TopicsNow,
    within: Duration,
) -> Vec<String> {
    let deadline = env.clock.now() + within;
    let live = topics();
    let mut partitions: Vec<Tp> = lock(&group)
        .history
        .commits
        .iter()
        .filter(|c| live.contains_key(&c.tp.0))
        .map(|c| c.tp.clone())
        .collect();
    partitions.sort();
    partitions.dedup();
    let mut out = Vec::new();
    if !partitions.is_empty() {
        let mut read = false;
        while !read && env.clock.now() < deadline {
            let at = env.entropy.below(addrs.len() as u64) as usize;
            let mut any = Client::new(env.clone(), addrs[at], "group-final");
            if let Ok(found) = any.find_coordinator(GROUP).await
                && let Ok(ip) = found.host.parse::<IpAddr>()
                && let Ok(port) = u16::try_from(found.port)
            {
                let mut c = Client::new(env.clone(), SocketAddr::new(ip, port), "group-final");
                let sent = lock(&group).history.tick();
                if let Ok(offsets) = c.offset_fetch(GROUP, &partitions).await {
                    record_reads(&group, &offsets, sent);
                    read = true;
                }
            }
            if !read {
                env.clock.sleep(BACKOFF).await;
            }
        }
        if !read {
            out.push(format!("group {GROUP}: committed offsets could not be read after the heal"));
        }
    }
    let ledger = lock(&group);
    let mut findings = Findings::default();
    for anomaly in &ledger.history.anomalies {
        findings.push(crate::checker::Rule::Client, anomaly.clone());
    }
    commits::check(&ledger.history, &mut findings);
    ownership::check(&ledger.history, &mut findings);
    out.extend(findings.into_lines());
    out
}

/// Counts for the report: assignments, acknowledged commits, committed-offset reads.
pub fn counts(group: &SharedGroup) -> (usize, usize, usize) {
    let h = &lock(group).history;
    let acked = h.commits.iter().filter(|c| matches!(c.outcome, Outcome::Ok(..))).count();
    (h.assignments.len(), acked, h.offset_reads.len())
}
