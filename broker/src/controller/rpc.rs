//! The controller's wire protocol between nodes, on the controller listener: Raft messages
//! between controllers, and brokers' requests to the active controller (registration,
//! heartbeats, topic changes, producer-id blocks, metadata fetches, the quorum's state), whose
//! answers are in [`super::rpc_response`].
//!
//! Frames: length (`u32`, at most [`FRAME_BYTES_MAX`], checked before allocating), then a body
//! sealed with CRC-32C. A connection opens with a [`Hello`] naming the sender and what the
//! connection carries: a one-way stream of Raft messages, or requests answered in order.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::codec::{DecodeError, Reader, Writer, seal, unseal};
use super::logic::{Election, NewTopic, Reassignment};
use super::records::{
    BrokerEpoch, BrokerId, BrokerRegistration, Incarnation, read_registration, write_registration,
};
use crate::config::{ConfigChange, ConfigOp};
use crate::io::Conn;
use crate::model::TopicId;

pub use super::rpc_response::{MetadataDelta, QuorumStatus, Response, VoterStatus};

/// Request type of a registration from before directory ids.
const REGISTER: u8 = 1;
/// Request type of a registration naming its data folder.
const REGISTER_IN_DIRECTORY: u8 = 11;
/// Request type of an ISR change adding no member, or from before broker epochs.
const ALTER_PARTITION: u8 = 9;
/// Request type of an ISR change naming the broker epochs of the members it adds.
const ALTER_PARTITION_JOINING: u8 = 12;
/// Request type of an operator's leader election.
const ELECT_LEADERS: u8 = 13;
/// Request type of a heartbeat from before damaged logs were reported, or reporting none.
const HEARTBEAT: u8 = 2;
/// Request type of a heartbeat reporting logs known to hold a damaged batch.
const HEARTBEAT_WITH_DAMAGE: u8 = 14;
/// Request type of an operator's partition reassignments.
const ALTER_REASSIGNMENTS: u8 = 15;
/// Request type of an operator's incremental change of a topic's configuration.
const ALTER_CONFIGS_INCREMENTAL: u8 = 16;
/// Request type of a heartbeat reporting logs out of room for writes (and any damaged).
const HEARTBEAT_WITH_ROOM: u8 = 17;
/// Request type of a topic creation placed by the controller.
const CREATE_TOPIC: u8 = 3;
/// Request type of a topic creation with explicit replica assignments.
const CREATE_TOPIC_ASSIGNED: u8 = 18;
/// Request type of a topic's growth placed by the controller.
const CREATE_PARTITIONS: u8 = 5;
/// Request type of a topic's growth with explicit replica assignments.
const CREATE_PARTITIONS_ASSIGNED: u8 = 19;
/// Request type of a question for the metadata quorum's state (Kafka's DescribeQuorum).
const DESCRIBE_QUORUM: u8 = 20;

/// Operation codes of [`ConfigOp`] (Kafka's AlterConfigOp codes).
const OP_SET: u8 = 0;
const OP_DELETE: u8 = 1;
const OP_APPEND: u8 = 2;
const OP_SUBTRACT: u8 = 3;

/// Largest frame accepted (a metadata snapshot of a large cluster fits).
pub const FRAME_BYTES_MAX: usize = 64 << 20;
/// The protocol version spoken (in the hello).
pub const PROTOCOL_VERSION: u8 = 1;

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// A frame was too large.
    #[error("frame of {0} bytes is over the limit")]
    TooLarge(usize),
    /// A frame did not decode.
    #[error("bad frame: {0}")]
    Decode(#[from] DecodeError),
}

/// What a connection carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// Raft messages from controller `from`, one way.
    Raft,
    /// Requests, each answered in order.
    Requests,
}

/// The first frame of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The sending node.
    pub from: BrokerId,
    /// What follows.
    pub channel: Channel,
}

/// What a broker's heartbeats report of its logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogReports {
    /// Partitions whose log here went offline (a failed write or sync, a partition that could
    /// not open, or damage met while leading): the controller moves their leadership and ISR
    /// membership to other replicas, as Kafka does for a failed log directory.
    pub offline: Vec<(TopicId, i32)>,
    /// Partitions whose log here is known to hold a damaged batch: the controller prefers other
    /// replicas as their leaders.
    pub damaged: Vec<(TopicId, i32)>,
    /// Partitions whose log here refused a write for lack of room (disk space, or descriptors)
    /// lately, in any role: the controller moves their leadership and ISR membership to other
    /// replicas where another live in-sync replica can take the writes (never leaving a
    /// partition without a leader for it), lets this one back into the ISR only once it stops
    /// reporting it, and prefers other replicas as leaders meanwhile.
    pub full: Vec<(TopicId, i32)>,
}

