//! The group coordinator through its public API: consumer lifecycles end to end, and a
//! randomized property test driving many clients through joins, syncs, heartbeats, leaves,
//! commits, restarts, slow or failing writes and clock jumps, checking Kafka's group
//! invariants after every step.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use weir::coordinator::*;
use weir::io::Instant;
use weir::model::{LeaderEpoch, Offset, TopicPartition};

const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 15_000;

/// A coordinator with a simulated clock and a log that the test settles.
struct Sim {
    c: GroupCoordinator,
    mono: Instant,
    wall_ms: i64,
    replies: BTreeMap<RequestId, Response>,
    /// Every batch in issue order, with its fate once settled.
    batches: Vec<(PersistId, Vec<Record>, Option<bool>)>,
    auto_persist: bool,
    next_request: u64,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        Sim {
            c: GroupCoordinator::new(CoordinatorConfig::for_tests(), seed),
            mono: Instant::ZERO,
            wall_ms: 1_000_000,
            replies: BTreeMap::new(),
            batches: Vec::new(),
            auto_persist: true,
            next_request: 0,
        }
    }

    fn now(&self) -> Now {
        Now::new(self.mono, self.wall_ms)
    }

    fn id(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    fn absorb(&mut self, outputs: Vec<Output>) {
        for output in outputs {
            match output {
                Output::Reply(id, response) => {
                    assert!(self.replies.insert(id, response).is_none(), "{id:?} answered twice");
                }
                Output::Persist { id, records } => {
                    self.batches.push((id, records, None));
                    if self.auto_persist {
                        self.settle(self.batches.len() - 1, true);
                    }
                }
            }
        }
    }

    /// Settles batch `index` (durable or failed), in whatever order the test likes.
    fn settle(&mut self, index: usize, ok: bool) {
        let (id, _, fate) = &mut self.batches[index];
        if fate.is_some() {
            return;
        }
        *fate = Some(ok);
        let id = *id;
        let result = if ok { Ok(()) } else { Err(PersistError::NotEnoughReplicas) };
        let outputs = self.c.persisted(id, result, self.now());
        self.absorb(outputs);
    }

    fn unsettled(&self) -> Vec<usize> {
        (0..self.batches.len()).filter(|i| self.batches[*i].2.is_none()).collect()
    }

    /// The durable log: successful batches in issue order, through the byte encoding.
    fn durable_log(&self) -> Vec<Record> {
        self.batches
            .iter()
            .filter(|(_, _, fate)| *fate == Some(true))
            .flat_map(|(_, records, _)| records)
            .map(|r| {
                let (key, value) = (r.encode_key().unwrap(), r.encode_value().unwrap());
                Record::decode(&key, value.as_deref()).unwrap()
            })
            .collect()
    }

    /// Moves the clock, firing each timer at its deadline.
    fn advance(&mut self, ms: u64) {
        let target = self.mono + Duration::from_millis(ms);
        loop {
            let due = self.c.next_deadline().filter(|d| *d <= target);
            let step_to = due.unwrap_or(target);
            self.wall_ms += step_to.saturating_duration_since(self.mono).as_millis() as i64;
            self.mono = self.mono.max(step_to);
            let outputs = self.c.tick(self.now());
            self.absorb(outputs);
            if due.is_none() {
                break;
            }
        }
    }

    fn send(
        &mut self,
        f: impl FnOnce(&mut GroupCoordinator, RequestId, Now) -> Vec<Output>,
    ) -> RequestId {
        let id = self.id();
        let now = self.now();
        let outputs = f(&mut self.c, id, now);
        self.absorb(outputs);
        id
    }
}

fn join_req(member: &MemberId, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        version: 7,
        group_id: GroupId::from("g"),
        member_id: member.clone(),
        instance_id: instance.map(InstanceId::from),
        client_id: "consumer".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: CONSUMER_PROTOCOL_TYPE.into(),
        protocols: vec![Protocol::new("range", encode_subscription_v0(&["orders"]))],
        reason: None,
    }
}

