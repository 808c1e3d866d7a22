//! The `weir` binary: `weir serve` runs a broker node. With no arguments it listens on
//! 127.0.0.1:9092 and keeps its data in `./weir-data`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use weir::config::BrokerConfig;
use weir::node::Broker;
use weir::runtime;

/// Huge allocations are lazy, so a hostile array count cannot abort the broker; see
/// `runtime::alloc`.
#[global_allocator]
static ALLOCATOR: runtime::alloc::LazyHugeAlloc = runtime::alloc::LazyHugeAlloc;

#[derive(Parser)]
#[command(name = "weir", version, about = "A Kafka-compatible, durable, replicated log broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a broker node.
    Serve {
        /// A TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The client listener address (overrides the file).
        #[arg(long)]
        listener: Option<std::net::SocketAddr>,
        /// The data folder (overrides the file).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// This node's id (overrides the file).
        #[arg(long)]
        node_id: Option<i32>,
        /// Serve Prometheus metrics over HTTP here (`GET /metrics`; overrides the file).
        #[arg(long)]
        metrics_listener: Option<std::net::SocketAddr>,
    },
}

fn main() -> ExitCode {
    runtime::init_logging();
    let Cli { command: Command::Serve { config, listener, data_dir, node_id, metrics_listener } } =
        Cli::parse();
    let mut settings = match config {
        Some(path) => {
            match runtime::read_config_file(&path).map(|text| BrokerConfig::from_toml(&text)) {
                Ok(Ok(settings)) => settings,
                Ok(Err(e)) => return fail(format!("{}: {e}", path.display())),
                Err(e) => return fail(format!("{}: {e}", path.display())),
            }
        }
        None => BrokerConfig::default(),
    };
    settings.listener = listener.unwrap_or(settings.listener);
    settings.data_dir = data_dir.unwrap_or(settings.data_dir);
    settings.node_id = node_id.unwrap_or(settings.node_id);
    settings.metrics_listener = metrics_listener.or(settings.metrics_listener);
    if let Err(e) = settings.validate() {
        return fail(e.to_string());
    }
    match runtime::limits::raise_open_files() {
        Ok(files) if files.now > files.was => {
            tracing::info!(was = files.was, now = files.now, "raised the limit of open files");
        }
        Ok(files) => tracing::info!(limit = files.now, hard = files.hard, "limit of open files"),
        Err(e) => tracing::warn!("the limit of open files could not be raised: {e}"),
    }
    let rt = match runtime::build_runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(format!("starting the runtime: {e}")),
    };
    rt.block_on(async move {
        let env = runtime::production_env(settings.data_dir.clone());
        let broker = match Broker::start(env, settings).await {
            Ok(broker) => broker,
            Err(e) => return fail(format!("starting the broker: {e}")),
        };
        let listener = match broker.bind().await {
            Ok(listener) => listener,
            Err(e) => return fail(format!("binding {e}")),
        };
        tokio::select! {
            biased;
            () = runtime::shutdown_signal() => {
                tracing::info!("shutting down");
                broker.shutdown().await;
                ExitCode::SUCCESS
            }
            () = serve_when_ready(std::sync::Arc::clone(&broker), listener) => ExitCode::FAILURE,
        }
    })
}

/// Serves clients once the node has joined the cluster (a controller-only node just keeps its
/// controller running).
async fn serve_when_ready(broker: std::sync::Arc<Broker>, listener: Box<dyn weir::io::Listener>) {
    if !broker.config.has_role(weir::config::Role::Broker) {
        return std::future::pending().await;
    }
    while !broker.wait_ready(JOIN_LOG_INTERVAL).await {
        tracing::info!("waiting to join the cluster: the controller quorum is not reachable yet");
    }
    tracing::info!(node = broker.config.node_id, "joined the cluster");
    broker.serve(listener).await
}

/// How often a node still waiting to join the cluster says so.
const JOIN_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

fn fail(message: String) -> ExitCode {
    eprintln!("weir: {message}");
    ExitCode::FAILURE
}
