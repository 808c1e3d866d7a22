//! The controller's answers to brokers' requests (see [`super::rpc`]): what each carries, and
//! its encoding, including the controller's errors by code.

use bytes::Bytes;

use super::codec::{DecodeError, Writer, seal, unseal};
use super::logic::ControllerError;
use super::records::BrokerId;

/// Response type of a change made for some partitions and refused for others.
const PARTLY_DONE: u8 = 5;
/// Response type of the metadata quorum's state.
const QUORUM: u8 = 6;

/// The metadata quorum as its leader describes it (Kafka's DescribeQuorum).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuorumStatus {
    /// The leader.
    pub leader: BrokerId,
    /// Its term (Kafka's leader epoch of the metadata log).
    pub term: u64,
    /// The index up to which entries are committed (Kafka's high watermark).
    pub committed: u64,
    /// Each voter, by id.
    pub voters: Vec<VoterStatus>,
}

/// One voter as the quorum's leader knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoterStatus {
    /// The voter.
    pub id: BrokerId,
    /// The index of its last entry known to match the leader's (the leader's own: its last;
    /// −1: not heard from since the leader took over).
    pub log_end: i64,
    /// When the leader last heard from it, in ms since the epoch (−1: not since it took over).
    pub last_heard_ms: i64,
    /// When its log last reached the leader's end, in ms since the epoch (−1: not since the
    /// leader took over).
    pub caught_up_ms: i64,
}

/// Committed metadata for a broker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    /// A snapshot to start from (when the broker is behind the retained log).
    pub snapshot: Option<Bytes>,
    /// Committed entries after it, with their log index.
    pub entries: Vec<(u64, Bytes)>,
}

/// The controller's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Done; the change is at this log index (0: nothing was written).
    Done {
        /// The index to wait for before the change is visible.
        offset: u64,
        /// For a heartbeat: whether the broker was fenced when it arrived (this answer's entry
        /// unfences it), or, for a controlled shutdown, whether it is fenced now.
        fenced: bool,
    },
    /// Producer ids `[first, first + count)`.
    ProducerIds {
        /// The first.
        first: i64,
        /// How many.
        count: i64,
        /// The log index of the allocation.
        offset: u64,
    },
    /// Committed metadata.
    Metadata(MetadataDelta),
    /// A change made for some partitions (at this log index; 0: nothing was written) and
    /// refused for the others.
    PartlyDone {
        /// The index to wait for before the change is visible.
        offset: u64,
        /// The partitions refused, by topic name and index, and why.
        refused: Vec<(String, i32, ControllerError)>,
    },
    /// The metadata quorum's state.
    Quorum(QuorumStatus),
    /// Refused.
    Error {
        /// Why.
        error: ControllerError,
        /// The active controller, if known (for NotController).
        leader: Option<BrokerId>,
    },
}

fn error_code(e: &ControllerError) -> (u8, String) {
    match e {
        ControllerError::NotController => (1, String::new()),
        ControllerError::TopicExists(s) => (2, s.clone()),
        ControllerError::UnknownTopic(s) => (3, s.clone()),
        ControllerError::BadName(s) => (4, s.clone()),
        ControllerError::BadPartitions(n) => (5, n.to_string()),
        ControllerError::BadReplication { wanted, live } => (6, format!("{wanted}/{live}")),
        ControllerError::BadConfig(s) => (7, s.clone()),
        ControllerError::Internal(s) => (8, s.clone()),
        ControllerError::StaleBroker(b) => (9, b.to_string()),
        ControllerError::Timeout => (10, String::new()),
        ControllerError::StalePartition(s) => (11, s.clone()),
        ControllerError::IneligibleReplica(s) => (12, s.clone()),
        ControllerError::BadAssignment(s) => (13, s.clone()),
        ControllerError::NoReassignment(s) => (14, s.clone()),
        ControllerError::ReplicationFactorChange { from, to } => (15, format!("{from}/{to}")),
    }
}