fn sync_req(
    member: &MemberId,
    instance: Option<&str>,
    generation: Generation,
    plan: Vec<(MemberId, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        group_id: GroupId::from("g"),
        generation,
        member_id: member.clone(),
        instance_id: instance.map(InstanceId::from),
        protocol_type: Some(CONSUMER_PROTOCOL_TYPE.into()),
        protocol_name: Some("range".into()),
        assignments: plan,
    }
}

fn commit_req(
    member: &MemberId,
    instance: Option<&str>,
    generation: Generation,
    partition: i32,
    offset: i64,
) -> CommitRequest {
    CommitRequest {
        version: 8,
        group_id: GroupId::from("g"),
        generation,
        member_id: member.clone(),
        instance_id: instance.map(InstanceId::from),
        retention_ms: None,
        offsets: vec![OffsetCommit {
            partition: TopicPartition::new("orders", partition),
            offset: Offset(offset),
            leader_epoch: LeaderEpoch(1),
            metadata: None,
            topic_id: None,
        }],
    }
}

fn join_reply(sim: &mut Sim, id: RequestId) -> JoinResponse {
    match sim.replies.remove(&id) {
        Some(Response::Join(r)) => r,
        other => panic!("expected a JoinGroup reply, got {other:?}"),
    }
}

#[test]
fn a_consumer_joins_commits_and_resumes_on_a_new_coordinator() {
    let mut sim = Sim::new(1);
    // KIP-394: the first JoinGroup only obtains a member id.
    let first = sim.send(|c, id, now| c.join(id, join_req(&MemberId::unknown(), None), now));
    let r = join_reply(&mut sim, first);
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    assert_eq!(r.error.map(GroupError::code), Some(79));
    let me = r.member_id;
    let second = sim.send(|c, id, now| c.join(id, join_req(&me, None), now));
    sim.advance(0);
    let joined = join_reply(&mut sim, second);
    assert_eq!((joined.error, joined.leader.clone()), (None, me.clone()));
    let generation = joined.generation;
    let plan = vec![(me.clone(), Bytes::from_static(b"orders-0,orders-1"))];
    let sync = sim.send(|c, id, now| c.sync(id, sync_req(&me, None, generation, plan), now));
    let Some(Response::Sync(s)) = sim.replies.remove(&sync) else { panic!("no sync reply") };
    assert_eq!(s.assignment, Bytes::from_static(b"orders-0,orders-1"));
    let commit =
        sim.send(|c, id, now| c.commit(id, commit_req(&me, None, generation, 1, 500), now));
    let Some(Response::Commit(cr)) = sim.replies.remove(&commit) else { panic!("no commit reply") };
    assert_eq!(cr.partitions[0].error, None);

    // Fail-over: a new coordinator replays __consumer_offsets; the member keeps going.
    let mut next = Sim::new(2);
    next.mono = sim.mono;
    next.wall_ms = sim.wall_ms;
    let outputs = next.c.load(sim.durable_log(), next.now());
    next.absorb(outputs);
    let got = next.c.fetch_offsets(&GroupId::from("g"), Some(&[TopicPartition::new("orders", 1)]));
    assert_eq!(got[0].1.as_ref().map(|o| o.offset), Some(Offset(500)));
    let hb = next.send(|c, id, now| {
        let req = HeartbeatRequest {
            group_id: GroupId::from("g"),
            generation,
            member_id: me.clone(),
            instance_id: None,
        };
        c.heartbeat(id, req, now)
    });
    assert_eq!(
        next.replies.remove(&hb),
        Some(Response::Heartbeat(HeartbeatResponse { error: None }))
    );
}

