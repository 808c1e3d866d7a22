//! One broker node wired together from an `Env` and a configuration: the catalog of topics,
//! producer ids, the group coordinator, the background work (retention, compaction,
//! checkpoints, interval flushes) and the client listener. The same wiring runs in production
//! and in the simulator.

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{Catalog, CatalogError};
use crate::config::BrokerConfig;
use crate::coordinator::CoordinatorConfig;
use crate::groups::Groups;
use crate::io::{Env, Listener};
use crate::log::producers::PRODUCER_ID_EXPIRATION_MS_DEFAULT;
use crate::producer_ids::ProducerIds;
use crate::server;
use crate::topics::OFFSETS_TOPIC;

/// Why a broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The topics could not be opened.
    #[error("opening topics: {0}")]
    Catalog(#[from] CatalogError),
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
        ..CoordinatorConfig::default()
    }
}

/// A running broker node.
pub struct Broker {
    /// Its environment.
    pub env: Env,
    /// Its configuration.
    pub config: BrokerConfig,
    /// Its topics.
    pub catalog: Catalog,
    /// Producer id allocation.
    pub producer_ids: tokio::sync::Mutex<ProducerIds>,
    /// The group coordinator.
    pub groups: Arc<Groups>,
    /// Woken whenever a partition's high watermark moves (fetch long polls).
    pub appended: Arc<tokio::sync::Notify>,
    /// The address the listener actually bound (its port matters when the configuration asks
    /// for port 0).
    bound: std::sync::OnceLock<std::net::SocketAddr>,
}

impl Broker {
    /// Opens the broker's state from its data folder.
    pub async fn start(env: Env, config: BrokerConfig) -> Result<Arc<Broker>, StartError> {
        let disk = &*env.disk;
        disk.create_dir(std::path::Path::new("")).await?;
        let appended = Arc::new(tokio::sync::Notify::new());
        let catalog = Catalog::open(env.clone(), config.clone(), Arc::clone(&appended)).await?;
        let offsets_configs = [("cleanup.policy".to_owned(), "compact".to_owned())];
        let offsets = catalog
            .ensure_internal(OFFSETS_TOPIC, config.offsets_topic_num_partitions, &offsets_configs)
            .await?;
        let producer_ids = ProducerIds::load(disk).await?;
        let groups = Groups::start(env.clone(), coordinator_config(&config), offsets).await;
        let broker = Arc::new(Broker {
            env: env.clone(),
            config,
            catalog,
            producer_ids: tokio::sync::Mutex::new(producer_ids),
            groups,
            appended,
            bound: std::sync::OnceLock::new(),
        });
        broker.spawn_maintenance();
        Ok(broker)
    }

    /// Binds the client listener.
    pub async fn bind(&self) -> std::io::Result<Box<dyn Listener>> {
        let listener = self.env.net.bind(self.config.listener).await?;
        let _ = self.bound.set(listener.local_addr());
        Ok(listener)
    }

    /// The host and port clients are told to connect to.
    pub fn advertised(&self) -> (String, i32) {
        let (host, port) = self.config.advertised();
        match self.bound.get() {
            Some(bound) if port == 0 => (host, i32::from(bound.port())),
            _ => (host, port),
        }
    }

    /// Accepts connections until the listener fails.
    pub async fn serve(self: Arc<Self>, listener: Box<dyn Listener>) {
        tracing::info!(addr = %listener.local_addr(), node = self.config.node_id, "weir listening");
        loop {
            match listener.accept().await {
                Ok((conn, peer)) => {
                    let broker = Arc::clone(&self);
                    self.env.spawn("connection", server::serve_connection(broker, conn, peer));
                }
                Err(e) => {
                    tracing::error!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Starts the periodic background work on the injected clock.
    fn spawn_maintenance(self: &Arc<Self>) {
        let broker = Arc::downgrade(self);
        let clock = Arc::clone(&self.env.clock);
        let retention =
            Duration::from_millis(self.config.log_retention_check_interval_ms.max(1) as u64);
        let checkpoint =
            Duration::from_millis(self.config.log_checkpoint_interval_ms.max(1) as u64);
        let tick = retention.min(checkpoint).min(Duration::from_secs(1));
        self.env.spawn("maintenance", async move {
            let (mut next_retention, mut next_checkpoint) =
                (clock.now() + retention, clock.now() + checkpoint);
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
                    broker.checkpoint_all().await;
                }
            }
        });
    }

    fn partitions(&self) -> Vec<Arc<crate::partition::Partition>> {
        self.catalog
            .all()
            .iter()
            .flat_map(|t| t.partitions.read().unwrap_or_else(|p| p.into_inner()).clone())
            .collect()
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
            if partition.log.config().cleanup_policy.compacts()
                && let Err(e) = partition.log.clean(self.env.clock.wall_ms(), hw).await
            {
                tracing::warn!(partition = %partition.tp, "compaction failed: {e}");
            }
            if let Err(e) = partition.log.apply_retention(hw).await {
                tracing::warn!(partition = %partition.tp, "retention failed: {e}");
            }
        }
    }

    /// Recovery-point checkpoints for every partition.
    async fn checkpoint_all(&self) {
        for partition in self.partitions() {
            if let Err(e) = partition.checkpoint(PRODUCER_ID_EXPIRATION_MS_DEFAULT).await {
                tracing::warn!(partition = %partition.tp, "checkpoint failed: {e}");
            }
        }
    }

    /// Flushes and checkpoints every partition so the next start has nothing to recover.
    pub async fn shutdown(&self) {
        self.checkpoint_all().await;
        for partition in self.partitions() {
            if let Err(e) = partition.log.close().await {
                tracing::warn!(partition = %partition.tp, "close failed: {e}");
            }
        }
    }
}
