//! What the broker workload runs against: a Weir broker started in this process (production
//! runtime, a scratch data folder, an ephemeral loopback port, its disk wrapped only to count
//! syncs), or any Kafka-compatible broker already listening at `--peer`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use weir::config::BrokerConfig;
use weir::io::TaskHandle;
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
        let runtime = weir::runtime::build_runtime()?;
        let (env, disk) = counted_env(dir.to_path_buf());
        let config = BrokerConfig {
            listener: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        };
        let (broker, serving, addr) = runtime.block_on(async move {
            let broker = Broker::start(env, config).await?;
            let listener = broker.bind().await?;
            let addr = listener.local_addr();
            let serving = broker.env.spawn("serve", Arc::clone(&broker).serve(listener));
            Result::Ok((broker, serving, addr))
        })?;
        Ok(InProcess { runtime, broker, serving, addr, dir: dir.to_path_buf(), disk })
    }

    /// Shuts the broker down cleanly and removes its data folder.
    pub fn stop(self) -> Result<()> {
        self.serving.abort();
        self.runtime.block_on(self.broker.shutdown());
        drop(self.broker);
        self.runtime.shutdown_timeout(Duration::from_secs(5));
        std::fs::remove_dir_all(&self.dir)?;
        Ok(())
    }
}
