//! The metadata quorum, sans-IO: a Raft group (tikv's `raft` crate) that replicates opaque
//! entries between controllers. No clock, no I/O: the shell calls [`Quorum::tick`] every
//! [`super::service::TICK`], hands in peers' messages, and carries out each [`Ready`] — send
//! `send_now`, make `persist` durable, send `send_after_persist`, install `snapshot`, apply
//! `committed` — then calls [`Quorum::advance`] and carries out what that returns.
//!
//! Raft randomises election timeouts with an unseeded generator; here its range is narrowed
//! to one value and the randomness comes from the seeded generator instead: a follower lets
//! each tick through only with some probability, so controllers time out at different,
//! seed-determined moments.

pub mod storage;
pub mod store;

use bytes::Bytes;
use protobuf::Message as _;
use raft::prelude::{ConfState, Entry, EntryType, HardState, Message, MessageType, Snapshot};
use raft::{RawNode, StateRole};
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

pub use self::storage::MetaStorage;
pub use self::store::{QuorumStore, StoreError};

/// A Raft node id (a Weir node id, which is never negative).
pub type NodeId = u64;

/// Out of this many ticks, a follower passes on average `TICK_PASS_NUMERATOR`: the jitter
/// that keeps followers from campaigning at once (Raft's own randomised timeout draws from an
/// unseeded generator, so it is pinned to one value and the seeded skipping replaces it).
const TICK_PASS_DENOMINATOR: u32 = 2;
const TICK_PASS_NUMERATOR: u32 = 1;

/// Why the quorum refused something.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    /// Only the leader accepts proposals.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader {
        /// The leader, if known.
        leader: Option<NodeId>,
    },
    /// A message from a peer did not decode.
    #[error("undecodable raft message: {0}")]
    Decode(String),
    /// Raft refused.
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
}

/// The quorum's settings.
#[derive(Clone, Debug)]
pub struct QuorumConfig {
    /// This node.
    pub node: NodeId,
    /// Every voter (including this node).
    pub voters: Vec<NodeId>,
    /// Seeds the election-timeout jitter.
    pub seed: u64,
    /// Ticks without a leader before an election.
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_ticks: usize,
}

/// A snapshot of the state machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotData {
    /// The last entry it includes.
    pub index: u64,
    /// That entry's term.
    pub term: u64,
    /// The state machine's bytes.
    pub data: Bytes,
}

/// How far a voter's log matches the leader's, as the leader knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoterProgress {
    /// The voter.
    pub id: NodeId,
    /// The index of its last entry known to match the leader's.
    pub log_end: u64,
}

/// What the store held at start-up.
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    /// Term, vote and commit.
    pub hard_state: HardState,
    /// The snapshot, with the membership it was taken under.
    pub snapshot: Option<(SnapshotData, ConfState)>,
    /// Entries after the snapshot, in order.
    pub entries: Vec<Entry>,
}

/// A committed entry to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Its index.
    pub index: u64,
    /// Its term.
    pub term: u64,
    /// Its data (never empty: Raft's own empty entries are not delivered).
    pub data: Bytes,
}

/// What the store must make durable.
#[derive(Clone, Debug, Default)]
pub struct Persist {
    /// Entries to append; the first may overwrite stored entries from its index on.
    pub entries: Vec<Entry>,
    /// The hard state to store.
    pub hard_state: Option<HardState>,
    /// A snapshot to store; entries up to its index are dropped.
    pub snapshot: Option<(SnapshotData, ConfState)>,
}

impl Persist {
    /// Whether there is nothing to store.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.hard_state.is_none() && self.snapshot.is_none()
    }
}

/// One round of work for the shell.
pub struct Ready {
    /// Messages that may go out before persisting.
    pub send_now: Vec<(NodeId, Bytes)>,
    /// What to make durable.
    pub persist: Persist,
    /// Messages that may go out only after `persist` is durable.
    pub send_after_persist: Vec<(NodeId, Bytes)>,
    /// A snapshot from the leader: the state machine restarts from it.
    pub snapshot: Option<SnapshotData>,
    /// Entries to apply, in order.
    pub committed: Vec<Committed>,
    raw: raft::Ready,
}

