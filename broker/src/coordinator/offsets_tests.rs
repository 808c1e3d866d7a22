#![allow(clippy::unwrap_used)]

use crate::coordinator::test_support::*;
use crate::coordinator::*;
use crate::model::{LeaderEpoch, Offset, TopicId, TopicPartition};

fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

fn fetched(h: &Harness, group: &str, partition: TopicPartition) -> Option<i64> {
    let got = h.c.fetch_offsets(&GroupId::from(group), Some(&[partition]));
    got[0].1.as_ref().map(|o| o.offset.0)
}

#[test]
fn members_commit_with_their_generation_only() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g");
    let ok = h.commit("g", &a, generation, tp("t", 0), 10);
    assert_eq!(h.commit_error(ok), None);
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(10));
    let stale = h.commit("g", &a, Generation(generation.0 - 1), tp("t", 0), 11);
    assert_eq!(h.commit_error(stale), Some(GroupError::IllegalGeneration));
    let ghost = h.commit("g", &MemberId::from("ghost"), generation, tp("t", 0), 12);
    assert_eq!(h.commit_error(ghost), Some(GroupError::UnknownMemberId));
    let simple = h.commit("g", &MemberId::unknown(), Generation::NONE, tp("t", 0), 13);
    assert_eq!(h.commit_error(simple), Some(GroupError::UnknownMemberId), "the group has members");
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(10), "rejected commits change nothing");
    let lower = h.commit("g", &a, generation, tp("t", 0), 3);
    assert_eq!(h.commit_error(lower), None);
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(3), "an explicit lower commit is honoured");
}

#[test]
fn commits_during_completing_rebalance_are_refused() {
    let mut h = Harness::new();
    let (a, join) = h.join_new("g");
    h.tick();
    let generation = h.join_reply(join).generation;
    let c = h.commit("g", &a, generation, tp("t", 0), 1);
    assert_eq!(h.commit_error(c), Some(GroupError::RebalanceInProgress));
}

#[test]
fn simple_consumers_commit_to_empty_or_missing_groups() {
    let mut h = Harness::new();
    let c = h.commit("simple", &MemberId::unknown(), Generation::NONE, tp("t", 1), 5);
    assert_eq!(h.commit_error(c), None);
    assert_eq!(h.state("simple"), GroupState::Empty);
    assert_eq!(h.c.list_groups(&[])[0].protocol_type, "", "a simple group has no protocol type");
    let c = h.commit("missing", &MemberId::from("m"), Generation(1), tp("t", 1), 5);
    assert_eq!(
        h.commit_error(c),
        Some(GroupError::IllegalGeneration),
        "v8 answers ILLEGAL_GENERATION"
    );
}

#[test]
fn a_commit_is_visible_and_acknowledged_only_once_durable() {
    let mut h = Harness::new();
    h.auto_persist = false;
    let c = h.commit("g", &MemberId::unknown(), Generation::NONE, tp("t", 0), 7);
    assert!(h.take(c).is_none());
    assert_eq!(fetched(&h, "g", tp("t", 0)), None);
    h.settle(Ok(()));
    assert_eq!(h.commit_error(c), None);
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(7));
    let c = h.commit("g", &MemberId::unknown(), Generation::NONE, tp("t", 0), 8);
    h.settle(Err(PersistError::Storage));
    assert_eq!(h.commit_error(c), Some(GroupError::NotCoordinator));
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(7), "a failed write is not applied");
}

