//! The controller's async shell: it owns the quorum and its store, drives Raft's ticks from
//! the injected clock, carries Raft messages between controllers, applies committed metadata
//! to the image, takes snapshots, and answers brokers' requests one at a time through
//! [`ControllerLogic`]. Nothing here decides anything about the cluster.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot};

use super::codec::DecodeError;
use super::image::MetadataImage;
use super::logic::{ControllerError, ControllerLogic, IsrChange, LogicConfig};
use super::quorum::{Quorum, QuorumConfig, QuorumError, QuorumStore};
use super::records::{BrokerId, MetadataRecord, encode_entry};
use super::rpc::{
    Channel, Hello, MetadataDelta, QuorumStatus, Request, Response, read_frame, write_frame,
};
use crate::io::{Conn, Env, Listener, timeout};
use crate::server::accept::Acceptor;

mod raft;
use raft::{Inbox, Peers, run};

/// Raft's tick.
pub const TICK: Duration = Duration::from_millis(50);
/// Ticks a follower lets pass without hearing from a leader before it campaigns (each tick
/// passes with probability ½ for jitter, so on average 0.6 s; see `quorum::Quorum::tick`), and
/// the leader's window for hearing from a quorum before it steps down (0.3 s). Short, because a
/// broker that dies with the active controller is fenced only once a new controller is
/// elected: with 1 s of election ticks, split votes pushed failover past 4 s.
pub const ELECTION_TICKS: usize = 6;
/// Ticks between the leader's heartbeats.
pub const HEARTBEAT_TICKS: usize = 2;
/// Committed entries kept after the snapshot before a new snapshot is taken.
pub const SNAPSHOT_EVERY_ENTRIES: usize = 1_000;
/// How long a request waits for its records to commit.
pub const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the active controller looks for expired broker sessions.
pub const EXPIRY_CHECK: Duration = Duration::from_millis(250);
/// Raft messages queued per peer before new ones are dropped (Raft resends).
pub const PEER_QUEUE_MAX: usize = 4_096;
/// Most bytes of peers' Raft messages waiting for the Raft loop; more are dropped (Raft sends
/// again). The loop takes none while it waits for room to persist, and the leader keeps
/// sending: without a bound they would pile up for as long as the disk stays full.
pub const RAFT_INBOX_MAX_BYTES: usize = 64 << 20;
/// Where the quorum keeps its log, hard state and snapshot.
pub const QUORUM_DIR: &str = "meta/quorum";
/// Between tries to persist the quorum's state while the disk is out of room (space, or
/// descriptors).
pub const STORE_RETRY: Duration = Duration::from_secs(1);

/// The controller's settings.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// This node.
    pub node: BrokerId,
    /// Every voter and its controller listener (none for this node when it has none).
    pub voters: BTreeMap<BrokerId, Option<SocketAddr>>,
    /// The decisions' settings.
    pub logic: LogicConfig,
    /// How often the active controller gives leadership back to preferred replicas (none: it
    /// does not; see [`ControllerLogic::preferred_leaders`]).
    pub leader_rebalance: Option<Duration>,
}

