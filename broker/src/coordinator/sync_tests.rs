#![allow(clippy::unwrap_used)]

use bytes::Bytes;

use crate::coordinator::test_support::*;
use crate::coordinator::*;

/// Three members join one after another before the (3 s) initial delay ends.
fn three_members(h: &mut Harness) -> Vec<(MemberId, JoinResponse)> {
    let mut joins = Vec::new();
    for _ in 0..3 {
        joins.push(h.join_new("g"));
        h.advance(500);
    }
    h.advance(10_000);
    joins.into_iter().map(|(id, req)| (id.clone(), h.join_reply(req))).collect()
}

fn delayed() -> Harness {
    let mut config = CoordinatorConfig::for_tests();
    config.initial_rebalance_delay_ms = 3_000;
    Harness::with_config(config)
}

#[test]
fn three_members_form_one_generation_and_followers_wait_for_the_leader() {
    let mut h = delayed();
    let joined = three_members(&mut h);
    let generation = joined[0].1.generation;
    assert!(joined.iter().all(|(_, r)| r.error.is_none() && r.generation == generation));
    let leader = joined[0].0.clone();
    assert!(joined.iter().all(|(_, r)| r.leader == leader), "one leader");
    assert_eq!(joined[0].1.members.len(), 3, "the leader sees every member's metadata");
    assert!(joined[0].1.members.iter().all(|m| !m.metadata.is_empty()));
    assert!(joined[1].1.members.is_empty() && joined[2].1.members.is_empty());

    let f1 = h.sync("g", &joined[1].0, generation, vec![]);
    let f2 = h.sync("g", &joined[2].0, generation, vec![]);
    assert!(h.take(f1).is_none() && h.take(f2).is_none(), "followers wait for the leader");
    let plan: Vec<_> =
        joined.iter().map(|(id, _)| (id.clone(), Bytes::from(format!("for {id}")))).collect();
    h.auto_persist = false;
    let l = h.sync("g", &leader, generation, plan);
    assert!(h.take(l).is_none(), "nothing is handed out before the assignment is durable");
    h.settle(Ok(()));
    for (req, (id, _)) in [l, f1, f2].into_iter().zip(&joined) {
        let r = h.sync_reply(req);
        assert_eq!(r.error, None);
        assert_eq!(r.assignment, Bytes::from(format!("for {id}")));
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
    }
    assert_eq!(h.state("g"), GroupState::Stable);
    match h.log.last() {
        Some(Record::Group { value: Some(v), .. }) => {
            assert_eq!(v.generation, generation);
            assert_eq!(v.members.len(), 3);
            assert!(v.members.iter().all(|m| !m.assignment.is_empty()));
        }
        other => panic!("expected the group's metadata to be persisted, got {other:?}"),
    }
}

#[test]
fn failed_assignment_write_sends_everyone_back_to_rejoin() {
    let mut h = Harness::new();
    let (a, join) = h.join_new("g");
    h.tick();
    let generation = h.join_reply(join).generation;
    h.auto_persist = false;
    let s = h.sync("g", &a, generation, vec![(a.clone(), Bytes::from_static(b"x"))]);
    h.settle(Err(PersistError::NotEnoughReplicas));
    let r = h.sync_reply(s);
    assert_eq!(r.error, Some(GroupError::CoordinatorNotAvailable));
    assert_eq!(h.state("g"), GroupState::PreparingRebalance);
}

#[test]
fn sync_and_heartbeat_validate_member_and_generation() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g");
    let stale = Generation(generation.0 - 1);
    let s = h.sync("g", &a, stale, vec![]);
    assert_eq!(h.sync_reply(s).error, Some(GroupError::IllegalGeneration));
    let s = h.sync("g", &MemberId::from("ghost"), generation, vec![]);
    assert_eq!(h.sync_reply(s).error, Some(GroupError::UnknownMemberId));
    let s = h.sync("nope", &a, generation, vec![]);
    assert_eq!(h.sync_reply(s).error, Some(GroupError::UnknownMemberId));
    assert_eq!(h.heartbeat("g", &a, stale), Some(GroupError::IllegalGeneration));
    assert_eq!(
        h.heartbeat("g", &MemberId::from("ghost"), generation),
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(h.heartbeat("g", &a, generation), None);
    // During a rebalance SyncGroup and Heartbeat say "rejoin".
    h.join_new("g");
    assert_eq!(h.heartbeat("g", &a, generation), Some(GroupError::RebalanceInProgress));
    let s = h.sync("g", &a, generation, vec![]);
    assert_eq!(h.sync_reply(s).error, Some(GroupError::RebalanceInProgress));
}

#[test]
fn a_new_member_rebalances_a_stable_group() {
    let mut h = Harness::new();
    let (a, g1) = h.stable_single("g");
    let (b, join_b) = h.join_new("g");
    assert_eq!(h.state("g"), GroupState::PreparingRebalance);
    assert!(h.take(join_b).is_none(), "waits for a to rejoin");
    assert_eq!(h.heartbeat("g", &a, g1), Some(GroupError::RebalanceInProgress));
    let join_a = h.join("g", &a);
    let (ra, rb) = (h.join_reply(join_a), h.join_reply(join_b));
    assert_eq!(ra.generation, Generation(g1.0 + 1));
    assert_eq!(rb.generation, ra.generation);
    assert_eq!(ra.leader, a, "the previous leader stays leader");
    assert_eq!(rb.member_id, b);
}

