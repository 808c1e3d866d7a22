//! A real broker for integration tests: the production runtime and disk, on an ephemeral
//! loopback port, in a scratch folder removed afterwards. Tests drive it with real clients.
#![allow(dead_code, clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use weir::config::BrokerConfig;
use weir::io::TaskHandle;
use weir::node::Broker;
use weir::runtime::production_env;

pub mod wire;

/// A broker running in this process.
pub struct TestBroker {
    pub broker: Arc<Broker>,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    serving: TaskHandle,
    owns_dir: bool,
}

/// A fresh scratch folder.
pub fn scratch() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!("weir-it-{}-{n}-{nanos}", std::process::id()))
}

/// Test settings: fast group rebalances, few offsets partitions.
pub fn config(dir: PathBuf) -> BrokerConfig {
    BrokerConfig {
        listener: SocketAddr::from(([127, 0, 0, 1], 0)),
        data_dir: dir,
        offsets_topic_num_partitions: 4,
        group_initial_rebalance_delay_ms: 0,
        group_min_session_timeout_ms: 1_000,
        log_retention_check_interval_ms: 200,
        ..BrokerConfig::default()
    }
}

impl TestBroker {
    /// Starts a broker in a new scratch folder.
    pub async fn start() -> TestBroker {
        let dir = scratch();
        Self::start_with(config(dir)).await
    }

    /// Starts a broker with `config` (its data folder is removed when the broker is dropped).
    pub async fn start_with(config: BrokerConfig) -> TestBroker {
        let dir = config.data_dir.clone();
        let env = production_env(dir.clone());
        let broker = Broker::start(env, config).await.unwrap();
        let listener = broker.bind().await.unwrap();
        assert!(broker.wait_ready(std::time::Duration::from_secs(30)).await, "broker never ready");
        let addr = listener.local_addr();
        let serving = broker.env.spawn("serve", Arc::clone(&broker).serve(listener));
        TestBroker { broker, addr, dir, serving, owns_dir: true }
    }

    /// `host:port` for client configuration.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// Stops serving (as a crash: nothing is flushed) and returns the data folder and port.
    pub fn crash(mut self) -> (PathBuf, SocketAddr) {
        self.serving.abort();
        self.owns_dir = false;
        (self.dir.clone(), self.addr)
    }

    /// Shuts down cleanly and returns the data folder and port.
    pub async fn stop(mut self) -> (PathBuf, SocketAddr) {
        self.serving.abort();
        self.broker.shutdown().await;
        self.owns_dir = false;
        (self.dir.clone(), self.addr)
    }

    /// Starts a broker again over a data folder, on the same port.
    pub async fn restart(dir: PathBuf, addr: SocketAddr) -> TestBroker {
        let mut config = config(dir);
        config.listener = addr;
        Self::start_with(config).await
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.serving.abort();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
