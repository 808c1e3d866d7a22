//! Tests of the controller's decisions: placement, fencing and the leadership moves that
//! follow, topic changes and their refusals.

use std::time::Duration;

use super::*;
use crate::config::TopicConfig;
use crate::controller::records::{BrokerEpoch, DirectoryId};

const SESSION: Duration = Duration::from_secs(9);
/// Brokers heartbeat every second: a broker silent for more than 3 s is not elected.
const HEARTBEAT: Duration = Duration::from_secs(1);

fn config() -> LogicConfig {
    LogicConfig {
        topic_defaults: TopicConfig::with_defaults(Default::default()),
        num_partitions: 1,
        default_replication_factor: 1,
        session_timeout: SESSION,
        heartbeat_interval: HEARTBEAT,
    }
}

fn logic(image: &MetadataImage) -> ControllerLogic {
    ControllerLogic::new(config(), image, at(0))
}

fn at(secs: u64) -> Instant {
    Instant::from_nanos(secs * 1_000_000_000)
}

fn registration(id: BrokerId, rack: Option<&str>) -> BrokerRegistration {
    BrokerRegistration {
        broker_id: id,
        incarnation: Incarnation(id as u128 * 100),
        host: "127.0.0.1".into(),
        port: 9000 + id as u16,
        rack: rack.map(str::to_owned),
        unclean_shutdown: false,
        directory: Some(DirectoryId(id as u128)),
    }
}

fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
    let next = image.offset + 1;
    for r in records {
        image.apply(next, r);
    }
}

fn cluster(racks: &[Option<&str>]) -> (MetadataImage, ControllerLogic) {
    let mut image = MetadataImage::default();
    let mut logic = logic(&image);
    for (i, rack) in racks.iter().enumerate() {
        let records = logic.register(&image, registration(i as i32 + 1, *rack), at(0));
        apply(&mut image, &records);
    }
    (image, logic)
}

fn topic(name: &str, partitions: i32, replication: i32) -> NewTopic {
    NewTopic { name: name.into(), partitions, replication, configs: vec![], assignments: vec![] }
}

fn create(image: &mut MetadataImage, logic: &mut ControllerLogic, t: NewTopic, id: u8) {
    let records = logic.create_topic(image, &t, false, TopicId([id; 16])).unwrap();
    apply(image, &records);
}

#[test]
fn partitions_spread_round_robin_over_live_brokers() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("t", 6, 2), 1);
    let t = image.topic("t").unwrap();
    let mut leaders = BTreeMap::<BrokerId, usize>::new();
    for p in t.partitions.values() {
        assert_eq!(p.replicas.len(), 2);
        assert_ne!(p.replicas[0], p.replicas[1]);
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!(p.isr, p.replicas);
        *leaders.entry(p.leader).or_default() += 1;
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
}

#[test]
fn the_start_rotates_between_topics() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("a", 1, 1), 1);
    create(&mut image, &mut logic, topic("b", 1, 1), 2);
    let a = image.partition("a", 0).unwrap().leader;
    let b = image.partition("b", 0).unwrap().leader;
    assert_ne!(a, b, "single-partition topics should not all land on one broker");
}

#[test]
fn replicas_spread_across_racks() {
    let (mut image, mut logic) = cluster(&[Some("x"), Some("x"), Some("y"), Some("y")]);
    create(&mut image, &mut logic, topic("t", 8, 2), 1);
    let rack = |b: BrokerId| image.brokers[&b].registration.rack.clone();
    for p in image.topic("t").unwrap().partitions.values() {
        assert_ne!(rack(p.replicas[0]), rack(p.replicas[1]), "{p:?}");
    }
}

#[test]
fn too_large_a_replication_factor_is_refused() {
    let (image, mut logic) = cluster(&[None, None]);
    let err = logic.create_topic(&image, &topic("t", 1, 3), false, TopicId([1; 16]));
    assert_eq!(err, Err(ControllerError::BadReplication { wanted: 3, live: 2 }));
}

#[test]
fn the_default_replication_factor_is_not_cut_to_the_live_brokers() {
    let (mut image, mut logic) = cluster(&[None, None]);
    logic.config.default_replication_factor = 3;
    let err = logic.create_topic(&image, &topic("t", 1, -1), false, TopicId([1; 16]));
    assert_eq!(err, Err(ControllerError::BadReplication { wanted: 3, live: 2 }));
    logic.config.default_replication_factor = 2;
    create(&mut image, &mut logic, topic("t", 1, -1), 1);
    assert_eq!(image.partition("t", 0).unwrap().replicas.len(), 2);
}