/// A broker's request to the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Register a broker run.
    Register(BrokerRegistration),
    /// A broker is alive (and may ask to shut down).
    Heartbeat {
        /// The broker.
        broker_id: BrokerId,
        /// Its run.
        incarnation: Incarnation,
        /// Whether it asks for a controlled shutdown.
        shutdown: bool,
        /// What it reports of its logs.
        reports: LogReports,
        /// The broker's session may have lapsed since its last answered heartbeat: the
        /// controller answers only once an entry it proposed commits, with that entry's index,
        /// so that the answer comes from a controller that still leads and the broker can wait
        /// for every change made while it was away (see `Membership::is_fenced`).
        lapsed: bool,
    },
    /// Create a topic.
    CreateTopic {
        /// The topic.
        topic: NewTopic,
        /// Check only.
        validate_only: bool,
    },
    /// Delete a topic.
    DeleteTopic {
        /// Its name.
        name: String,
    },
    /// Grow a topic.
    CreatePartitions {
        /// Its name.
        name: String,
        /// The new count.
        count: i32,
        /// The replicas of each new partition, in order (CreatePartitions' explicit
        /// assignments); empty: placed like the topic's first partition.
        assignments: Vec<Vec<BrokerId>>,
        /// Check only.
        validate_only: bool,
    },
    /// Replace a topic's configuration overrides.
    AlterConfigs {
        /// Its name.
        name: String,
        /// Every override.
        configs: BTreeMap<String, String>,
        /// Check only.
        validate_only: bool,
    },
    /// Change some of a topic's configuration overrides, in order, on the overrides the
    /// controller holds (so that changes of different settings sent through different brokers
    /// at once all take effect).
    AlterConfigsIncremental {
        /// Its name.
        name: String,
        /// The changes.
        changes: Vec<ConfigChange>,
        /// Check only.
        validate_only: bool,
    },
    /// Elect leaders for these partitions (an operator's ElectLeaders).
    ElectLeaders {
        /// Which leader to pick.
        election: Election,
        /// The partitions, by topic name and index.
        partitions: Vec<(String, i32)>,
    },
    /// Start, replace or cancel these partitions' reassignments (an operator's
    /// AlterPartitionReassignments).
    AlterReassignments {
        /// The reassignments, each partition once.
        changes: Vec<Reassignment>,
        /// Whether a target may have another size than the partition's replicas (KIP-860).
        allow_replication_factor_change: bool,
    },
    /// A block of producer ids for a broker.
    ProducerIds {
        /// The broker.
        broker_id: BrokerId,
    },
    /// A partition leader asks for a new ISR (Kafka's AlterPartition).
    AlterPartition {
        /// The leader asking.
        broker_id: BrokerId,
        /// Its run.
        incarnation: Incarnation,
        /// The partition's topic.
        topic_id: TopicId,
        /// The partition.
        partition: i32,
        /// The leader epoch the leader is in.
        leader_epoch: i32,
        /// The partition epoch the change is based on.
        partition_epoch: i32,
        /// The ISR asked for.
        isr: Vec<BrokerId>,
        /// Each member added, with the broker epoch of the run that caught up (KIP-903).
        joining: Vec<(BrokerId, BrokerEpoch)>,
    },
    /// `request` — a change a client asked for — to be started within `ms` of its arrival,
    /// or not at all: the broker that sends it stops waiting then, and so has its client.
    Within {
        /// Milliseconds the sender still waits for the answer.
        ms: u32,
        /// The change (never itself a `Within`).
        request: Box<Request>,
    },
    /// The metadata quorum's state, from its leader.
    DescribeQuorum,
    /// Committed metadata after log index `after`, waiting up to `max_wait_ms` for some.
    FetchMetadata {
        /// The last index the broker has applied.
        after: u64,
        /// How long to wait when there is nothing new.
        max_wait_ms: u32,
    },
}

