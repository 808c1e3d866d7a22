//! The metadata log's records: typed, versioned and checksummed. Every change to the cluster's
//! metadata — a broker registering or being fenced, a topic created or deleted, a partition's
//! leader or replicas changing, a block of producer ids handed out — is one record, and the
//! metadata image is what applying them in log order gives.
//!
//! Encoding: version (`u8`), type tag (`u8`), the fields, CRC-32C of all of it. A reader
//! rejects an unknown version or tag rather than guessing.

use bytes::Bytes;

use super::codec::{DecodeError, Reader, Writer, seal, unseal};
use crate::model::TopicId;

/// The record format this code writes.
pub const RECORD_VERSION: u8 = 1;

/// A broker's id (`node.id`).
pub type BrokerId = i32;

/// A broker process's identity for one run: a restarted broker registers again with a fresh
/// incarnation, so heartbeats from an older run are told apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Incarnation(pub u128);

/// A broker run's epoch as followers name it in their Fetch requests (`replica_epoch`,
/// KIP-903): 63 bits of its [`Incarnation`], never negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerEpoch(pub i64);

impl Incarnation {
    /// The broker epoch of this run.
    pub fn epoch(self) -> BrokerEpoch {
        BrokerEpoch((self.0 >> 65) as i64)
    }
}

/// A data folder's identity, drawn at random when the folder is first used and kept in its
/// `meta.properties`: a broker that registers with another one than before lost its disk, and
/// with it every record it held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirectoryId(pub u128);

/// A broker's registration: who it is and where clients reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// Its id.
    pub broker_id: BrokerId,
    /// This run of it.
    pub incarnation: Incarnation,
    /// The host clients connect to.
    pub host: String,
    /// The port clients connect to.
    pub port: u16,
    /// Its rack (`broker.rack`), for placement.
    pub rack: Option<String>,
    /// Its last run ended without a clean shutdown (a crash or a power failure): under
    /// `flush.policy=interval` its logs may have lost acknowledged records, so it must not
    /// stay in sync, or lead, on the strength of what it held before.
    pub unclean_shutdown: bool,
    /// Its data folder (None in registrations from before directory ids existed).
    pub directory: Option<DirectoryId>,
}

/// One partition's assignment and leadership, in full (a change is a new record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRecord {
    /// Its topic.
    pub topic_id: TopicId,
    /// Its index.
    pub partition: i32,
    /// Every replica, preferred leader first.
    pub replicas: Vec<BrokerId>,
    /// The in-sync replicas.
    pub isr: Vec<BrokerId>,
    /// The leader, or −1 while it has none.
    pub leader: BrokerId,
    /// Bumped whenever the leader changes.
    pub leader_epoch: i32,
    /// Bumped on every change.
    pub partition_epoch: i32,
    /// Replicas a reassignment in progress adds: in `replicas`, copying the log, and kept once
    /// every replica it moves to is in sync (empty when none is in progress).
    pub adding: Vec<BrokerId>,
    /// Replicas a reassignment in progress removes: in `replicas` (after the replicas it moves
    /// to) until every replica it moves to is in sync.
    pub removing: Vec<BrokerId>,
}

impl PartitionRecord {
    /// Whether a reassignment is in progress.
    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The replicas a reassignment in progress moves to (all of them when none is), in order.
    pub fn target(&self) -> Vec<BrokerId> {
        self.replicas.iter().copied().filter(|r| !self.removing.contains(r)).collect()
    }

    /// The replicas in the order an unclean election tries them: those a reassignment in
    /// progress is not adding first (they held the log before the move; one being added may
    /// hold little of it yet), each part in the assignment's order.
    pub fn unclean_order(&self) -> Vec<BrokerId> {
        let (added, held): (Vec<BrokerId>, Vec<BrokerId>) =
            self.replicas.iter().partition(|r| self.adding.contains(r));
        held.into_iter().chain(added).collect()
    }
}

/// The leader value of a partition without one.
pub const NO_LEADER: BrokerId = -1;

