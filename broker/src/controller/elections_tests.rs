//! Tests of the elections the controller makes beside fencing: leadership given back to
//! preferred replicas, an operator's ElectLeaders, and the replica a failover prefers.

use super::*;

/// Three brokers and a topic of one partition on all three: the partition as placed.
fn trio() -> (MetadataImage, ControllerLogic, PartitionRecord) {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("trio", 1, 3), 1);
    let p = image.partition("trio", 0).unwrap().clone();
    (image, logic, p)
}

/// A heartbeat reporting `p`'s log there damaged.
fn damaged(p: &PartitionRecord) -> LogReports {
    LogReports { damaged: vec![(p.topic_id, p.partition)], ..LogReports::default() }
}

/// The run `registration` gives broker `b`.
fn incarnation(b: BrokerId) -> Incarnation {
    Incarnation(b as u128 * 100)
}

#[test]
fn leadership_goes_back_to_preferred_replicas_once_they_are_in_sync() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("spread", 6, 3), 1);
    assert!(logic.preferred_leaders(&image, at(0)).is_empty(), "placed: led by preferred");
    let preferred_by_1: Vec<i32> = image
        .topic("spread")
        .unwrap()
        .partitions
        .values()
        .filter(|p| p.replicas[0] == 1)
        .map(|p| p.partition)
        .collect();
    assert!(!preferred_by_1.is_empty());
    // Broker 1 goes silent: its partitions move, and it leaves their ISRs.
    beat(&mut logic, &image, &[2, 3], 14);
    let batch = logic.expire(&image, at(15)).expect("broker 1 expired");
    apply(&mut image, &batch);
    let moved = |image: &MetadataImage| -> Vec<i32> {
        let partitions = &image.topic("spread").unwrap().partitions;
        partitions.values().filter(|p| p.leader != p.replicas[0]).map(|p| p.partition).collect()
    };
    assert_eq!(moved(&image), preferred_by_1);
    assert!(logic.preferred_leaders(&image, at(15)).is_empty(), "fenced: not elected");
    // Back, but out of sync: still not elected.
    let records = logic.heartbeat(&image, 1, Incarnation(100), false, &NONE, at(20)).unwrap();
    apply(&mut image, &records);
    beat(&mut logic, &image, &[2, 3], 20);
    assert!(logic.preferred_leaders(&image, at(20)).is_empty(), "out of sync: not elected");
    // In sync again (as its leaders' ISR changes would have it).
    let rejoined = changed(&image, "spread", |p| {
        if !p.isr.contains(&1) {
            p.isr.push(1);
        }
    });
    apply(&mut image, &rejoined);
    // Not heard from for more than three heartbeats: it may have died unfenced.
    assert!(logic.preferred_leaders(&image, at(25)).is_empty(), "silent: not elected");
    // Reporting one partition's log offline: that one stays where it is.
    let (offline, topic_id) = (preferred_by_1[0], TopicId([1; 16]));
    logic
        .heartbeat(
            &image,
            1,
            Incarnation(100),
            false,
            &offline_only(&[(topic_id, offline)]),
            at(25),
        )
        .unwrap();
    let records = logic.preferred_leaders(&image, at(25));
    let elected: Vec<i32> = records
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::Partition(p) => Some(p.partition),
            _ => None,
        })
        .collect();
    assert_eq!(elected, preferred_by_1[1..].to_vec(), "all but the offline one");
    beat(&mut logic, &image, &[1], 26);
    let before = image.clone();
    let records = logic.preferred_leaders(&image, at(26));
    assert_eq!(records.len(), preferred_by_1.len(), "{records:?}");
    for r in &records {
        let MetadataRecord::Partition(next) = r else { panic!("{r:?}") };
        let was = before.partition("spread", next.partition).unwrap();
        assert_eq!(next.leader, 1);
        assert_eq!(next.leader_epoch, was.leader_epoch + 1);
        assert_eq!(next.partition_epoch, was.partition_epoch + 1);
        assert_eq!(next.isr, was.isr, "the old leader stays in sync and follows");
        assert_eq!(next.replicas, was.replicas);
    }
    apply(&mut image, &records);
    assert!(moved(&image).is_empty());
    assert!(logic.preferred_leaders(&image, at(26)).is_empty(), "nothing left to move");
    // Broker 2 shuts down: its partitions move and it leaves their ISRs. Back in them, and
    // heard from again, it is still not elected while it shuts down.
    beat(&mut logic, &image, &[1, 3], 26);
    let records = logic.heartbeat(&image, 2, Incarnation(200), true, &NONE, at(26)).unwrap();
    apply(&mut image, &records);
    assert!(!moved(&image).is_empty());
    let back = changed(&image, "spread", |p| {
        if !p.isr.contains(&2) {
            p.isr.push(2);
        }
    });
    apply(&mut image, &back);
    beat(&mut logic, &image, &[2], 26);
    assert!(logic.preferred_leaders(&image, at(26)).is_empty(), "shutting down: not elected");
}

