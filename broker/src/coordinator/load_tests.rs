#![allow(clippy::unwrap_used)]

use bytes::Bytes;

use crate::coordinator::test_support::*;
use crate::coordinator::*;
use crate::model::{LeaderEpoch, Offset, TopicPartition};

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

/// An offset committed with a retention time keeps its expiry through a reload (in the layout
/// that carries one), and reads back as it did before, with no leader epoch.
#[test]
fn an_offsets_expiry_survives_a_reload() {
    let mut h = Harness::new();
    let (none, unknown) = (Generation::NONE, MemberId::unknown());
    let (kept, expiring) = (TopicPartition::new("kept", 0), TopicPartition::new("expiring", 0));
    for (tp, retention_ms) in [(&kept, None), (&expiring, Some(60_000))] {
        let entry = OffsetCommit {
            partition: tp.clone(),
            offset: Offset(5),
            leader_epoch: LeaderEpoch(3),
            metadata: None,
            topic_id: None,
        };
        let c = h.commit_retained("s", &unknown, none, vec![entry], retention_ms);
        assert_eq!(h.commit_error(c), None);
    }
    let fetch = |h: &Harness| h.c.fetch_offsets(&GroupId::from("s"), None);
    let before = fetch(&h);
    let mut r = reload(&h);
    assert_eq!(fetch(&r), before, "the same offsets, epochs and expiry after the reload");
    let epochs: Vec<i32> = before.iter().map(|(_, o)| o.as_ref().unwrap().leader_epoch.0).collect();
    assert_eq!(epochs, [-1, 3], "an expiring offset has no leader epoch, in memory as in the log");
    // The default check interval is 10 minutes, the broker's retention a week.
    r.advance(11 * 60_000);
    assert_eq!(committed(&r, "s", &expiring), None);
    assert_eq!(committed(&r, "s", &kept), Some(5));
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
    h.leave_alone("g", a);
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

/// The records of `h`'s durable log that belong to `group`, as a load of its partition reads.
fn records_of(h: &Harness, group: &str) -> Vec<Record> {
    h.log.iter().filter(|r| r.group().as_str() == group).cloned().collect()
}

/// The committed offset of `group` for `tp`, if any.
fn committed(h: &Harness, group: &str, tp: &TopicPartition) -> Option<i64> {
    let fetched = h.c.fetch_offsets(&GroupId::from(group), Some(std::slice::from_ref(tp)));
    fetched[0].1.as_ref().map(|o| o.offset.0)
}

#[test]
fn unloading_some_groups_leaves_the_others_mid_rebalance() {
    let mut h = Harness::new();
    let tp = TopicPartition::new("t", 0);
    let (a, gen_a) = h.stable_single("a");
    let (b, gen_b) = h.stable_single("b");
    for (group, member, generation, offset) in [("a", &a, gen_a, 5), ("b", &b, gen_b, 9)] {
        let c = h.commit(group, member, generation, tp.clone(), offset);
        assert_eq!(h.commit_error(c), None);
    }
    // A second member joins each group: both rebalance, the new members' joins parked.
    let (_, parked_a) = h.join_new("a");
    let (_, parked_b) = h.join_new("b");
    assert_eq!(h.state("b"), GroupState::PreparingRebalance);
    let out = h.c.unload_groups(|g| g.as_str() == "a");
    h.absorb(out);
    assert_eq!(h.join_reply(parked_a).error, Some(GroupError::NotCoordinator));
    assert!(h.take(parked_b).is_none(), "b's parked join was answered by a's unload");
    assert_eq!(h.state("a"), GroupState::Dead);
    assert_eq!(committed(&h, "a", &tp), None);
    assert_eq!(committed(&h, "b", &tp), Some(9));
    // b's rebalance carries on: its first member rejoins and both get the next generation.
    let rejoin = h.join("b", &b);
    let next = Generation(gen_b.0 + 1);
    assert_eq!(h.join_reply(rejoin).generation, next);
    assert_eq!(h.join_reply(parked_b).generation, next);
    // a comes back from its records as it was persisted, b untouched by the load.
    let out = h.c.load(records_of(&h, "a"), h.now());
    h.absorb(out);
    assert_eq!((h.state("a"), h.generation("a")), (GroupState::Stable, gen_a));
    assert_eq!(committed(&h, "a", &tp), Some(5));
    assert_eq!((h.state("b"), h.generation("b")), (GroupState::CompletingRebalance, next));
}

#[test]
fn a_batch_waiting_at_unload_answers_its_request_but_is_not_replayed() {
    let mut h = Harness::new();
    let tp = TopicPartition::new("t", 0);
    let (a, gen_a) = h.stable_single("a");
    let (b, gen_b) = h.stable_single("b");
    h.auto_persist = false;
    let commit_a = h.commit("a", &a, gen_a, tp.clone(), 5);
    let commit_b = h.commit("b", &b, gen_b, tp.clone(), 9);
    let out = h.c.unload_groups(|g| g.as_str() == "a");
    h.absorb(out);
    assert!(h.take(commit_a).is_none(), "answered before its batch settled");
    h.settle(Ok(()));
    h.settle(Ok(()));
    // The commit was written: its request is told so, but the unloaded group is not
    // brought back to memory by it, only by a load of its partition.
    assert_eq!(h.commit_error(commit_a), None);
    assert_eq!(h.commit_error(commit_b), None);
    assert_eq!(h.state("a"), GroupState::Dead);
    assert_eq!(committed(&h, "a", &tp), None);
    assert_eq!(committed(&h, "b", &tp), Some(9));
    let out = h.c.load(records_of(&h, "a"), h.now());
    h.absorb(out);
    assert_eq!(committed(&h, "a", &tp), Some(5));
}

#[test]
fn loading_one_partition_leaves_other_groups_sessions_alone() {
    let mut h = Harness::new();
    let (_, gen_a) = h.stable_single("a");
    let (_, gen_b) = h.stable_single("b");
    let out = h.c.unload_groups(|g| g.as_str() == "a");
    h.absorb(out);
    // Most of b's session passes before a's partition is loaded; the load restarts the
    // sessions of a's members only, so b's silent member still expires on time.
    h.advance(SESSION_MS as u64 - 100);
    let out = h.c.load(records_of(&h, "a"), h.now());
    h.absorb(out);
    h.advance(200);
    assert_eq!((h.state("b"), h.generation("b")), (GroupState::Empty, Generation(gen_b.0 + 1)));
    assert_eq!((h.state("a"), h.generation("a")), (GroupState::Stable, gen_a));
}
