#![allow(clippy::unwrap_used)]

use bytes::Bytes;

use crate::coordinator::test_support::*;
use crate::coordinator::*;

#[test]
fn member_id_required_then_rejoin_joins() {
    let mut h = Harness::new();
    let first = h.join("g", &MemberId::unknown());
    let r = h.join_reply(first);
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    assert!(r.member_id.as_str().starts_with("client-"), "{}", r.member_id);
    assert_eq!(h.state("g"), GroupState::Empty, "a pending member is not a member");
    let second = h.join("g", &r.member_id);
    assert!(h.take(second).is_none(), "parked until the join phase completes");
    h.tick();
    let joined = h.join_reply(second);
    assert_eq!(joined.error, None);
    assert_eq!(joined.generation, Generation(1));
    assert_eq!(joined.leader, r.member_id);
    assert_eq!(joined.members.len(), 1);
    assert_eq!(h.state("g"), GroupState::CompletingRebalance);
}

#[test]
fn old_clients_join_without_member_id_round_trip() {
    let mut h = Harness::new();
    let mut req = Harness::join_request("g", &MemberId::unknown(), None, &["t"]);
    req.version = 3;
    let id = h.send_join(req);
    h.tick();
    let r = h.join_reply(id);
    assert_eq!(r.error, None);
    assert!(!r.member_id.is_unknown());
}

#[test]
fn pending_member_that_never_returns_is_forgotten() {
    let mut h = Harness::new();
    let first = h.join("g", &MemberId::unknown());
    let id = h.join_reply(first).member_id;
    h.advance(SESSION_MS as u64 + 1);
    let late = h.join("g", &id);
    assert_eq!(h.join_reply(late).error, Some(GroupError::UnknownMemberId));
}

#[test]
fn bad_joins_are_refused() {
    let mut h = Harness::new();
    let mut req = Harness::join_request("g", &MemberId::unknown(), None, &["t"]);
    req.session_timeout_ms = 10;
    let id = h.send_join(req);
    assert_eq!(h.join_reply(id).error, Some(GroupError::InvalidSessionTimeout));
    let id = h.send_join(Harness::join_request("", &MemberId::unknown(), None, &["t"]));
    assert_eq!(h.join_reply(id).error, Some(GroupError::InvalidGroupId));
    let id = h.join("nope", &MemberId::from("ghost"));
    assert_eq!(h.join_reply(id).error, Some(GroupError::UnknownMemberId));
    let mut req = Harness::join_request("g", &MemberId::unknown(), None, &["t"]);
    req.protocol_type = String::new();
    let id = h.send_join(req);
    assert_eq!(h.join_reply(id).error, Some(GroupError::InconsistentGroupProtocol));
}

#[test]
fn incompatible_protocols_are_refused_once_the_group_has_members() {
    let mut h = Harness::new();
    h.stable_single("g");
    let mut req = Harness::join_request("g", &MemberId::unknown(), None, &["t"]);
    req.protocols = vec![Protocol::new("roundrobin", Bytes::new())];
    let id = h.send_join(req);
    assert_eq!(h.join_reply(id).error, Some(GroupError::InconsistentGroupProtocol));
}

#[test]
fn group_max_size_refuses_extra_members() {
    let mut config = CoordinatorConfig::for_tests();
    config.group_members_max = 1;
    let mut h = Harness::with_config(config);
    let (a, _) = h.stable_single("g");
    let refused = h.join("g", &MemberId::unknown());
    let r = h.join_reply(refused);
    assert_eq!(
        r.error,
        Some(GroupError::GroupMaxSizeReached),
        "refused before an id is handed out"
    );
    assert!(r.member_id.is_unknown());
    let rejoin = h.join("g", &a);
    assert_eq!(h.join_reply(rejoin).error, None, "existing members are still welcome");
}

#[test]
fn initial_rebalance_delay_waits_for_more_members_and_is_extended() {
    let mut config = CoordinatorConfig::for_tests();
    config.initial_rebalance_delay_ms = 3_000;
    let mut h = Harness::with_config(config);
    let (a, join_a) = h.join_new("g");
    h.advance(2_000);
    let (b, join_b) = h.join_new("g");
    h.advance(1_500); // the first delay ends, but b arrived during it: extended by 3 s
    assert!(h.take(join_a).is_none());
    h.advance(3_000);
    let (ra, rb) = (h.join_reply(join_a), h.join_reply(join_b));
    assert_eq!((ra.generation, rb.generation), (Generation(1), Generation(1)));
    assert_eq!(ra.leader, a);
    assert_eq!(ra.members.len(), 2);
    assert!(rb.members.is_empty());
    assert_ne!(a, b);
}

#[test]
fn rejoining_with_same_metadata_in_stable_returns_the_current_generation() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g");
    let (b, join_b) = h.join_new("g");
    assert_eq!(h.heartbeat("g", &a, generation), Some(GroupError::RebalanceInProgress));
    let join_a = h.join("g", &a);
    let (ra, rb) = (h.join_reply(join_a), h.join_reply(join_b));
    assert_eq!(ra.generation, rb.generation);
    let s_b = h.sync("g", &b, rb.generation, vec![]);
    let s_a = h.sync("g", &a, ra.generation, vec![(b.clone(), Bytes::from_static(b"B"))]);
    assert_eq!(h.sync_reply(s_b).assignment, Bytes::from_static(b"B"));
    assert_eq!(h.sync_reply(s_a).assignment, Bytes::new());
    // A follower rejoining unchanged gets the same generation back, without a rebalance.
    let again = h.join("g", &b);
    let r = h.join_reply(again);
    assert_eq!((r.error, r.generation), (None, rb.generation));
    assert_eq!(h.state("g"), GroupState::Stable);
    // The leader rejoining forces one.
    h.join("g", &a);
    assert_eq!(h.state("g"), GroupState::PreparingRebalance);
}