#[test]
fn batches_apply_in_log_order_even_if_reported_out_of_order() {
    let mut h = Harness::new();
    h.auto_persist = false;
    let first = h.commit("g", &MemberId::unknown(), Generation::NONE, tp("t", 0), 1);
    let second = h.commit("g", &MemberId::unknown(), Generation::NONE, tp("t", 0), 2);
    let (id1, _) = h.held.remove(0);
    let (id2, _) = h.held.remove(0);
    let out = h.c.persisted(id2, Ok(()), h.now());
    assert!(out.is_empty(), "the second waits for the first");
    let out = h.c.persisted(id1, Ok(()), h.now());
    let order: Vec<_> = out
        .iter()
        .map(|o| match o {
            Output::Reply(id, _) => *id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(order, vec![first, second]);
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(2));
}

#[test]
fn oversized_metadata_is_refused_per_partition() {
    let mut h = Harness::new();
    let offsets =
        [(0, "x".repeat(5_000)), (1, "ok".to_owned())].map(|(p, metadata)| OffsetCommit {
            partition: tp("t", p),
            offset: Offset(1),
            leader_epoch: crate::model::LeaderEpoch::NONE,
            metadata: Some(metadata),
            topic_id: None,
        });
    let id = h.commit_offsets("g", &MemberId::unknown(), Generation::NONE, offsets.into());
    match h.take(id) {
        Some(Response::Commit(r)) => {
            assert_eq!(r.partitions[0].error, Some(GroupError::OffsetMetadataTooLarge));
            assert_eq!(r.partitions[1].error, None);
        }
        other => panic!("{other:?}"),
    }
}

fn delete_offsets(
    h: &mut Harness,
    group: &str,
    partitions: Vec<TopicPartition>,
) -> DeleteOffsetsResponse {
    let id = h.request_id();
    let out = h.c.delete_offsets(
        id,
        DeleteOffsetsRequest { group_id: GroupId::from(group), partitions },
        h.now(),
    );
    h.absorb(out);
    match h.take(id) {
        Some(Response::DeleteOffsets(r)) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn offset_delete_refuses_subscribed_topics() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g"); // subscribed to "t"
    for topic in ["t", "old"] {
        let c = h.commit("g", &a, generation, tp(topic, 0), 4);
        assert_eq!(h.commit_error(c), None);
    }
    let r = delete_offsets(&mut h, "g", vec![tp("t", 0), tp("old", 0)]);
    assert_eq!(r.error, None);
    assert_eq!(r.partitions[0].error, Some(GroupError::GroupSubscribedToTopic));
    assert_eq!(r.partitions[1].error, None);
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(4));
    assert_eq!(fetched(&h, "g", tp("old", 0)), None);
    assert_eq!(delete_offsets(&mut h, "nope", vec![]).error, Some(GroupError::GroupIdNotFound));
}

#[test]
fn empty_group_offsets_expire_after_retention_since_it_emptied() {
    let mut config = CoordinatorConfig::for_tests();
    config.offsets_retention_ms = 60_000;
    config.offsets_retention_check_interval_ms = 1_000;
    let mut h = Harness::with_config(config);
    let (a, generation) = h.stable_single("g");
    let c = h.commit("g", &a, generation, tp("t", 0), 9);
    h.commit_error(c);
    // The group stays Stable with a live member far beyond retention: nothing expires.
    for _ in 0..20 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &a, generation), None);
    }
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(9));
    h.leave_alone("g", a);
    assert_eq!(h.state("g"), GroupState::Empty);
    h.advance(59_000);
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(9), "not yet");
    h.advance(2_000);
    assert_eq!(fetched(&h, "g", tp("t", 0)), None);
    assert_eq!(h.state("g"), GroupState::Dead, "the offsetless empty group is deleted");
    assert!(h.log.iter().any(|r| matches!(r, Record::Group { value: None, .. })));
}

#[test]
fn simple_group_offsets_expire_by_commit_time() {
    let mut config = CoordinatorConfig::for_tests();
    config.offsets_retention_ms = 10_000;
    config.offsets_retention_check_interval_ms = 1_000;
    let mut h = Harness::with_config(config);
    let c = h.commit("s", &MemberId::unknown(), Generation::NONE, tp("t", 0), 1);
    h.commit_error(c);
    h.advance(6_000);
    let c = h.commit("s", &MemberId::unknown(), Generation::NONE, tp("t", 1), 1);
    h.commit_error(c);
    h.advance(5_000);
    assert_eq!(fetched(&h, "s", tp("t", 0)), None);
    assert_eq!(fetched(&h, "s", tp("t", 1)), Some(1));
    assert_eq!(h.state("s"), GroupState::Empty);
}

