//! One Weir node wired together from an `Env` and a configuration: the controller (when the
//! node votes in the metadata quorum), and the broker — its membership in the cluster, the
//! partitions it hosts, producer ids, the group coordinator, background work (retention,
//! compaction, checkpoints, interval flushes), the client and metrics listeners, and the loops
//! that follow the metadata (in `metadata_loops`). The same wiring runs in production and in
//! the simulator.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::catalog::{Catalog, CatalogError};
use crate::config::broker::BrokerConfigError;
use crate::config::{BrokerConfig, Role};
use crate::controller::client::ControllerClient;
use crate::controller::logic::{ControllerError, LogicConfig, NewTopic};
use crate::controller::membership::{Membership, Timing};
use crate::controller::records::{BrokerRegistration, DirectoryId, Incarnation};
use crate::controller::rpc::{Request, Response};
use crate::controller::service::{Controller, ControllerConfig, ControllerStartError};
use crate::coordinator::CoordinatorConfig;
use crate::groups::Groups;
use crate::identity::{self, IdentityError};
use crate::io::{Env, Listener, timeout};
use crate::log::error::MaintenanceError;
use crate::log::{CleanOutcome, CleanStats};
use crate::partition::Partition;
use crate::partition::read_ahead::{READ_AHEAD_BYTES_MAX, ReadAheadBudget};
use crate::producer_ids::ProducerIds;
use crate::replication::catch_up::CatchUpBudget;
use crate::scrub::{ScrubConfig, Scrubber};
use crate::server;
use crate::server::accept::{ACCEPT_LOG_INTERVAL, Acceptor};
use crate::server::connections::Connections;
use crate::server::memory::{Lease, REQUEST_MEMORY_LOG_INTERVAL, RequestMemory};

mod metadata_loops;
use metadata_loops::{isr_loop, reconcile_loop};