#[test]
fn superseded_join_is_answered() {
    let mut h = Harness::new();
    let (a, _) = h.stable_single("g");
    // A pending member id keeps the join phase open.
    let pending = h.join("g", &MemberId::unknown());
    let p = h.join_reply(pending).member_id;
    let first = h.join("g", &a);
    let second = h.join("g", &a);
    assert_eq!(h.join_reply(first).error, Some(GroupError::RebalanceInProgress));
    assert!(h.take(second).is_none());
    let joined = h.join("g", &p);
    assert_eq!(h.join_reply(second).error, None);
    assert_eq!(h.join_reply(joined).error, None);
}

fn static_join(h: &mut Harness, instance: &str) -> RequestId {
    h.send_join(Harness::join_request("g", &MemberId::unknown(), Some(instance), &["t"]))
}

#[test]
fn static_member_restart_keeps_the_generation_and_fences_the_old_id() {
    let mut h = Harness::new();
    let j1 = static_join(&mut h, "i1");
    let j2 = static_join(&mut h, "i2");
    h.tick();
    let (r1, r2) = (h.join_reply(j1), h.join_reply(j2));
    assert!(r1.member_id.as_str().starts_with("i1-"), "static ids start with the instance id");
    let generation = r1.generation;
    let assignment = vec![
        (r1.member_id.clone(), Bytes::from_static(b"one")),
        (r2.member_id.clone(), Bytes::from_static(b"two")),
    ];
    let s1 = h.sync("g", &r1.member_id, generation, assignment);
    let s2 = h.sync("g", &r2.member_id, generation, vec![]);
    assert_eq!(h.sync_reply(s1).error, None);
    assert_eq!(h.sync_reply(s2).error, None);

    // i2 restarts: a new member id, no rebalance, its assignment is kept.
    let rejoin = static_join(&mut h, "i2");
    let r = h.join_reply(rejoin);
    assert_eq!((r.error, r.generation), (None, generation));
    assert_ne!(r.member_id, r2.member_id);
    assert_eq!(h.state("g"), GroupState::Stable);
    let s = h.sync("g", &r.member_id, generation, vec![]);
    assert_eq!(h.sync_reply(s).assignment, Bytes::from_static(b"two"));
    // The old incarnation is fenced.
    let hb = h.request_id();
    let req = HeartbeatRequest {
        group_id: GroupId::from("g"),
        generation,
        member_id: r2.member_id.clone(),
        instance_id: Some(InstanceId::from("i2")),
    };
    let out = h.c.heartbeat(hb, req, h.now());
    h.absorb(out);
    assert_eq!(
        h.take(hb),
        Some(Response::Heartbeat(HeartbeatResponse { error: Some(GroupError::FencedInstanceId) }))
    );
    assert_eq!(h.heartbeat("g", &r1.member_id, generation), None, "the other member never noticed");
}

#[test]
fn static_replacement_waits_for_its_record_and_reverts_if_it_fails() {
    let mut h = Harness::new();
    let j = static_join(&mut h, "i");
    h.tick();
    let r = h.join_reply(j);
    let s = h.sync(
        "g",
        &r.member_id,
        r.generation,
        vec![(r.member_id.clone(), Bytes::from_static(b"x"))],
    );
    h.sync_reply(s);
    h.auto_persist = false;
    let rejoin = static_join(&mut h, "i");
    assert!(h.take(rejoin).is_none(), "held until the member record is durable");
    h.settle(Err(PersistError::Storage));
    let failed = h.join_reply(rejoin);
    assert_eq!(failed.error, Some(GroupError::NotCoordinator));
    assert_eq!(
        h.heartbeat("g", &r.member_id, r.generation),
        None,
        "the old id holds the instance again"
    );
}

#[test]
fn static_leader_rejoining_with_v9_skips_assignment() {
    let mut h = Harness::new();
    let j = static_join(&mut h, "i");
    h.tick();
    let r = h.join_reply(j);
    let s = h.sync("g", &r.member_id, r.generation, vec![]);
    h.sync_reply(s);
    let mut req = Harness::join_request("g", &MemberId::unknown(), Some("i"), &["t"]);
    req.version = 9;
    let rejoin = h.send_join(req);
    let r2 = h.join_reply(rejoin);
    assert!(r2.skip_assignment);
    assert_eq!(r2.leader, r2.member_id);
    assert_eq!(r2.members.len(), 1);
}

/// A pending member that expires during the initial rebalance delay does not end the delay:
/// the members that joined wait for it, as in Kafka's original coordinator (whose initial
/// delayed join completes only when it expires), so that more can still arrive.
#[test]
fn a_pending_member_expiring_does_not_cut_the_initial_delay_short() {
    let mut config = CoordinatorConfig::for_tests();
    config.initial_rebalance_delay_ms = 15_000;
    let mut h = Harness::with_config(config);
    let (a, join_a) = h.join_new("g");
    let pending = h.join("g", &MemberId::unknown());
    assert_eq!(h.join_reply(pending).error, Some(GroupError::MemberIdRequired));
    h.advance(SESSION_MS as u64 + 1);
    assert!(h.take(join_a).is_none(), "the pending member's expiry ended the initial delay");
    assert_eq!(h.state("g"), GroupState::PreparingRebalance);
    h.advance(REBALANCE_MS as u64);
    let r = h.join_reply(join_a);
    assert_eq!((r.error, r.generation, r.leader.clone()), (None, Generation(1), a));
    assert_eq!(r.members.len(), 1);
}