#[test]
fn explicit_assignments_place_the_replicas_named_and_only_live_ones_start_in_sync() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    let assigned = NewTopic { assignments: vec![vec![3, 1], vec![2, 3]], ..topic("t", -1, -1) };
    create(&mut image, &mut logic, assigned, 1);
    let p0 = image.partition("t", 0).unwrap();
    assert_eq!((p0.replicas.clone(), p0.leader, p0.isr.clone()), (vec![3, 1], 3, vec![3, 1]));
    let p1 = image.partition("t", 1).unwrap();
    assert_eq!((p1.replicas.clone(), p1.leader), (vec![2, 3], 2));
    // Broker 3 fenced: it is assigned, not in sync, and never the leader.
    let fenced = MetadataRecord::FenceBroker { broker_id: 3, incarnation: Incarnation(300) };
    apply(&mut image, &[fenced]);
    let assigned = NewTopic { assignments: vec![vec![3, 1]], ..topic("u", -1, -1) };
    create(&mut image, &mut logic, assigned, 2);
    let u = image.partition("u", 0).unwrap();
    assert_eq!((u.replicas.clone(), u.leader, u.isr.clone()), (vec![3, 1], 1, vec![1]));
    for (bad, why) in [
        (vec![vec![3]], "only fenced brokers"),
        (vec![vec![1, 9]], "a broker never registered"),
        (vec![vec![1, 1]], "a broker twice"),
        (vec![vec![1, 2], vec![2]], "unequal replica counts"),
        (vec![vec![]], "no replica"),
    ] {
        let t = NewTopic { assignments: bad, ..topic("v", -1, -1) };
        let err = logic.create_topic(&image, &t, false, TopicId([3; 16]));
        assert!(matches!(err, Err(ControllerError::BadAssignment(_))), "{why}: {err:?}");
    }
}

#[test]
fn new_partitions_follow_explicit_assignments_checked_as_kafka_checks_them() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("t", 1, 2), 1);
    let fenced = MetadataRecord::FenceBroker { broker_id: 3, incarnation: Incarnation(300) };
    apply(&mut image, &[fenced]);
    for (bad, why) in [
        (vec![vec![1, 2]], "one assignment for two new partitions"),
        (vec![vec![1, 2], vec![2]], "a replication factor other than the topic's"),
        (vec![vec![1, 2], vec![1, 9]], "a broker never registered"),
        (vec![vec![1, 2], vec![2, 2]], "a broker twice"),
    ] {
        let err = logic.create_partitions(&image, "t", 3, &bad, false);
        assert!(matches!(err, Err(ControllerError::BadAssignment(_))), "{why}: {err:?}");
    }
    let assigned = [vec![2, 1], vec![3, 2]];
    assert_eq!(logic.create_partitions(&image, "t", 3, &assigned, true), Ok(vec![]));
    let records = logic.create_partitions(&image, "t", 3, &assigned, false).unwrap();
    apply(&mut image, &records);
    let p1 = image.partition("t", 1).unwrap();
    assert_eq!((p1.replicas.clone(), p1.leader, p1.isr.clone()), (vec![2, 1], 2, vec![2, 1]));
    // Broker 3 is fenced: assigned, not in sync, not the leader.
    let p2 = image.partition("t", 2).unwrap();
    assert_eq!((p2.replicas.clone(), p2.leader, p2.isr.clone()), (vec![3, 2], 2, vec![2]));
}

#[test]
fn validate_only_and_refusals_produce_no_records() {
    let (mut image, mut logic) = cluster(&[None]);
    assert_eq!(logic.create_topic(&image, &topic("t", 3, 1), true, TopicId([1; 16])), Ok(vec![]));
    create(&mut image, &mut logic, topic("t", 3, 1), 1);
    assert!(matches!(
        logic.create_topic(&image, &topic("t", 3, 1), false, TopicId([2; 16])),
        Err(ControllerError::TopicExists(_))
    ));
    let bad = NewTopic { configs: vec![("retention.ms".into(), "x".into())], ..topic("u", 1, 1) };
    assert!(matches!(
        logic.create_topic(&image, &bad, false, TopicId([3; 16])),
        Err(ControllerError::BadConfig(_))
    ));
    assert!(matches!(
        logic.create_topic(&image, &topic("bad name!", 1, 1), false, TopicId([4; 16])),
        Err(ControllerError::BadName(_))
    ));
    assert_eq!(
        logic.create_partitions(&image, "t", 2, &[], false),
        Err(ControllerError::BadPartitions(2))
    );
    create(&mut image, &mut logic, topic("__consumer_offsets", 1, 1), 9);
    assert!(matches!(
        logic.delete_topic(&image, "__consumer_offsets"),
        Err(ControllerError::Internal(_))
    ));
    assert!(matches!(
        logic.create_partitions(&image, "__consumer_offsets", 2, &[], false),
        Err(ControllerError::Internal(_))
    ));
}