fn error_from(code: u8, text: String) -> Result<ControllerError, DecodeError> {
    let num = |s: &str| s.parse::<i64>().unwrap_or(-1);
    Ok(match code {
        1 => ControllerError::NotController,
        2 => ControllerError::TopicExists(text),
        3 => ControllerError::UnknownTopic(text),
        4 => ControllerError::BadName(text),
        5 => ControllerError::BadPartitions(num(&text) as i32),
        6 => {
            let (w, l) = text.split_once('/').unwrap_or(("-1", "0"));
            ControllerError::BadReplication { wanted: num(w) as i32, live: num(l).max(0) as usize }
        }
        7 => ControllerError::BadConfig(text),
        8 => ControllerError::Internal(text),
        9 => ControllerError::StaleBroker(num(&text) as i32),
        10 => ControllerError::Timeout,
        11 => ControllerError::StalePartition(text),
        12 => ControllerError::IneligibleReplica(text),
        13 => ControllerError::BadAssignment(text),
        14 => ControllerError::NoReassignment(text),
        15 => {
            let (from, to) = text.split_once('/').unwrap_or(("-1", "-1"));
            ControllerError::ReplicationFactorChange { from: num(from) as i32, to: num(to) as i32 }
        }
        other => return Err(DecodeError::Unknown("controller error", u32::from(other))),
    })
}

impl Response {
    /// Encodes it.
    pub fn encode(&self) -> Bytes {
        let mut w = Writer::default();
        match self {
            Response::Done { offset, fenced } => {
                w.u8(1).u64(*offset).bool(*fenced);
            }
            Response::ProducerIds { first, count, offset } => {
                w.u8(2).i64(*first).i64(*count).u64(*offset);
            }
            Response::Metadata(delta) => {
                w.u8(3);
                w.bool(delta.snapshot.is_some());
                if let Some(s) = &delta.snapshot {
                    w.bytes(s);
                }
                w.u32(delta.entries.len() as u32);
                for (index, data) in &delta.entries {
                    w.u64(*index).bytes(data);
                }
            }
            Response::Quorum(status) => {
                w.u8(QUORUM).i32(status.leader).u64(status.term).u64(status.committed);
                w.u32(status.voters.len() as u32);
                for v in &status.voters {
                    w.i32(v.id).i64(v.log_end).i64(v.last_heard_ms).i64(v.caught_up_ms);
                }
            }
            Response::Error { error, leader } => {
                let (code, text) = error_code(error);
                w.u8(4).u8(code).str(&text).i32(leader.unwrap_or(-1));
            }
            Response::PartlyDone { offset, refused } => {
                w.u8(PARTLY_DONE).u64(*offset).u32(refused.len() as u32);
                for (topic, partition, error) in refused {
                    let (code, text) = error_code(error);
                    w.str(topic).i32(*partition).u8(code).str(&text);
                }
            }
        }
        seal(w)
    }

    /// Decodes it.
    pub fn decode(bytes: &Bytes) -> Result<Response, DecodeError> {
        let mut r = unseal(bytes)?;
        let response = match r.u8("response type")? {
            1 => Response::Done { offset: r.u64("offset")?, fenced: r.bool("fenced")? },
            2 => Response::ProducerIds {
                first: r.i64("first")?,
                count: r.i64("count")?,
                offset: r.u64("offset")?,
            },
            3 => {
                let snapshot =
                    if r.bool("has snapshot")? { Some(r.bytes("snapshot")?) } else { None };
                let entries =
                    r.list("entries", 12, |r| Ok((r.u64("index")?, r.bytes("entry")?)))?;
                Response::Metadata(MetadataDelta { snapshot, entries })
            }
            4 => {
                let code = r.u8("error code")?;
                let text = r.str("error text")?;
                let leader = r.i32("leader")?;
                Response::Error {
                    error: error_from(code, text)?,
                    leader: (leader >= 0).then_some(leader),
                }
            }
            QUORUM => Response::Quorum(QuorumStatus {
                leader: r.i32("quorum leader")?,
                term: r.u64("quorum term")?,
                committed: r.u64("quorum commit")?,
                voters: r.list("voters", 28, |r| {
                    Ok(VoterStatus {
                        id: r.i32("voter")?,
                        log_end: r.i64("voter log end")?,
                        last_heard_ms: r.i64("voter heard")?,
                        caught_up_ms: r.i64("voter caught up")?,
                    })
                })?,
            }),
            PARTLY_DONE => Response::PartlyDone {
                offset: r.u64("offset")?,
                refused: r.list("refused", 10, |r| {
                    let topic = r.str("topic name")?;
                    let partition = r.i32("partition")?;
                    let code = r.u8("error code")?;
                    Ok((topic, partition, error_from(code, r.str("error text")?)?))
                })?,
            },
            other => return Err(DecodeError::Unknown("response type", u32::from(other))),
        };
        r.end()?;
        Ok(response)
    }
}