/// OffsetCommit v2–v4's `retention_time_ms`: an offset committed with one expires that long
/// after its commit, not `offsets.retention.minutes` after its base, but still only while its
/// group is one whose offsets expire.
#[test]
fn offsets_committed_with_a_retention_time_expire_then() {
    let mut config = CoordinatorConfig::for_tests();
    config.offsets_retention_ms = 600_000;
    config.offsets_retention_check_interval_ms = 1_000;
    let mut h = Harness::with_config(config);
    let entry = |topic: &str| OffsetCommit {
        partition: tp(topic, 0),
        offset: Offset(5),
        leader_epoch: LeaderEpoch(7),
        metadata: None,
        topic_id: None,
    };
    // A simple group: one offset kept 10 s, one by the broker's retention.
    let (none, unknown) = (Generation::NONE, MemberId::unknown());
    let c = h.commit_retained("s", &unknown, none, vec![entry("t")], Some(10_000));
    h.commit_error(c);
    let c = h.commit_retained("s", &unknown, none, vec![entry("u")], None);
    h.commit_error(c);
    h.advance(9_000);
    assert_eq!(fetched(&h, "s", tp("t", 0)), Some(5), "not yet");
    h.advance(2_000);
    assert_eq!(fetched(&h, "s", tp("t", 0)), None);
    assert_eq!(fetched(&h, "s", tp("u", 0)), Some(5), "kept by the broker's retention");

    // A Stable consumer group keeps the offsets of the topic it subscribes to past their
    // expiry, and not those of another; once it is Empty, the rest go at the next check
    // rather than the broker's retention after it emptied.
    let (a, generation) = h.stable_single("g");
    let c = h.commit_retained("g", &a, generation, vec![entry("t"), entry("x")], Some(10_000));
    h.commit_error(c);
    assert_eq!(fetched(&h, "g", tp("x", 0)), Some(5), "committed");
    for _ in 0..6 {
        h.advance(5_000);
        assert_eq!(h.heartbeat("g", &a, generation), None);
    }
    assert_eq!(fetched(&h, "g", tp("t", 0)), Some(5), "kept while subscribed to");
    assert_eq!(fetched(&h, "g", tp("x", 0)), None, "not subscribed to");
    h.leave_alone("g", a);
    assert_eq!(h.state("g"), GroupState::Empty);
    h.advance(1_500);
    assert_eq!(fetched(&h, "g", tp("t", 0)), None);
    // The expiry is written with the offset, for a coordinator that loads the group later.
    let expiring = h.log.iter().any(
        |r| matches!(r, Record::Offset { value: Some(v), .. } if v.expire_timestamp.is_some()),
    );
    assert!(expiring, "no offset record carries its expiry");
}

#[test]
fn deleting_groups_requires_them_empty() {
    let mut h = Harness::new();
    h.stable_single("busy");
    let c = h.commit("idle", &MemberId::unknown(), Generation::NONE, tp("t", 0), 1);
    h.commit_error(c);
    let id = h.request_id();
    let ids = vec![GroupId::from("busy"), GroupId::from("idle"), GroupId::from("nope")];
    let out = h.c.delete_groups(id, ids, h.now());
    h.absorb(out);
    let Some(Response::DeleteGroups(r)) = h.take(id) else { panic!("no reply") };
    assert_eq!(r.groups[0].1, Some(GroupError::NonEmptyGroup));
    assert_eq!(r.groups[1].1, None);
    assert_eq!(r.groups[2].1, Some(GroupError::GroupIdNotFound));
    assert_eq!(h.state("idle"), GroupState::Dead);
    assert_eq!(fetched(&h, "idle", tp("t", 0)), None);
    assert_eq!(h.c.list_groups(&[]).len(), 1);
}

#[test]
fn a_failed_deletion_brings_the_group_back() {
    let mut h = Harness::new();
    let c = h.commit("idle", &MemberId::unknown(), Generation::NONE, tp("t", 0), 1);
    h.commit_error(c);
    h.auto_persist = false;
    let id = h.request_id();
    let out = h.c.delete_groups(id, vec![GroupId::from("idle")], h.now());
    h.absorb(out);
    let blocked = h.join("idle", &MemberId::unknown());
    assert_eq!(h.join_reply(blocked).error, Some(GroupError::CoordinatorNotAvailable));
    h.settle(Err(PersistError::TimedOut));
    let Some(Response::DeleteGroups(r)) = h.take(id) else { panic!("no reply") };
    assert_eq!(r.groups[0].1, Some(GroupError::CoordinatorNotAvailable));
    assert_eq!(h.state("idle"), GroupState::Empty);
    assert_eq!(fetched(&h, "idle", tp("t", 0)), Some(1));
}

#[test]
fn deletion_tombstones_commits_still_in_flight() {
    let mut h = Harness::new();
    h.auto_persist = false;
    let c = h.commit("g", &MemberId::unknown(), Generation::NONE, tp("t", 3), 1);
    let id = h.request_id();
    let out = h.c.delete_groups(id, vec![GroupId::from("g")], h.now());
    h.absorb(out);
    h.settle(Ok(()));
    h.settle(Ok(()));
    assert_eq!(h.commit_error(c), None);
    let tombstoned = h.log.iter().any(
        |r| matches!(r, Record::Offset { partition, value: None, .. } if *partition == tp("t", 3)),
    );
    assert!(tombstoned);
    assert_eq!(fetched(&h, "g", tp("t", 3)), None);
}

