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
pub use net::{AcceptFault, Latency};
pub use node::{Boot, NodeStatus, boot};
pub use sim::{Host, Sim, SimStats};
pub use world::RunOutcome;

/// The simulated time of the latest clock advance of any simulation in this process, for log
/// lines only (with several simulations running at once it is one of theirs).
static LOG_CLOCK_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Stamps log lines with simulated time.
struct SimulatedTime;

impl tracing_subscriber::fmt::time::FormatTime for SimulatedTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        let nanos = LOG_CLOCK_NANOS.load(std::sync::atomic::Ordering::Relaxed);
        write!(w, "{:>9.3}s", nanos as f64 / 1e9)
    }
}

/// `WEIR_LOG=<filter>` (e.g. `weir=debug`) prints the nodes' logs to stderr, stamped with
/// simulated time. Does nothing without it, or when logging is already set up in this process.
pub fn log_from_env() {
    if let Ok(filter) = std::env::var("WEIR_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_timer(SimulatedTime)
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// Runs one seed's `run`, turning a panic (a broken assertion in the code under test) into an
/// error carrying its message, so that a sweep reports the seed with its replay command instead
/// of dying without naming it. The panic's own message and location still go to stderr.
pub fn catch_panic<T>(run: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        format!("panicked: {message}")
    })
}

#[cfg(test)]
mod tests {
    use super::catch_panic;

    #[test]
    fn a_panicking_run_becomes_an_error_with_its_message() {
        assert_eq!(catch_panic(|| 7), Ok(7));
        let seed = 0x2a;
        let failed = catch_panic(|| -> u32 { panic!("batch at {seed} out of order") });
        assert_eq!(failed, Err("panicked: batch at 42 out of order".to_owned()));
        assert_eq!(catch_panic(|| -> u32 { panic!("static") }), Err("panicked: static".to_owned()));
    }
}