impl Hello {
    /// Encodes it.
    pub fn encode(&self) -> Bytes {
        let mut w = Writer::default();
        w.u8(PROTOCOL_VERSION).i32(self.from).u8(match self.channel {
            Channel::Raft => 1,
            Channel::Requests => 2,
        });
        seal(w)
    }

    /// Decodes it.
    pub fn decode(bytes: &Bytes) -> Result<Hello, DecodeError> {
        let mut r = unseal(bytes)?;
        let version = r.u8("protocol version")?;
        if version != PROTOCOL_VERSION {
            return Err(DecodeError::Unknown("protocol version", u32::from(version)));
        }
        let from = r.i32("node id")?;
        let channel = match r.u8("channel")? {
            1 => Channel::Raft,
            2 => Channel::Requests,
            other => return Err(DecodeError::Unknown("channel", u32::from(other))),
        };
        r.end()?;
        Ok(Hello { from, channel })
    }
}

fn write_partitions(w: &mut Writer, partitions: &[(TopicId, i32)]) {
    w.u32(partitions.len() as u32);
    for (topic_id, partition) in partitions {
        w.topic_id(*topic_id).i32(*partition);
    }
}

fn read_partitions(r: &mut Reader, what: &'static str) -> Result<Vec<(TopicId, i32)>, DecodeError> {
    r.list(what, 20, |r| Ok((r.topic_id("topic id")?, r.i32("partition")?)))
}