#[test]
fn a_controller_taking_over_elects_only_brokers_it_has_heard_from_itself() {
    let (mut image, mut logic) = cluster(&[None, None]);
    create(&mut image, &mut logic, topic("pair", 2, 2), 1);
    let flipped = changed(&image, "pair", |p| {
        p.leader = p.replicas[1];
        p.leader_epoch += 1;
    });
    apply(&mut image, &flipped);
    let config = config();
    // Both brokers' heartbeats were copied to it a moment ago: either may have died since.
    let seen = BTreeMap::from([(1, at(99)), (2, at(99))]);
    let mut fresh = ControllerLogic::taking_over(config, &image, at(100), &seen);
    assert!(fresh.preferred_leaders(&image, at(100)).is_empty(), "heard from no one yet");
    let asked = fresh.elect_leaders(&image, Election::Preferred, at(100), |_, _| true);
    assert!(asked.is_empty(), "an operator's election waits for them too");
    beat(&mut fresh, &image, &[1, 2], 100);
    assert_eq!(fresh.preferred_leaders(&image, at(100)).len(), 2);
}

#[test]
fn leader_rebalancing_moves_a_bounded_number_of_partitions_at_a_time() {
    let (mut image, mut logic) = cluster(&[None, None]);
    let count = PREFERRED_ELECTIONS_MAX as i32 + 5;
    create(&mut image, &mut logic, topic("many", count, 2), 1);
    let flipped = changed(&image, "many", |p| {
        p.leader = p.replicas[1];
        p.leader_epoch += 1;
    });
    apply(&mut image, &flipped);
    let first = logic.preferred_leaders(&image, at(0));
    assert_eq!(first.len(), PREFERRED_ELECTIONS_MAX);
    apply(&mut image, &first);
    assert_eq!(logic.preferred_leaders(&image, at(0)).len(), 5, "the rest at the next pass");
}

