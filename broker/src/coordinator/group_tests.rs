#![allow(clippy::unwrap_used)]

use bytes::Bytes;

use super::*;
use crate::coordinator::member::ParkedJoin;
use crate::coordinator::types::{Protocol, RequestId};

fn member(id: &str, instance: Option<&str>, protocols: &[&str]) -> Member {
    Member {
        id: MemberId::from(id),
        instance_id: instance.map(InstanceId::from),
        client_id: "c".into(),
        client_host: "h".into(),
        rebalance_timeout_ms: 100,
        session_timeout_ms: 10,
        protocol_type: "consumer".into(),
        protocols: protocols.iter().map(|p| Protocol::new(*p, Bytes::new())).collect(),
        assignment: Bytes::new(),
        awaiting_join: Some(ParkedJoin { request: RequestId(0), version: 7 }),
        awaiting_sync: None,
        is_new: true,
        joined_seq: 0,
    }
}

fn group() -> Group {
    Group::new(GroupId::from("g"), TimestampMs(0))
}

#[test]
fn first_member_leads_and_the_earliest_joined_succeeds_it() {
    let mut g = group();
    g.add(member("z", None, &["range"]));
    g.add(member("b", None, &["range"]));
    g.add(member("a", None, &["range"]));
    assert_eq!(g.leader, Some(MemberId::from("z")));
    assert_eq!(g.protocol_type.as_deref(), Some("consumer"));
    g.remove(&MemberId::from("z"));
    assert_eq!(g.leader, Some(MemberId::from("b")), "b joined before a");
}

#[test]
fn protocol_vote_picks_the_most_preferred_common_protocol() {
    let mut g = group();
    g.add(member("a", None, &["sticky", "range"]));
    g.add(member("b", None, &["range", "sticky"]));
    g.add(member("c", None, &["range", "roundrobin", "sticky"]));
    assert_eq!(g.select_protocol().as_deref(), Some("range"));
    g.state = GroupState::Stable;
    assert!(g.supports_protocols("consumer", &["sticky"]));
    assert!(!g.supports_protocols("consumer", &["roundrobin"]), "a and b lack it");
    assert!(!g.supports_protocols("connect", &["range"]));
}

#[test]
fn vote_ties_break_alphabetically() {
    let mut g = group();
    g.add(member("a", None, &["sticky", "range"]));
    g.add(member("b", None, &["range", "sticky"]));
    assert_eq!(g.select_protocol().as_deref(), Some("range"));
}

#[test]
fn empty_groups_accept_any_nonempty_protocol() {
    let g = group();
    assert!(g.supports_protocols("anything", &["x"]));
    assert!(!g.supports_protocols("", &["x"]));
    assert!(!g.supports_protocols("consumer", &[]));
}

#[test]
fn static_members_are_validated_by_instance_id() {
    let mut g = group();
    g.add(member("m1", Some("i"), &["range"]));
    let i = InstanceId::from("i");
    assert_eq!(g.validate_member(&MemberId::from("m1"), Some(&i)), Ok(()));
    assert_eq!(
        g.validate_member(&MemberId::from("m0"), Some(&i)),
        Err(GroupError::FencedInstanceId)
    );
    assert_eq!(
        g.validate_member(&MemberId::from("m1"), Some(&InstanceId::from("j"))),
        Err(GroupError::UnknownMemberId)
    );
    let old = g.replace_static_member(&MemberId::from("m1"), MemberId::from("m2")).unwrap();
    assert_eq!(old.id, MemberId::from("m1"));
    assert_eq!(g.leader, Some(MemberId::from("m2")));
    assert_eq!(
        g.validate_member(&MemberId::from("m1"), Some(&i)),
        Err(GroupError::FencedInstanceId)
    );
    assert_eq!(g.validate_member(&MemberId::from("m1"), None), Err(GroupError::UnknownMemberId));
}

#[test]
fn all_joined_needs_every_member_and_no_pending_id() {
    let mut g = group();
    g.add(member("a", None, &["range"]));
    assert!(g.has_all_members_joined());
    g.pending_members.insert(MemberId::from("p"));
    assert!(!g.has_all_members_joined());
    g.pending_members.clear();
    let mut b = member("b", None, &["range"]);
    b.awaiting_join = None;
    g.add(b);
    assert!(!g.has_all_members_joined());
    assert_eq!(g.awaiting_join_count(), 1);
}

#[test]
fn leader_that_did_not_rejoin_is_replaced_by_one_that_did() {
    let mut g = group();
    let mut a = member("a", None, &["range"]);
    a.awaiting_join = None;
    g.add(a);
    g.add(member("b", None, &["range"]));
    assert!(g.maybe_elect_new_joined_leader());
    assert_eq!(g.leader, Some(MemberId::from("b")));
}

#[test]
fn next_generation_selects_protocol_and_subscriptions() {
    let mut g = group();
    let mut a = member("a", None, &[]);
    a.protocols = vec![Protocol::new("range", subscription::encode_v0(&["t1", "t2"]))];
    g.add(a);
    g.transition_to(GroupState::PreparingRebalance, TimestampMs(5));
    g.init_next_generation(TimestampMs(6));
    assert_eq!(g.generation, Generation(1));
    assert!(g.is(GroupState::CompletingRebalance));
    assert_eq!(g.protocol_name.as_deref(), Some("range"));
    assert!(g.is_subscribed_to("t1") && !g.is_subscribed_to("t3"));
    assert_eq!(g.state_since, Some(TimestampMs(6)));
}

#[test]
#[should_panic(expected = "invalid transition")]
fn invalid_transitions_are_bugs() {
    group().transition_to(GroupState::Stable, TimestampMs(0));
}
