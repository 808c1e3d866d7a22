//! The metadata image: what applying the metadata log in order gives — the brokers, topics,
//! partition assignments and leaders, and the next free producer id. Applying is total and
//! deterministic (a record naming something unknown changes nothing), so every node that
//! applies the same prefix of the committed log holds the same image.
//!
//! A snapshot of the image is itself a list of records that rebuild it, so a snapshot and a
//! log replay go through the same `apply`.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::codec::{DecodeError, Reader, Writer, seal, unseal};
use super::records::{
    BrokerId, BrokerRegistration, Incarnation, MetadataRecord, NO_LEADER, PartitionRecord,
};
use crate::model::TopicId;

/// The snapshot format this code writes.
pub const SNAPSHOT_VERSION: u8 = 1;

/// A registered broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerImage {
    /// Its registration.
    pub registration: BrokerRegistration,
    /// Whether it is fenced (must not lead).
    pub fenced: bool,
    /// Whether it is shutting down in a controlled way.
    pub shutting_down: bool,
}

impl BrokerImage {
    /// Whether partitions may be led by it.
    pub fn is_live(&self) -> bool {
        !self.fenced && !self.shutting_down
    }
}

/// A topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    /// Its name.
    pub name: String,
    /// Its stable id.
    pub id: TopicId,
    /// Its configuration overrides.
    pub configs: BTreeMap<String, String>,
    /// Its partitions, by index.
    pub partitions: BTreeMap<i32, PartitionRecord>,
}

/// The cluster's metadata at one offset of the metadata log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// The log index of the last record applied (0: none).
    pub offset: u64,
    /// Registered brokers, by id.
    pub brokers: BTreeMap<BrokerId, BrokerImage>,
    /// Topics, by id.
    pub topics: BTreeMap<TopicId, TopicImage>,
    /// Topic ids, by name.
    pub names: BTreeMap<String, TopicId>,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
}

impl MetadataImage {
    /// Applies the record at log index `offset`.
    pub fn apply(&mut self, offset: u64, record: &MetadataRecord) {
        self.offset = self.offset.max(offset);
        match record {
            MetadataRecord::RegisterBroker(r) => {
                self.brokers.insert(
                    r.broker_id,
                    BrokerImage { registration: r.clone(), fenced: false, shutting_down: false },
                );
            }
            MetadataRecord::FenceBroker { broker_id, incarnation } => {
                if let Some(b) = self.broker_run(*broker_id, *incarnation) {
                    b.fenced = true;
                }
            }
            MetadataRecord::UnfenceBroker { broker_id, incarnation } => {
                if let Some(b) = self.broker_run(*broker_id, *incarnation) {
                    b.fenced = false;
                    b.shutting_down = false;
                }
            }
            MetadataRecord::ShutdownBroker { broker_id, incarnation } => {
                if let Some(b) = self.broker_run(*broker_id, *incarnation) {
                    b.shutting_down = true;
                }
            }
            MetadataRecord::CreateTopic { name, topic_id, configs } => {
                if self.names.contains_key(name) || self.topics.contains_key(topic_id) {
                    return;
                }
                self.names.insert(name.clone(), *topic_id);
                self.topics.insert(
                    *topic_id,
                    TopicImage {
                        name: name.clone(),
                        id: *topic_id,
                        configs: configs.iter().cloned().collect(),
                        partitions: BTreeMap::new(),
                    },
                );
            }
            MetadataRecord::Partition(p) => {
                if let Some(topic) = self.topics.get_mut(&p.topic_id) {
                    topic.partitions.insert(p.partition, p.clone());
                }
            }
            MetadataRecord::TopicConfigs { topic_id, configs } => {
                if let Some(topic) = self.topics.get_mut(topic_id) {
                    topic.configs = configs.iter().cloned().collect();
                }
            }
            MetadataRecord::DeleteTopic { topic_id } => {
                if let Some(topic) = self.topics.remove(topic_id) {
                    self.names.remove(&topic.name);
                }
            }
            MetadataRecord::ProducerIds { first, count, .. } => {
                self.next_producer_id = self.next_producer_id.max(first.saturating_add(*count));
            }
        }
    }

    fn broker_run(&mut self, id: BrokerId, incarnation: Incarnation) -> Option<&mut BrokerImage> {
        self.brokers.get_mut(&id).filter(|b| b.registration.incarnation == incarnation)
    }

