//! A small harness for the coordinator's unit tests: a simulated clock, persistence that
//! succeeds at once (or is held for the test to settle), and replies collected by request id.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::io::Instant;
use crate::model::{LeaderEpoch, Offset, TopicPartition};

pub const SESSION_MS: i32 = 10_000;
pub const REBALANCE_MS: i32 = 20_000;

pub struct Harness {
    pub c: GroupCoordinator,
    pub mono: Instant,
    pub wall_ms: i64,
    pub replies: BTreeMap<RequestId, Response>,
    pub log: Vec<Record>,
    pub held: Vec<(PersistId, Vec<Record>)>,
    pub auto_persist: bool,
    next_request: u64,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with_config(CoordinatorConfig::for_tests())
    }

    pub fn with_config(config: CoordinatorConfig) -> Harness {
        Harness {
            c: GroupCoordinator::new(config, 42),
            mono: Instant::ZERO,
            wall_ms: 1_700_000_000_000,
            replies: BTreeMap::new(),
            log: Vec::new(),
            held: Vec::new(),
            auto_persist: true,
            next_request: 0,
        }
    }

    pub fn now(&self) -> Now {
        Now::new(self.mono, self.wall_ms)
    }

    pub fn request_id(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    pub fn absorb(&mut self, outputs: Vec<Output>) {
        for output in outputs {
            match output {
                Output::Reply(id, response) => {
                    let previous = self.replies.insert(id, response);
                    assert!(previous.is_none(), "request {id:?} answered twice");
                }
                Output::Persist { id, records } => {
                    if self.auto_persist {
                        self.log.extend(records);
                        let more = self.c.persisted(id, Ok(()), self.now());
                        self.absorb(more);
                    } else {
                        self.held.push((id, records));
                    }
                }
            }
        }
    }

    /// Settles the oldest held batch.
    pub fn settle(&mut self, result: Result<(), PersistError>) {
        let (id, records) = self.held.remove(0);
        if result.is_ok() {
            self.log.extend(records);
        }
        let outputs = self.c.persisted(id, result, self.now());
        self.absorb(outputs);
    }

    /// Moves both clocks forward, firing each timer at its own deadline on the way.
    pub fn advance(&mut self, ms: u64) {
        let target = self.mono + Duration::from_millis(ms);
        while let Some(deadline) = self.c.next_deadline().filter(|d| *d <= target) {
            let step = deadline.saturating_duration_since(self.mono);
            self.mono = self.mono.max(deadline);
            self.wall_ms += step.as_millis() as i64;
            self.tick();
        }
        self.wall_ms += target.saturating_duration_since(self.mono).as_millis() as i64;
        self.mono = target;
        self.tick();
    }

    pub fn tick(&mut self) {
        let outputs = self.c.tick(self.now());
        self.absorb(outputs);
    }

    pub fn take(&mut self, id: RequestId) -> Option<Response> {
        self.replies.remove(&id)
    }

    pub fn join_reply(&mut self, id: RequestId) -> JoinResponse {
        match self.take(id) {
            Some(Response::Join(r)) => r,
            other => panic!("expected a JoinGroup reply to {id:?}, got {other:?}"),
        }
    }

    pub fn sync_reply(&mut self, id: RequestId) -> SyncResponse {
        match self.take(id) {
            Some(Response::Sync(r)) => r,
            other => panic!("expected a SyncGroup reply to {id:?}, got {other:?}"),
        }
    }

    pub fn join_request(
        group: &str,
        member: &MemberId,
        instance: Option<&str>,
        topics: &[&str],
    ) -> JoinRequest {
        JoinRequest {
            version: 7,
            group_id: GroupId::from(group),
            member_id: member.clone(),
            instance_id: instance.map(InstanceId::from),
            client_id: "client".into(),
            client_host: "/10.0.0.1".into(),
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: REBALANCE_MS,
            protocol_type: CONSUMER_PROTOCOL_TYPE.into(),
            protocols: vec![Protocol::new("range", encode_subscription_v0(topics))],
            reason: None,
        }
    }

    pub fn send_join(&mut self, req: JoinRequest) -> RequestId {
        let id = self.request_id();
        let outputs = self.c.join(id, req, self.now());
        self.absorb(outputs);
        id
    }

    pub fn join(&mut self, group: &str, member: &MemberId) -> RequestId {
        self.send_join(Self::join_request(group, member, None, &["t"]))
    }

    /// A dynamic member's full entry: MEMBER_ID_REQUIRED, then the parked rejoin.
    pub fn join_new(&mut self, group: &str) -> (MemberId, RequestId) {
        let first = self.join(group, &MemberId::unknown());
        let r = self.join_reply(first);
        assert_eq!(r.error, Some(GroupError::MemberIdRequired));
        let id = r.member_id;
        let second = self.join(group, &id);
        (id, second)
    }

    pub fn sync(
        &mut self,
        group: &str,
        member: &MemberId,
        generation: Generation,
        assignments: Vec<(MemberId, Bytes)>,
    ) -> RequestId {
        let id = self.request_id();
        let req = SyncRequest {
            group_id: GroupId::from(group),
            generation,
            member_id: member.clone(),
            instance_id: None,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.into()),
            protocol_name: Some("range".into()),
            assignments,
        };
        let outputs = self.c.sync(id, req, self.now());
        self.absorb(outputs);
        id
    }

    pub fn heartbeat(
        &mut self,
        group: &str,
        member: &MemberId,
        generation: Generation,
    ) -> Option<GroupError> {
        let id = self.request_id();
        let req = HeartbeatRequest {
            group_id: GroupId::from(group),
            generation,
            member_id: member.clone(),
            instance_id: None,
        };
        let outputs = self.c.heartbeat(id, req, self.now());
        self.absorb(outputs);
        match self.take(id) {
            Some(Response::Heartbeat(r)) => r.error,
            other => panic!("expected a Heartbeat reply, got {other:?}"),
        }
    }

    pub fn commit(
        &mut self,
        group: &str,
        member: &MemberId,
        generation: Generation,
        tp: TopicPartition,
        offset: i64,
    ) -> RequestId {
        let entry = OffsetCommit {
            partition: tp,
            offset: Offset(offset),
            leader_epoch: LeaderEpoch(0),
            metadata: None,
            topic_id: None,
        };
        self.commit_offsets(group, member, generation, vec![entry])
    }

    /// An OffsetCommit (v8) of `offsets` to `group` by `member`; the request's id.
    pub fn commit_offsets(
        &mut self,
        group: &str,
        member: &MemberId,
        generation: Generation,
        offsets: Vec<OffsetCommit>,
    ) -> RequestId {
        self.commit_retained(group, member, generation, offsets, None)
    }

    /// An OffsetCommit of `offsets` to `group` by `member`, with a retention time (v2) or
    /// without (v8); the request's id.
    pub fn commit_retained(
        &mut self,
        group: &str,
        member: &MemberId,
        generation: Generation,
        offsets: Vec<OffsetCommit>,
        retention_ms: Option<i64>,
    ) -> RequestId {
        let id = self.request_id();
        let req = CommitRequest {
            version: if retention_ms.is_some() { 2 } else { 8 },
            group_id: GroupId::from(group),
            generation,
            member_id: member.clone(),
            instance_id: None,
            retention_ms,
            offsets,
        };
        let outputs = self.c.commit(id, req, self.now());
        self.absorb(outputs);
        id
    }

    pub fn commit_error(&mut self, id: RequestId) -> Option<GroupError> {
        match self.take(id) {
            Some(Response::Commit(r)) => r.partitions[0].error,
            other => panic!("expected a commit reply, got {other:?}"),
        }
    }

    pub fn state(&self, group: &str) -> GroupState {
        self.c.describe_groups(&[GroupId::from(group)])[0].state
    }

    pub fn generation(&self, group: &str) -> Generation {
        self.c.describe_groups(&[GroupId::from(group)])[0].generation
    }

    /// `member` leaves `group` (LeaveGroup v3+, by itself).
    pub fn leave_alone(&mut self, group: &str, member: MemberId) {
        let id = self.request_id();
        let leave = LeaveRequest {
            group_id: GroupId::from(group),
            members: vec![LeavingMember { member_id: member, instance_id: None, reason: None }],
        };
        let out = self.c.leave(id, leave, self.now());
        self.absorb(out);
    }

    /// One member forms a Stable group; returns its id and generation.
    pub fn stable_single(&mut self, group: &str) -> (MemberId, Generation) {
        let (id, join) = self.join_new(group);
        self.tick();
        let r = self.join_reply(join);
        assert_eq!(r.error, None);
        let s = self.sync(group, &id, r.generation, vec![(id.clone(), Bytes::from_static(b"a"))]);
        assert_eq!(self.sync_reply(s).error, None);
        (id, r.generation)
    }
}
