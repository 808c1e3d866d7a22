//! Tests of partition reassignment: replicas added, then the others dropped once the target is
//! in sync; cancels, replacements and refusals.

use super::*;

/// Four brokers and a topic of one partition on three of them: the partition as placed, and
/// the broker without a replica.
fn four() -> (MetadataImage, ControllerLogic, PartitionRecord, BrokerId) {
    let (mut image, mut logic) = cluster(&[None, None, None, None]);
    create(&mut image, &mut logic, topic("t", 1, 3), 1);
    let p = image.partition("t", 0).unwrap().clone();
    let spare = (1..=4).find(|b| !p.replicas.contains(b)).unwrap();
    (image, logic, p, spare)
}

fn move_to(target: &[BrokerId]) -> Reassignment {
    Reassignment { topic: "t".into(), partition: 0, target: Some(target.to_vec()) }
}

fn cancel() -> Reassignment {
    Reassignment { topic: "t".into(), partition: 0, target: None }
}

/// The one partition record `records` holds.
fn only(records: &[MetadataRecord]) -> PartitionRecord {
    match records {
        [MetadataRecord::Partition(p)] => p.clone(),
        other => panic!("expected one partition record, got {other:?}"),
    }
}

/// The leader's ISR change making the ISR `isr`, as the service handles it.
fn join(
    logic: &ControllerLogic,
    image: &MetadataImage,
    isr: &[BrokerId],
    now: Instant,
) -> Vec<MetadataRecord> {
    let p = image.partition("t", 0).unwrap();
    let joining: Vec<(BrokerId, BrokerEpoch)> = isr
        .iter()
        .filter(|b| !p.isr.contains(b))
        .map(|&b| (b, image.brokers[&b].registration.incarnation.epoch()))
        .collect();
    let change = IsrChange {
        broker_id: p.leader,
        topic_id: p.topic_id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr,
        joining: &joining,
    };
    let records = logic.alter_partition(image, &change).unwrap();
    logic.completing_reassignments(image, records, now)
}

#[test]
fn replicas_are_added_then_the_others_dropped_once_the_target_is_in_sync() {
    let (mut image, logic, p, spare) = four();
    // The leader is moved away: the spare takes its place.
    let target: Vec<BrokerId> =
        p.replicas.iter().map(|&r| if r == p.leader { spare } else { r }).collect();
    let (records, refused) = logic.alter_reassignments(&image, &[move_to(&target)], false, at(1));
    assert!(refused.is_empty(), "{refused:?}");
    let started = only(&records);
    let mut union = target.clone();
    union.push(p.leader);
    assert_eq!(started.replicas, union, "the target first, then the replica it drops");
    assert_eq!((started.adding.clone(), started.removing.clone()), (vec![spare], vec![p.leader]));
    assert_eq!((started.isr.clone(), started.leader), (p.isr.clone(), p.leader));
    assert_eq!(started.leader_epoch, p.leader_epoch, "leadership does not move yet");
    assert_eq!(started.partition_epoch, p.partition_epoch + 1);
    apply(&mut image, &records);
    assert!(logic.due_reassignments(&image, at(1)).is_empty(), "the spare is not in sync");
    // The spare joins as a replica it keeps leaves: not every replica it moves to is in sync.
    let partly: Vec<BrokerId> = union.iter().copied().filter(|&r| r != target[1]).collect();
    let records = join(&logic, &image, &partly, at(1));
    let joined = only(&records);
    assert!(joined.reassigning() && joined.isr.contains(&spare), "{joined:?}");
    apply(&mut image, &records);
    assert!(logic.due_reassignments(&image, at(1)).is_empty(), "{} is out of sync", target[1]);
    let all: Vec<BrokerId> = union.clone();
    let records = join(&logic, &image, &all, at(2));
    let done = only(&records);
    assert_eq!(done.replicas, target);
    assert!(!done.reassigning());
    let mut isr = done.isr.clone();
    isr.sort_unstable();
    let mut want = target.clone();
    want.sort_unstable();
    assert_eq!(isr, want, "the dropped replica leaves the ISR");
    assert!(target.contains(&done.leader), "a kept replica leads: {done:?}");
    assert_eq!(done.leader_epoch, p.leader_epoch + 1, "in a new epoch");
    apply(&mut image, &records);
    assert_eq!(image.partition("t", 0).unwrap(), &done);
}