/// What [`Quorum::advance`] leaves to do.
#[derive(Default)]
pub struct Advanced {
    /// Messages to send.
    pub send: Vec<(NodeId, Bytes)>,
    /// Entries to apply, in order.
    pub committed: Vec<Committed>,
}

/// A Raft member, sans-IO.
pub struct Quorum {
    node: RawNode<MetaStorage>,
    storage: MetaStorage,
    rng: ChaCha8Rng,
}

fn encode_messages(messages: Vec<Message>) -> Vec<(NodeId, Bytes)> {
    messages
        .into_iter()
        .filter_map(|m| m.write_to_bytes().ok().map(|b| (m.to, Bytes::from(b))))
        .collect()
}

fn committed(entries: Vec<Entry>) -> Vec<Committed> {
    entries
        .into_iter()
        .filter(|e| e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty())
        .map(|e| Committed { index: e.index, term: e.term, data: Bytes::from(e.data.to_vec()) })
        .collect()
}

fn logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

impl Quorum {
    /// A member from its recovered state (a fresh node starts with every voter in its
    /// membership).
    pub fn new(config: QuorumConfig, recovered: Recovered) -> Result<Quorum, QuorumError> {
        let storage = MetaStorage::new(&config.voters, recovered);
        let raft_config = raft::Config {
            id: config.node,
            election_tick: config.election_ticks,
            heartbeat_tick: config.heartbeat_ticks,
            min_election_tick: config.election_ticks,
            max_election_tick: config.election_ticks + 1,
            check_quorum: true,
            pre_vote: true,
            applied: storage.snapshot_index(),
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            ..Default::default()
        };
        let mut node = RawNode::new(&raft_config, storage.clone(), &logger())?;
        if config.voters == [config.node] {
            // Alone: no one to wait for.
            node.campaign()?;
        }
        Ok(Quorum { node, storage, rng: ChaCha8Rng::seed_from_u64(config.seed) })
    }

    /// One tick of the injected clock.
    pub fn tick(&mut self) {
        let leading = self.node.raft.state == StateRole::Leader;
        if leading || self.rng.next_u32() % TICK_PASS_DENOMINATOR < TICK_PASS_NUMERATOR {
            self.node.tick();
        }
    }

    /// A message from a peer; returns the peer if it is a voter.
    pub fn step(&mut self, message: &[u8]) -> Result<Option<NodeId>, QuorumError> {
        let mut message =
            Message::parse_from_bytes(message).map_err(|e| QuorumError::Decode(e.to_string()))?;
        let from = Some(message.from).filter(|&id| self.node.raft.prs().get(id).is_some());
        if self.withholds_vote(&message) {
            return Ok(from);
        }
        // A leader tells a voter in its heartbeats how far it may commit: as far as it last
        // knew the voter held. A voter back on a new disk holds less, and Raft, which assumes
        // no voter ever loses its log, would panic; it may commit only what it holds, and the
        // leader's next append, refused, finds where its log really ends.
        if message.get_msg_type() == MessageType::MsgHeartbeat {
            let held = self.node.raft.raft_log.last_index();
            if message.commit > held {
                message.commit = held;
            }
        }
        self.node.step(message)?;
        Ok(from)
    }

    /// Whether to leave a (pre-)vote request unanswered: this voter holds no entry, and the
    /// candidate holds some. Plain Raft grants a vote to any candidate whose log is at least as
    /// long as the voter's, but a voter that holds nothing may have lost its disk: the log it
    /// had, part of a majority that committed entries the candidate lacks, would have refused
    /// it. An empty voter therefore votes only for empty candidates (a cluster's first
    /// election), and otherwise waits for a leader to give it the log.
    fn withholds_vote(&self, message: &Message) -> bool {
        let asks = matches!(
            message.get_msg_type(),
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote
        );
        asks && self.node.raft.raft_log.last_index() == 0 && message.index > 0
    }