/// The retention check counts a commit still being written as an offset that has not expired:
/// it neither deletes a group whose first commit is in flight nor tombstones a partition whose
/// newer commit is, either of which would be written after the commit and erase it, though its
/// client is told it succeeded.
#[test]
fn retention_spares_commits_still_being_written() {
    let mut config = CoordinatorConfig::for_tests();
    config.offsets_retention_ms = 10_000;
    config.offsets_retention_check_interval_ms = 1_000;
    let mut h = Harness::with_config(config);
    // A simple group's first commit, in flight across a retention check.
    h.auto_persist = false;
    let first = h.commit("s", &MemberId::unknown(), Generation::NONE, tp("t", 0), 1);
    h.advance(1_500);
    assert_eq!(h.state("s"), GroupState::Empty, "the group was deleted under its first commit");
    while !h.held.is_empty() {
        h.settle(Ok(()));
    }
    assert_eq!(h.commit_error(first), None);
    h.advance(1_000);
    assert_eq!(fetched(&h, "s", tp("t", 0)), Some(1));
    // Its offset past retention, with a newer commit of the same partition in flight.
    h.auto_persist = true;
    h.advance(7_000);
    assert_eq!(fetched(&h, "s", tp("t", 0)), Some(1), "not yet");
    h.auto_persist = false;
    let newer = h.commit("s", &MemberId::unknown(), Generation::NONE, tp("t", 0), 2);
    h.advance(1_000);
    while !h.held.is_empty() {
        h.settle(Ok(()));
    }
    assert_eq!(h.commit_error(newer), None);
    h.auto_persist = true;
    h.advance(1_000);
    let tombstoned = h.log.iter().any(|r| matches!(r, Record::Offset { value: None, .. }));
    assert!(!tombstoned, "a tombstone was written: {:?}", h.log);
    assert_eq!(fetched(&h, "s", tp("t", 0)), Some(2));
}

/// The offsets of a deleted topic go from every group, committed or still being written; the
/// other topics' stay.
#[test]
fn a_deleted_topics_offsets_are_tombstoned_in_every_group() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("g");
    for (topic, offset) in [("gone", 4), ("kept", 5)] {
        let c = h.commit("g", &a, generation, tp(topic, 0), offset);
        assert_eq!(h.commit_error(c), None);
    }
    let c = h.commit("s", &MemberId::unknown(), Generation::NONE, tp("gone", 1), 6);
    assert_eq!(h.commit_error(c), None);
    h.auto_persist = false;
    let in_flight = h.commit("s", &MemberId::unknown(), Generation::NONE, tp("gone", 2), 7);
    let out = h.c.remove_topic_offsets(&["gone".to_owned()].into(), h.now());
    h.absorb(out);
    while !h.held.is_empty() {
        h.settle(Ok(()));
    }
    assert_eq!(h.commit_error(in_flight), None);
    assert_eq!(fetched(&h, "g", tp("gone", 0)), None);
    assert_eq!(fetched(&h, "g", tp("kept", 0)), Some(5));
    assert_eq!(fetched(&h, "s", tp("gone", 1)), None);
    assert_eq!(fetched(&h, "s", tp("gone", 2)), None, "the commit in flight was kept");
    assert_eq!(h.state("g"), GroupState::Stable, "the group itself is left as it was");
}

/// A deleted topic's offsets that its deletion's tombstones missed (their write failed, the
/// groups were still loading, or the broker was down) go at the next retention check, whatever
/// their age, from every group; a commit still in flight is spared until it is written. The
/// other topics' stay, and nothing goes before the coordinator knows the cluster's topics.
#[test]
fn the_retention_check_tombstones_offsets_of_topics_gone_from_the_cluster() {
    let mut config = CoordinatorConfig::for_tests();
    config.offsets_retention_check_interval_ms = 1_000;
    let mut h = Harness::with_config(config);
    let (a, generation) = h.stable_single("g");
    for (topic, offset) in [("gone", 4), ("kept", 5)] {
        let c = h.commit("g", &a, generation, tp(topic, 0), offset);
        assert_eq!(h.commit_error(c), None);
    }
    let c = h.commit("s", &MemberId::unknown(), Generation::NONE, tp("gone", 1), 6);
    assert_eq!(h.commit_error(c), None);
    h.advance(1_000);
    assert_eq!(fetched(&h, "g", tp("gone", 0)), Some(4), "gone before the topics were known");
    h.c.set_live_topics([("kept".to_owned(), TopicId([1; 16]))].into());
    h.auto_persist = false;
    let in_flight = h.commit("g", &a, generation, tp("gone", 2), 7);
    h.advance(1_000);
    while !h.held.is_empty() {
        h.settle(Ok(()));
    }
    assert_eq!(h.commit_error(in_flight), None);
    h.auto_persist = true;
    assert_eq!(fetched(&h, "g", tp("gone", 0)), None);
    assert_eq!(fetched(&h, "g", tp("gone", 2)), Some(7), "the commit in flight was erased");
    assert_eq!(fetched(&h, "g", tp("kept", 0)), Some(5));
    assert_eq!(fetched(&h, "s", tp("gone", 1)), None);
    assert_eq!(h.state("g"), GroupState::Stable, "the group itself is left as it was");
    h.advance(1_000);
    assert_eq!(fetched(&h, "g", tp("gone", 2)), None);
    assert_eq!(fetched(&h, "g", tp("kept", 0)), Some(5));
}