#[test]
fn session_timeout_removes_a_silent_member_and_rebalances() {
    let mut h = Harness::new();
    let (a, _) = h.stable_single("g");
    let (b, join_b) = h.join_new("g");
    let join_a = h.join("g", &a);
    let generation = h.join_reply(join_a).generation;
    h.join_reply(join_b);
    let sa = h.sync("g", &a, generation, vec![]);
    let sb = h.sync("g", &b, generation, vec![]);
    h.sync_reply(sa);
    h.sync_reply(sb);
    // a keeps heartbeating; b goes silent.
    for _ in 0..3 {
        h.advance(SESSION_MS as u64 / 2);
        let _ = h.heartbeat("g", &a, generation);
    }
    assert_eq!(h.state("g"), GroupState::PreparingRebalance, "b's session expired");
    let members = &h.c.describe_groups(&[GroupId::from("g")])[0].members;
    assert_eq!(members.len(), 1);
    assert_eq!(h.heartbeat("g", &b, generation), Some(GroupError::UnknownMemberId));
    let rejoin = h.join("g", &a);
    let r = h.join_reply(rejoin);
    assert_eq!(r.generation, Generation(generation.0 + 1));
    assert_eq!(r.members.len(), 1);
}

#[test]
fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let mut h = Harness::new();
    let (a, _) = h.stable_single("g");
    let (b, join_b) = h.join_new("g");
    let join_a = h.join("g", &a);
    let g2 = h.join_reply(join_a).generation;
    h.join_reply(join_b);
    for m in [&a, &b] {
        let s = h.sync("g", m, g2, vec![]);
        h.sync_reply(s);
    }
    // a third member triggers a rebalance; only it and a rejoin, b keeps heartbeating only.
    let (_c, join_c) = h.join_new("g");
    let join_a = h.join("g", &a);
    for _ in 0..4 {
        assert_eq!(h.heartbeat("g", &b, g2), Some(GroupError::RebalanceInProgress));
        h.advance(REBALANCE_MS as u64 / 4);
    }
    let (ra, rc) = (h.join_reply(join_a), h.join_reply(join_c));
    assert_eq!(ra.generation, Generation(g2.0 + 1));
    assert_eq!(rc.generation, ra.generation);
    assert_eq!(ra.members.len(), 2, "b was dropped");
    assert!(ra.members.iter().all(|m| m.member_id != b));
}

#[test]
fn members_that_never_sync_are_removed() {
    let mut h = Harness::new();
    let (a, join_a) = h.join_new("g");
    let (b, join_b) = h.join_new("g");
    h.tick();
    let generation = h.join_reply(join_a).generation;
    h.join_reply(join_b);
    // b (a follower) syncs and waits; the leader a never sends its assignment.
    // Both keep heartbeating, so only the sync deadline (the rebalance timeout) can act.
    let s = h.sync("g", &b, generation, vec![]);
    for _ in 0..4 {
        assert_eq!(h.heartbeat("g", &a, generation), None);
        assert_eq!(h.heartbeat("g", &b, generation), None);
        h.advance(REBALANCE_MS as u64 / 4);
    }
    assert_eq!(h.heartbeat("g", &a, generation), Some(GroupError::UnknownMemberId));
    assert_eq!(
        h.sync_reply(s).error,
        Some(GroupError::RebalanceInProgress),
        "b's parked sync learns of the rebalance"
    );
    assert_eq!(h.state("g"), GroupState::PreparingRebalance);
}

#[test]
fn leave_triggers_a_rebalance_and_the_last_leave_empties_the_group() {
    let mut h = Harness::new();
    let (a, _) = h.stable_single("g");
    let (b, join_b) = h.join_new("g");
    let join_a = h.join("g", &a);
    let generation = h.join_reply(join_a).generation;
    h.join_reply(join_b);
    for m in [&a, &b] {
        let s = h.sync("g", m, generation, vec![]);
        h.sync_reply(s);
    }
    let leave = |h: &mut Harness, m: &MemberId| {
        let id = h.request_id();
        let req = LeaveRequest {
            group_id: GroupId::from("g"),
            members: vec![LeavingMember { member_id: m.clone(), instance_id: None, reason: None }],
        };
        let out = h.c.leave(id, req, h.now());
        h.absorb(out);
        match h.take(id) {
            Some(Response::Leave(r)) => r.members[0].error,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(leave(&mut h, &b), None);
    assert_eq!(h.state("g"), GroupState::PreparingRebalance);
    assert_eq!(leave(&mut h, &b), Some(GroupError::UnknownMemberId));
    assert_eq!(leave(&mut h, &a), None);
    assert_eq!(h.state("g"), GroupState::Empty);
    assert_eq!(h.generation("g"), Generation(generation.0 + 1), "emptying ends a generation");
    assert!(
        matches!(h.log.last(), Some(Record::Group { value: Some(v), .. }) if v.members.is_empty())
    );
}
