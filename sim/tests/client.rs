//! The simulated Kafka client against a simulated Weir broker, one call of each kind, without
//! faults: what a workload relies on works, and an unreachable broker is reported as such.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use weir_sim::Sim;
use weir_sim::checker::values;
use weir_sim::client::admin::{EARLIEST, LATEST};
use weir_sim::client::fetch::FetchWant;
use weir_sim::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use weir_sim::client::{CallError, Client, ClientError};
use weir_sim::workload::broker::{BROKER_PORT, Shape, setup};

const LIMIT: Duration = Duration::from_secs(30);

fn batch(partition: i32, base_sequence: i32, numbers: &[u64]) -> PartitionBatch {
    PartitionBatch {
        partition,
        base_sequence,
        records: numbers.iter().map(|&n| (None, values::encode(9, n))).collect(),
    }
}

fn acked_offset(outcome: &ProduceOutcome) -> Option<i64> {
    match outcome {
        ProduceOutcome::Answered(a) => {
            a.first().filter(|a| a.error_code == 0).map(|a| a.base_offset)
        }
        ProduceOutcome::Unacknowledged => None,
    }
}

#[test]
fn every_call_works_against_a_healthy_broker() {
    let sim = Sim::new(7);
    let broker = sim.add_host("broker", setup::broker_boot(&Shape::from_seed(7)));
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(broker), BROKER_PORT);
    let result = sim.block_on(client, LIMIT, move |env| async move {
        let mut c = Client::new(env, addr, "smoke");
        c.create_topic("t", 2, &[("flush.policy", "ack")]).await.unwrap();
        c.create_topic("t", 2, &[]).await.unwrap();
        assert_eq!(c.partition_counts(&["t"]).await.unwrap().get("t"), Some(&2));
        let id = c.init_producer_id(None).await.unwrap();
        let first = c.produce("t", Acks::All, Some(id), &[batch(0, 0, &[0, 1])]).await.unwrap();
        assert_eq!(acked_offset(&first), Some(0));
        // A retry of the same sequence is answered with the original offsets, not written again.
        let retry = c.produce("t", Acks::All, Some(id), &[batch(0, 0, &[0, 1])]).await.unwrap();
        assert_eq!(acked_offset(&retry), Some(0));
        let plain = c.produce("t", Acks::Leader, None, &[batch(0, -1, &[2])]).await.unwrap();
        assert_eq!(acked_offset(&plain), Some(2));
        let none = c.produce("t", Acks::None, None, &[batch(1, -1, &[3])]).await.unwrap();
        assert_eq!(none, ProduceOutcome::Unacknowledged);
        // Asking again with the current identity (KIP-360) gives a fresh id, never one that
        // another ask with the same identity was given.
        let renewed = c.init_producer_id(Some(id)).await.unwrap();
        let again = c.init_producer_id(Some(id)).await.unwrap();
        assert_eq!((renewed.epoch, again.epoch), (0, 0));
        assert!(renewed.id != id.id && again.id != id.id && renewed.id != again.id);
        let latest = c.list_offsets("t", &[0, 1], LATEST).await.unwrap();
        assert_eq!(latest.get(&0), Some(&Ok(3)));
        let earliest = c.list_offsets("t", &[0], EARLIEST).await.unwrap();
        assert_eq!(earliest.get(&0), Some(&Ok(0)));
        let want = FetchWant { topic: "t".to_owned(), partition: 0, offset: 1 };
        let fetched = c.fetch(&[want], Duration::from_millis(100)).await.unwrap();
        let records: Vec<(i64, Option<Bytes>)> =
            fetched[0].records.iter().map(|r| (r.offset, r.value.clone())).collect();
        assert_eq!(records, vec![(1, Some(values::encode(9, 1))), (2, Some(values::encode(9, 2)))]);
        assert_eq!(fetched[0].high_watermark, 3);
        let coordinator = c.find_coordinator("g").await.unwrap();
        assert_eq!((coordinator.host, coordinator.port), (addr.ip().to_string(), 9092));
    });
    assert!(result.is_some(), "the calls did not finish");
}

#[test]
fn a_broker_that_is_down_is_unreachable_not_indeterminate() {
    let sim = Sim::new(8);
    let broker = sim.add_host("broker", setup::broker_boot(&Shape::from_seed(8)));
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(broker), BROKER_PORT);
    sim.kill(broker);
    let error = sim.block_on(client, LIMIT, move |env| async move {
        let mut c = Client::new(env, addr, "smoke");
        c.create_topic("t", 1, &[]).await.unwrap_err()
    });
    let error = error.unwrap();
    assert!(matches!(error, ClientError::Call(CallError::Unreachable(_))), "{error:?}");
    assert!(!error.is_indeterminate());
}

#[test]
fn group_calls_work_against_a_healthy_broker() {
    use std::collections::BTreeMap;
    use weir_sim::client::assignment::{decode_assignment, encode_assignment, encode_subscription};
    use weir_sim::client::group::MemberConfig;
    let sim = Sim::new(9);
    let broker = sim.add_host("broker", setup::broker_boot(&Shape::from_seed(9)));
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(broker), BROKER_PORT);
    let result = sim.block_on(client, LIMIT, move |env| async move {
        let mut c = Client::new(env, addr, "member");
        c.create_topic("t", 2, &[]).await.unwrap();
        eprintln!("created");
        // As every Kafka client does first: find the coordinator (which creates the offsets
        // topic on first use).
        c.find_coordinator("g").await.unwrap();
        let config = MemberConfig {
            group: "g".to_owned(),
            session_timeout: Duration::from_secs(6),
            rebalance_timeout: Duration::from_secs(6),
        };
        let subscription = encode_subscription(&["t".to_owned()]).unwrap();
        let joined = c.join_group(&config, "", subscription).await.unwrap();
        eprintln!("joined {joined:?}");
        assert!(joined.is_leader());
        let tps = vec![("t".to_owned(), 0), ("t".to_owned(), 1)];
        let mine = encode_assignment(&tps).unwrap();
        let bytes =
            c.sync_group(&config, &joined, vec![(joined.member_id.clone(), mine)]).await.unwrap();
        assert_eq!(decode_assignment(&bytes).unwrap(), tps);
        eprintln!("synced");
        c.heartbeat("g", joined.generation, &joined.member_id).await.unwrap();
        let offsets: BTreeMap<(String, i32), i64> = [(("t".to_owned(), 0), 5)].into();
        let codes =
            c.offset_commit("g", joined.generation, &joined.member_id, &offsets).await.unwrap();
        assert_eq!(codes.get(&("t".to_owned(), 0)), Some(&0));
        let read = c.offset_fetch("g", &tps).await.unwrap();
        assert_eq!(read.get(&("t".to_owned(), 0)), Some(&5));
        assert_eq!(read.get(&("t".to_owned(), 1)), Some(&-1));
        c.leave_group("g", &joined.member_id).await.unwrap();
    });
    assert!(result.is_some(), "the calls did not finish");
}