#[test]
fn deleting_a_group_with_members_fails() {
    let mut sim = Sim::new(3);
    let j = sim.send(|c, id, now| c.join(id, join_req(&MemberId::unknown(), Some("pod-0")), now));
    sim.advance(0);
    assert_eq!(join_reply(&mut sim, j).error, None);
    let d = sim.send(|c, id, now| c.delete_groups(id, vec![GroupId::from("g")], now));
    let Some(Response::DeleteGroups(r)) = sim.replies.remove(&d) else { panic!("no reply") };
    assert_eq!(r.groups, vec![(GroupId::from("g"), Some(GroupError::NonEmptyGroup))]);
}

// ---- The property test ----
//
// Clients behave like consumers (join, sync, heartbeat, rejoin when told, commit), while chaos
// actions force rejoins, restarts, departures, clock jumps and slow, failed or reordered
// writes. The checker watches every reply.

const CLIENTS: usize = 5;
const STATIC_CLIENTS: usize = 2;

#[derive(Clone, Debug)]
enum Action {
    /// The client's natural next step.
    Poll(usize),
    /// A JoinGroup out of turn.
    Join(usize),
    /// A static client restarts: it rejoins with no member id.
    Restart(usize),
    Leave(usize),
    Commit(usize, i32, i64),
    /// A SyncGroup or OffsetCommit with an older generation (a zombie member).
    Stale(usize, bool),
    SimpleCommit(i32, i64),
    Advance(u64),
    /// Settle an unsettled write: usually the oldest, sometimes a later one; rarely failing.
    Settle(usize, bool),
}

fn action() -> impl Strategy<Value = Action> {
    let client = 0..CLIENTS;
    prop_oneof![
        30 => client.clone().prop_map(Action::Poll),
        1 => client.clone().prop_map(Action::Join),
        1 => (0..STATIC_CLIENTS).prop_map(Action::Restart),
        1 => client.clone().prop_map(Action::Leave),
        4 => (client, 0..3i32, 0..100i64).prop_map(|(c, p, o)| Action::Commit(c, p, o)),
        1 => (0..3i32, 0..100i64).prop_map(|(p, o)| Action::SimpleCommit(p, o)),
        2 => (0..CLIENTS, any::<bool>()).prop_map(|(c, sync)| Action::Stale(c, sync)),
        6 => prop_oneof![12 => 0..3_000u64, 1 => 3_000..40_000u64].prop_map(Action::Advance),
        8 => (0..8usize, prop::bool::weighted(0.9)).prop_map(|(i, ok)| Action::Settle(i, ok)),
    ]
}

#[derive(Clone, Debug, Default)]
struct Client {
    instance: Option<String>,
    member: MemberId,
    generation: Generation,
    /// The members list, if this client led `generation`.
    led: Option<Vec<JoinedMember>>,
    synced: Option<Generation>,
    must_rejoin: bool,
    /// A JoinGroup or SyncGroup in flight: a consumer waits for it.
    busy: bool,
}

/// What the test remembers about a request until its reply arrives.
#[derive(Clone, Debug)]
enum Sent {
    Join(usize),
    Sync(usize, Generation),
    Heartbeat(usize),
    Commit(TopicPartition, i64, &'static str),
    /// A commit the coordinator must refuse.
    RefusedCommit,
    Other,
}

/// What the checker has learnt, and the invariants it enforces.
#[derive(Default)]
struct Checker {
    /// The leader of each generation, by identity (instance id for static members).
    leaders: BTreeMap<Generation, String>,
    /// Identities known to be members of each generation.
    members: BTreeMap<Generation, BTreeSet<String>>,
    max_generation: Generation,
    /// Each group's committed offsets, from acknowledged commits in reply order.
    committed: BTreeMap<(&'static str, TopicPartition), i64>,
    /// Successful SyncGroup replies checked.
    syncs_checked: usize,
}

/// Who a member id belongs to: static ids are `<instance>-<uuid>` and keep their instance's
/// identity across restarts; a dynamic id is its own identity.
fn owner(member: &MemberId) -> String {
    let s = member.as_str();
    (0..STATIC_CLIENTS)
        .map(|i| format!("pod-{i}"))
        .find(|pod| s.strip_prefix(pod.as_str()).is_some_and(|rest| rest.starts_with('-')))
        .unwrap_or_else(|| s.to_owned())
}

fn assignment_for(generation: Generation, leader: &str, target: &str) -> Bytes {
    Bytes::from(format!("{}|{leader}|{target}", generation.0))
}

struct World {
    sim: Sim,
    clients: Vec<Client>,
    sent: BTreeMap<RequestId, Sent>,
    check: Checker,
    last_generation: Generation,
}

impl World {
    fn new(seed: u64) -> World {
        let mut sim = Sim::new(seed);
        sim.auto_persist = false;
        let clients = (0..CLIENTS)
            .map(|i| Client {
                instance: (i < STATIC_CLIENTS).then(|| format!("pod-{i}")),
                ..Client::default()
            })
            .collect();
        World {
            sim,
            clients,
            sent: BTreeMap::new(),
            check: Checker::default(),
            last_generation: Generation(0),
        }
    }