#[test]
fn incremental_config_changes_apply_to_the_overrides_the_controller_holds() {
    use crate::config::{ConfigChange, ConfigOp};
    let (mut image, mut logic) = cluster(&[None]);
    create(&mut image, &mut logic, topic("t", 1, 1), 1);
    let set = |name: &str, value: &str| ConfigChange {
        name: name.into(),
        op: ConfigOp::Set(value.into()),
    };
    // Two changes of different settings, as two brokers send them at once, each knowing
    // only the overrides from before both: the second keeps the first.
    for change in [set("retention.ms", "5000"), set("segment.ms", "7000")] {
        let records =
            logic.alter_configs_incremental(&image, "t", &[change], false, at(0)).unwrap();
        apply(&mut image, &records);
    }
    let append =
        ConfigChange { name: "cleanup.policy".into(), op: ConfigOp::Append("compact".into()) };
    let records = logic.alter_configs_incremental(&image, "t", &[append], false, at(0)).unwrap();
    apply(&mut image, &records);
    let expected: BTreeMap<String, String> = [
        ("cleanup.policy".into(), "delete,compact".into()),
        ("retention.ms".into(), "5000".into()),
        ("segment.ms".into(), "7000".into()),
    ]
    .into();
    assert_eq!(image.topic("t").unwrap().configs, expected);
    // Refusals and a check only write nothing.
    let bad = [set("retention.ms", "-7")];
    let refused = logic.alter_configs_incremental(&image, "t", &bad, false, at(0));
    assert!(matches!(refused, Err(ControllerError::BadConfig(_))), "{refused:?}");
    let unknown = logic.alter_configs_incremental(&image, "u", &[], false, at(0));
    assert_eq!(unknown, Err(ControllerError::UnknownTopic("u".into())));
    let check = [set("retention.ms", "1")];
    assert_eq!(logic.alter_configs_incremental(&image, "t", &check, true, at(0)), Ok(vec![]));
    // Deleting a setting the topic does not hold, known or not, changes nothing.
    let absent = ["max.message.bytes", "leader.replication.throttled.replicas"]
        .map(|name| ConfigChange { name: name.into(), op: ConfigOp::Delete });
    assert_eq!(logic.alter_configs_incremental(&image, "t", &absent, false, at(0)), Ok(vec![]));
    assert_eq!(image.topic("t").unwrap().configs, expected);
}

#[test]
fn a_silent_broker_is_fenced_and_loses_leadership_then_gets_it_back() {
    let (mut image, mut logic) = cluster(&[None, None]);
    create(&mut image, &mut logic, topic("solo", 2, 1), 1);
    create(&mut image, &mut logic, topic("pair", 1, 2), 2);
    for b in [1, 2] {
        let hb =
            logic.heartbeat(&image, b, Incarnation(b as u128 * 100), false, &NONE, at(5)).unwrap();
        assert!(hb.is_empty(), "a live broker's heartbeat changes nothing");
    }
    assert!(logic.expire(&image, at(14)).is_none(), "within the session");
    // Broker 1 goes silent; broker 2 keeps heartbeating.
    logic.heartbeat(&image, 2, Incarnation(200), false, &NONE, at(14)).unwrap();
    let batch = logic.expire(&image, at(15)).expect("broker 1 expired");
    apply(&mut image, &batch);
    assert!(logic.expire(&image, at(15)).is_none(), "broker 2 heartbeated");
    assert!(image.brokers[&1].fenced);
    let pair = image.partition("pair", 0).unwrap();
    assert_eq!(pair.leader, 2, "the in-sync follower takes over");
    assert_eq!(pair.isr, vec![2]);
    for p in image.topic("solo").unwrap().partitions.values() {
        if p.replicas == vec![1] {
            assert_eq!(p.leader, NO_LEADER, "a single-replica partition on a fenced broker");
            assert_eq!(p.leader_epoch, 1);
        }
    }
    // It comes back with the same incarnation: unfenced, and its leaderless partitions return.
    let records = logic.heartbeat(&image, 1, Incarnation(100), false, &NONE, at(20)).unwrap();
    apply(&mut image, &records);
    assert!(!image.brokers[&1].fenced);
    for p in image.topic("solo").unwrap().partitions.values() {
        assert_ne!(p.leader, NO_LEADER);
    }
    // A heartbeat from an old run is refused.
    assert_eq!(
        logic.heartbeat(&image, 1, Incarnation(7), false, &NONE, at(21)),
        Err(ControllerError::StaleBroker(1))
    );
}

