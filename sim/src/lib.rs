//! Deterministic simulation of Weir nodes.
//!
//! One OS thread runs a discrete-event executor: ready tasks are polled in an order drawn from
//! the seeded RNG, and when none is ready, time jumps straight to the next timer. Every host has
//! a simulated [`weir::io::Env`] — clock, disk, network, spawner, entropy — whose faults the test
//! controls. One `u64` seed determines the whole run, and every scheduling decision and I/O result
//! is folded into a trace hash that proves it.

pub mod bench;
pub mod checker;
pub mod client;
pub mod clock;
pub mod disk;
pub mod entropy;
mod executor;
pub mod nemesis;
pub mod net;
pub mod node;
mod sim;
pub mod spawn;
mod timer;
pub mod trace;
pub mod workload;
mod world;

pub use disk::DiskFaults;
pub use net::Latency;
pub use node::{Boot, NodeStatus, boot};
pub use sim::{Host, Sim, SimStats};
pub use world::RunOutcome;

/// `WEIR_LOG=<filter>` (e.g. `weir=debug`) prints the nodes' logs to stderr, without wall-clock
/// times. Does nothing without it, or when logging is already set up in this process.
pub fn log_from_env() {
    if let Ok(filter) = std::env::var("WEIR_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .without_time()
            .with_writer(std::io::stderr)
            .try_init();
    }
}