#[test]
fn an_unclean_election_picks_a_live_replica_only_for_partitions_without_a_leader() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("pair", 2, 2), 1);
    let everything = |_: &str, _: i32| true;
    assert!(logic.elect_leaders(&image, Election::Unclean, at(0), everything).is_empty());
    // Partition 0 loses its leader with only that broker in sync; partition 1 keeps one.
    let p0 = image.partition("pair", 0).unwrap().clone();
    let (leader, other) = (p0.leader, p0.replicas[1]);
    let mut orphan = p0.clone();
    orphan.isr = vec![leader];
    orphan.leader = NO_LEADER;
    orphan.leader_epoch += 1;
    orphan.partition_epoch += 1;
    apply(&mut image, &[MetadataRecord::Partition(orphan)]);
    // Leaderless partitions are not the preferred elections' to hand out.
    assert!(logic.preferred_leaders(&image, at(0)).is_empty());
    let only_p1 = |t: &str, p: i32| t == "pair" && p == 1;
    assert!(logic.elect_leaders(&image, Election::Unclean, at(0), only_p1).is_empty());
    // The in-sync replica is electable: a clean election.
    let records = logic.elect_leaders(&image, Election::Unclean, at(0), everything);
    let [MetadataRecord::Partition(next)] = records.as_slice() else { panic!("{records:?}") };
    assert_eq!((next.leader, next.isr.clone()), (leader, vec![leader]));
    // Its log there offline (as its heartbeat says): the out-of-sync replica takes over.
    let gone = [(TopicId([1; 16]), 0)];
    logic
        .heartbeat(
            &image,
            leader,
            Incarnation(leader as u128 * 100),
            false,
            &offline_only(&gone),
            at(1),
        )
        .unwrap();
    let unclean = |image: &MetadataImage, logic: &ControllerLogic, secs| {
        let records = logic.elect_leaders(image, Election::Unclean, at(secs), everything);
        let elected: Vec<PartitionRecord> = records
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition(p) if p.partition == 0 => Some(p.clone()),
                _ => None,
            })
            .collect();
        elected
    };
    let elected = unclean(&image, &logic, 1);
    assert_eq!(elected.len(), 1);
    assert_eq!((elected[0].leader, elected[0].isr.clone()), (other, vec![other]));
    // With the in-sync replica fenced, the same.
    let others: Vec<BrokerId> = [1, 2, 3].into_iter().filter(|&b| b != leader).collect();
    beat(&mut logic, &image, &others, 14);
    let fenced = logic.expire(&image, at(15)).unwrap();
    apply(&mut image, &fenced);
    assert_eq!(image.partition("pair", 0).unwrap().leader, NO_LEADER);
    let elected = unclean(&image, &logic, 15);
    assert_eq!((elected[0].leader, elected[0].isr.clone()), (other, vec![other]));
    assert_eq!(elected[0].leader_epoch, image.partition("pair", 0).unwrap().leader_epoch + 1);
    // No electable replica at all: nothing.
    assert!(unclean(&image, &logic, 30).is_empty(), "every replica silent");
}

#[test]
fn failover_prefers_a_replica_heard_from_lately_without_its_log_offline() {
    let (mut image, mut logic, p) = trio();
    let [first, second, third] = p.replicas[..] else { panic!("{p:?}") };
    assert_eq!(p.leader, first);
    let leader_after = |records: &[MetadataRecord]| {
        let p = records.iter().find_map(|r| match r {
            MetadataRecord::Partition(p) => Some(p.clone()),
            _ => None,
        });
        p.unwrap().leader
    };
    // The leader's session ends; the next in order is live but silent for more than 3
    // heartbeats (it may have died too), the last heartbeated a moment ago.
    beat(&mut logic, &image, &[second], 5);
    beat(&mut logic, &image, &[third], 9);
    let fenced = logic.expire(&image, at(10)).expect("the leader expired");
    assert_eq!(leader_after(&fenced), third);
    // A controlled shutdown, the next replica reporting the log offline there.
    let offline = [(p.topic_id, 0)];
    logic
        .heartbeat(&image, second, incarnation(second), false, &offline_only(&offline), at(10))
        .unwrap();
    beat(&mut logic, &image, &[third], 10);
    let shutdown = logic.heartbeat(&image, first, incarnation(first), true, &NONE, at(10)).unwrap();
    assert_eq!(leader_after(&shutdown), third);
    // A controller that has just taken over has heard from neither: the next in order, at once.
    let seen = BTreeMap::from([(second, at(10)), (third, at(10))]);
    let mut fresh = ControllerLogic::taking_over(config(), &image, at(10), &seen);
    let shutdown = fresh.heartbeat(&image, first, incarnation(first), true, &NONE, at(10)).unwrap();
    assert_eq!(leader_after(&shutdown), second);
    // The topic allowing unclean elections, its leader back on a new disk as the only member
    // in sync: a replica that answers, not the first in order, becomes the whole ISR.
    let alone = changed(&image, "trio", |p| p.isr = vec![first]);
    apply(&mut image, &alone);
    let unclean = vec![("unclean.leader.election.enable".to_owned(), "true".to_owned())];
    let records = logic.alter_configs(&image, "trio", unclean.into_iter().collect(), false, at(10));
    apply(&mut image, &records.unwrap());
    let mut moved = registration(first, None);
    moved.incarnation = Incarnation(7);
    moved.directory = Some(DirectoryId(77));
    let records = logic.register(&image, moved, at(10));
    let next = image.partition("trio", 0).map(|_| leader_after(&records[1..]));
    assert_eq!(next, Some(third));
}