#[test]
fn controlled_shutdown_moves_leadership_away() {
    let (mut image, mut logic) = cluster(&[None, None]);
    create(&mut image, &mut logic, topic("pair", 4, 2), 1);
    let records = logic.heartbeat(&image, 1, Incarnation(100), true, &NONE, at(1)).unwrap();
    apply(&mut image, &records);
    assert!(!image.is_live(1));
    for p in image.topic("pair").unwrap().partitions.values() {
        assert_eq!(p.leader, 2);
    }
    let again = logic.heartbeat(&image, 1, Incarnation(100), true, &NONE, at(2)).unwrap();
    assert!(again.is_empty());
}

#[test]
fn producer_id_blocks_never_overlap() {
    let (mut image, _) = cluster(&[None]);
    let mut seen = Vec::new();
    for broker in [1, 2, 1] {
        let r = ControllerLogic::producer_ids(&image, broker);
        if let MetadataRecord::ProducerIds { first, count, .. } = r {
            seen.push((first, count));
        }
        apply(&mut image, &[r]);
    }
    assert_eq!(seen, vec![(0, 1000), (1000, 1000), (2000, 1000)]);
    assert_eq!(hosting_brokers(&image).len(), 0);
}

#[test]
fn a_leader_that_restarts_leads_on_in_a_new_epoch() {
    let (mut image, mut logic) = cluster(&[None, None]);
    create(&mut image, &mut logic, topic("t", 2, 2), 1);
    let led_by_1 = |image: &MetadataImage| -> Vec<(i32, i32)> {
        let t = image.topic("t").unwrap();
        t.partitions
            .values()
            .filter(|p| p.leader == 1)
            .map(|p| (p.partition, p.leader_epoch))
            .collect()
    };
    let before = led_by_1(&image);
    assert!(!before.is_empty());
    // The same run registering again changes no epoch.
    let again = logic.register(&image, registration(1, None), at(1));
    apply(&mut image, &again);
    assert_eq!(led_by_1(&image), before);
    // A new run (it crashed and came back within its session) leads in a new epoch.
    let restarted = BrokerRegistration { incarnation: Incarnation(7), ..registration(1, None) };
    let records = logic.register(&image, restarted, at(2));
    apply(&mut image, &records);
    let after = led_by_1(&image);
    assert_eq!(after.len(), before.len(), "it keeps its leadership");
    for ((p, old), (q, new)) in before.iter().zip(&after) {
        assert_eq!(p, q);
        assert_eq!(*new, old + 1, "partition {p}");
    }
}

#[test]
fn after_an_unclean_shutdown_a_replica_leaves_the_isr_of_interval_topics_only() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    let interval =
        NewTopic { configs: vec![("flush.policy".into(), "interval".into())], ..topic("i", 1, 3) };
    create(&mut image, &mut logic, interval, 1);
    create(&mut image, &mut logic, topic("a", 1, 3), 2);
    let leader = image.partition("i", 0).unwrap().leader;
    let follower = image.partition("i", 0).unwrap().isr.iter().copied().find(|&b| b != leader);
    let follower = follower.unwrap();
    let unclean = |id: BrokerId, incarnation: u128| BrokerRegistration {
        incarnation: Incarnation(incarnation),
        unclean_shutdown: true,
        ..registration(id, None)
    };
    // A restart after a clean shutdown keeps every ISR.
    let clean = BrokerRegistration { incarnation: Incarnation(50), ..registration(follower, None) };
    let records = logic.register(&image, clean, at(1));
    apply(&mut image, &records);
    assert_eq!(image.partition("i", 0).unwrap().isr.len(), 3);
    // After an unclean one, the follower leaves the interval topic's ISR, not the other's.
    let before = image.partition("i", 0).unwrap().clone();
    let records = logic.register(&image, unclean(follower, 51), at(2));
    apply(&mut image, &records);
    let after = image.partition("i", 0).unwrap();
    assert!(!after.isr.contains(&follower), "{after:?}");
    assert_eq!((after.leader, after.leader_epoch), (before.leader, before.leader_epoch));
    assert_eq!(after.partition_epoch, before.partition_epoch + 1);
    assert_eq!(image.partition("a", 0).unwrap().isr.len(), 3);
    // The leader restarting uncleanly hands leadership to the remaining in-sync replica.
    let records = logic.register(&image, unclean(leader, 52), at(3));
    apply(&mut image, &records);
    let now = image.partition("i", 0).unwrap();
    assert_eq!(now.isr.len(), 1, "{now:?}");
    assert_ne!(now.leader, leader);
    assert_ne!(now.leader, follower);
    assert_eq!(now.leader_epoch, before.leader_epoch + 1);
    // The last in-sync replica stays: nothing holds more.
    let last = now.leader;
    let records = logic.register(&image, unclean(last, 53), at(4));
    apply(&mut image, &records);
    let last_standing = image.partition("i", 0).unwrap();
    assert_eq!(last_standing.isr, vec![last]);
}

