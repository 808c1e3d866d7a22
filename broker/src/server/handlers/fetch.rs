//! Fetch: whole stored batches from each requested partition up to its high watermark (a
//! follower replica — a fetch naming a broker as `replica_id` — reads up to the log end, and
//! its fetch offset tells the leader what it holds), bounded
//! per partition and in total (the first batch is always whole, so a consumer can make
//! progress); a long poll of up to `max_wait_ms` for `min_bytes`, woken by appends. Topics are
//! named by id from v13. Empty record sets are empty bytes, never null. Fetch sessions are not
//! kept: session id 0 means "no session" and clients send full fetches. A consumer's read is
//! served from a read ahead when one for its offset is ready ([`crate::partition::read_ahead`]).
//! A partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its leader from
//! v16 (KIP-951).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};

use super::metadata::{LeaderHints, image_of};
use super::{absent_error, code, epoch_check, leadership_error};
use crate::catalog::Topic;
use crate::controller::records::BrokerEpoch;
use crate::fetcher::REPAIR_RACK_ID;
use crate::io::timeout;
use crate::log::ReadError;
use crate::model::{Offset, TopicId};
use crate::node::Broker;
use crate::partition::{Partition, Traffic};
use crate::protocol::Response;
use crate::server::Reply;

/// Kafka's FETCH_SESSION_ID_NOT_FOUND: sent when a client asks for an incremental fetch.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;

/// Answers Fetch.
pub async fn handle(broker: &Arc<Broker>, request: FetchRequest, version: i16) -> Reply {
    let broker = Arc::clone(broker);
    Reply::Later(Box::pin(async move {
        let mut response = long_poll(&broker, &request, version).await;
        if version >= 16 {
            hint_leaders(&broker, &mut response);
        }
        Some(Response::Fetch(response))
    }))
}

/// Tells each partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH where its
/// leader is, with the leaders' endpoints (KIP-951, Fetch v16+: topics by id), so that the
/// consumer fetches there without asking for metadata first.
fn hint_leaders(broker: &Broker, response: &mut FetchResponse) {
    let mut hints = LeaderHints::new(broker);
    for topic in &mut response.responses {
        let id = Some(TopicId(*topic.topic_id.as_bytes()));
        for p in &mut topic.partitions {
            if let Some((leader, epoch)) = hints.hint(id, "", p.partition_index, p.error_code) {
                p.current_leader.leader_id = BrokerId(leader);
                p.current_leader.leader_epoch = epoch;
            }
        }
    }
    response.node_endpoints = hints.endpoints(|node_id, host, port, rack| {
        let mut node = NodeEndpoint::default();
        (node.node_id, node.host, node.port, node.rack) = (node_id, host, port, rack);
        node
    });
}

async fn long_poll(broker: &Arc<Broker>, request: &FetchRequest, version: i16) -> FetchResponse {
    if request.session_id > 0 {
        let mut response = FetchResponse::default();
        response.error_code = FETCH_SESSION_ID_NOT_FOUND;
        return response;
    }
    let clock = Arc::clone(&broker.env.clock);
    let deadline = clock.now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    loop {
        let notified = broker.appended.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let (response, bytes, failed, served) = read_all(broker, request, version).await;
        let now = clock.now();
        // As in Kafka, never more than the response may hold.
        let min_bytes = request.min_bytes.min(request.max_bytes).max(0) as usize;
        if bytes >= min_bytes || failed || now >= deadline {
            // Counted once answered: a read that does not end the long poll is read again.
            for Served { partition, bytes, replica } in served {
                let traffic = &partition.traffic;
                let counter =
                    if replica { &traffic.replication_bytes_out } else { &traffic.bytes_out };
                Traffic::add(counter, bytes);
            }
            return response;
        }
        // Read afresh once woken: what this read holds is given back while the poll waits.
        drop((response, served));
        let _ = timeout(&*clock, deadline - now, notified).await;
    }
}

/// Batches a fetch gives out of one partition.
struct Served {
    partition: Arc<Partition>,
    bytes: usize,
    /// To a follower.
    replica: bool,
}

