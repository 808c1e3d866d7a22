//! An in-memory cluster of quorums: messages delivered through a seeded queue, nodes cut off
//! and healed; checks that no two nodes ever commit different data at one index.

use std::collections::BTreeMap;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use super::*;

struct Cluster {
    nodes: BTreeMap<NodeId, Quorum>,
    /// What each node committed, by index.
    committed: BTreeMap<NodeId, BTreeMap<u64, Bytes>>,
    cut: Vec<NodeId>,
    queue: Vec<(NodeId, NodeId, Bytes)>,
    rng: ChaCha8Rng,
}

impl Cluster {
    fn new(n: u64, seed: u64) -> Cluster {
        let voters: Vec<NodeId> = (1..=n).collect();
        let nodes = voters
            .iter()
            .map(|&id| {
                let config = QuorumConfig {
                    node: id,
                    voters: voters.clone(),
                    seed: seed ^ id,
                    election_ticks: 10,
                    heartbeat_ticks: 2,
                };
                (id, Quorum::new(config, Recovered::default()).unwrap())
            })
            .collect();
        Cluster {
            nodes,
            committed: BTreeMap::new(),
            cut: Vec::new(),
            queue: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Voter `node` of three starts over on a new disk: nothing recovered.
    fn replace_disk(&mut self, node: NodeId, seed: u64) {
        let config = QuorumConfig {
            node,
            voters: vec![1, 2, 3],
            seed: seed ^ node,
            election_ticks: 10,
            heartbeat_ticks: 2,
        };
        self.nodes.insert(node, Quorum::new(config, Recovered::default()).unwrap());
        self.committed.remove(&node);
    }

    fn record(&mut self, node: NodeId, entries: &[Committed]) {
        for c in entries {
            let mine = self.committed.entry(node).or_default();
            mine.insert(c.index, c.data.clone());
            for (other, theirs) in &self.committed {
                if let Some(data) = theirs.get(&c.index) {
                    assert_eq!(data, &c.data, "nodes {node} and {other} differ at {}", c.index);
                }
            }
        }
    }

    fn drive(&mut self, node: NodeId) {
        loop {
            let q = self.nodes.get_mut(&node).unwrap();
            let Some(ready) = q.ready() else { break };
            let mut out: Vec<(NodeId, Bytes)> = ready.send_now.clone();
            out.extend(ready.send_after_persist.clone());
            let committed = ready.committed.clone();
            let advanced = q.advance(ready);
            out.extend(advanced.send);
            self.record(node, &committed);
            self.record(node, &advanced.committed);
            for (to, m) in out {
                self.queue.push((node, to, m));
            }
        }
    }

    fn step(&mut self, ticks: usize) {
        for _ in 0..ticks {
            let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
            for &id in &ids {
                self.nodes.get_mut(&id).unwrap().tick();
                self.drive(id);
            }
            // Deliver in a seeded order, several rounds per tick.
            for _ in 0..5 {
                let mut queue = std::mem::take(&mut self.queue);
                while !queue.is_empty() {
                    let i = (self.rng.next_u64() % queue.len() as u64) as usize;
                    let (from, to, m) = queue.swap_remove(i);
                    if self.cut.contains(&from) || self.cut.contains(&to) {
                        continue;
                    }
                    if let Some(q) = self.nodes.get_mut(&to) {
                        let _ = q.step(&m);
                    }
                    self.drive(to);
                }
            }
        }
    }

    fn leaders(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(id, q)| q.is_leader() && !self.cut.contains(id))
            .map(|(id, _)| *id)
            .collect()
    }

    fn propose(&mut self, data: &str) -> Option<NodeId> {
        let leader = *self.leaders().first()?;
        let q = self.nodes.get_mut(&leader).unwrap();
        q.propose(Bytes::from(data.to_owned())).ok()?;
        self.drive(leader);
        Some(leader)
    }

    fn has(&self, node: NodeId, data: &str) -> bool {
        self.committed.get(&node).is_some_and(|c| c.values().any(|d| d == data.as_bytes()))
    }
}

#[test]
fn three_and_five_nodes_elect_one_leader_and_commit() {
    for n in [3, 5] {
        let mut c = Cluster::new(n, 7);
        c.step(60);
        assert_eq!(c.leaders().len(), 1, "{n} nodes");
        c.propose("a").unwrap();
        c.step(5);
        for id in 1..=n {
            assert!(c.has(id, "a"), "node {id} of {n}");
        }
    }
}

#[test]
fn a_killed_leader_is_replaced_and_the_majority_commits() {
    let mut c = Cluster::new(3, 11);
    c.step(60);
    let old = c.leaders()[0];
    c.cut.push(old);
    c.step(80);
    let leaders = c.leaders();
    assert_eq!(leaders.len(), 1);
    assert_ne!(leaders[0], old);
    c.propose("after").unwrap();
    c.step(5);
    let others: Vec<NodeId> = (1..=3).filter(|&i| i != old).collect();
    for id in others {
        assert!(c.has(id, "after"));
    }
    assert!(!c.has(old, "after"));
    c.cut.clear();
    c.step(40);
    assert!(c.has(old, "after"), "the old leader catches up after healing");
}

#[test]
fn a_minority_cannot_commit() {
    let mut c = Cluster::new(5, 3);
    c.step(60);
    let leader = c.leaders()[0];
    // Cut the leader and one follower away from the other three.
    let follower = (1..=5).find(|&i| i != leader).unwrap();
    let minority = [leader, follower];
    // Model the split: messages between the two sides are dropped (cut = one side).
    let before = c.committed.clone();
    c.cut = minority.to_vec();
    // The minority's leader may still accept a proposal, which must never commit.
    let _ = c.nodes.get_mut(&leader).unwrap().propose(Bytes::from_static(b"lost"));
    c.step(80);
    assert!(!c.has(leader, "lost") && !c.has(follower, "lost"));
    c.propose("majority").unwrap();
    c.step(5);
    c.cut.clear();
    c.step(60);
    for id in 1..=5 {
        assert!(c.has(id, "majority"), "node {id}");
        assert!(!c.has(id, "lost"), "node {id} committed a minority write");
    }
    assert!(before.len() <= c.committed.len());
}

#[test]
fn a_far_behind_follower_catches_up_through_a_snapshot() {
    let mut c = Cluster::new(3, 5);
    c.step(60);
    let leader = c.leaders()[0];
    let lagger = (1..=3).find(|&i| i != leader).unwrap();
    c.cut.push(lagger);
    for i in 0..20 {
        c.propose(&format!("e{i}")).unwrap();
        c.step(2);
    }
    let applied = *c.committed[&leader].keys().last().unwrap();
    let q = c.nodes.get_mut(&leader).unwrap();
    q.compact(applied, Bytes::from_static(b"image")).unwrap();
    c.cut.clear();
    let mut installed = false;
    for _ in 0..60 {
        c.step(1);
        let q = c.nodes.get_mut(&lagger).unwrap();
        if q.storage.snapshot_index() >= applied {
            installed = true;
        }
    }
    assert!(installed, "the lagging follower never installed the snapshot");
    c.propose("later").unwrap();
    c.step(5);
    assert!(c.has(lagger, "later"));
}

#[test]
fn the_same_seed_gives_the_same_history() {
    let run = |seed| {
        let mut c = Cluster::new(3, seed);
        c.step(60);
        let l1 = c.leaders();
        c.cut.push(l1[0]);
        c.step(60);
        (l1, c.leaders(), c.nodes.values().map(Quorum::term).collect::<Vec<_>>())
    };
    assert_eq!(run(42), run(42));
    let differs = (0..8).any(|s| run(s) != run(s + 100));
    assert!(differs, "different seeds never changed anything");
}

#[test]
fn garbage_messages_are_refused() {
    let mut c = Cluster::new(3, 1);
    for junk in [&b""[..], b"\xff\xff\xff", b"not a message"] {
        let r = c.nodes.get_mut(&1).unwrap().step(junk);
        // An empty buffer decodes as an empty message, which Raft may ignore; anything else
        // must be an error rather than a panic.
        if !junk.is_empty() {
            assert!(r.is_err());
        }
    }
}

#[test]
fn a_voter_back_empty_votes_no_stale_candidate_in() {
    for seed in 0..8 {
        let mut c = Cluster::new(3, seed);
        c.step(60);
        let leader = c.leaders()[0];
        let stale = (1..=3).find(|&i| i != leader).unwrap();
        let replaced = (1..=3).find(|&i| i != leader && i != stale).unwrap();
        c.cut.push(stale);
        c.propose("committed").unwrap();
        c.step(5);
        assert!(c.has(replaced, "committed"), "seed {seed}");
        // The replaced voter's disk is new: it starts over with nothing.
        c.replace_disk(replaced, seed);
        c.cut = vec![leader];
        c.step(200);
        assert!(
            c.leaders().is_empty(),
            "seed {seed}: the stale voter was elected with the empty one's vote"
        );
        c.cut.clear();
        c.step(80);
        assert_eq!(c.leaders().len(), 1, "seed {seed}");
        c.propose("after").unwrap();
        c.step(10);
        // Every voter applies what comes next; the ones that kept their logs still hold the
        // entry committed before (the replaced one may get it as a snapshot, not an entry).
        for id in 1..=3 {
            assert!(c.has(id, "after"), "seed {seed}: node {id}");
            assert!(id == replaced || c.has(id, "committed"), "seed {seed}: node {id}");
        }
    }
}

#[test]
fn a_voter_back_empty_under_a_live_leader_catches_up() {
    for seed in 0..8 {
        let mut c = Cluster::new(3, seed);
        c.step(60);
        let leader = c.leaders()[0];
        let replaced = (1..=3).find(|&i| i != leader).unwrap();
        c.propose("committed").unwrap();
        c.step(5);
        assert!(c.has(replaced, "committed"), "seed {seed}");
        // Its disk is new while the leader still counts it as holding the log: the leader's
        // next heartbeat carries a commit index past everything it has.
        c.replace_disk(replaced, seed);
        c.step(40);
        c.propose("after").unwrap();
        c.step(20);
        assert!(c.has(replaced, "after"), "seed {seed}: the replaced voter did not catch up");
    }
}

#[test]
fn only_the_leader_tells_how_far_each_voter_holds_and_only_voters_count_as_heard() {
    let mut c = Cluster::new(3, 13);
    c.step(60);
    let leader = c.leaders()[0];
    c.propose("x").unwrap();
    c.step(5);
    let q = &c.nodes[&leader];
    let progress = q.progress().expect("the leader knows its voters' progress");
    let ids: Vec<NodeId> = progress.iter().map(|v| v.id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    for v in &progress {
        assert_eq!(v.log_end, q.last_index(), "voter {} caught up on a quiet quorum", v.id);
        assert_eq!(q.matched(v.id), Some(v.log_end));
    }
    assert_eq!(q.matched(9), None, "not a voter");
    let follower = (1..=3).find(|&i| i != leader).unwrap();
    assert!(c.nodes[&follower].progress().is_none(), "a follower knows no progress");
    assert!(c.nodes[&follower].matched(leader).is_none());

    // A message from a voter names it; one claiming to come from elsewhere does not.
    let mut message = Message::default();
    message.set_msg_type(MessageType::MsgHeartbeatResponse);
    message.to = leader;
    message.term = c.nodes[&leader].term();
    message.from = follower;
    let bytes = message.write_to_bytes().unwrap();
    assert_eq!(c.nodes.get_mut(&leader).unwrap().step(&bytes).unwrap(), Some(follower));
    message.from = 9;
    let bytes = message.write_to_bytes().unwrap();
    let stepped = c.nodes.get_mut(&leader).unwrap().step(&bytes);
    assert!(!matches!(stepped, Ok(Some(_))), "a stranger taken for a voter: {stepped:?}");
    // A stale heartbeat from a stranger, which Raft ignores without an error.
    message.set_msg_type(MessageType::MsgHeartbeat);
    message.term = 0;
    let bytes = message.write_to_bytes().unwrap();
    assert_eq!(c.nodes.get_mut(&leader).unwrap().step(&bytes).unwrap(), None);
}
