//! The I/O boundary: every way broker code can reach the outside world.
//!
//! Networking, disk, time, randomness and task spawning are traits here, bundled into one
//! [`Env`]. The production implementation lives in `crate::runtime` (tokio and `std::fs`); the
//! simulated one lives in the `weir-sim` crate. Broker logic receives an `Env` and nothing else,
//! so the same code runs in production and inside a seeded, fault-injecting simulator.
//!
//! This module holds traits and small runtime-agnostic helpers only — no implementation that
//! touches the operating system. Clippy's `disallowed-methods`/`disallowed-types` (see
//! `clippy.toml`) keep OS access out of everything but `runtime/`.

pub mod clock;
pub mod disk;
pub mod entropy;
pub mod net;
pub mod spawn;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use clock::{Clock, Instant, TimedOut, Timeout, timeout};
pub use disk::{Disk, File};
pub use entropy::Entropy;
pub use net::{Conn, Listener, Net};
pub use spawn::{Spawner, TaskHandle, yield_now};

/// A boxed, sendable future: the return type of every asynchronous trait method here.
///
/// Trait objects keep the broker free of a type parameter per I/O service; one allocation per
/// I/O call is noise next to the system call behind it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Everything a node may use to reach the world: one instance per node.
///
/// Cloning is cheap (reference counts). In simulation every node has its own `Env`, so its clock
/// can be skewed, its disk power-failed and its tasks killed independently of other nodes.
#[derive(Clone)]
pub struct Env {
    /// Monotonic and wall time, and timers.
    pub clock: Arc<dyn Clock>,
    /// The node's data folder.
    pub disk: Arc<dyn Disk>,
    /// Listening and connecting.
    pub net: Arc<dyn Net>,
    /// Running concurrent tasks.
    pub spawner: Arc<dyn Spawner>,
    /// Random numbers (seeded per node in simulation).
    pub entropy: Arc<dyn Entropy>,
}

impl Env {
    /// Spawns a named task on this node. See [`Spawner::spawn`].
    pub fn spawn<F>(&self, name: &str, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawner.spawn(name, Box::pin(task))
    }

    /// Spawns a named task at low priority. See [`Spawner::spawn_background`].
    pub fn spawn_background<F>(&self, name: &str, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawner.spawn_background(name, Box::pin(task))
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").finish_non_exhaustive()
    }
}