/// Reads every requested partition once: the response, the bytes it counts towards
/// `min_bytes`, whether any partition failed (which ends a long poll early, as in Kafka), and
/// the batches it gives out of each partition.
///
/// A partition whose read left batches unread below its bound (a limit cut it short, or it
/// ended with its segment) counts as full, its whole limit, as Kafka's delayed fetch counts
/// it: whole batches rarely fill a limit exactly, and a consumer far behind that asks for as
/// many bytes as a partition may give would otherwise wait out `max_wait_ms` on every fetch.
async fn read_all(
    broker: &Arc<Broker>,
    request: &FetchRequest,
    version: i16,
) -> (FetchResponse, usize, bool, Vec<Served>) {
    let mut response = FetchResponse::default();
    let mut served = Vec::new();
    let mut budget = request.max_bytes.max(0) as usize;
    let replica =
        if version >= 15 { request.replica_state.replica_id.0 } else { request.replica_id.0 };
    let replica = (replica >= 0).then_some(replica);
    // Fetch v15 and later name the follower's broker epoch (KIP-903).
    let replica_epoch = (version >= 15 && request.replica_state.replica_epoch >= 0)
        .then_some(BrokerEpoch(request.replica_state.replica_epoch));
    // Once per request: every partition of it comes from the same run.
    let current = replica.is_some_and(|f| current_run(broker, f, replica_epoch));
    let repair = replica.is_none() && version >= 11 && &*request.rack_id == REPAIR_RACK_ID;
    let (mut total, mut counted, mut failed) = (0usize, 0usize, false);
    for wanted in &request.topics {
        // From v13 a topic is named by its id only: one not hosted here is named from the
        // cluster's metadata, so that it is answered NOT_LEADER_OR_FOLLOWER, as by name, and
        // not UNKNOWN_TOPIC_ID (it is known; this broker just does not lead it).
        let (topic, named) = if version >= 13 {
            let id = TopicId(*wanted.topic_id.as_bytes());
            let topic = broker.catalog.by_id(id);
            let named = match topic {
                Some(_) => None,
                None => image_of(broker).topics.get(&id).map(|t| t.name.clone()),
            };
            (topic, named)
        } else {
            (broker.catalog.get(wanted.topic.0.as_str()), None)
        };
        let mut out = FetchableTopicResponse::default();
        out.topic = wanted.topic.clone();
        out.topic_id = wanted.topic_id;
        for part in &wanted.partitions {
            let limit = (part.partition_max_bytes.max(0) as usize).min(budget);
            let first = total == 0;
            let name = match (&topic, &named) {
                (Some(t), _) => t.name.as_str(),
                (None, Some(named)) => named.as_str(),
                (None, None) => wanted.topic.0.as_str(),
            };
            let (data, unread, gave) = read_partition(
                broker,
                name,
                topic.as_ref(),
                Asker { version, replica, replica_epoch, current, repair },
                part,
                limit,
                first,
            )
            .await;
            failed |= data.error_code != 0;
            let len = data.records.as_ref().map_or(0, Bytes::len);
            total += len;
            counted += if unread { len.max(limit) } else { len };
            budget = budget.saturating_sub(len);
            served.extend(gave);
            out.partitions.push(data);
        }
        response.responses.push(out);
    }
    (response, counted, failed, served)
}

/// Who fetches: the request version, and the follower broker's id for a replica fetch.
#[derive(Clone, Copy)]
struct Asker {
    version: i16,
    replica: Option<i32>,
    replica_epoch: Option<BrokerEpoch>,
    /// A replica fetch from the follower's current run (see [`current_run`]).
    current: bool,
    /// A replica's read of a batch to repair its copy with ([`REPAIR_RACK_ID`]): read afresh,
    /// and damage it meets here moves leadership only if not known before (see
    /// `Partition::damage_found_in_background`).
    repair: bool,
}

/// Whether a replica fetch naming broker epoch `epoch` comes from `follower`'s current run as
/// this broker's metadata knows it. A fetch naming none (before Fetch v15) is taken as current.
fn current_run(broker: &Broker, follower: i32, epoch: Option<BrokerEpoch>) -> bool {
    let Some(epoch) = epoch else { return true };
    let Some(membership) = broker.membership() else { return false };
    membership
        .image()
        .brokers
        .get(&follower)
        .is_some_and(|b| b.registration.incarnation.epoch() == epoch)
}

