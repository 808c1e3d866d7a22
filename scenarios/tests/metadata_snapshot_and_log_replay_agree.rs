//! The metadata image rebuilt from a snapshot plus the rest of the log equals the image from
//! replaying the whole log, at every cut, for random histories the active controller's own
//! logic writes: brokers registering, heartbeating, going silent and being fenced, shutting
//! down; topics created, grown, reconfigured and deleted; producer-id blocks. Each entry also
//! goes through its wire encoding, as it does in the quorum.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use weir::config::TopicConfig;
use weir::controller::image::MetadataImage;
use weir::controller::logic::{ControllerLogic, LogicConfig, NewTopic};
use weir::controller::records::{BrokerRegistration, DirectoryId, Incarnation, MetadataRecord};
use weir::io::Instant;
use weir::model::TopicId;

#[derive(Clone, Debug)]
enum Op {
    Register(i32, Option<u8>),
    Heartbeat(i32, bool),
    Advance(u64),
    Create(u8, i32, i32),
    Grow(u8, i32),
    Configure(u8, u32),
    Delete(u8),
    ProducerIds(i32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1..6i32, proptest::option::of(0..2u8)).prop_map(|(b, r)| Op::Register(b, r)),
        (1..6i32, any::<bool>()).prop_map(|(b, s)| Op::Heartbeat(b, s)),
        (1..20u64).prop_map(Op::Advance),
        (0..6u8, 1..8i32, 1..4i32).prop_map(|(t, p, r)| Op::Create(t, p, r)),
        (0..6u8, 1..12i32).prop_map(|(t, p)| Op::Grow(t, p)),
        (0..6u8, 1..100_000u32).prop_map(|(t, ms)| Op::Configure(t, ms)),
        (0..6u8).prop_map(Op::Delete),
        (1..6i32).prop_map(Op::ProducerIds),
    ]
}

/// The log the controller writes for `ops`: one entry (a batch of records) per change.
fn history(ops: &[Op]) -> Vec<Bytes> {
    let config = LogicConfig {
        topic_defaults: TopicConfig::with_defaults(BTreeMap::new()),
        num_partitions: 1,
        default_replication_factor: 1,
        session_timeout: Duration::from_secs(6),
        heartbeat_interval: Duration::from_millis(500),
    };
    let mut image = MetadataImage::default();
    let mut now = Instant::ZERO;
    let mut logic = ControllerLogic::new(config, &image, now);
    let mut log = Vec::new();
    let mut ids = 0u8;
    for op in ops {
        let mut batches: Vec<Vec<MetadataRecord>> = Vec::new();
        match op {
            Op::Register(b, rack) => {
                let registration = BrokerRegistration {
                    broker_id: *b,
                    incarnation: Incarnation(u128::from(ids) << 8 | *b as u128),
                    host: "127.0.0.1".into(),
                    port: 9000 + *b as u16,
                    rack: rack.map(|r| format!("rack{r}")),
                    unclean_shutdown: ids.is_multiple_of(3),
                    // Mostly the broker's one disk; now and then a new one, or none named.
                    directory: match ids % 7 {
                        0 => None,
                        5 => Some(DirectoryId(u128::from(ids))),
                        _ => Some(DirectoryId(0)),
                    },
                };
                ids = ids.wrapping_add(1);
                batches.push(logic.register(&image, registration, now));
            }
            Op::Heartbeat(b, shutdown) => {
                if let Some(broker) = image.brokers.get(b) {
                    let inc = broker.registration.incarnation;
                    batches.push(
                        logic
                            .heartbeat(&image, *b, inc, *shutdown, &Default::default(), now)
                            .unwrap(),
                    );
                }
            }
            Op::Advance(secs) => {
                now = now + Duration::from_secs(*secs);
                batches.extend(logic.expire(&image, now));
            }
            Op::Create(t, p, r) => {
                ids = ids.wrapping_add(1);
                let topic = NewTopic {
                    name: format!("t{t}"),
                    partitions: *p,
                    replication: *r,
                    configs: vec![],
                    assignments: vec![],
                };
                if let Ok(records) = logic.create_topic(&image, &topic, false, TopicId([ids; 16])) {
                    batches.push(records);
                }
            }
            Op::Grow(t, p) => {
                if let Ok(records) =
                    logic.create_partitions(&image, &format!("t{t}"), *p, &[], false)
                {
                    batches.push(records);
                }
            }
            Op::Configure(t, ms) => {
                let configs = BTreeMap::from([("retention.ms".to_owned(), ms.to_string())]);
                if let Ok(records) =
                    logic.alter_configs(&image, &format!("t{t}"), configs, false, now)
                {
                    batches.push(records);
                }
            }
            Op::Delete(t) => {
                if let Ok((_, records)) = logic.delete_topic(&image, &format!("t{t}")) {
                    batches.push(records);
                }
            }
            Op::ProducerIds(b) => batches.push(vec![ControllerLogic::producer_ids(&image, *b)]),
        }
        for batch in batches.into_iter().filter(|b| !b.is_empty()) {
            let index = log.len() as u64 + 1;
            for record in &batch {
                image.apply(index, record);
            }
            log.push(encode(&batch));
        }
    }
    log
}

fn encode(batch: &[MetadataRecord]) -> Bytes {
    let mut out = Vec::new();
    for r in batch {
        let bytes = r.encode();
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    Bytes::from(out)
}

fn apply_entry(image: &mut MetadataImage, index: u64, entry: &Bytes) {
    let mut pos = 0;
    while pos < entry.len() {
        let len = u32::from_be_bytes(entry[pos..pos + 4].try_into().unwrap()) as usize;
        let record = MetadataRecord::decode(&entry.slice(pos + 4..pos + 4 + len)).unwrap();
        image.apply(index, &record);
        pos += 4 + len;
    }
    image.offset = index;
}

fn replay(log: &[Bytes], from: MetadataImage, first: usize) -> MetadataImage {
    let mut image = from;
    for (i, entry) in log.iter().enumerate().skip(first) {
        apply_entry(&mut image, i as u64 + 1, entry);
    }
    image
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn metadata_snapshot_and_log_replay_agree(ops in proptest::collection::vec(op(), 1..80)) {
        let log = history(&ops);
        let full = replay(&log, MetadataImage::default(), 0);
        for cut in 0..=log.len() {
            let prefix = replay(&log[..cut], MetadataImage::default(), 0);
            let restored = MetadataImage::decode_snapshot(&prefix.encode_snapshot()).unwrap();
            prop_assert_eq!(&restored, &prefix, "snapshot at {} does not restore the image", cut);
            let continued = replay(&log, restored, cut);
            prop_assert_eq!(&continued, &full, "snapshot at {} then replay differs", cut);
        }
    }
}