    /// Proposes an entry (leader only).
    pub fn propose(&mut self, data: Bytes) -> Result<(), QuorumError> {
        if !self.is_leader() {
            return Err(QuorumError::NotLeader { leader: self.leader() });
        }
        self.node.propose(Vec::new(), data.to_vec())?;
        Ok(())
    }

    /// The leader, if known.
    pub fn leader(&self) -> Option<NodeId> {
        Some(self.node.raft.leader_id).filter(|&l| l != raft::INVALID_ID)
    }

    /// Whether this member leads.
    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// The highest index known committed.
    pub fn committed_index(&self) -> u64 {
        self.node.raft.raft_log.committed
    }

    /// The index of the last entry this member holds.
    pub fn last_index(&self) -> u64 {
        self.node.raft.raft_log.last_index()
    }

    /// On the leader, how far `voter`'s log is known to match its own; elsewhere, or for a
    /// node that is not a voter, nothing.
    pub fn matched(&self, voter: NodeId) -> Option<u64> {
        if !self.is_leader() {
            return None;
        }
        if voter == self.node.raft.id {
            return Some(self.last_index());
        }
        self.node.raft.prs().get(voter).map(|p| p.matched)
    }

    /// On the leader, how far each voter's log is known to match its own (its own: to the
    /// end); on any other member, nothing.
    pub fn progress(&self) -> Option<Vec<VoterProgress>> {
        if !self.is_leader() {
            return None;
        }
        let (me, last) = (self.node.raft.id, self.last_index());
        let voters = self.node.raft.prs().iter().map(|(&id, progress)| VoterProgress {
            id,
            log_end: if id == me { last } else { progress.matched },
        });
        Some(voters.collect())
    }

    /// Whether [`Quorum::ready`] has work.
    pub fn has_ready(&self) -> bool {
        self.node.has_ready()
    }

    /// The next round of work, if any. The in-memory log takes the new entries at once (so
    /// the leader can send them); the shell makes them durable before `send_after_persist`.
    pub fn ready(&mut self) -> Option<Ready> {
        if !self.node.has_ready() {
            return None;
        }
        let mut raw = self.node.ready();
        let send_now = encode_messages(raw.take_messages());
        let mut persist = Persist::default();
        let mut snapshot = None;
        if !raw.snapshot().is_empty() {
            let snap: Snapshot = raw.snapshot().clone();
            let meta = snap.get_metadata();
            let data = SnapshotData {
                index: meta.index,
                term: meta.term,
                data: Bytes::from(snap.data.to_vec()),
            };
            self.storage.install_snapshot(data.clone(), meta.get_conf_state().clone());
            persist.snapshot = Some((data.clone(), meta.get_conf_state().clone()));
            snapshot = Some(data);
        }
        let committed_now = committed(raw.take_committed_entries());
        if !raw.entries().is_empty() {
            self.storage.append(raw.entries());
            persist.entries = raw.entries().to_vec();
        }
        if let Some(hs) = raw.hs() {
            self.storage.set_hard_state(hs.clone());
            persist.hard_state = Some(hs.clone());
        }
        let send_after_persist = encode_messages(raw.take_persisted_messages());
        Some(Ready {
            send_now,
            persist,
            send_after_persist,
            snapshot,
            committed: committed_now,
            raw,
        })
    }

    /// Tells Raft the round is done (its `persist` durable, its entries applied); returns the
    /// messages and newly committed entries that follow.
    pub fn advance(&mut self, ready: Ready) -> Advanced {
        let mut light = self.node.advance(ready.raw);
        if let Some(commit) = light.commit_index() {
            self.storage.set_commit(commit);
        }
        let out = Advanced {
            send: encode_messages(light.take_messages()),
            committed: committed(light.take_committed_entries()),
        };
        self.node.advance_apply();
        out
    }

    /// Records `image` as the snapshot at `applied_index` (which must be applied) and drops
    /// the entries it covers; returns what the store must make durable.
    pub fn compact(&mut self, applied_index: u64, image: Bytes) -> Result<Persist, QuorumError> {
        let (data, conf) = self.storage.compact(applied_index, image)?;
        Ok(Persist { snapshot: Some((data, conf)), ..Persist::default() })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "tests.rs"]
mod tests;