#[test]
fn a_controller_taking_over_runs_sessions_from_the_last_heartbeat_it_saw() {
    let (image, _) = cluster(&[None, None, None]);
    let config = config();
    // Taking over at 100 s: broker 1 last seen at 95 s (its session ends at 104 s), broker 2 at
    // 50 s (its session ended long ago; it gets the grace), broker 3 never (a full session).
    let seen = BTreeMap::from([(1, at(95)), (2, at(50))]);
    let mut logic = ControllerLogic::taking_over(config, &image, at(100), &seen);
    let fenced = |batch: Option<Vec<MetadataRecord>>| -> Option<BrokerId> {
        batch?.iter().find_map(|r| match r {
            MetadataRecord::FenceBroker { broker_id, .. } => Some(*broker_id),
            _ => None,
        })
    };
    let grace = TAKEOVER_GRACE;
    let after = |t: Instant| Instant::from_nanos(t.as_nanos() + 1);
    assert_eq!(fenced(logic.expire(&image, at(100) + grace)), None, "within the grace");
    let mut image = image;
    let batch = logic.expire(&image, after(at(100) + grace));
    assert_eq!(fenced(batch.clone()), Some(2), "silent for long: fenced after the grace");
    apply(&mut image, &batch.unwrap_or_default());
    assert_eq!(fenced(logic.expire(&image, at(104))), None);
    let batch = logic.expire(&image, after(at(104)));
    assert_eq!(fenced(batch.clone()), Some(1), "a session after it was seen");
    apply(&mut image, &batch.unwrap_or_default());
    assert_eq!(fenced(logic.expire(&image, at(109))), None);
    assert_eq!(fenced(logic.expire(&image, after(at(109)))), Some(3), "never seen: a full session");
}

#[test]
fn a_broker_reporting_an_offline_log_loses_that_partition_only() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("t", 3, 3), 1);
    create(&mut image, &mut logic, topic("solo", 3, 1), 2);
    let led: Vec<i32> = image
        .topic("t")
        .unwrap()
        .partitions
        .values()
        .filter(|p| p.leader == 1)
        .map(|p| p.partition)
        .collect();
    let kept: Vec<i32> = image
        .topic("t")
        .unwrap()
        .partitions
        .values()
        .filter(|p| p.leader != 1)
        .map(|p| p.partition)
        .collect();
    let (gone, still) = (led[0], kept[0]);
    let before = image.partition("t", gone).unwrap().clone();
    let solo = image.topic("solo").unwrap().partitions.values().find(|p| p.leader == 1).unwrap();
    let solo = solo.partition;
    let offline = [(TopicId([1; 16]), gone), (TopicId([1; 16]), still), (TopicId([2; 16]), solo)];
    let records = logic
        .heartbeat(&image, 1, Incarnation(100), false, &offline_only(&offline), at(1))
        .unwrap();
    apply(&mut image, &records);
    // The partition it led moves to another in-sync replica, in a new leader epoch, without it.
    let after = image.partition("t", gone).unwrap();
    assert_ne!(after.leader, 1);
    assert!(before.isr.contains(&after.leader));
    assert!(!after.isr.contains(&1));
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    // Where it only followed, it leaves the ISR; the leader stays.
    let followed = image.partition("t", still).unwrap();
    assert!(!followed.isr.contains(&1));
    assert_ne!(followed.leader, 1);
    // Partitions it did not report keep it.
    for p in image.topic("t").unwrap().partitions.values() {
        if p.partition != gone && p.partition != still {
            assert!(p.isr.contains(&1), "{p:?}");
        }
    }
    // Where it was the only replica, no other can lead; it stays in the ISR for its return.
    let solo_after = image.partition("solo", solo).unwrap();
    assert_eq!(solo_after.isr, vec![1]);
    assert_eq!(solo_after.leader, NO_LEADER);
    assert!(image.is_live(1), "the broker itself stays live");
    let again = logic
        .heartbeat(&image, 1, Incarnation(100), false, &offline_only(&offline), at(2))
        .unwrap();
    assert!(again.is_empty(), "a repeated report changes nothing: {again:?}");
}