#[test]
fn a_replica_known_to_hold_damage_is_not_preferred_as_leader() {
    let (mut image, mut logic, p) = trio();
    let [first, second, third] = p.replicas[..] else { panic!("{p:?}") };
    let damaged = damaged(&p);
    // The preferred replica handed the lead to the next after meeting damage in its log; its
    // heartbeats, now as a follower, say the damage lasts.
    let moved = changed(&image, "trio", |p| {
        p.leader = second;
        p.leader_epoch += 1;
    });
    apply(&mut image, &moved);
    beat(&mut logic, &image, &[second, third], 1);
    logic.heartbeat(&image, first, incarnation(first), false, &damaged, at(1)).unwrap();
    assert!(logic.preferred_leaders(&image, at(1)).is_empty(), "not given back to the damage");
    let asked = logic.elect_leaders(&image, Election::Preferred, at(1), |_, _| true);
    assert!(asked.is_empty(), "nor on an operator's request");
    // Once its reports say the log is whole again (the damaged batch cut or deleted), it is
    // preferred again.
    beat(&mut logic, &image, &[first], 2);
    assert_eq!(logic.preferred_leaders(&image, at(2)).len(), 1);
    logic.heartbeat(&image, first, incarnation(first), false, &damaged, at(2)).unwrap();
    // The leader shuts down, the damaged replica next in order: the whole one leads.
    let damaged_next = changed(&image, "trio", |p| p.replicas = vec![second, first, third]);
    apply(&mut image, &damaged_next);
    let records = logic.heartbeat(&image, second, incarnation(second), true, &NONE, at(2));
    let records = records.unwrap();
    let [_, MetadataRecord::Partition(next)] = &records[..] else { panic!("{records:?}") };
    assert_eq!(next.leader, third);
}

#[test]
fn unclean_elections_prefer_a_replica_not_known_to_hold_damage() {
    let (mut image, mut logic, p) = trio();
    let [first, second, third] = p.replicas[..] else { panic!("{p:?}") };
    let damaged = damaged(&p);
    logic.heartbeat(&image, second, incarnation(second), false, &damaged, at(1)).unwrap();
    beat(&mut logic, &image, &[third], 1);
    let leader_of = |records: &[MetadataRecord]| {
        let elected = records.iter().find_map(|r| match r {
            MetadataRecord::Partition(p) => Some((p.leader, p.isr.clone())),
            _ => None,
        });
        elected.unwrap()
    };
    let everything = |_: &str, _: i32| true;
    // Leaderless with both followers in sync: the whole one of them.
    let orphan = changed(&image, "trio", |p| {
        p.leader = NO_LEADER;
        p.isr = vec![second, third];
    });
    apply(&mut image, &orphan);
    let records = logic.elect_leaders(&image, Election::Unclean, at(1), everything);
    assert_eq!(leader_of(&records), (third, vec![second, third]));
    // Leaderless with only the first in sync, and it down: out of the ISR, the whole one, by
    // ElectLeaders or by a topic allowing unclean elections.
    let fence = MetadataRecord::FenceBroker { broker_id: first, incarnation: incarnation(first) };
    let alone = changed(&image, "trio", |p| p.isr = vec![first]);
    apply(&mut image, &[vec![fence], alone].concat());
    let records = logic.elect_leaders(&image, Election::Unclean, at(1), everything);
    assert_eq!(leader_of(&records), (third, vec![third]));
    let unclean = [("unclean.leader.election.enable".to_owned(), "true".to_owned())];
    let records = logic.alter_configs(&image, "trio", unclean.into(), false, at(1)).unwrap();
    assert_eq!(leader_of(&records[1..]), (third, vec![third]));
    // A leader alone in the ISR of such a topic shuts down, the damaged replica next in
    // order: the whole one takes over.
    apply(&mut image, &records);
    let back = MetadataRecord::UnfenceBroker { broker_id: first, incarnation: incarnation(first) };
    let led_alone = changed(&image, "trio", |p| {
        p.leader = first;
        p.isr = vec![first];
    });
    apply(&mut image, &[vec![back], led_alone].concat());
    let shutdown = logic.heartbeat(&image, first, incarnation(first), true, &NONE, at(1));
    assert_eq!(leader_of(&shutdown.unwrap()[1..]), (third, vec![third]));
}