/// Reads one partition for a fetch: its part of the response, whether batches were left
/// unread below its bound, and what it gives out.
async fn read_partition(
    broker: &Broker,
    name: &str,
    topic: Option<&Arc<Topic>>,
    asker: Asker,
    part: &kafka_protocol::messages::fetch_request::FetchPartition,
    limit: usize,
    first: bool,
) -> (PartitionData, bool, Option<Served>) {
    let Asker { version, replica, replica_epoch, current, repair } = asker;
    let mut data = PartitionData::default();
    data.partition_index = part.partition;
    data.records = Some(Bytes::new());
    data.high_watermark = -1;
    data.last_stable_offset = -1;
    data.log_start_offset = -1;
    let unknown = if version >= 13 {
        ResponseError::UnknownTopicId
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    // Not led here (or not known to the metadata); a fetch by an unknown id has no name.
    // (Unlike ListOffsets, and Kafka's Fetch, leadership is checked before the client's leader
    // epoch: a follower answers NOT_LEADER_OR_FOLLOWER whatever epoch it was asked in, which
    // clients and followers answer as they do FENCED_LEADER_EPOCH, by asking for metadata.)
    if (topic.is_some() || !name.is_empty())
        && let Some(error) = leadership_error(broker, name, part.partition)
    {
        data.error_code = code(error);
        return (data, false, None);
    }
    let Some(topic) = topic else {
        // A topic the metadata has but this broker has not opened yet (it was just made, or
        // just given here) is NOT_LEADER_OR_FOLLOWER, as in Kafka: it exists.
        let known = !name.is_empty() && image_of(broker).topic(name).is_some();
        let error = if known { ResponseError::NotLeaderOrFollower } else { unknown };
        data.error_code = code(error);
        return (data, false, None);
    };
    let Some(partition) = topic.partition(part.partition) else {
        data.error_code = code(absent_error(broker, &topic.name, part.partition));
        return (data, false, None);
    };
    if let Err(error) = epoch_check(part.current_leader_epoch, partition.leader_epoch()) {
        data.error_code = code(error);
        return (data, false, None);
    }
    let offset = Offset(part.fetch_offset);
    let (hw, upto) = match replica {
        // The metadata may name this broker leader before the partition has taken the role:
        // its high watermark then is a follower's, possibly behind what was acknowledged.
        None if !partition.leads() => {
            data.error_code = code(ResponseError::NotLeaderOrFollower);
            return (data, false, None);
        }
        None => (partition.high_watermark(), partition.high_watermark()),
        Some(_) if !current => {
            // A fetch of the follower's previous run (held in a long poll, or sent before its
            // restart reached this broker's metadata) is answered but counts for nothing.
            (partition.high_watermark(), partition.log.log_end_offset())
        }
        Some(follower) => {
            let now = broker.env.clock.now();
            // Fetch v5 and later carry the follower's log start; earlier ones count as zero.
            let start = Offset(part.log_start_offset.max(0));
            let who = (follower, replica_epoch);
            match partition.follower_fetched(who, (offset, start), now) {
                Ok(hw) => (hw, partition.log.log_end_offset()),
                Err(error) => {
                    tracing::debug!(partition = %partition.tp, follower, "refused a replica fetch: {error}");
                    data.error_code = code(ResponseError::NotLeaderOrFollower);
                    return (data, false, None);
                }
            }
        }
    };
    data.high_watermark = hw.0;
    data.last_stable_offset = hw.0;
    data.log_start_offset = partition.log.log_start_offset().0;
    // A later partition gets nothing once the total budget is spent; the first always gets at
    // least one whole batch.
    if limit == 0 && !first {
        return (data, false, None);
    }
    let read = match replica {
        None if !repair => {
            partition.read_in_order(offset, limit.max(1), upto, &broker.read_ahead).await
        }
        _ => partition.log.read(offset, limit.max(1), upto).await,
    };
    let (mut unread, mut gave) = (false, None);
    match read {
        Ok(result) => {
            data.log_start_offset = result.log_start.0;
            unread = result.next_offset < upto;
            // Only the response's first batch may go past a limit, as in Kafka: a later
            // partition's first batch larger than what is left waits for a fetch that
            // starts with it.
            if first || result.records.len() <= limit {
                let (partition, bytes) = (Arc::clone(&partition), result.records.len());
                // A replica's read to repair its copy is replication too, asked as a consumer.
                let replica = replica.is_some() || repair;
                gave = Some(Served { partition, bytes, replica });
                data.records = Some(result.records);
            } else {
                unread = true;
            }
        }
        Err(ReadError::OutOfRange { log_start, .. }) => {
            data.error_code = code(ResponseError::OffsetOutOfRange);
            data.log_start_offset = log_start.0;
        }
        // The batch holding the offset is damaged on this broker's disk (it failed its CRC
        // every time it was read): said as Kafka says it, so that a client shows it to the
        // application rather than retrying in silence.
        Err(error @ ReadError::Corrupt { .. }) => {
            tracing::error!(partition = %partition.tp, "fetch found damaged data: {error}");
            match error {
                ReadError::Corrupt { offset, resume, .. } if repair => {
                    partition.damage_found_in_background(offset, resume);
                }
                ReadError::Corrupt { offset, .. } => partition.damage_found(offset),
                _ => {}
            }
            data.error_code = code(ResponseError::CorruptMessage);
        }
        Err(error) => {
            tracing::warn!(partition = %partition.tp, "fetch failed: {error}");
            data.error_code = code(ResponseError::KafkaStorageError);
        }
    }
    (data, unread, gave)
}
