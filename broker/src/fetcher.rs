//! The follower's replica fetcher: the shell around [`crate::replication::follower`] that
//! copies a partition's log from its leader with Kafka's own requests, so replication speaks
//! the client protocol (a Fetch with this broker's id as `replica_id`).
//!
//! One task per partition and leader epoch. It first finds where its log diverges from the
//! leader's (OffsetForLeaderEpoch, repeated while the answer says to ask again) and cuts its
//! tail there — never at its high watermark — then fetches from its log end in a long poll:
//! each fetch appends the leader's batches as they are (offsets and epochs kept), syncs them
//! under `flush.policy=ack` before asking for more (so the next fetch offset tells the leader
//! they are durable here), and takes the leader's high watermark. Any error backs off and
//! starts over from the divergence check. The task ends when the partition is removed or the
//! committed metadata gives it another leader or epoch; cuts and appends happen under the
//! partition's follow lock after checking that, so an older task can never write after a
//! newer one has cut. A replica whose whole log lies below the leader's log start (the leader
//! deleted the rest by retention while it was away) starts its log again at the leader's start.
//! A follower out of the ISR copies within the broker's catch-up budget
//! ([`crate::replication::catch_up`]): after each fetch it waits as long as the budget says, so
//! a replica restarted far behind does not take its leader's capacity from clients.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Weak};
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId as WireBrokerId, TopicName};
use kafka_protocol::messages::{FetchRequest, OffsetForLeaderEpochRequest};
use kafka_protocol::protocol::StrBytes;

use bytes::Bytes;
use uuid::Uuid;

use crate::client::{CallError, Connection};
use crate::controller::records::{BrokerEpoch, BrokerId};
use crate::log::batch::parse_header;
use crate::log::split::split_batches;
use crate::log::{AppendError, FlushPolicy, Log, MaintenanceError, Repair};
use crate::model::{LeaderEpoch, Offset};
use crate::node::Broker;
use crate::partition::{Partition, TruncateError};
use crate::replication::follower::{self, Divergence};

/// How long the leader may hold a fetch when it has nothing new.
pub const FETCH_MAX_WAIT: Duration = Duration::from_millis(500);
/// Most bytes one fetch asks for.
pub const FETCH_MAX_BYTES: i32 = 8 << 20;
/// Most bytes one fetch asks for while the follower is out of the ISR (Kafka's
/// `replica.fetch.max.bytes` default): the copy arrives in small steps that interleave with
/// the leader's and this broker's other work, instead of in bursts that hold a core.
pub const CATCH_UP_FETCH_MAX_BYTES: i32 = 1 << 20;
/// Copies one repair asks the leader for: the batch where the damage begins, if earlier, then
/// the one asked about (once more, should the first answer be stale).
const REPAIR_ROUNDS_MAX: usize = 3;
/// Times a fetcher task asks about one damaged offset.
const REPAIR_ATTEMPTS_MAX: u32 = 3;
/// The rack a replica's fetch of a batch to repair names (Fetch v11's `rack_id`, which Weir
/// otherwise ignores): damage the read meets on the leader does not move leadership.
pub const REPAIR_RACK_ID: &str = "weir-repair";
/// Pause after a failed step before starting over.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How long a call may take beyond the fetch's own wait.
const CALL_MARGIN: Duration = Duration::from_secs(5);
/// The Fetch version the fetcher speaks: topics by id, and the follower's id and broker epoch
/// in `replica_state` (KIP-903), so that the leader counts only the fetches of its current run.
const FETCH_VERSION: i16 = 15;
/// The OffsetForLeaderEpoch version the fetcher speaks (with `replica_id`).
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;