#[test]
fn a_target_the_isr_already_holds_completes_at_once() {
    let (image, logic, p, _) = four();
    // One replica fewer, the leader among those dropped.
    let target: Vec<BrokerId> = p.replicas.iter().copied().filter(|&r| r != p.leader).collect();
    let (records, refused) = logic.alter_reassignments(&image, &[move_to(&target)], true, at(1));
    assert!(refused.is_empty(), "{refused:?}");
    let done = only(&records);
    assert_eq!((done.replicas.clone(), done.isr.clone()), (target.clone(), target.clone()));
    assert!(!done.reassigning() && target.contains(&done.leader));
    assert_eq!(done.leader_epoch, p.leader_epoch + 1);
    // The same replicas as now: nothing to do.
    let (records, refused) =
        logic.alter_reassignments(&image, &[move_to(&p.replicas)], false, at(1));
    assert!(records.is_empty() && refused.is_empty(), "{records:?} {refused:?}");
}

#[test]
fn a_cancel_drops_the_replicas_being_added_and_keeps_the_others() {
    let (mut image, logic, p, spare) = four();
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[spare])], true, at(1));
    apply(&mut image, &records);
    let (records, refused) = logic.alter_reassignments(&image, &[cancel()], false, at(1));
    assert!(refused.is_empty(), "{refused:?}");
    let back = only(&records);
    let mut replicas = back.replicas.clone();
    replicas.sort_unstable();
    let mut before = p.replicas.clone();
    before.sort_unstable();
    assert_eq!(replicas, before);
    assert!(!back.reassigning() && back.leader == p.leader && back.isr.len() == 3);
    apply(&mut image, &records);
    let (records, refused) = logic.alter_reassignments(&image, &[cancel()], false, at(1));
    assert!(records.is_empty());
    assert!(matches!(&refused[..], [(_, 0, ControllerError::NoReassignment(_))]), "{refused:?}");
}

#[test]
fn a_cancel_that_would_leave_no_replica_in_sync_is_refused() {
    let (mut image, logic, _, spare) = four();
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[spare])], true, at(1));
    apply(&mut image, &records);
    // Only the spare, being added, is in sync (the others lost their disks, say).
    let lone = changed(&image, "t", |p| {
        p.isr = vec![spare];
        p.leader = spare;
        p.leader_epoch += 1;
    });
    apply(&mut image, &lone);
    let (records, refused) = logic.alter_reassignments(&image, &[cancel()], false, at(1));
    assert!(records.is_empty());
    assert!(matches!(&refused[..], [(_, 0, ControllerError::BadAssignment(_))]), "{refused:?}");
}

#[test]
fn a_new_target_replaces_the_one_in_progress() {
    let (mut image, mut logic) = cluster(&[None, None, None, None, None]);
    create(&mut image, &mut logic, topic("t", 1, 1), 1);
    let p = image.partition("t", 0).unwrap().clone();
    let others: Vec<BrokerId> = (1..=5).filter(|&b| b != p.leader).collect();
    let (a, b) = (others[0], others[1]);
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[a])], false, at(1));
    apply(&mut image, &records);
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[b])], false, at(1));
    let next = only(&records);
    assert_eq!(next.replicas, vec![b, a, p.leader]);
    assert_eq!((next.adding.clone(), next.removing.clone()), (vec![b], vec![a, p.leader]));
    apply(&mut image, &records);
    // `b` is still being added; `a`, being removed, is kept as a replica the partition has.
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[a, b])], true, at(1));
    let next = only(&records);
    assert_eq!(next.replicas, vec![a, b, p.leader]);
    assert_eq!((next.adding.clone(), next.removing.clone()), (vec![b], vec![p.leader]));
}

#[test]
fn bad_targets_are_refused_and_change_nothing() {
    let (image, logic, p, spare) = four();
    let unknown = Reassignment { topic: "nope".into(), partition: 0, target: Some(vec![1]) };
    let no_partition = Reassignment { topic: "t".into(), partition: 7, target: Some(vec![1]) };
    let resized = {
        let mut r = p.replicas.clone();
        r.push(spare);
        r
    };
    let cases = [
        (move_to(&[]), "no replica"),
        (move_to(&[spare, spare]), "a replica twice"),
        (move_to(&[spare, 99]), "an unregistered broker"),
        (unknown, "an unknown topic"),
        (no_partition, "an unknown partition"),
        (move_to(&resized), "another replication factor"),
    ];
    for (change, what) in cases {
        let (records, refused) = logic.alter_reassignments(&image, &[change], false, at(1));
        assert!(records.is_empty(), "{what}: {records:?}");
        let error = match &refused[..] {
            [(_, _, e)] => e.clone(),
            other => panic!("{what}: {other:?}"),
        };
        let expected = match what {
            "an unknown topic" | "an unknown partition" => {
                matches!(error, ControllerError::UnknownTopic(_))
            }
            "another replication factor" => {
                matches!(error, ControllerError::ReplicationFactorChange { from: 3, to: 4 })
            }
            _ => matches!(error, ControllerError::BadAssignment(_)),
        };
        assert!(expected, "{what}: {error:?}");
    }
}