/// A commit checked against an image older than the topics the coordinator knows, in which
/// the topic had another id or existed at all, is refused for that partition and writes
/// nothing: the topic was deleted (or made again) since, and its offsets tombstoned, which this
/// commit would outlive. A commit under the topic's current id is taken.
#[test]
fn a_commit_to_a_topic_deleted_since_it_was_checked_is_refused() {
    let mut h = Harness::new();
    let (old, new) = (TopicId([1; 16]), TopicId([2; 16]));
    h.c.set_live_topics([("t".to_owned(), new)].into());
    let offsets =
        [(0, "t", old), (1, "t", new), (0, "gone", old)].map(|(p, topic, topic_id)| OffsetCommit {
            partition: tp(topic, p),
            offset: Offset(5),
            leader_epoch: crate::model::LeaderEpoch::NONE,
            metadata: None,
            topic_id: Some(topic_id),
        });
    let id = h.commit_offsets("g", &MemberId::unknown(), Generation::NONE, offsets.into());
    let Some(Response::Commit(r)) = h.take(id) else { panic!("no reply") };
    let errors: Vec<_> = r.partitions.iter().map(|p| (p.partition.clone(), p.error)).collect();
    let unknown = Some(GroupError::UnknownTopicOrPartition);
    assert_eq!(errors, vec![(tp("t", 0), unknown), (tp("t", 1), None), (tp("gone", 0), unknown)]);
    assert_eq!(fetched(&h, "g", tp("t", 0)), None);
    assert_eq!(fetched(&h, "g", tp("t", 1)), Some(5));
    assert_eq!(fetched(&h, "g", tp("gone", 0)), None);
}

#[test]
fn figures_count_every_served_group_and_list_series_up_to_the_limit() {
    let mut h = Harness::new();
    let (a, generation) = h.stable_single("stable");
    for p in 0..3 {
        let id = h.commit("stable", &a, generation, tp("t", p), 10 + i64::from(p));
        assert_eq!(h.commit_error(id), None);
    }
    for group in ["simple-1", "simple-2"] {
        let id = h.commit(group, &MemberId::unknown(), Generation::NONE, tp("t", 0), 5);
        assert_eq!(h.commit_error(id), None);
    }
    let all = h.c.figures(|_| true, 100);
    let states: Vec<usize> = all.states.iter().map(|&(_, n)| n).collect();
    assert_eq!(states, vec![2, 0, 0, 1], "Empty, PreparingRebalance, CompletingRebalance, Stable");
    let listed: Vec<(&str, usize, usize)> =
        all.groups.iter().map(|g| (g.id.as_str(), g.members, g.offsets.len())).collect();
    assert_eq!(listed, vec![("simple-1", 0, 1), ("simple-2", 0, 1), ("stable", 1, 3)]);
    assert_eq!(all.groups[2].offsets[1], (tp("t", 1), Offset(11)));
    assert_eq!(all.omitted, 0);
    // Five series: simple-1's two, simple-2's two, and stable's members; its offsets are left
    // out, and counted.
    let capped = h.c.figures(|_| true, 5);
    let listed: Vec<usize> = capped.groups.iter().map(|g| g.offsets.len()).collect();
    assert_eq!((listed, capped.omitted), (vec![1, 1, 0], 3));
    assert_eq!(capped.states, all.states, "states count every group, listed or not");
    let none = h.c.figures(|_| true, 0);
    assert_eq!((none.groups.len(), none.omitted), (0, 8));
    // Groups not served here are neither counted nor listed.
    let served = h.c.figures(|g| g.as_str() == "stable", 100);
    let states: Vec<usize> = served.states.iter().map(|&(_, n)| n).collect();
    assert_eq!((states, served.groups.len()), (vec![0, 0, 0, 1], 1));
}
