#![allow(clippy::unwrap_used)]

use bytes::Bytes;

use crate::coordinator::test_support::*;
use crate::coordinator::*;
use crate::model::TopicPartition;

/// A fresh coordinator rebuilt from `h`'s durable log, via the byte encoding.
fn reload(h: &Harness) -> Harness {
    let mut fresh = Harness::new();
    fresh.mono = h.mono;
    fresh.wall_ms = h.wall_ms;
    let records: Vec<Record> = h
        .log
        .iter()
        .map(|r| {
            let key = r.encode_key().unwrap();
            let value = r.encode_value().unwrap();
            Record::decode(&key, value.as_deref()).unwrap()
        })
        .collect();
    let out = fresh.c.load(records, fresh.now());
    fresh.absorb(out);
    fresh
}

#[test]
fn offsets_and_generation_survive_a_reload() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g");
    for (p, o) in [(0, 5), (1, 7), (0, 6)] {
        let c = h.commit("g", &a, generation, TopicPartition::new("t", p), o);
        assert_eq!(h.commit_error(c), None);
    }
    let s =
        h.commit("simple", &MemberId::unknown(), Generation::NONE, TopicPartition::new("u", 0), 3);
    h.commit_error(s);
    let mut r = reload(&h);
    let g = GroupId::from("g");
    assert_eq!(r.c.fetch_offsets(&g, None), h.c.fetch_offsets(&g, None));
    assert_eq!(r.c.fetch_offsets(&g, None).len(), 2);
    assert_eq!(r.c.fetch_offsets(&GroupId::from("simple"), None).len(), 1);
    // The group is back Stable, with its member and assignment; the member carries on.
    let described = &r.c.describe_groups(&[g])[0];
    assert_eq!((described.state, described.generation), (GroupState::Stable, generation));
    assert_eq!(described.members[0].assignment, Bytes::from_static(b"a"));
    assert_eq!(r.heartbeat("g", &a, generation), None);
    let c = r.commit("g", &a, generation, TopicPartition::new("t", 0), 8);
    assert_eq!(r.commit_error(c), None);
}

#[test]
fn restored_members_that_stay_silent_expire() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g");
    let mut r = reload(&h);
    r.advance(SESSION_MS as u64 + 1);
    assert_eq!(r.heartbeat("g", &a, generation), Some(GroupError::UnknownMemberId));
    assert_eq!(r.state("g"), GroupState::Empty);
    assert_eq!(r.generation("g"), Generation(generation.0 + 1));
}

#[test]
fn an_emptied_group_comes_back_empty_with_its_generation() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g");
    let id = h.request_id();
    let leave = LeaveRequest {
        group_id: GroupId::from("g"),
        members: vec![LeavingMember { member_id: a, instance_id: None, reason: None }],
    };
    let out = h.c.leave(id, leave, h.now());
    h.absorb(out);
    let mut r = reload(&h);
    assert_eq!(r.state("g"), GroupState::Empty);
    assert_eq!(r.generation("g"), Generation(generation.0 + 1));
    let (_, join) = r.join_new("g");
    r.tick();
    assert_eq!(r.join_reply(join).generation, Generation(generation.0 + 2));
}

#[test]
fn deleted_groups_stay_deleted() {
    let mut h = Harness::new();
    let c =
        h.commit("gone", &MemberId::unknown(), Generation::NONE, TopicPartition::new("t", 0), 1);
    h.commit_error(c);
    let id = h.request_id();
    let out = h.c.delete_groups(id, vec![GroupId::from("gone")], h.now());
    h.absorb(out);
    let r = reload(&h);
    assert!(r.c.list_groups(&[]).is_empty());
    assert!(r.c.fetch_offsets(&GroupId::from("gone"), None).is_empty());
}
