//! The production [`Env`]: tokio for tasks, timers and sockets, `std::fs` for storage.
//!
//! This is the only module in `weir` allowed to touch the operating system; clippy's
//! `disallowed-methods`/`disallowed-types` bans are lifted here and nowhere else in the crate.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod alloc;
mod cached;
mod clock;
mod disk;
mod entropy;
mod gathered;
pub mod limits;
mod net;
mod spawn;

use std::path::PathBuf;
use std::sync::Arc;

pub use clock::SystemClock;
pub use disk::FsDisk;
pub use entropy::OsSeededEntropy;
pub use net::TcpNet;
pub use spawn::TokioSpawner;

use crate::io::Env;

/// Builds the production environment for a node whose data lives under `data_dir`.
///
/// Must be called from inside a tokio runtime (tasks are spawned on the current one).
pub fn production_env(data_dir: PathBuf) -> Env {
    Env {
        clock: Arc::new(SystemClock::new()),
        disk: Arc::new(FsDisk::new(data_dir)),
        net: Arc::new(TcpNet),
        spawner: Arc::new(TokioSpawner),
        entropy: Arc::new(OsSeededEntropy::new()),
    }
}

/// Builds the multi-threaded tokio runtime the `weir` binary runs on, and tunes the C
/// allocator for the broker's buffers ([`alloc::keep_freed_buffers`]).
pub fn build_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    alloc::keep_freed_buffers();
    tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("weir").build()
}

/// Logs to standard error; `WEIR_LOG` (or `RUST_LOG`) sets the filter, `info` by default.
/// Colours only when standard error is a terminal, so that a log redirected to a file is plain.
pub fn init_logging() {
    let filter = std::env::var("WEIR_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_owned());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Reads a configuration file.
pub fn read_config_file(path: &std::path::Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            biased;
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