/// How long an admin request waits for the controller and for its change to be visible here.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error("configuration: {0}")]
    Config(#[from] BrokerConfigError),
    /// The controller could not start.
    #[error("controller: {0}")]
    Controller(#[from] ControllerStartError),
    /// The partitions could not be opened.
    #[error("opening partitions: {0}")]
    Catalog(#[from] CatalogError),
    /// The data folder's identity could not be settled.
    #[error("data folder: {0}")]
    Identity(#[from] IdentityError),
    /// The disk failed.
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
}

/// The coordinator's settings from the broker's.
fn coordinator_config(config: &BrokerConfig) -> CoordinatorConfig {
    CoordinatorConfig {
        session_timeout_ms_min: config.group_min_session_timeout_ms.clamp(0, i64::from(i32::MAX))
            as i32,
        session_timeout_ms_max: config.group_max_session_timeout_ms.clamp(0, i64::from(i32::MAX))
            as i32,
        initial_rebalance_delay_ms: config
            .group_initial_rebalance_delay_ms
            .clamp(0, i64::from(i32::MAX)) as i32,
        group_members_max: usize::try_from(config.group_max_size).unwrap_or(1).max(1),
        offset_metadata_bytes_max: usize::try_from(config.offset_metadata_max_bytes).unwrap_or(0),
        offsets_retention_ms: config.offsets_retention_minutes.saturating_mul(60_000),
        offsets_retention_check_interval_ms: config.offsets_retention_check_interval_ms,
        ..CoordinatorConfig::default()
    }
}

/// A running node.
pub struct Broker {
    /// Its environment.
    pub env: Env,
    /// Its configuration.
    pub config: BrokerConfig,
    /// Its controller, when it votes in the metadata quorum.
    pub controller: Option<Arc<Controller>>,
    /// The way to the active controller.
    pub client: Arc<ControllerClient>,
    /// The partitions it hosts.
    pub catalog: Catalog,
    /// Producer id allocation.
    pub producer_ids: ProducerIds,
    /// The group coordinator.
    pub groups: Arc<Groups>,
    /// Woken whenever a partition's high watermark moves (fetch long polls).
    pub appended: Arc<tokio::sync::Notify>,
    /// Its membership, once the client listener is bound (brokers only).
    membership: OnceLock<Arc<Membership>>,
    /// The metadata offset the catalog has reconciled to.
    reconciled: AtomicU64,
    /// Woken when `reconciled` moves.
    reconciled_changed: tokio::sync::Notify,
    /// The address the listener actually bound (its port matters when the configuration asks
    /// for port 0).
    bound: OnceLock<std::net::SocketAddr>,
    /// The address the metrics listener bound, if one is configured.
    metrics_bound: OnceLock<std::net::SocketAddr>,
    /// The previous run ended with a clean shutdown (see [`CLEAN_SHUTDOWN_MARKER`]).
    clean_start: bool,
    /// Its data folder's identity (see [`identity`]).
    directory: DirectoryId,
    /// The byte rate this broker's followers out of the ISR copy at, together.
    pub catch_up: std::sync::Mutex<CatchUpBudget>,
    /// The bytes consumers' reads ahead may hold together.
    pub read_ahead: Arc<ReadAheadBudget>,
    /// Set once a shutdown begins.
    stopping: AtomicBool,
    /// Client connections being served, and their limits.
    connections: Arc<Connections>,
    /// `queued_max_request_bytes`: the request bytes connections may hold while they are read
    /// and handled.
    request_memory: RequestMemory,
    /// When a connection was last logged waiting for request memory.
    memory_wait_logged: std::sync::Mutex<Option<crate::io::Instant>>,
    /// Frames that had to wait for request memory.
    memory_waits: AtomicU64,
    /// Counters for the metrics listener.
    pub metrics: Arc<crate::server::metrics::Metrics>,
}

/// An empty file in the data folder written once a shutdown has flushed and closed every log,
/// and removed (durably) at start before anything else is written: its absence at start means
/// the last run crashed or lost power, which the controller must know (see
/// `BrokerRegistration::unclean_shutdown`).
pub const CLEAN_SHUTDOWN_MARKER: &str = ".clean-shutdown";

impl Broker {
    /// Opens the node's state from its data folder and starts its controller.
    pub async fn start(env: Env, config: BrokerConfig) -> Result<Arc<Broker>, StartError> {
        config.validate()?;
        env.disk.create_dir(std::path::Path::new("")).await?;
        // First: a folder of another node's is refused before anything in it changes.
        let directory = identity::load_or_create(&env, config.node_id).await?;
        let clean_start = take_clean_shutdown_marker(&env).await?;
        let voters = config.voters()?;
        let controller = if config.has_role(Role::Controller) {
            let logic = LogicConfig {
                topic_defaults: config.topic_config(),
                num_partitions: config.num_partitions,
                default_replication_factor: config.default_replication_factor,
                session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
                heartbeat_interval: Duration::from_millis(config.broker_heartbeat_interval_ms),
            };
            let controller_config = ControllerConfig {
                node: config.node_id,
                voters: voters.clone(),
                logic,
                leader_rebalance: config.leader_rebalance_interval(),
            };
            let controller = Controller::start(env.clone(), controller_config).await?;
            if let Some(addr) = config.controller_listener {
                let listener = env.net.bind(addr).await?;
                tracing::info!(%addr, node = config.node_id, "controller listening");
                env.spawn("controller-listener", Arc::clone(&controller).serve(listener));
            }
            Some(controller)
        } else {
            None
        };
        let client = Arc::new(ControllerClient::new(
            env.clone(),
            config.node_id,
            voters,
            controller.clone(),
        ));
        let appended = Arc::new(tokio::sync::Notify::new());
        let catch_up_rate = config.replica_catch_up_bytes_per_sec;
        let (max_connections, max_connections_per_ip) =
            (config.max_connections, config.max_connections_per_ip);
        let request_memory = RequestMemory::from_config(config.queued_max_request_bytes);
        let catalog = Catalog::new(env.clone(), config.clone(), Arc::clone(&appended));
        let groups = Groups::start(env.clone(), coordinator_config(&config)).await;
        let broker = Arc::new(Broker {
            env: env.clone(),
            config,
            controller,
            client,
            catalog,
            producer_ids: ProducerIds::default(),
            groups,
            appended,
            membership: OnceLock::new(),
            reconciled: AtomicU64::new(0),
            reconciled_changed: tokio::sync::Notify::new(),
            bound: OnceLock::new(),
            metrics_bound: OnceLock::new(),
            clean_start,
            directory,
            catch_up: std::sync::Mutex::new(CatchUpBudget::new(catch_up_rate)),
            read_ahead: ReadAheadBudget::new(READ_AHEAD_BYTES_MAX),
            stopping: AtomicBool::new(false),
            connections: Connections::new(max_connections, max_connections_per_ip),
            request_memory,
            memory_wait_logged: std::sync::Mutex::new(None),
            memory_waits: AtomicU64::new(0),
            metrics: Arc::default(),
        });
        broker.spawn_maintenance();
        broker.spawn_scrub().await;
        Ok(broker)
    }

    /// Binds the client listener and joins the cluster as a broker.
    pub async fn bind(self: &Arc<Self>) -> std::io::Result<Box<dyn Listener>> {
        let addr = self.config.listener;
        let listener = self.env.net.bind(addr).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("the client listener {addr}: {e}"))
        })?;
        let _ = self.bound.set(listener.local_addr());
        if let Some(addr) = self.config.metrics_listener
            && self.metrics_bound.get().is_none()
        {
            let metrics = self.env.net.bind(addr).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("the metrics listener {addr}: {e}"))
            })?;
            let _ = self.metrics_bound.set(metrics.local_addr());
            self.env.spawn(
                "metrics-listener",
                crate::server::metrics::serve(Arc::downgrade(self), metrics),
            );
        }
        if self.config.has_role(Role::Broker) && self.membership.get().is_none() {
            let (host, port) = self.advertised();
            let timing = Timing {
                heartbeat_interval: Duration::from_millis(self.config.broker_heartbeat_interval_ms),
                session_timeout: Duration::from_millis(self.config.broker_session_timeout_ms),
            };
            let registration = BrokerRegistration {
                broker_id: self.config.node_id,
                incarnation: Incarnation(0),
                host,
                port: u16::try_from(port).unwrap_or(0),
                rack: self.config.rack.clone(),
                unclean_shutdown: !self.clean_start,
                directory: Some(self.directory),
            };
            let membership =
                Membership::start(self.env.clone(), Arc::clone(&self.client), registration, timing);
            let _ = self.membership.set(Arc::clone(&membership));
            self.env.spawn("isr-changes", isr_loop(Arc::downgrade(self), Arc::clone(&membership)));
            self.env.spawn("broker-reconcile", reconcile_loop(Arc::downgrade(self), membership));
        }
        Ok(listener)
    }

    /// Waits until this broker has registered, caught up with the committed metadata and
    /// opened its partitions, so it can serve; false if `limit` passed first.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        let Some(membership) = self.membership() else { return false };
        let wait = async {
            loop {
                let notified = self.reconciled_changed.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                let image = membership.image();
                if membership.caught_up()
                    && !membership.is_fenced()
                    && image.brokers.contains_key(&self.config.node_id)
                    && self.reconciled.load(Ordering::Acquire) >= image.offset
                {
                    return;
                }
                // Registration and heartbeats do not wake the reconciler; poll them.
                let tick = self.env.clock.sleep(Duration::from_millis(20));
                tokio::select! {
                    biased;
                    () = notified => {}
                    () = tick => {}
                }
            }
        };
        timeout(&*self.env.clock, limit, wait).await.is_ok()
    }

    /// This broker's membership (none before `bind`, or on a controller-only node).
    pub fn membership(&self) -> Option<&Arc<Membership>> {
        self.membership.get()
    }

    /// The configuration of the topic called `name`, from the committed metadata.
    pub fn topic_config(&self, name: &str) -> Option<crate::config::TopicConfig> {
        let image = self.membership()?.image();
        let topic = image.topic(name)?;
        let mut config = self.config.topic_config();
        config.replace(topic.configs.clone()).ok()?;
        Some(config)
    }

    /// The host and port clients are told to connect to.
    pub fn advertised(&self) -> (String, i32) {
        let (host, port) = self.config.advertised();
        match self.bound.get() {
            Some(bound) if port == 0 => (host, i32::from(bound.port())),
            _ => (host, port),
        }
    }

    /// The client connections being served now.
    pub fn open_connections(&self) -> usize {
        self.connections.open()
    }

    /// The request bytes client connections hold now, read or being read and not yet handled
    /// (counted only under a `queued_max_request_bytes` limit).
    pub fn request_bytes_in_use(&self) -> usize {
        self.request_memory.in_use()
    }

    /// The address the metrics listener bound (see [`crate::server::metrics`]), once it has.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics_bound.get().copied()
    }

    /// Request frames that had to wait for room within `queued_max_request_bytes`.
    pub fn request_memory_waits(&self) -> u64 {
        self.memory_waits.load(Ordering::Relaxed)
    }

    /// Waits for room for a request frame of `len` bytes within `queued_max_request_bytes`,
    /// logging (at most every [`REQUEST_MEMORY_LOG_INTERVAL`]) when a connection has to wait.
    pub async fn lease_request_memory(&self, len: usize) -> Lease {
        if !self.request_memory.has_room_for(len) {
            self.memory_waits.fetch_add(1, Ordering::Relaxed);
            let now = self.env.clock.now();
            let mut logged =
                self.memory_wait_logged.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if logged.is_none_or(|at| now - at >= REQUEST_MEMORY_LOG_INTERVAL) {
                tracing::warn!(
                    max = self.config.queued_max_request_bytes,
                    frame = len,
                    "queued_max_request_bytes held by requests: connections wait before reading their next"
                );
                *logged = Some(now);
            }
        }
        self.request_memory.lease(len).await
    }

    /// The client connections from `ip` being served now.
    pub fn open_connections_from(&self, ip: std::net::IpAddr) -> usize {
        self.connections.open_from(ip)
    }

    /// Accepts connections until the listener is closed; a failed accept is tried again (see
    /// [`server::accept`]). Within `max_connections` and `max_connections_per_ip` (see
    /// [`server::connections`]).
    pub async fn serve(self: Arc<Self>, listener: Box<dyn Listener>) {
        tracing::info!(addr = %listener.local_addr(), node = self.config.node_id, "weir listening");
        let mut acceptor = Acceptor::new(listener, Arc::clone(&self.env.clock), "client");
        let mut full_logged: Option<crate::io::Instant> = None;
        loop {
            if !self.connections.has_room() {
                let now = self.env.clock.now();
                if full_logged.is_none_or(|at| now - at >= ACCEPT_LOG_INTERVAL) {
                    tracing::warn!(
                        max = self.config.max_connections,
                        "max_connections open: accepting no more until one closes"
                    );
                    full_logged = Some(now);
                }
                self.connections.room().await;
            }
            let Some((conn, peer)) = acceptor.next().await else { return };
            let Some(open) = self.connections.admit(peer.ip()) else {
                tracing::info!(
                    %peer,
                    max = self.config.max_connections_per_ip,
                    "closing a new connection: its address has max_connections_per_ip open"
                );
                continue;
            };
            let broker = Arc::clone(&self);
            self.env.spawn("connection", server::serve_connection(broker, conn, peer, open));
        }
    }

    /// Sends a change to the active controller and waits until this broker has applied it,
    /// for at most [`ADMIN_TIMEOUT`].
    pub async fn change(&self, request: Request) -> Result<Response, ControllerError> {
        self.change_within(request, ADMIN_TIMEOUT).await
    }

    /// Sends a change to the active controller and waits until this broker has applied it,
    /// for at most `limit`: once that has passed, no further attempt is sent (a client that
    /// gave up on the change must not see it happen long after, when it may already have
    /// acted on its failure — say, deleted the topic a timed-out create had made after all,
    /// which a create still being retried here would then bring back).
    pub async fn change_within(
        &self,
        request: Request,
        limit: Duration,
    ) -> Result<Response, ControllerError> {
        let membership = self.membership().ok_or(ControllerError::NotController)?;
        if limit.is_zero() {
            // Not even a first attempt: it would be polled once before the timer.
            return Err(ControllerError::Timeout);
        }
        let clock = &*self.env.clock;
        let deadline = clock.now() + limit;
        let response = membership.call(&request, limit).await?;
        match &response {
            Response::Error { error, .. } => return Err(error.clone()),
            Response::Done { offset, .. }
            | Response::ProducerIds { offset, .. }
            | Response::PartlyDone { offset, .. } => {
                let left = deadline.saturating_duration_since(clock.now());
                self.wait_reconciled(*offset, left).await;
            }
            Response::Metadata(_) | Response::Quorum(_) => {}
        }
        Ok(response)
    }

    /// Creates a topic through the controller and waits until it is visible here, for at
    /// most [`ADMIN_TIMEOUT`].
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication: i32,
        configs: &[(String, String)],
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let topic = NewTopic {
            name: name.to_owned(),
            partitions,
            replication,
            configs: configs.to_vec(),
            assignments: Vec::new(),
        };
        self.create_topic_within(topic, validate_only, ADMIN_TIMEOUT).await
    }

    /// Creates `topic` through the controller and waits until it is visible here, for at
    /// most `limit` (see [`Broker::change_within`]).
    pub async fn create_topic_within(
        &self,
        topic: NewTopic,
        validate_only: bool,
        limit: Duration,
    ) -> Result<(), ControllerError> {
        self.change_within(Request::CreateTopic { topic, validate_only }, limit).await.map(|_| ())
    }

    /// Waits until the catalog has reconciled metadata up to `offset`.
    pub async fn wait_reconciled(&self, offset: u64, limit: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.reconciled_changed.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                if self.reconciled.load(Ordering::Acquire) >= offset {
                    return;
                }
                notified.await;
            }
        };
        timeout(&*self.env.clock, limit, wait).await.is_ok()
    }

    /// Starts the periodic background work on the injected clock.
    fn spawn_maintenance(self: &Arc<Self>) {
        let broker = Arc::downgrade(self);
        let clock = Arc::clone(&self.env.clock);
        let retention =
            Duration::from_millis(self.config.log_retention_check_interval_ms.max(1) as u64);
        let checkpoint =
            Duration::from_millis(self.config.log_checkpoint_interval_ms.max(1) as u64);
        let hw_checkpoint = Duration::from_millis(
            self.config.replica_high_watermark_checkpoint_interval_ms.max(1) as u64,
        );
        let tick = retention.min(checkpoint).min(hw_checkpoint).min(Duration::from_secs(1));
        self.env.spawn("maintenance", async move {
            let (mut next_retention, mut next_checkpoint, mut next_hw_checkpoint) =
                (clock.now() + retention, clock.now() + checkpoint, clock.now() + hw_checkpoint);
            loop {
                clock.sleep(tick).await;
                let Some(broker) = broker.upgrade() else { return };
                let now = clock.now();
                broker.flush_due().await;
                if now >= next_retention {
                    next_retention = now + retention;
                    broker.enforce_retention().await;
                }
                if now >= next_checkpoint {
                    next_checkpoint = now + checkpoint;
                    next_hw_checkpoint = now + hw_checkpoint;
                    broker.checkpoint_all().await;
                } else if now >= next_hw_checkpoint {
                    next_hw_checkpoint = now + hw_checkpoint;
                    broker.checkpoint_high_watermarks().await;
                }
            }
        });
    }

    /// Starts the scrub (see [`crate::scrub`]), unless it is off.
    async fn spawn_scrub(self: &Arc<Self>) {
        let config = ScrubConfig {
            interval: Duration::from_millis(self.config.log_scrub_interval_ms),
            bytes_per_sec: self.config.log_scrub_bytes_per_sec,
        };
        // A controller-only node hosts no partitions.
        if config.interval.is_zero() || !self.config.has_role(Role::Broker) {
            return;
        }
        let (clock, disk) = (Arc::clone(&self.env.clock), Arc::clone(&self.env.disk));
        let scrubber = Scrubber::load(clock, disk, config).await;
        self.env.spawn("scrub", scrubber.run(Arc::downgrade(self)));
    }

    /// The partitions this broker hosts.
    pub(crate) fn partitions(&self) -> Vec<Arc<Partition>> {
        self.catalog.partitions()
    }

    /// Partition `tp`, if this broker hosts it.
    pub(crate) fn hosted(&self, tp: &crate::model::TopicPartition) -> Option<Arc<Partition>> {
        self.catalog.partition(&tp.topic, tp.partition.0)
    }

    /// Whether a shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Interval-policy flushes that are due.
    async fn flush_due(&self) {
        for partition in self.partitions() {
            if partition.log.flush_if_due().await.is_ok() {
                partition.log.set_high_watermark(partition.high_watermark());
            }
        }
    }

    /// Retention and compaction for every partition, bounded by its high watermark.
    async fn enforce_retention(&self) {
        for partition in self.partitions() {
            let hw = partition.high_watermark();
            if partition.log.config().cleanup_policy.compacts() {
                match partition.clean(self.env.clock.wall_ms(), hw).await {
                    Ok(CleanOutcome::Cleaned(CleanStats { damage_met, .. })) => {
                        for at in damage_met {
                            partition.note_damage(at);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(partition = %partition.tp, "compaction failed: {e}"),
                }
            }
            if let Err(e) = partition.log.apply_retention(hw).await {
                tracing::warn!(partition = %partition.tp, "retention failed: {e}");
            }
        }
    }

    /// High-watermark checkpoints for every partition whose high watermark moved.
    async fn checkpoint_high_watermarks(&self) {
        for partition in self.partitions() {
            match partition.log.checkpoint_high_watermark().await {
                // An offline log already said why, and has nothing to record.
                Ok(()) | Err(MaintenanceError::Offline(_)) => {}
                Err(e) => {
                    let tp = &partition.tp;
                    tracing::warn!(partition = %tp, "high watermark checkpoint failed: {e}");
                }
            }
        }
    }

    /// Recovery-point checkpoints for every partition.
    async fn checkpoint_all(&self) {
        for partition in self.partitions() {
            if let Err(e) = partition.checkpoint(self.config.producer_id_expiration_ms).await {
                tracing::warn!(partition = %partition.tp, "checkpoint failed: {e}");
            }
        }
    }

    /// Moves leadership away (in a cluster), then flushes and checkpoints every partition so
    /// the next start has nothing to recover.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        if let Some(membership) = self.membership()
            && self.config.voters().is_ok_and(|v| v.len() > 1)
        {
            membership.controlled_shutdown(Duration::from_secs(5)).await;
        }
        self.checkpoint_all().await;
        let mut clean = true;
        for partition in self.partitions() {
            if let Err(e) = partition.log.close().await {
                tracing::warn!(partition = %partition.tp, "close failed: {e}");
                clean = false;
            }
        }
        if clean && let Err(e) = leave_clean_shutdown_marker(&self.env).await {
            tracing::warn!("clean shutdown marker: {e}");
        }
    }
}

/// Whether the last run left [`CLEAN_SHUTDOWN_MARKER`]; removes it, durably, so that a crash
/// of this run is seen as one.
async fn take_clean_shutdown_marker(env: &Env) -> std::io::Result<bool> {
    let root = std::path::Path::new("");
    match env.disk.remove(std::path::Path::new(CLEAN_SHUTDOWN_MARKER)).await {
        Ok(()) => {
            env.disk.sync_dir(root).await?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes [`CLEAN_SHUTDOWN_MARKER`], durably.
async fn leave_clean_shutdown_marker(env: &Env) -> std::io::Result<()> {
    env.disk.create(std::path::Path::new(CLEAN_SHUTDOWN_MARKER)).await?;
    env.disk.sync_dir(std::path::Path::new("")).await
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