fn write_topic(w: &mut Writer, t: &NewTopic) {
    w.str(&t.name)
        .i32(t.partitions)
        .i32(t.replication)
        .pairs(t.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
}

fn read_topic(r: &mut Reader) -> Result<NewTopic, DecodeError> {
    Ok(NewTopic {
        name: r.str("topic name")?,
        partitions: r.i32("partitions")?,
        replication: r.i32("replication")?,
        configs: r.pairs("configs")?,
        assignments: Vec::new(),
    })
}

impl Request {
    /// Encodes it.
    pub fn encode(&self) -> Bytes {
        let mut w = Writer::default();
        match self {
            Request::Register(b) => {
                w.u8(if b.directory.is_some() { REGISTER_IN_DIRECTORY } else { REGISTER });
                write_registration(&mut w, b);
            }
            Request::Heartbeat { broker_id, incarnation, shutdown, reports, lapsed } => {
                let LogReports { offline, damaged, full } = reports;
                // The oldest type that carries the reports, for nodes of earlier releases.
                let kind = match (damaged.is_empty(), full.is_empty()) {
                    (true, true) => HEARTBEAT,
                    (false, true) => HEARTBEAT_WITH_DAMAGE,
                    (_, false) => HEARTBEAT_WITH_ROOM,
                };
                w.u8(kind);
                w.i32(*broker_id).u128(incarnation.0).bool(*shutdown);
                write_partitions(&mut w, offline);
                w.bool(*lapsed);
                if kind != HEARTBEAT {
                    write_partitions(&mut w, damaged);
                }
                if kind == HEARTBEAT_WITH_ROOM {
                    write_partitions(&mut w, full);
                }
            }
            Request::CreateTopic { topic, validate_only } => {
                // Assignments only in the type that carries them, for nodes of earlier
                // releases.
                let assigned = !topic.assignments.is_empty();
                w.u8(if assigned { CREATE_TOPIC_ASSIGNED } else { CREATE_TOPIC });
                write_topic(&mut w, topic);
                w.bool(*validate_only);
                if assigned {
                    w.u32(topic.assignments.len() as u32);
                    for replicas in &topic.assignments {
                        w.i32s(replicas);
                    }
                }
            }
            Request::DeleteTopic { name } => {
                w.u8(4).str(name);
            }
            Request::CreatePartitions { name, count, assignments, validate_only } => {
                // Only assigned partitions take the newer kind, which a controller of an
                // older version would refuse.
                let kind = if assignments.is_empty() {
                    CREATE_PARTITIONS
                } else {
                    CREATE_PARTITIONS_ASSIGNED
                };
                w.u8(kind).str(name).i32(*count).bool(*validate_only);
                if !assignments.is_empty() {
                    w.u32(assignments.len() as u32);
                    for replicas in assignments {
                        w.i32s(replicas);
                    }
                }
            }
            Request::AlterConfigs { name, configs, validate_only } => {
                w.u8(6)
                    .str(name)
                    .pairs(configs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .bool(*validate_only);
            }
            Request::AlterConfigsIncremental { name, changes, validate_only } => {
                w.u8(ALTER_CONFIGS_INCREMENTAL).str(name).u32(changes.len() as u32);
                for change in changes {
                    w.str(&change.name);
                    match &change.op {
                        ConfigOp::Set(value) => w.u8(OP_SET).str(value),
                        ConfigOp::Delete => w.u8(OP_DELETE),
                        ConfigOp::Append(items) => w.u8(OP_APPEND).str(items),
                        ConfigOp::Subtract(items) => w.u8(OP_SUBTRACT).str(items),
                    };
                }
                w.bool(*validate_only);
            }
            Request::ProducerIds { broker_id } => {
                w.u8(7).i32(*broker_id);
            }
            Request::ElectLeaders { election, partitions } => {
                w.u8(ELECT_LEADERS).bool(*election == Election::Unclean);
                w.u32(partitions.len() as u32);
                for (topic, partition) in partitions {
                    w.str(topic).i32(*partition);
                }
            }
            Request::AlterReassignments { changes, allow_replication_factor_change } => {
                w.u8(ALTER_REASSIGNMENTS).bool(*allow_replication_factor_change);
                w.u32(changes.len() as u32);
                for change in changes {
                    w.str(&change.topic).i32(change.partition).bool(change.target.is_some());
                    if let Some(target) = &change.target {
                        w.i32s(target);
                    }
                }
            }
            Request::FetchMetadata { after, max_wait_ms } => {
                w.u8(8).u64(*after).u32(*max_wait_ms);
            }
            Request::DescribeQuorum => {
                w.u8(DESCRIBE_QUORUM);
            }
            Request::Within { ms, request } => {
                w.u8(10).u32(*ms).bytes(&request.encode());
            }
            Request::AlterPartition {
                broker_id,
                incarnation,
                topic_id,
                partition,
                leader_epoch,
                partition_epoch,
                isr,
                joining,
            } => {
                w.u8(if joining.is_empty() { ALTER_PARTITION } else { ALTER_PARTITION_JOINING })
                    .i32(*broker_id)
                    .u128(incarnation.0)
                    .topic_id(*topic_id)
                    .i32(*partition)
                    .i32(*leader_epoch)
                    .i32(*partition_epoch)
                    .i32s(isr);
                if !joining.is_empty() {
                    w.u32(joining.len() as u32);
                    for (broker, epoch) in joining {
                        w.i32(*broker).i64(epoch.0);
                    }
                }
            }
        }
        seal(w)
    }

    /// Decodes it.
    pub fn decode(bytes: &Bytes) -> Result<Request, DecodeError> {
        let mut r = unseal(bytes)?;
        let request = match r.u8("request type")? {
            REGISTER => Request::Register(read_registration(&mut r, false)?),
            REGISTER_IN_DIRECTORY => Request::Register(read_registration(&mut r, true)?),
            kind @ (HEARTBEAT | HEARTBEAT_WITH_DAMAGE | HEARTBEAT_WITH_ROOM) => {
                let broker_id = r.i32("broker id")?;
                let incarnation = Incarnation(r.u128("incarnation")?);
                let shutdown = r.bool("shutdown")?;
                let offline = read_partitions(&mut r, "offline partitions")?;
                let lapsed = r.bool("lapsed")?;
                let damaged = if kind == HEARTBEAT {
                    Vec::new()
                } else {
                    read_partitions(&mut r, "damaged partitions")?
                };
                let full = if kind == HEARTBEAT_WITH_ROOM {
                    read_partitions(&mut r, "partitions out of room")?
                } else {
                    Vec::new()
                };
                let reports = LogReports { offline, damaged, full };
                Request::Heartbeat { broker_id, incarnation, shutdown, reports, lapsed }
            }
            kind @ (CREATE_TOPIC | CREATE_TOPIC_ASSIGNED) => {
                let mut topic = read_topic(&mut r)?;
                let validate_only = r.bool("validate only")?;
                if kind == CREATE_TOPIC_ASSIGNED {
                    topic.assignments = r.list("assignments", 4, |r| r.i32s("replicas"))?;
                }
                Request::CreateTopic { topic, validate_only }
            }
            4 => Request::DeleteTopic { name: r.str("topic name")? },
            kind @ (CREATE_PARTITIONS | CREATE_PARTITIONS_ASSIGNED) => {
                let name = r.str("topic name")?;
                let count = r.i32("count")?;
                let validate_only = r.bool("validate only")?;
                let assignments = if kind == CREATE_PARTITIONS_ASSIGNED {
                    r.list("assignments", 4, |r| r.i32s("replicas"))?
                } else {
                    Vec::new()
                };
                Request::CreatePartitions { name, count, assignments, validate_only }
            }
            6 => Request::AlterConfigs {
                name: r.str("topic name")?,
                configs: r.pairs("configs")?.into_iter().collect(),
                validate_only: r.bool("validate only")?,
            },
            ALTER_CONFIGS_INCREMENTAL => Request::AlterConfigsIncremental {
                name: r.str("topic name")?,
                changes: r.list("config changes", 5, |r| {
                    let name = r.str("config name")?;
                    let op = match r.u8("config operation")? {
                        OP_SET => ConfigOp::Set(r.str("config value")?),
                        OP_DELETE => ConfigOp::Delete,
                        OP_APPEND => ConfigOp::Append(r.str("config items")?),
                        OP_SUBTRACT => ConfigOp::Subtract(r.str("config items")?),
                        other => {
                            return Err(DecodeError::Unknown("config operation", u32::from(other)));
                        }
                    };
                    Ok(ConfigChange { name, op })
                })?,
                validate_only: r.bool("validate only")?,
            },
            7 => Request::ProducerIds { broker_id: r.i32("broker id")? },
            ELECT_LEADERS => Request::ElectLeaders {
                election: if r.bool("unclean")? { Election::Unclean } else { Election::Preferred },
                partitions: r
                    .list("partitions", 8, |r| Ok((r.str("topic name")?, r.i32("partition")?)))?,
            },
            ALTER_REASSIGNMENTS => Request::AlterReassignments {
                allow_replication_factor_change: r.bool("allow replication factor change")?,
                changes: r.list("reassignments", 9, |r| {
                    Ok(Reassignment {
                        topic: r.str("topic name")?,
                        partition: r.i32("partition")?,
                        target: if r.bool("has target")? { Some(r.i32s("target")?) } else { None },
                    })
                })?,
            },
            8 => Request::FetchMetadata { after: r.u64("after")?, max_wait_ms: r.u32("max wait")? },
            DESCRIBE_QUORUM => Request::DescribeQuorum,
            kind @ (ALTER_PARTITION | ALTER_PARTITION_JOINING) => Request::AlterPartition {
                broker_id: r.i32("broker id")?,
                incarnation: Incarnation(r.u128("incarnation")?),
                topic_id: r.topic_id("topic id")?,
                partition: r.i32("partition")?,
                leader_epoch: r.i32("leader epoch")?,
                partition_epoch: r.i32("partition epoch")?,
                isr: r.i32s("isr")?,
                joining: if kind == ALTER_PARTITION_JOINING {
                    r.list("joining", 12, |r| {
                        Ok((r.i32("joining broker")?, BrokerEpoch(r.i64("broker epoch")?)))
                    })?
                } else {
                    Vec::new()
                },
            },
            10 => {
                let ms = r.u32("within ms")?;
                let request = Request::decode(&r.bytes("request within")?)?;
                if matches!(request, Request::Within { .. }) {
                    return Err(DecodeError::Unknown("request type within a request", 10));
                }
                Request::Within { ms, request: Box::new(request) }
            }
            other => return Err(DecodeError::Unknown("request type", u32::from(other))),
        };
        r.end()?;
        Ok(request)
    }
}

/// Writes one frame.
pub async fn write_frame(conn: &mut dyn Conn, body: &[u8]) -> Result<(), RpcError> {
    if body.len() > FRAME_BYTES_MAX {
        return Err(RpcError::TooLarge(body.len()));
    }
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    conn.write_all(&out).await?;
    conn.flush().await?;
    Ok(())
}

/// Reads one frame, checking its length before allocating.
pub async fn read_frame(conn: &mut dyn Conn) -> Result<Bytes, RpcError> {
    let mut len = [0u8; 4];
    conn.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(RpcError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body).await?;
    Ok(Bytes::from(body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "rpc_tests.rs"]
mod tests;