    fn step(&mut self, action: Action) {
        match action {
            Action::Poll(i) => self.poll(i),
            Action::Join(i) => self.join(i),
            Action::Restart(i) => {
                self.clients[i].member = MemberId::unknown();
                self.join(i);
            }
            Action::Leave(i) => {
                let fresh =
                    Client { instance: self.clients[i].instance.clone(), ..Client::default() };
                let c = std::mem::replace(&mut self.clients[i], fresh);
                let req = LeaveRequest {
                    group_id: GroupId::from("g"),
                    members: vec![LeavingMember {
                        member_id: c.member,
                        instance_id: c.instance.as_deref().map(InstanceId::from),
                        reason: None,
                    }],
                };
                self.send(Sent::Other, |co, id, now| co.leave(id, req, now));
            }
            Action::Commit(i, p, o) => {
                let c = self.clients[i].clone();
                let req = commit_req(&c.member, c.instance.as_deref(), c.generation, p, o);
                self.send(Sent::Commit(TopicPartition::new("orders", p), o, "g"), |co, id, now| {
                    co.commit(id, req, now)
                });
            }
            Action::Stale(i, sync) => {
                let c = self.clients[i].clone();
                let generation = Generation(c.generation.0 - 1);
                if c.member.is_unknown() || generation.0 < 0 {
                    return;
                }
                if sync {
                    let req = sync_req(&c.member, c.instance.as_deref(), generation, Vec::new());
                    self.send(Sent::Sync(i, generation), |co, id, now| co.sync(id, req, now));
                } else {
                    let req = commit_req(&c.member, c.instance.as_deref(), generation, 0, 1_000);
                    self.send(Sent::RefusedCommit, |co, id, now| co.commit(id, req, now));
                }
            }
            Action::SimpleCommit(p, o) => {
                let mut req = commit_req(&MemberId::unknown(), None, Generation::NONE, p, o);
                req.group_id = GroupId::from("simple");
                let sent = Sent::Commit(TopicPartition::new("orders", p), o, "simple");
                self.send(sent, |co, id, now| co.commit(id, req, now));
            }
            Action::Advance(ms) => self.sim.advance(ms),
            Action::Settle(k, ok) => {
                let unsettled = self.sim.unsettled();
                if !unsettled.is_empty() {
                    let index = unsettled[if k < 6 { 0 } else { k % unsettled.len() }];
                    self.sim.settle(index, ok);
                }
            }
        }
        self.process_replies();
        self.check_state();
    }

