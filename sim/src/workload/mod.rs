//! Workloads: the applications a simulation runs, each with its own history and checker.

pub mod broker;
pub mod cluster;
mod damage;
pub mod echo;
pub mod hostile;
pub mod log;

use std::time::Duration;

/// The outcome of one seed of a workload that runs Weir itself (the broker and cluster
/// workloads).
#[derive(Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The trace hash at the end.
    pub trace_hash: u64,
    /// Simulated time at the end.
    pub simulated: Duration,
    /// The shape the seed chose.
    pub shape: String,
    /// Counts for the summary line.
    pub counts: String,
    /// Records acknowledged to producers (every one is checked in the final read).
    pub acked: usize,
    /// The faults injected, in order.
    pub faults: Vec<String>,
    /// Violations (empty: passed).
    pub violations: Vec<String>,
}

/// Choices beyond the seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Let the nemesis turn on disk faults: I/O errors, failed syncs, bit flips in reads,
    /// latency.
    pub disk_faults: bool,
}