#[test]
fn leadership_handed_over_again_and_again_comes_to_every_in_sync_replica() {
    // Each leader in turn reports the partition offline (a damaged log: it stays live and
    // rejoins the ISR once caught up). Taking the first other ISR member each time would move
    // leadership between two replicas for good, never reaching the third, whose copy may be
    // the only intact one.
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("t", 1, 3), 1);
    let mut leaders = vec![image.partition("t", 0).unwrap().leader];
    for round in 0..3u64 {
        let p = image.partition("t", 0).unwrap().clone();
        let leader = p.leader;
        let offline = [(TopicId([1; 16]), 0)];
        let incarnation = Incarnation(leader as u128 * 100);
        let records = logic
            .heartbeat(&image, leader, incarnation, false, &offline_only(&offline), at(1 + round))
            .unwrap();
        apply(&mut image, &records);
        let moved = image.partition("t", 0).unwrap().clone();
        assert_ne!(moved.leader, leader, "round {round}: {moved:?}");
        assert!(p.isr.contains(&moved.leader), "round {round}: {moved:?}");
        leaders.push(moved.leader);
        // The old leader catches up and joins the ISR again, in the assignment's order.
        let rejoined = PartitionRecord {
            isr: moved.replicas.clone(),
            partition_epoch: moved.partition_epoch + 1,
            ..moved
        };
        apply(&mut image, &[MetadataRecord::Partition(rejoined)]);
    }
    let mut reached = leaders.clone();
    reached.sort_unstable();
    reached.dedup();
    assert_eq!(reached, vec![1, 2, 3], "leaders in turn: {leaders:?}");
}

#[test]
fn a_broker_back_on_a_new_disk_leaves_every_isr_even_as_the_last_member() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("a", 3, 3), 1);
    create(&mut image, &mut logic, topic("solo", 3, 1), 2);
    let unclean = vec![("unclean.leader.election.enable".into(), "true".into())];
    create(&mut image, &mut logic, NewTopic { configs: unclean, ..topic("lossy", 3, 1) }, 3);
    let replaced = 1;
    let led: Vec<i32> = image
        .topic("a")
        .unwrap()
        .partitions
        .values()
        .filter(|p| p.leader == replaced)
        .map(|p| p.partition)
        .collect();
    let (solo, _) =
        image.topic("solo").unwrap().partitions.iter().find(|(_, p)| p.leader == replaced).unwrap();
    let solo = *solo;
    assert!(!led.is_empty());
    // A restart over the same disk, even an unclean one, keeps its ISRs (flush.policy=ack).
    let same_disk = BrokerRegistration {
        incarnation: Incarnation(7),
        unclean_shutdown: true,
        ..registration(replaced, None)
    };
    let records = logic.register(&image, same_disk, at(1));
    apply(&mut image, &records);
    assert!(image.topic("a").unwrap().partitions.values().all(|p| p.isr.len() == 3));
    assert_eq!(image.partition("solo", solo).unwrap().leader, replaced);
    // Back on a new disk, it is in no ISR and leads nothing.
    let before = image.clone();
    let new_disk = BrokerRegistration {
        incarnation: Incarnation(8),
        directory: Some(DirectoryId(0xd15c)),
        ..registration(replaced, None)
    };
    let records = logic.register(&image, new_disk, at(2));
    apply(&mut image, &records);
    for p in image.topic("a").unwrap().partitions.values() {
        let old = &before.topic("a").unwrap().partitions[&p.partition];
        assert!(!p.isr.contains(&replaced), "{p:?}");
        assert_eq!(p.isr.len(), 2, "{p:?}");
        if led.contains(&p.partition) {
            assert!(p.leader != replaced && p.leader != NO_LEADER, "{p:?}");
            assert_eq!(p.leader_epoch, old.leader_epoch + 1);
        } else {
            assert_eq!((p.leader, p.leader_epoch), (old.leader, old.leader_epoch));
        }
        assert_eq!(p.partition_epoch, old.partition_epoch + 1);
    }
    let orphan = image.partition("solo", solo).unwrap();
    assert!(orphan.isr.is_empty() && orphan.leader == NO_LEADER, "{orphan:?}");
    // Where the topic allows unclean election, the partition is served again at once (by the
    // only replica there is, the empty one), in a new leader epoch.
    let lossy: Vec<_> = image
        .topic("lossy")
        .unwrap()
        .partitions
        .values()
        .filter(|p| p.replicas == [replaced])
        .collect();
    assert_eq!(lossy.len(), 1, "one of its partitions lives on the replaced broker alone");
    for p in lossy {
        let old = &before.topic("lossy").unwrap().partitions[&p.partition];
        assert_eq!((p.leader, p.isr.clone()), (replaced, vec![replaced]), "{p:?}");
        assert_eq!(p.leader_epoch, old.leader_epoch + 1);
    }
    // Another restart on the new disk does not make it eligible again.
    let again = BrokerRegistration {
        incarnation: Incarnation(9),
        directory: Some(DirectoryId(0xd15c)),
        ..registration(replaced, None)
    };
    let records = logic.register(&image, again, at(3));
    apply(&mut image, &records);
    let orphan = image.partition("solo", solo).unwrap();
    assert!(orphan.isr.is_empty() && orphan.leader == NO_LEADER, "{orphan:?}");
    // Until an operator allows an unclean election: a live replica then leads at once.
    let configs = BTreeMap::from([("unclean.leader.election.enable".into(), "true".into())]);
    let records = logic.alter_configs(&image, "solo", configs, false, at(0)).unwrap();
    apply(&mut image, &records);
    let served = image.partition("solo", solo).unwrap();
    assert_eq!((served.leader, served.isr.clone()), (replaced, vec![replaced]), "{served:?}");
}