/// Why the controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControllerStartError {
    /// The quorum's store failed.
    #[error("quorum store: {0}")]
    Store(#[from] super::quorum::StoreError),
    /// The quorum refused its state.
    #[error("quorum: {0}")]
    Quorum(#[from] QuorumError),
    /// The stored snapshot does not decode.
    #[error("metadata snapshot: {0}")]
    Snapshot(#[from] DecodeError),
}

enum Event {
    Step(Bytes),
    Propose(Bytes, oneshot::Sender<Result<(), QuorumError>>),
}

/// What the quorum has committed, as the rest of the node sees it.
#[derive(Default)]
struct Published {
    image: Arc<MetadataImage>,
    snapshot: Option<Bytes>,
    /// Committed entries after the snapshot, with their index.
    tail: VecDeque<(u64, Bytes)>,
    /// Index at which each awaited proposal was applied.
    applied: BTreeMap<u64, u64>,
    leader: Option<BrokerId>,
    is_leader: bool,
    /// This node leads and has applied an entry of its own term, so its image is current.
    current: bool,
    /// The quorum's state, while this node leads it.
    quorum: Option<QuorumStatus>,
    /// The quorum's store failed to persist: out of room and waiting for it, or failed for
    /// good and stopped. The image may be behind the quorum's meanwhile, so this controller
    /// neither acts as the active one nor serves its node's broker the metadata (the broker
    /// takes it from the active controller instead).
    store_failed: bool,
}

/// A running controller.
pub struct Controller {
    env: Env,
    config: ControllerConfig,
    events: mpsc::UnboundedSender<Event>,
    /// The bytes of peers' messages among `events`.
    inbox: Arc<Inbox>,
    published: Mutex<Published>,
    applied: Notify,
    logic: tokio::sync::Mutex<Option<ControllerLogic>>,
    nonce: AtomicU64,
    /// Set while a proposal's outcome is unknown to this controller: from the moment it is
    /// proposed until it is seen applied. A commit that failed, or whose caller went away (a
    /// request's connection closed mid-commit drops its future), leaves it set, and its entry
    /// may still be in the log, to be applied later. Records computed from an image without it
    /// would then be applied after it and undo it, a leader or partition epoch going backwards,
    /// so the next change first commits an empty entry ([`Controller::settle`]).
    unsettled: AtomicBool,
    /// When each broker's heartbeat last reached this controller, active or not (brokers copy
    /// theirs to every voter), so a controller taking over knows who went silent before it did.
    seen: Mutex<BTreeMap<BrokerId, crate::io::Instant>>,
}

impl Controller {
    /// Opens the quorum's state and starts the controller's tasks.
    pub async fn start(
        env: Env,
        config: ControllerConfig,
    ) -> Result<Arc<Controller>, ControllerStartError> {
        let (store, recovered) =
            QuorumStore::open(Arc::clone(&env.disk), Path::new(QUORUM_DIR)).await?;
        let mut published = Published::default();
        if let Some((snapshot, _)) = &recovered.snapshot {
            published.image = Arc::new(MetadataImage::decode_snapshot(&snapshot.data)?);
            published.snapshot = Some(snapshot.data.clone());
        }
        let quorum_config = QuorumConfig {
            node: config.node as u64,
            voters: config.voters.keys().map(|&v| v as u64).collect(),
            seed: env.entropy.next_u64(),
            election_ticks: ELECTION_TICKS,
            heartbeat_ticks: HEARTBEAT_TICKS,
        };
        let quorum = Quorum::new(quorum_config, recovered)?;
        let (events, queue) = mpsc::unbounded_channel();
        let inbox = Arc::new(Inbox::new(RAFT_INBOX_MAX_BYTES));
        let controller = Arc::new(Controller {
            env: env.clone(),
            config,
            events,
            inbox: Arc::clone(&inbox),
            published: Mutex::new(published),
            applied: Notify::new(),
            logic: tokio::sync::Mutex::new(None),
            nonce: AtomicU64::new(env.entropy.next_u64() | 1),
            unsettled: AtomicBool::new(false),
            seen: Mutex::new(BTreeMap::new()),
        });
        let peers = Peers::new(&controller);
        let raft = run(Arc::downgrade(&controller), quorum, store, (queue, inbox), peers);
        env.spawn("controller-raft", raft);
        env.spawn("controller-expiry", expiry_loop(Arc::downgrade(&controller)));
        if let Some(every) = controller.config.leader_rebalance {
            env.spawn("controller-rebalance", rebalance_loop(Arc::downgrade(&controller), every));
        }
        Ok(controller)
    }

    fn published(&self) -> std::sync::MutexGuard<'_, Published> {
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bytes of peers' Raft messages waiting for the Raft loop (at most
    /// [`RAFT_INBOX_MAX_BYTES`]).
    pub fn raft_inbox_bytes(&self) -> usize {
        self.inbox.queued()
    }

    /// The committed metadata image as this controller has applied it.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.published().image)
    }

    /// The active controller, as far as this one knows.
    pub fn leader(&self) -> Option<BrokerId> {
        self.published().leader
    }

    /// Whether this node is the active controller with a current image.
    pub fn is_active(&self) -> bool {
        let p = self.published();
        p.is_leader && p.current && !p.store_failed
    }

    /// Whether this controller serves its node's broker the committed metadata
    /// ([`Controller::local_metadata`]): not while its store cannot persist, when what it has
    /// applied may be behind the quorum's for as long as that lasts.
    pub fn serves_local_metadata(&self) -> bool {
        !self.published().store_failed
    }

    /// The quorum's store failed to persist (see `Published::store_failed`). Commits waiting
    /// here are woken, to fail at once.
    fn store_failed(&self) {
        {
            let mut p = self.published();
            p.store_failed = true;
            p.is_leader = false;
            p.current = false;
            p.leader = None;
            p.quorum = None;
        }
        self.applied.notify_waiters();
    }

    /// Accepts controller connections (Raft peers and brokers) until the listener is closed; a
    /// failed accept is tried again (see [`crate::server::accept`]).
    pub async fn serve(self: Arc<Self>, listener: Box<dyn Listener>) {
        let mut acceptor = Acceptor::new(listener, Arc::clone(&self.env.clock), "controller");
        while let Some((conn, peer)) = acceptor.next().await {
            let me = Arc::clone(&self);
            self.env.spawn("controller-conn", async move {
                if let Err(e) = me.serve_conn(conn).await {
                    tracing::debug!(%peer, "controller connection ended: {e}");
                }
            });
        }
    }

    async fn serve_conn(&self, mut conn: Box<dyn Conn>) -> Result<(), super::rpc::RpcError> {
        let hello = Hello::decode(&read_frame(&mut *conn).await?)?;
        loop {
            let frame = read_frame(&mut *conn).await?;
            match hello.channel {
                Channel::Raft => {
                    let len = frame.len();
                    if !self.inbox.admit(len) {
                        tracing::debug!(
                            from = hello.from,
                            "the raft inbox is full: a message dropped"
                        );
                    } else if self.events.send(Event::Step(frame)).is_err() {
                        self.inbox.taken(len);
                    }
                }
                Channel::Requests => {
                    let response = match Request::decode(&frame) {
                        Ok(request) => self.handle(request).await,
                        Err(e) => {
                            tracing::warn!(
                                from = hello.from,
                                "undecodable controller request: {e}"
                            );
                            return Err(e.into());
                        }
                    };
                    write_frame(&mut *conn, &response.encode()).await?;
                }
            }
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, BTreeMap<BrokerId, crate::io::Instant>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The decisions' state for this controller becoming active now, with the brokers' sessions
    /// running from when it last heard from each.
    fn take_over(&self, image: &MetadataImage, now: crate::io::Instant) -> ControllerLogic {
        ControllerLogic::taking_over(self.config.logic.clone(), image, now, &self.seen())
    }

    /// The committed metadata after `after` for this node's own broker, waiting up to
    /// `max_wait` for some, whether this controller is active or not: what it has applied was
    /// committed by the quorum, so it may lag the active controller's but never disagree with
    /// it, and it is there while no controller is active (the broker's own registration in it
    /// tells the broker when it has caught up).
    pub async fn local_metadata(&self, after: u64, max_wait: Duration) -> Response {
        self.fetch_metadata(after, max_wait, false).await
    }

    fn not_controller(&self) -> Response {
        Response::Error { error: ControllerError::NotController, leader: self.leader() }
    }

    /// Answers one request (from this node's broker directly, or from the network).
    pub async fn handle(&self, request: Request) -> Response {
        // A change bounded by its sender's wait is not started once that has passed (it
        // may have waited here behind a slow commit): the sender, and its client, have
        // given up on it and may be acting on that.
        let (request, start_by) = match request {
            Request::Within { ms, request } => {
                let limit = Duration::from_millis(u64::from(ms));
                (*request, Some(self.env.clock.now() + limit))
            }
            request => (request, None),
        };
        if let Request::FetchMetadata { after, max_wait_ms } = request {
            let wait = Duration::from_millis(u64::from(max_wait_ms));
            return self.fetch_metadata(after, wait, true).await;
        }
        if let Request::DescribeQuorum = request {
            // The quorum's leader answers, current image or not, as Kafka's does.
            // Taken out first: the lock must not be held into `not_controller`, which takes it.
            let status = self.published().quorum.clone();
            return match status {
                Some(status) => Response::Quorum(status),
                None => self.not_controller(),
            };
        }
        if let Request::Heartbeat { broker_id, .. } = request {
            self.seen().insert(broker_id, self.env.clock.now());
        }
        let mut logic = self.logic.lock().await;
        if start_by.is_some_and(|by| self.env.clock.now() >= by) {
            return Response::Error { error: ControllerError::Timeout, leader: self.leader() };
        }
        if !self.is_active() {
            *logic = None;
            return self.not_controller();
        }
        if let Err(error) = self.settle().await {
            return Response::Error { error, leader: self.leader() };
        }
        let image = self.image();
        let now = self.env.clock.now();
        let logic = logic.get_or_insert_with(|| self.take_over(&image, now));
        // A broker back from a lapsed session is answered with an index only a quorum could
        // have committed: this controller may have been deposed without knowing it (paused, or
        // cut off, with that broker), and an index from its stale image would let the broker
        // lead partitions that moved away meanwhile. So is an operator's election that needs
        // no change: "not needed" from a deposed controller's image may be false.
        let prove = matches!(
            request,
            Request::Heartbeat { lapsed: true, .. } | Request::ElectLeaders { .. }
        );
        // A heartbeat of a broker this controller fenced: the answer's entry unfences it, and
        // the broker must not lead again before its image holds every change up to it.
        let rejoining = match &request {
            Request::Heartbeat { broker_id, shutdown: false, .. } => {
                image.brokers.get(broker_id).is_some_and(|b| b.fenced)
            }
            _ => false,
        };
        let outcome = match request {
            Request::Register(registration) => Ok(logic.register(&image, registration, now)),
            Request::Heartbeat { broker_id, incarnation, shutdown, reports, .. } => {
                logic.heartbeat(&image, broker_id, incarnation, shutdown, &reports, now)
            }
            Request::CreateTopic { topic, validate_only } => {
                let mut id = [0u8; 16];
                self.env.entropy.fill(&mut id);
                logic.create_topic(&image, &topic, validate_only, crate::model::TopicId(id))
            }
            Request::DeleteTopic { name } => logic.delete_topic(&image, &name).map(|(_, r)| r),
            Request::CreatePartitions { name, count, assignments, validate_only } => {
                logic.create_partitions(&image, &name, count, &assignments, validate_only)
            }
            Request::AlterConfigs { name, configs, validate_only } => {
                logic.alter_configs(&image, &name, configs, validate_only, now)
            }
            Request::AlterConfigsIncremental { name, changes, validate_only } => {
                logic.alter_configs_incremental(&image, &name, &changes, validate_only, now)
            }
            Request::ElectLeaders { election, partitions } => {
                let asked: BTreeSet<(&str, i32)> =
                    partitions.iter().map(|(t, p)| (t.as_str(), *p)).collect();
                Ok(logic.elect_leaders(&image, election, now, |t, p| asked.contains(&(t, p))))
            }
            Request::AlterReassignments { changes, allow_replication_factor_change } => {
                let allow = allow_replication_factor_change;
                let (records, refused) = logic.alter_reassignments(&image, &changes, allow, now);
                if refused.is_empty() {
                    Ok(records)
                } else {
                    // A failed commit is asked again, whole, by the sender (it retries on
                    // another controller, or on this one once it settles).
                    let committed = match records.is_empty() {
                        true => Ok(image.offset),
                        false => self.commit(records).await,
                    };
                    return match committed {
                        Ok(offset) => Response::PartlyDone { offset, refused },
                        Err(error) => Response::Error { error, leader: self.leader() },
                    };
                }
            }
            Request::ProducerIds { broker_id } => {
                let record = ControllerLogic::producer_ids(&image, broker_id);
                let MetadataRecord::ProducerIds { first, count, .. } = record else {
                    return Response::Error { error: ControllerError::Timeout, leader: None };
                };
                return match self.commit(vec![record]).await {
                    Ok(offset) => Response::ProducerIds { first, count, offset },
                    Err(error) => Response::Error { error, leader: self.leader() },
                };
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
                let current = image
                    .brokers
                    .get(&broker_id)
                    .is_some_and(|b| b.registration.incarnation == incarnation);
                if current {
                    let change = IsrChange {
                        broker_id,
                        topic_id,
                        partition,
                        leader_epoch,
                        partition_epoch,
                        isr: &isr,
                        joining: &joining,
                    };
                    let outcome = match logic.alter_partition(&image, &change) {
                        // The leader acts on a refusal (it stops counting the follower it asked
                        // to add), so a refusal must come from the current state, not from a
                        // controller deposed without knowing it whose image misses a change
                        // that did commit: an empty entry committed first proves this one
                        // still leads, and the change is judged again on what it applied.
                        Err(ControllerError::IneligibleReplica(_)) => {
                            if let Err(error) = self.commit(Vec::new()).await {
                                return Response::Error { error, leader: self.leader() };
                            }
                            logic.alter_partition(&self.image(), &change)
                        }
                        other => other,
                    };
                    // A replica being added that joins the ISR may complete a reassignment.
                    outcome
                        .map(|records| logic.completing_reassignments(&self.image(), records, now))
                } else {
                    Err(ControllerError::StaleBroker(broker_id))
                }
            }
            // Answered above.
            Request::FetchMetadata { .. } | Request::DescribeQuorum => {
                return self.not_controller();
            }
            Request::Within { .. } => {
                Err(ControllerError::Internal("a bounded request within a bounded request".into()))
            }
        };
        let fenced_of = |image: &MetadataImage, id: BrokerId| {
            image.brokers.get(&id).is_some_and(|b| b.fenced || b.shutting_down)
        };
        match outcome {
            Ok(records) if records.is_empty() && !prove => {
                Response::Done { offset: image.offset, fenced: false }
            }
            Ok(records) => {
                let subject = match records.first() {
                    Some(MetadataRecord::ShutdownBroker { broker_id, .. }) => Some(*broker_id),
                    _ => None,
                };
                match self.commit(records).await {
                    Ok(offset) => Response::Done {
                        offset,
                        fenced: rejoining || subject.is_some_and(|b| fenced_of(&self.image(), b)),
                    },
                    Err(error) => Response::Error { error, leader: self.leader() },
                }
            }
            Err(error) => Response::Error { error, leader: self.leader() },
        }
    }

    /// Proposes `records` as one entry and waits until it is applied; returns its index.
    async fn commit(&self, records: Vec<MetadataRecord>) -> Result<u64, ControllerError> {
        // Commits run one at a time, under the logic lock; only a success clears this.
        self.unsettled.store(true, Ordering::Relaxed);
        let nonce = self.nonce.fetch_add(2, Ordering::Relaxed);
        self.published().applied.insert(nonce, 0);
        let result = timeout(&*self.env.clock, COMMIT_TIMEOUT, async {
            let (tx, rx) = oneshot::channel();
            self.events
                .send(Event::Propose(encode_entry(nonce, &records), tx))
                .map_err(|_| ControllerError::Timeout)?;
            match rx.await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ControllerError::NotController),
                Err(_) => return Err(ControllerError::Timeout),
            }
            loop {
                let notified = self.applied.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                {
                    let p = self.published();
                    if let Some(&index) = p.applied.get(&nonce).filter(|&&i| i > 0) {
                        return Ok(index);
                    }
                    if !p.is_leader {
                        return Err(ControllerError::NotController);
                    }
                }
                notified.await;
            }
        })
        .await;
        self.published().applied.remove(&nonce);
        let result = result.unwrap_or(Err(ControllerError::Timeout));
        if result.is_ok() {
            self.unsettled.store(false, Ordering::Relaxed);
        }
        result
    }

    /// Makes sure every entry this controller proposed is applied (or gone from the log) before
    /// a change is computed from its image: if an earlier proposal's outcome is unknown, an
    /// empty entry is committed first, which the log applies only after everything before it.
    /// The caller holds the logic lock.
    async fn settle(&self) -> Result<(), ControllerError> {
        if self.unsettled.load(Ordering::Relaxed) {
            self.commit(Vec::new()).await?;
        }
        Ok(())
    }

    /// Committed entries after `after`, waiting up to `max_wait` when there are none.
    ///
    /// Only the active controller with a current image answers: a restarted or lagging
    /// controller may not yet have applied everything committed, and a broker that took its
    /// image for the whole truth would remove partitions it still owns.
    async fn fetch_metadata(&self, after: u64, max_wait: Duration, only_active: bool) -> Response {
        if only_active && !self.is_active() {
            return self.not_controller();
        }
        let wait = async {
            loop {
                let notified = self.applied.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                if self.image().offset > after {
                    return;
                }
                notified.await;
            }
        };
        let _ = timeout(&*self.env.clock, max_wait, wait).await;
        if only_active && !self.is_active() {
            return self.not_controller();
        }
        let p = self.published();
        let first_retained = p.tail.front().map_or(p.image.offset + 1, |(i, _)| *i);
        let snapshot_offset = first_retained.saturating_sub(1);
        let mut delta = MetadataDelta::default();
        if after < snapshot_offset {
            delta.snapshot = p.snapshot.clone();
        }
        delta.entries = p.tail.iter().filter(|(i, _)| *i > after).cloned().collect();
        Response::Metadata(delta)
    }

    /// For a change the active controller makes of its own accord: the logic, held under its
    /// lock (taken over if this controller just became active), with the image and the time,
    /// once every earlier proposal is settled; `None` if this controller is not the active one
    /// or a proposal did not settle.
    async fn active_logic(
        &self,
    ) -> Option<(
        tokio::sync::MutexGuard<'_, Option<ControllerLogic>>,
        Arc<MetadataImage>,
        crate::io::Instant,
    )> {
        let mut logic = self.logic.lock().await;
        if !self.is_active() {
            *logic = None;
            return None;
        }
        if let Err(e) = self.settle().await {
            tracing::warn!("an earlier proposal did not settle: {e}");
            return None;
        }
        let image = self.image();
        let now = self.env.clock.now();
        logic.get_or_insert_with(|| self.take_over(&image, now));
        Some((logic, image, now))
    }

    /// Completes the reassignments that are due ([`ControllerLogic::due_reassignments`]), then
    /// fences brokers whose sessions expired, one batch at a time.
    async fn expire_sessions(&self) {
        let Some((mut guard, image, now)) = self.active_logic().await else { return };
        let Some(logic) = guard.as_mut() else { return };
        let due = logic.due_reassignments(&image, now);
        if !due.is_empty() {
            tracing::info!(partitions = due.len(), "completing reassignments");
            if let Err(e) = self.commit(due).await {
                tracing::warn!("completing reassignments did not commit: {e}");
            }
        }
        // Each fence is computed from the image with the previous one applied.
        for _ in 0..image.brokers.len() {
            let Some(batch) = logic.expire(&self.image(), now) else { return };
            tracing::info!(records = batch.len(), "fencing a broker whose session expired");
            if let Err(e) = self.commit(batch).await {
                tracing::warn!("fencing did not commit: {e}");
                return;
            }
        }
    }

    /// Gives partitions' leadership back to their preferred replicas, if this controller is
    /// the active one (see [`ControllerLogic::preferred_leaders`]).
    async fn rebalance_leaders(&self) {
        let Some((mut guard, image, now)) = self.active_logic().await else { return };
        let Some(logic) = guard.as_mut() else { return };
        let records = logic.preferred_leaders(&image, now);
        if records.is_empty() {
            return;
        }
        tracing::info!(partitions = records.len(), "giving leadership back to preferred replicas");
        if let Err(e) = self.commit(records).await {
            tracing::warn!("leader rebalancing did not commit: {e}");
        }
    }
}

async fn rebalance_loop(controller: std::sync::Weak<Controller>, every: Duration) {
    loop {
        let Some(c) = controller.upgrade() else { return };
        let clock = Arc::clone(&c.env.clock);
        drop(c);
        clock.sleep(every).await;
        let Some(c) = controller.upgrade() else { return };
        c.rebalance_leaders().await;
    }
}

async fn expiry_loop(controller: std::sync::Weak<Controller>) {
    loop {
        let Some(c) = controller.upgrade() else { return };
        let clock = Arc::clone(&c.env.clock);
        drop(c);
        clock.sleep(EXPIRY_CHECK).await;
        let Some(c) = controller.upgrade() else { return };
        c.expire_sessions().await;
    }
}