#[test]
fn a_completion_waits_for_a_replica_it_keeps_to_be_electable() {
    let (mut image, mut logic, p, spare) = four();
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[spare])], true, at(1));
    apply(&mut image, &records);
    // The spare caught up, but this controller has not heard from it for 10 s.
    let others: Vec<BrokerId> = (1..=4).filter(|&b| b != spare).collect();
    beat(&mut logic, &image, &others, 10);
    let mut union = p.replicas.clone();
    union.push(spare);
    let records = join(&logic, &image, &union, at(10));
    let joined = only(&records);
    assert!(joined.reassigning() && joined.leader == p.leader, "{joined:?}");
    apply(&mut image, &records);
    assert!(logic.due_reassignments(&image, at(10)).is_empty());
    beat(&mut logic, &image, &[spare], 11);
    let done = only(&logic.due_reassignments(&image, at(11)));
    assert_eq!(
        (done.replicas.clone(), done.isr.clone(), done.leader),
        (vec![spare], vec![spare], spare)
    );
    assert_eq!(done.partition_epoch, joined.partition_epoch + 1);
}

#[test]
fn a_cancel_moves_leadership_off_a_replica_being_added_even_to_a_new_controller() {
    let (mut image, logic, p, spare) = four();
    let kept = p.replicas.iter().copied().find(|&r| r != p.leader).unwrap();
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[spare, kept])], true, at(1));
    apply(&mut image, &records);
    // The spare caught up and leads (a failover), the replica kept fell out of sync.
    let led_by_spare = changed(&image, "t", |q| {
        q.isr.retain(|&r| r != kept);
        q.isr.push(spare);
        q.leader = spare;
        q.leader_epoch += 1;
    });
    apply(&mut image, &led_by_spare);
    let before = image.partition("t", 0).unwrap().clone();
    // A controller that just took over has heard from no broker yet.
    let fresh = ControllerLogic::new(config(), &image, at(30));
    let (records, refused) = fresh.alter_reassignments(&image, &[cancel()], false, at(30));
    assert!(refused.is_empty(), "{refused:?}");
    let back = only(&records);
    assert!(back.leader != NO_LEADER && back.leader != spare, "{back:?}");
    assert!(back.isr.contains(&back.leader) && !back.isr.contains(&spare), "{back:?}");
    assert_eq!(back.leader_epoch, before.leader_epoch + 1);
}

#[test]
fn partitions_added_during_a_move_get_as_many_replicas_as_it_moves_to() {
    let (mut image, mut logic, _, spare) = four();
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[spare])], true, at(1));
    apply(&mut image, &records);
    let records = logic.create_partitions(&image, "t", 2, &[], false).unwrap();
    assert!(
        matches!(&records[..], [MetadataRecord::Partition(q)] if q.replicas.len() == 1),
        "{records:?}"
    );
}

#[test]
fn an_unclean_election_during_a_move_prefers_a_replica_it_does_not_add() {
    let (mut image, mut logic) = cluster(&[None, None, None, None]);
    let unclean = vec![("unclean.leader.election.enable".to_owned(), "true".to_owned())];
    let t = NewTopic { configs: unclean, ..topic("t", 1, 2) };
    create(&mut image, &mut logic, t, 1);
    let p = image.partition("t", 0).unwrap().clone();
    let (leader, other) = (p.leader, *p.replicas.iter().find(|&&r| r != p.leader).unwrap());
    let spare = (1..=4).find(|b| !p.replicas.contains(b)).unwrap();
    // The other replica fell out of sync; the move adds the spare first in the assignment.
    let alone = changed(&image, "t", |q| q.isr = vec![leader]);
    apply(&mut image, &alone);
    let (records, _) = logic.alter_reassignments(&image, &[move_to(&[spare, other])], false, at(1));
    apply(&mut image, &records);
    assert_eq!(image.partition("t", 0).unwrap().replicas, vec![spare, other, leader]);
    // The leader, the only in-sync replica, goes silent.
    let live: Vec<BrokerId> = (1..=4).filter(|&b| b != leader).collect();
    beat(&mut logic, &image, &live, 14);
    let batch = logic.expire(&image, at(15)).expect("the leader expired");
    apply(&mut image, &batch);
    let q = image.partition("t", 0).unwrap();
    assert_eq!((q.leader, q.isr.clone()), (other, vec![other]), "{q:?}");
}