#[test]
fn a_replica_reporting_its_log_offline_is_not_added_to_the_isr() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("t", 1, 3), 1);
    let p = image.partition("t", 0).unwrap().clone();
    let follower = p.replicas.iter().copied().find(|&b| b != p.leader).unwrap();
    // It reports its log offline: it leaves the ISR.
    let report = offline_only(&[(p.topic_id, 0)]);
    let incarnation = Incarnation(follower as u128 * 100);
    let records = logic.heartbeat(&image, follower, incarnation, false, &report, at(1)).unwrap();
    apply(&mut image, &records);
    let p = image.partition("t", 0).unwrap().clone();
    assert!(!p.isr.contains(&follower), "{p:?}");
    let all = p.replicas.clone();
    let epoch = image.brokers[&follower].registration.incarnation.epoch();
    let joining = [(follower, epoch)];
    let change = isr_change(&p, &all, &joining);
    assert!(
        matches!(
            logic.alter_partition(&image, &change),
            Err(ControllerError::IneligibleReplica(_))
        ),
        "added while it reports its log offline"
    );
    // Its log takes writes again: it may join.
    logic.heartbeat(&image, follower, incarnation, false, &NONE, at(2)).unwrap();
    let records = logic.alter_partition(&image, &change).unwrap();
    apply(&mut image, &records);
    assert_eq!(image.partition("t", 0).unwrap().isr.len(), 3);
}

#[test]
fn a_replica_out_of_room_gives_way_only_to_another_in_sync_replica() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("t", 1, 3), 1);
    let full = |p: &PartitionRecord| LogReports {
        full: vec![(p.topic_id, p.partition)],
        ..LogReports::default()
    };
    let mut gave_way = Vec::new();
    for secs in 1..=3 {
        let p = image.partition("t", 0).unwrap().clone();
        let leader = p.leader;
        let incarnation = Incarnation(leader as u128 * 100);
        let records = logic.heartbeat(&image, leader, incarnation, false, &full(&p), at(secs));
        apply(&mut image, &records.unwrap());
        let now = image.partition("t", 0).unwrap().clone();
        if p.isr.len() > 1 {
            // Another in-sync replica takes the writes; this one leaves the ISR.
            assert!(now.leader != leader && now.leader != NO_LEADER, "{now:?}");
            assert!(!now.isr.contains(&leader), "{now:?}");
            gave_way.push(leader);
        } else {
            // The last in-sync replica keeps the partition: no leaderless partition, and no
            // unclean election, for lack of room.
            assert_eq!((now.leader, now.isr.clone()), (leader, vec![leader]), "{now:?}");
        }
    }
    assert_eq!(gave_way.len(), 2);
    // Not let back in while it reports its log out of room; then it is.
    let p = image.partition("t", 0).unwrap().clone();
    let back = gave_way[0];
    let epoch = image.brokers[&back].registration.incarnation.epoch();
    let isr = vec![p.leader, back];
    let joining = [(back, epoch)];
    let change = isr_change(&p, &isr, &joining);
    let incarnation = Incarnation(back as u128 * 100);
    logic.heartbeat(&image, back, incarnation, false, &full(&p), at(4)).unwrap();
    assert!(matches!(
        logic.alter_partition(&image, &change),
        Err(ControllerError::IneligibleReplica(_))
    ));
    logic.heartbeat(&image, back, incarnation, false, &NONE, at(5)).unwrap();
    assert!(logic.alter_partition(&image, &change).is_ok());
}

