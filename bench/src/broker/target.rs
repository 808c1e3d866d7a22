//! What the broker workload runs against: a Weir broker started in this process (production
//! runtime, a scratch data folder, an ephemeral loopback port, its disk wrapped only to count
//! syncs), or any Kafka-compatible broker already listening at `--peer`. The cluster
//! benchmark starts three of them, each with its own runtime, as three processes would be.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use weir::config::BrokerConfig;
use weir::io::{Listener, TaskHandle};
use weir::node::Broker;

use super::client::Result;
use crate::counting::{DiskCounters, counted_env};

/// A Weir broker running in this process.
pub struct InProcess {
    runtime: tokio::runtime::Runtime,
    broker: Arc<Broker>,
    serving: TaskHandle,
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Its data folder.
    pub dir: PathBuf,
    /// What it asked of its disk.
    pub disk: Arc<DiskCounters>,
}

impl InProcess {
    /// Starts a broker with default settings (but an ephemeral port) in `dir`.
    pub fn start(dir: &Path) -> Result<InProcess> {
        InProcess::start_with(BrokerConfig {
            listener: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        })
    }

    /// Starts a broker with `config` (its data folder is `config.data_dir`). It serves
    /// clients once it has joined the cluster, as `weir serve` does.
    pub fn start_with(config: BrokerConfig) -> Result<InProcess> {
        let runtime = weir::runtime::build_runtime()?;
        let dir = config.data_dir.clone();
        let (env, disk) = counted_env(dir.clone());
        let (broker, serving, addr) = runtime.block_on(async move {
            let broker = Broker::start(env, config).await?;
            let listener = broker.bind().await?;
            let addr = listener.local_addr();
            let serving =
                broker.env.spawn("serve", serve_when_ready(Arc::clone(&broker), listener));
            Result::Ok((broker, serving, addr))
        })?;
        Ok(InProcess { runtime, broker, serving, addr, dir, disk })
    }

    /// Shuts the broker down cleanly (moving its leaderships away first, in a cluster) and
    /// keeps its data folder, so it can be started again over it.
    pub fn halt(self) -> PathBuf {
        self.serving.abort();
        self.runtime.block_on(self.broker.shutdown());
        drop(self.broker);
        self.runtime.shutdown_timeout(Duration::from_secs(5));
        self.dir
    }

    /// Shuts the broker down cleanly and removes its data folder.
    pub fn stop(self) -> Result<()> {
        let dir = self.halt();
        std::fs::remove_dir_all(dir)?;
        Ok(())
    }
}

/// Serves `listener` once the broker has registered and caught up with the cluster's
/// metadata.
async fn serve_when_ready(broker: Arc<Broker>, listener: Box<dyn Listener>) {
    while !broker.wait_ready(Duration::from_secs(1)).await {}
    broker.serve(listener).await
}