/// Why one step of the fetcher failed.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error("the leader's address is unknown")]
    NoAddress,
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("the leader answered error code {0}")]
    Kafka(i16),
    #[error("the answer lacked the partition")]
    Malformed,
    #[error("the leader does not know where the asked epoch ends yet")]
    EpochUnknown,
    #[error("no longer following this leader and epoch")]
    Stale,
    #[error("appending: {0}")]
    Append(#[from] AppendError),
    #[error("truncating: {0}")]
    Truncate(#[from] TruncateError),
    #[error("advancing the log start: {0}")]
    Start(#[from] MaintenanceError),
}

/// Copies `partition` from broker `leader` in leader epoch `epoch` until that stops being
/// this broker's role.
pub async fn follow(
    broker: Weak<Broker>,
    partition: Arc<Partition>,
    leader: BrokerId,
    epoch: LeaderEpoch,
) {
    let mut conn: Option<Connection> = None;
    let mut diverged_checked = false;
    // The damaged offsets this task has asked the leader to repair, with the times asked.
    let mut repairs_asked = BTreeMap::new();
    loop {
        let Some(b) = broker.upgrade() else { return };
        if !still_following(&b, &partition, leader, epoch) {
            return;
        }
        if let Some(offline) = partition.log.offline() {
            // A failed write or sync: nothing past the last good sync can be vouched for, so
            // this replica stops copying (and falls out of the ISR) until a restart recovers it.
            tracing::warn!(partition = %partition.tp, "replica fetcher stops: {offline}");
            return;
        }
        let env = b.env.clone();
        let me = b.config.node_id;
        // This run's broker epoch; the fetcher starts only once the broker has registered.
        let my_epoch = b.membership().map(|m| m.incarnation().epoch());
        let addr = leader_addr(&b, leader);
        let catching_up = !in_isr(&b, &partition, me);
        drop(b);
        let step = async {
            let addr = addr.ok_or(StepError::NoAddress)?;
            let c = match &mut conn {
                Some(c) if c.addr() == addr => c,
                _ => conn.insert(Connection::new(env.clone(), addr, &format!("weir-replica-{me}"))),
            };
            if diverged_checked {
                let max_bytes =
                    if catching_up { CATCH_UP_FETCH_MAX_BYTES } else { FETCH_MAX_BYTES };
                repair_damage(c, &partition, (leader, epoch), &mut repairs_asked).await;
                fetch_once(c, &partition, ((me, my_epoch), leader, epoch), max_bytes).await
            } else {
                diverged_checked = truncate_divergence(c, &partition, me, leader, epoch).await?;
                Ok(0)
            }
        };
        match step.await {
            Ok(copied) if copied > 0 => {
                let Some(b) = broker.upgrade() else { return };
                // Consumers catching up on this broker make way for its replicas' appends too.
                b.read_ahead.note_write(env.clock.now());
                let wait = if catching_up {
                    b.catch_up
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .charge(env.clock.now(), copied)
                } else {
                    Duration::ZERO
                };
                drop(b);
                if !wait.is_zero() {
                    env.clock.sleep(wait).await;
                }
            }
            Ok(_) => {}
            Err(StepError::Stale) => {}
            Err(e) => {
                tracing::debug!(partition = %partition.tp, leader, ?epoch, "replica fetcher: {e}");
                diverged_checked = false;
                env.clock.sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

/// Where an empty log must start again to take `first`, the first batch a leader sent, if that
/// batch begins below the log's end and reaches past it. The leader's log start may lie inside
/// a batch (DeleteRecords may put it there), and a replica that started again at that offset is
/// sent the whole batch: like Kafka's follower, it starts again at the batch's base, and adopts
/// the leader's start after the append.
fn straddled_start(log: &Log, first: &[u8]) -> Option<Offset> {
    let header = parse_header(first).ok()?;
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let (base, last) = (Offset(header.base_offset()), Offset(header.last_offset()));
    (start == end && base < end && last >= end).then_some(base)
}

/// Whether the committed metadata has broker `me` in the ISR of `partition`: a follower out
/// of it copies within the broker's catch-up budget
/// ([`crate::config::BrokerConfig::replica_catch_up_bytes_per_sec`]).
fn in_isr(broker: &Broker, partition: &Partition, me: BrokerId) -> bool {
    broker.membership().is_some_and(|m| {
        m.image()
            .partition(&partition.tp.topic, partition.tp.partition.0)
            .is_some_and(|record| record.isr.contains(&me))
    })
}

/// Whether the catalog still hosts this very partition and its role is to follow `leader`
/// in `epoch`.
fn still_following(
    broker: &Broker,
    partition: &Arc<Partition>,
    leader: BrokerId,
    epoch: LeaderEpoch,
) -> bool {
    let hosted = broker
        .catalog
        .partition(&partition.tp.topic, partition.tp.partition.0)
        .is_some_and(|p| Arc::ptr_eq(&p, partition));
    hosted && partition.follows(leader, epoch)
}

/// The client address broker `leader` registered. Replicas reach each other by IP address
/// (a host name would need a resolver the I/O boundary does not offer).
fn leader_addr(broker: &Broker, leader: BrokerId) -> Option<SocketAddr> {
    let image = broker.membership()?.image();
    let registration = &image.brokers.get(&leader)?.registration;
    let ip: IpAddr = registration.host.parse().ok()?;
    Some(SocketAddr::new(ip, registration.port))
}

/// One round of the divergence check: asks the leader where this log's newest epoch ends and
/// cuts there. True when the log now agrees with the leader's (fetching may start).
async fn truncate_divergence(
    conn: &mut Connection,
    partition: &Partition,
    me: BrokerId,
    leader: BrokerId,
    epoch: LeaderEpoch,
) -> Result<bool, StepError> {
    // A produce this broker accepted as leader may still be writing: the check must see it.
    partition.settle_leader_appends().await;
    let Some(asked) = follower::first_question(&partition.log.epochs()) else {
        // Nothing to ask about (an empty log, or one a cut emptied of its epochs): a producer
        // snapshot left past its end (see `Partition::forget_epochs_at_end`) still goes.
        partition.remove_snapshots_past_end().await?;
        return Ok(true);
    };
    let mut request = OffsetForLeaderEpochRequest::default();
    request.replica_id = WireBrokerId(me);
    let mut topic = OffsetForLeaderTopic::default();
    topic.topic = TopicName(StrBytes::from_string(partition.tp.topic.clone()));
    let mut wanted = OffsetForLeaderPartition::default();
    wanted.partition = partition.tp.partition.0;
    wanted.current_leader_epoch = epoch.0;
    wanted.leader_epoch = asked.0;
    topic.partitions.push(wanted);
    request.topics.push(topic);
    let response = conn.call(&request, OFFSET_FOR_LEADER_EPOCH_VERSION, CALL_MARGIN).await?;
    let answer =
        response.topics.first().and_then(|t| t.partitions.first()).ok_or(StepError::Malformed)?;
    if answer.error_code != 0 {
        return Err(StepError::Kafka(answer.error_code));
    }
    let _follow = partition.follow.lock().await;
    if !partition.follows(leader, epoch) {
        return Err(StepError::Stale);
    }
    let local = partition.log.epochs();
    let end = partition.log.log_end_offset();
    let leader_answer = (LeaderEpoch(answer.leader_epoch), Offset(answer.end_offset));
    match follower::resolve(&local, end, leader_answer) {
        Divergence::TruncateTo(offset) => {
            cut(partition, offset, end).await?;
            Ok(true)
        }
        Divergence::AskAgain(offset) => {
            cut(partition, offset, end).await?;
            Ok(false)
        }
        Divergence::Unknown => Err(StepError::EpochUnknown),
    }
}

async fn cut(partition: &Partition, offset: Offset, end: Offset) -> Result<(), StepError> {
    if offset < end {
        let hw = partition.high_watermark().0;
        tracing::info!(partition = %partition.tp, from = end.0, to = offset.0, hw, "truncating a divergent tail");
        partition.truncate_to(offset).await?;
    } else if offset == end {
        // No record diverges, but an epoch this replica began as leader and wrote nothing in
        // may: the leader never knew it.
        partition.forget_epochs_at_end().await?;
    }
    Ok(())
}

/// What this replica may tell the leader it holds: its log end — synced first under
/// `flush.policy=ack`, where the fetch offset promises durability (a failed sync takes the log
/// offline and ends the fetcher instead).
async fn held(partition: &Partition) -> Result<Offset, StepError> {
    if partition.log.config().flush_policy == FlushPolicy::Ack {
        let end = partition.log.log_end_offset();
        if partition.log.durable_offset() < end {
            partition.log.flush().await.map_err(|e| StepError::Append(e.into()))?;
        }
        return Ok(partition.log.durable_offset().min(end));
    }
    Ok(partition.log.log_end_offset())
}

/// One fetch from the log end: appends what the leader sent and takes its high watermark.
/// Returns the bytes appended.
async fn fetch_once(
    conn: &mut Connection,
    partition: &Partition,
    ((me, my_epoch), leader, epoch): ((BrokerId, Option<BrokerEpoch>), BrokerId, LeaderEpoch),
    max_bytes: i32,
) -> Result<u64, StepError> {
    let mut request = FetchRequest::default();
    request.replica_state.replica_id = WireBrokerId(me);
    request.replica_state.replica_epoch = my_epoch.map_or(-1, |e| e.0);
    request.max_wait_ms = FETCH_MAX_WAIT.as_millis() as i32;
    request.min_bytes = 1;
    request.max_bytes = max_bytes;
    request.session_epoch = -1;
    let mut topic = FetchTopic::default();
    topic.topic_id = Uuid::from_bytes(partition.topic_id.0);
    let mut wanted = FetchPartition::default();
    wanted.partition = partition.tp.partition.0;
    wanted.current_leader_epoch = epoch.0;
    let wanted_offset = held(partition).await?.0;
    wanted.fetch_offset = wanted_offset;
    wanted.last_fetched_epoch = -1;
    // The start as checkpointed: the leader's DeleteRecords counts on it surviving a crash.
    wanted.log_start_offset = partition.log.durable_log_start_offset().0;
    wanted.partition_max_bytes = max_bytes;
    topic.partitions.push(wanted);
    request.topics.push(topic);
    let response = conn.call(&request, FETCH_VERSION, FETCH_MAX_WAIT + CALL_MARGIN).await?;
    if response.error_code != 0 {
        return Err(StepError::Kafka(response.error_code));
    }
    let data = response
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or(StepError::Malformed)?;
    let leader_start = Offset(data.log_start_offset);
    if data.error_code == ResponseError::OffsetOutOfRange.code()
        && Offset(wanted_offset) < leader_start
    {
        // The leader has deleted (by retention or DeleteRecords) everything this replica
        // lacks: no tail can be copied, so the log starts again at the leader's start. What
        // it held lies below every offset the leader still serves, all of it committed.
        let _follow = partition.follow.lock().await;
        if !partition.follows(leader, epoch) {
            return Err(StepError::Stale);
        }
        tracing::info!(partition = %partition.tp, from = wanted_offset, to = leader_start.0, "the leader's log starts past this replica's end: starting again there");
        partition.restart_at(leader_start).await?;
        return Ok(0);
    }
    if data.error_code != 0 {
        return Err(StepError::Kafka(data.error_code));
    }
    let records = data.records.clone().unwrap_or_default();
    // The leader sends whole batches; a cut-off last one is left for the next fetch.
    let batches: Vec<_> = split_batches(&records).map_while(Result::ok).collect();
    let _follow = partition.follow.lock().await;
    if !partition.follows(leader, epoch) {
        return Err(StepError::Stale);
    }
    if let Some(base) = batches.first().and_then(|first| straddled_start(&partition.log, first)) {
        tracing::info!(partition = %partition.tp, from = %partition.log.log_end_offset(), to = %base, "the leader's log starts inside a batch: starting again at its base");
        partition.restart_at(base).await?;
    }
    partition.append_replicated(&batches).await?;
    partition.follower_high_watermark(Offset(data.high_watermark));
    // Records the leader deleted (DeleteRecords, or its retention) are deleted here too, up to
    // this replica's own high watermark, durably before the next fetch reports the new start:
    // the leader's DeleteRecords waits for that, so that whichever replica leads next, what
    // was deleted stays deleted.
    if leader_start > partition.log.durable_log_start_offset() {
        partition.log.delete_records_before(leader_start, partition.high_watermark()).await?;
    }
    Ok(batches.iter().map(|b| b.len() as u64).sum())
}

/// Asks the leader for an intact copy of each batch this log is known to hold damaged below
/// the high watermark, and writes it over the damaged one ([`Partition::repair`]): a damaged
/// copy does not stay damaged while an intact one exists. Where the damage begins at an earlier
/// batch, that one is repaired first, then the one asked about. An offset repaired, found
/// intact, or whose copy on the leader is damaged too is not asked about again by this task
/// (its leader and epoch: the damage the producer state's rebuild passed over stays listed
/// after its repair); one whose asking failed otherwise (no copy, a copy that did not fit) is
/// asked again at later steps, at most [`REPAIR_ATTEMPTS_MAX`] times in all.
async fn repair_damage(
    conn: &mut Connection,
    partition: &Partition,
    (leader, epoch): (BrokerId, LeaderEpoch),
    asked: &mut BTreeMap<Offset, u32>,
) {
    // The highest first: a copy fits only where an intact batch follows it, so damage in
    // adjacent batches comes undone from its end; and again while a pass repairs anything.
    let mut progress = true;
    while progress {
        progress = false;
        for known in partition.damage_to_repair(partition.high_watermark()).into_iter().rev() {
            let attempts = asked.entry(known).or_default();
            if *attempts >= REPAIR_ATTEMPTS_MAX {
                continue;
            }
            *attempts += 1;
            match repair_one(conn, partition, (leader, epoch), known).await {
                // Asked about again if found damaged again later (by the scrub, say), once no
                // longer listed as damaged (the producer state's mark stays listed).
                Some(Asked::Done) if !still_listed(partition, known) => {
                    asked.remove(&known);
                    progress = true;
                }
                Some(Asked::Done) => {
                    asked.insert(known, REPAIR_ATTEMPTS_MAX);
                    progress = true;
                }
                Some(Asked::Refused) => {
                    asked.insert(known, REPAIR_ATTEMPTS_MAX);
                }
                Some(Asked::Again) => {}
                None => return,
            }
        }
    }
}

/// Whether `offset` is still listed as damaged to repair.
fn still_listed(partition: &Partition, offset: Offset) -> bool {
    partition.damage_to_repair(partition.high_watermark()).contains(&offset)
}

/// How asking about one damaged offset ended.
enum Asked {
    /// Repaired, or found to read intact.
    Done,
    /// The leader's copy is damaged too.
    Refused,
    /// Not repaired this time (no copy, or it did not fit yet): ask again at a later step.
    Again,
}

/// Asks the leader for the batch holding `known` (first for an earlier damaged batch, where
/// the walk to it meets one) and repairs this log's copy. `None` if the fetcher should stop
/// (no longer following, a failed call or repair).
async fn repair_one(
    conn: &mut Connection,
    partition: &Partition,
    (leader, epoch): (BrokerId, LeaderEpoch),
    known: Offset,
) -> Option<Asked> {
    let mut wanted = known;
    for _ in 0..REPAIR_ROUNDS_MAX {
        let copy = match fetch_copy(conn, partition, wanted, epoch).await {
            Ok(Copy::Batch(copy)) => copy,
            Ok(Copy::Damaged) => return Some(Asked::Refused),
            Ok(Copy::Unavailable) => return Some(Asked::Again),
            Err(e) => {
                tracing::debug!(partition = %partition.tp, %wanted, "repair: no copy from the leader: {e}");
                return None;
            }
        };
        let _follow = partition.follow.lock().await;
        if !partition.follows(leader, epoch) {
            return None;
        }
        match partition.repair(copy).await {
            Ok(Repair::Earlier(at)) if at < wanted && wanted == known => wanted = at,
            // The earlier batch done: now the one asked about.
            Ok(Repair::Repaired { .. } | Repair::Intact { .. }) if wanted != known => {
                wanted = known;
            }
            Ok(Repair::Repaired { .. } | Repair::Intact { .. }) => return Some(Asked::Done),
            Ok(outcome) => {
                tracing::info!(partition = %partition.tp, %wanted, ?outcome, "repair: the leader's copy does not fit");
                return Some(Asked::Again);
            }
            Err(e) => {
                tracing::warn!(partition = %partition.tp, %wanted, "repair failed: {e}");
                return None;
            }
        }
    }
    Some(Asked::Again)
}

/// What the leader answered when asked for a copy of a batch.
enum Copy {
    /// The batch.
    Batch(Bytes),
    /// Its copy is damaged too (CORRUPT_MESSAGE).
    Damaged,
    /// No such batch, or another error: it may be there later.
    Unavailable,
}

/// One fetch of the batch holding `offset` from the leader, below its high watermark: as a
/// consumer (so that the leader does not take the offset for this replica's position) naming
/// [`REPAIR_RACK_ID`] (so that damage the read meets on the leader is noted there without
/// moving leadership, see `server::handlers::fetch`).
async fn fetch_copy(
    conn: &mut Connection,
    partition: &Partition,
    offset: Offset,
    epoch: LeaderEpoch,
) -> Result<Copy, StepError> {
    let mut request = FetchRequest::default();
    request.replica_state.replica_id = WireBrokerId(-1);
    request.replica_state.replica_epoch = -1;
    request.max_wait_ms = 0;
    request.min_bytes = 0;
    request.max_bytes = FETCH_MAX_BYTES;
    request.session_epoch = -1;
    request.rack_id = StrBytes::from_static_str(REPAIR_RACK_ID);
    let mut topic = FetchTopic::default();
    topic.topic_id = Uuid::from_bytes(partition.topic_id.0);
    let mut wanted = FetchPartition::default();
    wanted.partition = partition.tp.partition.0;
    wanted.current_leader_epoch = epoch.0;
    wanted.fetch_offset = offset.0;
    wanted.last_fetched_epoch = -1;
    wanted.log_start_offset = -1;
    // The first batch comes whole whatever the budget: only it is wanted.
    wanted.partition_max_bytes = 1;
    topic.partitions.push(wanted);
    request.topics.push(topic);
    let response = conn.call(&request, FETCH_VERSION, CALL_MARGIN).await?;
    let Some(data) = response.responses.first().and_then(|t| t.partitions.first()) else {
        return Ok(Copy::Unavailable);
    };
    if data.error_code == ResponseError::CorruptMessage.code() {
        return Ok(Copy::Damaged);
    }
    if response.error_code != 0 || data.error_code != 0 {
        return Ok(Copy::Unavailable);
    }
    let records = data.records.clone().unwrap_or_default();
    let first = split_batches(&records).next().and_then(Result::ok);
    // The batch holding the offset, or, where it lies in a gap compaction left (damage a read
    // from there met is noted there), the first after it: the repair checks that it fits.
    let holds = |batch: &Bytes| parse_header(batch).is_ok_and(|h| offset.0 <= h.last_offset());
    Ok(first.filter(holds).map_or(Copy::Unavailable, Copy::Batch))
}