#[test]
fn a_member_is_added_only_in_the_run_that_caught_up() {
    let (mut image, mut logic) = cluster(&[None, None, None]);
    create(&mut image, &mut logic, topic("t", 1, 3), 1);
    let p = image.partition("t", 0).unwrap().clone();
    let follower = p.replicas.iter().copied().find(|&b| b != p.leader).unwrap();
    let rest: Vec<BrokerId> = p.isr.iter().copied().filter(|&b| b != follower).collect();
    let shrink = isr_change(&p, &rest, &[]);
    let records = logic.alter_partition(&image, &shrink).unwrap();
    apply(&mut image, &records);
    let p = image.partition("t", 0).unwrap().clone();
    let old_run = image.brokers[&follower].registration.incarnation.epoch();
    // The follower registers again (a restart) before the leader's request arrives.
    let restarted =
        BrokerRegistration { incarnation: Incarnation(u128::MAX), ..registration(follower, None) };
    let records = logic.register(&image, restarted, at(1));
    apply(&mut image, &records);
    let new_run = image.brokers[&follower].registration.incarnation.epoch();
    assert_ne!(old_run, new_run);
    let all = p.replicas.clone();
    let join = |epoch: BrokerEpoch| {
        let joining = [(follower, epoch)];
        let change = isr_change(&p, &all, &joining);
        logic.alter_partition(&image, &change)
    };
    assert!(
        matches!(join(old_run), Err(ControllerError::IneligibleReplica(_))),
        "the run that caught up is gone"
    );
    let records = join(new_run).unwrap();
    assert!(matches!(&records[..], [MetadataRecord::Partition(q)] if q.isr.len() == 3));
}

/// A record of each partition of `topic`, changed by `change` and with its partition epoch
/// bumped.
fn changed(
    image: &MetadataImage,
    topic: &str,
    change: impl Fn(&mut PartitionRecord),
) -> Vec<MetadataRecord> {
    let partitions = &image.topic(topic).unwrap().partitions;
    let changed = partitions.values().map(|p| {
        let mut next = p.clone();
        change(&mut next);
        next.partition_epoch += 1;
        MetadataRecord::Partition(next)
    });
    changed.collect()
}

/// The ISR change the leader of `p` asks for: the ISR `isr`, adding the runs in `joining`.
fn isr_change<'a>(
    p: &PartitionRecord,
    isr: &'a [BrokerId],
    joining: &'a [(BrokerId, BrokerEpoch)],
) -> IsrChange<'a> {
    IsrChange {
        broker_id: p.leader,
        topic_id: p.topic_id,
        partition: p.partition,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr,
        joining,
    }
}

/// A heartbeat reporting every log whole.
const NONE: LogReports = LogReports { offline: Vec::new(), damaged: Vec::new(), full: Vec::new() };

/// A heartbeat's reports: `offline` offline, no damage.
fn offline_only(offline: &[(TopicId, i32)]) -> LogReports {
    LogReports { offline: offline.to_vec(), ..LogReports::default() }
}

/// Heartbeats of `brokers` at `secs`, none reporting an offline log.
fn beat(logic: &mut ControllerLogic, image: &MetadataImage, brokers: &[BrokerId], secs: u64) {
    for &b in brokers {
        logic.heartbeat(image, b, Incarnation(b as u128 * 100), false, &NONE, at(secs)).unwrap();
    }
}

#[path = "elections_tests.rs"]
mod elections;

#[path = "reassignments_tests.rs"]
mod reassignments;