    /// What a consumer does next: (re)join, sync, or heartbeat.
    fn poll(&mut self, i: usize) {
        let c = self.clients[i].clone();
        if c.busy {
        } else if c.member.is_unknown() || c.must_rejoin {
            self.join(i);
        } else if c.synced != Some(c.generation) {
            let plan = match &c.led {
                Some(list) => {
                    let me = owner(&c.member);
                    list.iter()
                        .map(|m| {
                            (
                                m.member_id.clone(),
                                assignment_for(c.generation, &me, &owner(&m.member_id)),
                            )
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            self.clients[i].busy = true;
            let req = sync_req(&c.member, c.instance.as_deref(), c.generation, plan);
            self.send(Sent::Sync(i, c.generation), |co, id, now| co.sync(id, req, now));
        } else {
            let req = HeartbeatRequest {
                group_id: GroupId::from("g"),
                generation: c.generation,
                member_id: c.member.clone(),
                instance_id: c.instance.as_deref().map(InstanceId::from),
            };
            self.send(Sent::Heartbeat(i), |co, id, now| co.heartbeat(id, req, now));
        }
    }

    fn join(&mut self, i: usize) {
        self.clients[i].busy = true;
        let c = self.clients[i].clone();
        let req = join_req(&c.member, c.instance.as_deref());
        self.send(Sent::Join(i), |co, id, now| co.join(id, req, now));
    }

    fn send(
        &mut self,
        sent: Sent,
        f: impl FnOnce(&mut GroupCoordinator, RequestId, Now) -> Vec<Output>,
    ) {
        let id = RequestId(self.sim.next_request + 1);
        self.sent.insert(id, sent);
        assert_eq!(self.sim.send(f), id);
    }

    fn process_replies(&mut self) {
        let replies = std::mem::take(&mut self.sim.replies);
        // Every member id a reply hands out is known before any reply is checked.
        for (id, response) in replies {
            let sent = self
                .sent
                .remove(&id)
                .unwrap_or_else(|| panic!("reply to unknown or answered {id:?}"));
            match (sent, response) {
                (Sent::Join(i), Response::Join(r)) => self.on_join(i, r),
                (Sent::Sync(i, generation), Response::Sync(r)) => self.on_sync(i, generation, r),
                (Sent::Heartbeat(i), Response::Heartbeat(r)) => self.on_error(i, r.error),
                (Sent::Commit(tp, offset, group), Response::Commit(r)) => {
                    if r.partitions[0].error.is_none() {
                        self.check.committed.insert((group, tp), offset);
                    }
                }
                (Sent::RefusedCommit, Response::Commit(r)) => {
                    assert!(
                        r.partitions[0].error.is_some(),
                        "a commit with a stale generation was accepted"
                    );
                }
                (Sent::Other, _) => {}
                (sent, response) => panic!("{sent:?} answered with {response:?}"),
            }
        }
    }

    fn on_error(&mut self, i: usize, error: Option<GroupError>) {
        let c = &mut self.clients[i];
        match error {
            None => {}
            Some(GroupError::UnknownMemberId | GroupError::FencedInstanceId) => {
                c.member = MemberId::unknown();
                c.must_rejoin = true;
            }
            Some(_) => c.must_rejoin = true,
        }
    }

    fn on_join(&mut self, i: usize, r: JoinResponse) {
        let c = &mut self.clients[i];
        c.busy = false;
        match r.error {
            None => {}
            Some(GroupError::MemberIdRequired) => {
                c.member = r.member_id;
                c.must_rejoin = true;
                return;
            }
            // A reply to a JoinGroup from an earlier incarnation does not concern this one.
            Some(_) if !r.member_id.is_unknown() && r.member_id != c.member => return,
            error => return self.on_error(i, error),
        }
        assert!(
            r.generation >= self.check.max_generation,
            "generation went back: {} after {}",
            r.generation,
            self.check.max_generation
        );
        self.check.max_generation = r.generation;
        c.member = r.member_id.clone();
        c.generation = r.generation;
        c.led = (!r.members.is_empty()).then(|| r.members.clone());
        c.must_rejoin = false;
        let leader = owner(&r.leader);
        let known = self.check.leaders.entry(r.generation).or_insert(leader.clone());
        assert_eq!(*known, leader, "two leaders in generation {}", r.generation);
        let members = self.check.members.entry(r.generation).or_default();
        members.insert(owner(&r.member_id));
        members.extend(r.members.iter().map(|m| owner(&m.member_id)));
    }

    fn on_sync(&mut self, i: usize, generation: Generation, r: SyncResponse) {
        self.clients[i].busy = false;
        if r.error.is_some() {
            return self.on_error(i, r.error);
        }
        let me = owner(&self.clients[i].member);
        let members = self.check.members.get(&generation);
        assert!(
            members.is_some_and(|m| m.contains(&me)),
            "{me} synced generation {generation} without being a member of it"
        );
        let text = String::from_utf8(r.assignment.to_vec()).unwrap_or_default();
        let parts: Vec<&str> = text.split('|').collect();
        assert_eq!(parts.len(), 3, "unexpected assignment {text:?} for {me} in {generation}");
        assert_eq!(parts[0], generation.0.to_string(), "assignment from another generation");
        let leader = self.check.leaders.get(&generation).map(String::as_str);
        assert_eq!(Some(parts[1]), leader, "assignment from a leader other than the generation's");
        assert_eq!(parts[2], me, "someone else's assignment");
        self.clients[i].synced = Some(generation);
        self.check.syncs_checked += 1;
    }

    fn check_state(&mut self) {
        let described = &self.sim.c.describe_groups(&[GroupId::from("g")])[0];
        if described.state != GroupState::Dead {
            assert!(described.generation >= self.last_generation, "group generation decreased");
            self.last_generation = described.generation;
        }
        if matches!(described.state, GroupState::Stable | GroupState::CompletingRebalance) {
            assert!(!described.members.is_empty());
        }
        // No identity is a member twice (a restarted static member replaces itself).
        let owners: BTreeSet<String> =
            described.members.iter().map(|m| owner(&m.member_id)).collect();
        assert_eq!(owners.len(), described.members.len(), "an instance is a member twice");
        for group in ["g", "simple"] {
            let live: BTreeMap<TopicPartition, i64> = self
                .sim
                .c
                .fetch_offsets(&GroupId::from(group), None)
                .into_iter()
                .filter_map(|(tp, o)| o.map(|o| (tp, o.offset.0)))
                .collect();
            let model: BTreeMap<TopicPartition, i64> = self
                .check
                .committed
                .iter()
                .filter(|((g, _), _)| *g == group)
                .map(|((_, tp), o)| (tp.clone(), *o))
                .collect();
            assert_eq!(live, model, "offsets of {group} differ from the acknowledged commits");
        }
    }

    /// Settles everything, rebuilds a coordinator from the durable log and compares, then
    /// unloads and checks every request got exactly one reply.
    fn finish(mut self) -> usize {
        for index in self.sim.unsettled() {
            self.sim.settle(index, true);
        }
        self.process_replies();
        self.check_state();
        let mut fresh = Sim::new(99);
        fresh.mono = self.sim.mono;
        fresh.wall_ms = self.sim.wall_ms;
        let outputs = fresh.c.load(self.sim.durable_log(), fresh.now());
        fresh.absorb(outputs);
        for group in ["g", "simple"] {
            let id = GroupId::from(group);
            assert_eq!(
                fresh.c.fetch_offsets(&id, None),
                self.sim.c.fetch_offsets(&id, None),
                "reload changed offsets of {group}"
            );
        }
        let reloaded = fresh.c.describe_groups(&[GroupId::from("g")])[0].generation;
        assert!(reloaded <= self.last_generation, "reload invented generation {reloaded}");
        let outputs = self.sim.c.unload_groups(|_| true);
        self.sim.absorb(outputs);
        self.process_replies();
        assert!(self.sent.is_empty(), "requests never answered: {:?}", self.sent);
        self.check.syncs_checked
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_group_traffic_keeps_kafkas_invariants(
        seed in any::<u64>(),
        actions in prop::collection::vec(action(), 1..400),
    ) {
        let mut world = World::new(seed);
        for a in actions {
            world.step(a);
        }
        let syncs = world.finish();
        if std::env::var_os("WEIR_COORDINATOR_STATS").is_some() {
            eprintln!("checked {syncs} assignments");
        }
    }
}