    /// The topic called `name`.
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.names.get(name).and_then(|id| self.topics.get(id))
    }

    /// A partition of the topic called `name`.
    pub fn partition(&self, name: &str, index: i32) -> Option<&PartitionRecord> {
        self.topic(name)?.partitions.get(&index)
    }

    /// Brokers that may lead, by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerImage> {
        self.brokers.values().filter(|b| b.is_live())
    }

    /// Whether `broker` may lead partitions.
    pub fn is_live(&self, broker: BrokerId) -> bool {
        self.brokers.get(&broker).is_some_and(BrokerImage::is_live)
    }

    /// Records that rebuild this image from an empty one, in an order `apply` accepts.
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for b in self.brokers.values() {
            out.push(MetadataRecord::RegisterBroker(b.registration.clone()));
            let (broker_id, incarnation) = (b.registration.broker_id, b.registration.incarnation);
            if b.shutting_down {
                out.push(MetadataRecord::ShutdownBroker { broker_id, incarnation });
            }
            if b.fenced {
                out.push(MetadataRecord::FenceBroker { broker_id, incarnation });
            }
        }
        for t in self.topics.values() {
            out.push(MetadataRecord::CreateTopic {
                name: t.name.clone(),
                topic_id: t.id,
                configs: t.configs.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            });
            out.extend(t.partitions.values().cloned().map(MetadataRecord::Partition));
        }
        if self.next_producer_id > 0 {
            out.push(MetadataRecord::ProducerIds {
                broker_id: NO_LEADER,
                first: 0,
                count: self.next_producer_id,
            });
        }
        out
    }

    /// The image as snapshot bytes: version, offset, its records, CRC-32C.
    pub fn encode_snapshot(&self) -> Bytes {
        let mut w = Writer::default();
        w.u8(SNAPSHOT_VERSION).u64(self.offset);
        let records = self.to_records();
        w.u32(records.len() as u32);
        for r in &records {
            w.bytes(&r.encode());
        }
        seal(w)
    }

    /// Rebuilds an image from snapshot bytes.
    pub fn decode_snapshot(bytes: &Bytes) -> Result<MetadataImage, DecodeError> {
        let mut r: Reader = unseal(bytes)?;
        let version = r.u8("snapshot version")?;
        if version != SNAPSHOT_VERSION {
            return Err(DecodeError::Unknown("snapshot version", u32::from(version)));
        }
        let offset = r.u64("snapshot offset")?;
        let records = r.list("snapshot records", 4, |r| {
            r.bytes("snapshot record").and_then(|b| MetadataRecord::decode(&b))
        })?;
        r.end()?;
        let mut image = MetadataImage::default();
        for record in &records {
            image.apply(offset, record);
        }
        image.offset = offset;
        Ok(image)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn register(id: BrokerId, incarnation: u128) -> MetadataRecord {
        MetadataRecord::RegisterBroker(BrokerRegistration {
            broker_id: id,
            incarnation: Incarnation(incarnation),
            host: format!("h{id}"),
            port: 9000 + id as u16,
            rack: None,
            unclean_shutdown: false,
            directory: None,
        })
    }

    fn partition(topic_id: TopicId, partition: i32, leader: BrokerId) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            topic_id,
            partition,
            replicas: vec![leader],
            isr: vec![leader],
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
        })
    }

    fn log() -> Vec<MetadataRecord> {
        let a = TopicId([1; 16]);
        let b = TopicId([2; 16]);
        vec![
            register(1, 10),
            register(2, 20),
            MetadataRecord::CreateTopic { name: "a".into(), topic_id: a, configs: vec![] },
            partition(a, 0, 1),
            partition(a, 1, 2),
            MetadataRecord::FenceBroker { broker_id: 2, incarnation: Incarnation(20) },
            MetadataRecord::FenceBroker { broker_id: 1, incarnation: Incarnation(11) },
            MetadataRecord::CreateTopic { name: "b".into(), topic_id: b, configs: vec![] },
            partition(b, 0, 1),
            MetadataRecord::TopicConfigs {
                topic_id: a,
                configs: vec![("retention.ms".into(), "5".into())],
            },
            MetadataRecord::ProducerIds { broker_id: 1, first: 0, count: 1000 },
            MetadataRecord::DeleteTopic { topic_id: b },
            register(3, 30),
            MetadataRecord::ShutdownBroker { broker_id: 3, incarnation: Incarnation(30) },
        ]
    }

    #[test]
    fn applying_the_log_gives_the_expected_image() {
        let mut image = MetadataImage::default();
        for (i, r) in log().iter().enumerate() {
            image.apply(i as u64 + 1, r);
        }
        assert_eq!(image.offset, 14);
        assert!(image.brokers[&2].fenced);
        assert!(!image.brokers[&1].fenced, "a fence for another incarnation is ignored");
        assert!(!image.is_live(3));
        assert_eq!(image.live_brokers().count(), 1);
        assert!(image.topic("b").is_none());
        assert_eq!(image.partition("a", 1).map(|p| p.leader), Some(2));
        assert_eq!(image.topic("a").map(|t| t.configs.len()), Some(1));
        assert_eq!(image.next_producer_id, 1000);
    }

    #[test]
    fn a_snapshot_at_every_offset_agrees_with_replaying_the_log() {
        let log = log();
        for cut in 0..=log.len() {
            let mut replayed = MetadataImage::default();
            for (i, r) in log[..cut].iter().enumerate() {
                replayed.apply(i as u64 + 1, r);
            }
            let restored = MetadataImage::decode_snapshot(&replayed.encode_snapshot()).unwrap();
            assert_eq!(restored, replayed, "cut at {cut}");
            let mut continued = restored;
            let mut full = replayed;
            for (i, r) in log[cut..].iter().enumerate() {
                continued.apply((cut + i) as u64 + 1, r);
                full.apply((cut + i) as u64 + 1, r);
            }
            assert_eq!(continued, full);
        }
    }

    #[test]
    fn a_corrupt_snapshot_is_refused() {
        let mut image = MetadataImage::default();
        image.apply(1, &register(1, 1));
        let bytes = image.encode_snapshot();
        let mut bad = bytes.to_vec();
        bad[10] ^= 0x40;
        assert_eq!(MetadataImage::decode_snapshot(&Bytes::from(bad)), Err(DecodeError::Checksum));
    }
}