/// One change to the cluster's metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A broker (re)registered; it starts unfenced.
    RegisterBroker(BrokerRegistration),
    /// A broker stopped heartbeating: it must not lead.
    FenceBroker {
        /// The broker.
        broker_id: BrokerId,
        /// The run being fenced.
        incarnation: Incarnation,
    },
    /// A fenced broker heartbeats again.
    UnfenceBroker {
        /// The broker.
        broker_id: BrokerId,
        /// The run being unfenced.
        incarnation: Incarnation,
    },
    /// A broker asked to shut down in a controlled way: fenced, and its leadership moved.
    ShutdownBroker {
        /// The broker.
        broker_id: BrokerId,
        /// The run shutting down.
        incarnation: Incarnation,
    },
    /// A topic was created (its partitions follow as [`MetadataRecord::Partition`]).
    CreateTopic {
        /// Its name.
        name: String,
        /// Its stable id.
        topic_id: TopicId,
        /// Its configuration overrides.
        configs: Vec<(String, String)>,
    },
    /// A partition's assignment or leadership.
    Partition(PartitionRecord),
    /// A topic's configuration overrides, replacing the previous ones.
    TopicConfigs {
        /// The topic.
        topic_id: TopicId,
        /// Every override.
        configs: Vec<(String, String)>,
    },
    /// A topic was deleted, with its partitions.
    DeleteTopic {
        /// The topic.
        topic_id: TopicId,
    },
    /// Producer ids `[first, first + count)` were handed to a broker.
    ProducerIds {
        /// The broker.
        broker_id: BrokerId,
        /// The first id.
        first: i64,
        /// How many.
        count: i64,
    },
}

mod tag {
    pub const REGISTER: u8 = 1;
    /// A registration naming its data folder.
    pub const REGISTER_IN_DIRECTORY: u8 = 10;
    pub const FENCE: u8 = 2;
    pub const UNFENCE: u8 = 3;
    pub const SHUTDOWN: u8 = 4;
    pub const CREATE_TOPIC: u8 = 5;
    pub const PARTITION: u8 = 6;
    pub const TOPIC_CONFIGS: u8 = 7;
    pub const DELETE_TOPIC: u8 = 8;
    pub const PRODUCER_IDS: u8 = 9;
    /// A partition record with a reassignment in progress.
    pub const PARTITION_REASSIGNING: u8 = 11;
}

impl MetadataRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Bytes {
        let mut w = Writer::default();
        w.u8(RECORD_VERSION);
        match self {
            MetadataRecord::RegisterBroker(r) => {
                let kind =
                    if r.directory.is_some() { tag::REGISTER_IN_DIRECTORY } else { tag::REGISTER };
                w.u8(kind);
                write_registration(&mut w, r);
            }
            MetadataRecord::FenceBroker { broker_id, incarnation } => {
                w.u8(tag::FENCE).i32(*broker_id).u128(incarnation.0);
            }
            MetadataRecord::UnfenceBroker { broker_id, incarnation } => {
                w.u8(tag::UNFENCE).i32(*broker_id).u128(incarnation.0);
            }
            MetadataRecord::ShutdownBroker { broker_id, incarnation } => {
                w.u8(tag::SHUTDOWN).i32(*broker_id).u128(incarnation.0);
            }
            MetadataRecord::CreateTopic { name, topic_id, configs } => {
                w.u8(tag::CREATE_TOPIC)
                    .str(name)
                    .topic_id(*topic_id)
                    .pairs(configs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            }
            MetadataRecord::Partition(p) => {
                let kind =
                    if p.reassigning() { tag::PARTITION_REASSIGNING } else { tag::PARTITION };
                w.u8(kind)
                    .topic_id(p.topic_id)
                    .i32(p.partition)
                    .i32s(&p.replicas)
                    .i32s(&p.isr)
                    .i32(p.leader)
                    .i32(p.leader_epoch)
                    .i32(p.partition_epoch);
                if p.reassigning() {
                    w.i32s(&p.adding).i32s(&p.removing);
                }
            }
            MetadataRecord::TopicConfigs { topic_id, configs } => {
                w.u8(tag::TOPIC_CONFIGS)
                    .topic_id(*topic_id)
                    .pairs(configs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            }
            MetadataRecord::DeleteTopic { topic_id } => {
                w.u8(tag::DELETE_TOPIC).topic_id(*topic_id);
            }
            MetadataRecord::ProducerIds { broker_id, first, count } => {
                w.u8(tag::PRODUCER_IDS).i32(*broker_id).i64(*first).i64(*count);
            }
        }
        seal(w)
    }

    /// Decodes a record, checking its checksum, version and tag.
    pub fn decode(bytes: &Bytes) -> Result<MetadataRecord, DecodeError> {
        let mut r = unseal(bytes)?;
        let version = r.u8("version")?;
        if version != RECORD_VERSION {
            return Err(DecodeError::Unknown("record version", u32::from(version)));
        }
        let record = match r.u8("tag")? {
            tag::REGISTER => MetadataRecord::RegisterBroker(read_registration(&mut r, false)?),
            tag::REGISTER_IN_DIRECTORY => {
                MetadataRecord::RegisterBroker(read_registration(&mut r, true)?)
            }
            tag::FENCE => MetadataRecord::FenceBroker {
                broker_id: r.i32("broker id")?,
                incarnation: Incarnation(r.u128("incarnation")?),
            },
            tag::UNFENCE => MetadataRecord::UnfenceBroker {
                broker_id: r.i32("broker id")?,
                incarnation: Incarnation(r.u128("incarnation")?),
            },
            tag::SHUTDOWN => MetadataRecord::ShutdownBroker {
                broker_id: r.i32("broker id")?,
                incarnation: Incarnation(r.u128("incarnation")?),
            },
            tag::CREATE_TOPIC => MetadataRecord::CreateTopic {
                name: r.str("topic name")?,
                topic_id: r.topic_id("topic id")?,
                configs: r.pairs("configs")?,
            },
            kind @ (tag::PARTITION | tag::PARTITION_REASSIGNING) => {
                let mut p = PartitionRecord {
                    topic_id: r.topic_id("topic id")?,
                    partition: r.i32("partition")?,
                    replicas: r.i32s("replicas")?,
                    isr: r.i32s("isr")?,
                    leader: r.i32("leader")?,
                    leader_epoch: r.i32("leader epoch")?,
                    partition_epoch: r.i32("partition epoch")?,
                    adding: Vec::new(),
                    removing: Vec::new(),
                };
                if kind == tag::PARTITION_REASSIGNING {
                    p.adding = r.i32s("adding replicas")?;
                    p.removing = r.i32s("removing replicas")?;
                    let listed = |r: &BrokerId| p.replicas.contains(r);
                    let overlap = p.adding.iter().any(|r| p.removing.contains(r));
                    if !p.reassigning()
                        || overlap
                        || !p.adding.iter().all(listed)
                        || !p.removing.iter().all(listed)
                    {
                        return Err(DecodeError::Unknown("reassignment", u32::from(kind)));
                    }
                }
                MetadataRecord::Partition(p)
            }
            tag::TOPIC_CONFIGS => MetadataRecord::TopicConfigs {
                topic_id: r.topic_id("topic id")?,
                configs: r.pairs("configs")?,
            },
            tag::DELETE_TOPIC => MetadataRecord::DeleteTopic { topic_id: r.topic_id("topic id")? },
            tag::PRODUCER_IDS => MetadataRecord::ProducerIds {
                broker_id: r.i32("broker id")?,
                first: r.i64("first producer id")?,
                count: r.i64("producer id count")?,
            },
            other => return Err(DecodeError::Unknown("record tag", u32::from(other))),
        };
        r.end()?;
        Ok(record)
    }
}

/// Writes a registration's fields, its directory last when it has one (the caller writes the
/// tag or request type that says which).
pub(crate) fn write_registration(w: &mut Writer, r: &BrokerRegistration) {
    w.i32(r.broker_id)
        .u128(r.incarnation.0)
        .str(&r.host)
        .u16(r.port)
        .opt_str(r.rack.as_deref())
        .bool(r.unclean_shutdown);
    if let Some(directory) = r.directory {
        w.u128(directory.0);
    }
}

/// Reads what [`write_registration`] wrote; `with_directory` as its tag says.
pub(crate) fn read_registration(
    r: &mut Reader,
    with_directory: bool,
) -> Result<BrokerRegistration, DecodeError> {
    Ok(BrokerRegistration {
        broker_id: r.i32("broker id")?,
        incarnation: Incarnation(r.u128("incarnation")?),
        host: r.str("host")?,
        port: r.u16("port")?,
        rack: r.opt_str("rack")?,
        unclean_shutdown: r.bool("unclean shutdown")?,
        directory: if with_directory { Some(DirectoryId(r.u128("directory id")?)) } else { None },
    })
}

/// An entry of the metadata log: a batch of records applied atomically, with the nonce of the
/// proposal that wrote it.
pub(super) fn encode_entry(nonce: u64, records: &[MetadataRecord]) -> Bytes {
    let mut w = Writer::default();
    w.u64(nonce).u32(records.len() as u32);
    for r in records {
        w.bytes(&r.encode());
    }
    seal(w)
}

/// Decodes an entry of the metadata log into its nonce and records.
pub fn decode_entry(bytes: &Bytes) -> Result<(u64, Vec<MetadataRecord>), DecodeError> {
    let mut r: Reader = unseal(bytes)?;
    let nonce = r.u64("nonce")?;
    let records =
        r.list("records", 4, |r| r.bytes("record").and_then(|b| MetadataRecord::decode(&b)))?;
    r.end()?;
    Ok((nonce, records))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn samples() -> Vec<MetadataRecord> {
        let topic_id = TopicId([7; 16]);
        vec![
            MetadataRecord::RegisterBroker(BrokerRegistration {
                broker_id: 2,
                incarnation: Incarnation(99),
                host: "127.0.0.1".into(),
                port: 19093,
                rack: Some("a".into()),
                unclean_shutdown: true,
                directory: Some(DirectoryId(42)),
            }),
            MetadataRecord::RegisterBroker(BrokerRegistration {
                broker_id: 3,
                incarnation: Incarnation(98),
                host: "127.0.0.1".into(),
                port: 19094,
                rack: None,
                unclean_shutdown: false,
                directory: None,
            }),
            MetadataRecord::FenceBroker { broker_id: 2, incarnation: Incarnation(99) },
            MetadataRecord::UnfenceBroker { broker_id: 2, incarnation: Incarnation(99) },
            MetadataRecord::ShutdownBroker { broker_id: 2, incarnation: Incarnation(99) },
            MetadataRecord::CreateTopic {
                name: "orders".into(),
                topic_id,
                configs: vec![("retention.ms".into(), "1000".into())],
            },
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: 3,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 4,
                partition_epoch: 9,
                adding: Vec::new(),
                removing: Vec::new(),
            }),
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: 0,
                replicas: vec![4, 5, 1, 2],
                isr: vec![1, 2, 4],
                leader: 2,
                leader_epoch: 4,
                partition_epoch: 10,
                adding: vec![4, 5],
                removing: vec![1, 2],
            }),
            MetadataRecord::TopicConfigs { topic_id, configs: vec![] },
            MetadataRecord::DeleteTopic { topic_id },
            MetadataRecord::ProducerIds { broker_id: 1, first: 1000, count: 1000 },
        ]
    }

    #[test]
    fn every_record_round_trips() {
        for record in samples() {
            assert_eq!(MetadataRecord::decode(&record.encode()), Ok(record));
        }
    }

    #[test]
    fn any_flipped_bit_or_cut_is_rejected() {
        for record in samples() {
            let bytes = record.encode();
            for i in 0..bytes.len() * 8 {
                let mut bad = bytes.to_vec();
                bad[i / 8] ^= 1 << (i % 8);
                assert!(MetadataRecord::decode(&Bytes::from(bad)).is_err(), "{record:?} bit {i}");
            }
            for len in 0..bytes.len() {
                assert!(MetadataRecord::decode(&bytes.slice(..len)).is_err());
            }
        }
    }

    #[test]
    fn a_reassignment_naming_no_replica_or_one_both_added_and_removed_is_refused() {
        let base = PartitionRecord {
            topic_id: TopicId([3; 16]),
            partition: 0,
            replicas: vec![1, 2],
            isr: vec![1],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 1,
            adding: vec![2],
            removing: vec![1],
        };
        let good = MetadataRecord::Partition(base.clone());
        assert_eq!(MetadataRecord::decode(&good.encode()), Ok(good));
        let bad = [
            PartitionRecord { adding: vec![3], ..base.clone() },
            PartitionRecord { removing: vec![4], ..base.clone() },
            PartitionRecord { adding: vec![2], removing: vec![2], ..base.clone() },
        ];
        for p in bad {
            let record = MetadataRecord::Partition(p);
            assert!(MetadataRecord::decode(&record.encode()).is_err(), "{record:?}");
        }
    }

    #[test]
    fn an_unknown_version_is_refused() {
        let mut w = Writer::default();
        w.u8(RECORD_VERSION + 1).u8(tag::DELETE_TOPIC).topic_id(TopicId::ZERO);
        let err = MetadataRecord::decode(&seal(w)).unwrap_err();
        assert_eq!(err, DecodeError::Unknown("record version", u32::from(RECORD_VERSION + 1)));
    }
}
