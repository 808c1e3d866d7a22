//! Workloads: the applications a simulation runs, each with its own history and checker.

pub mod broker;
pub mod cluster;
pub mod echo;
pub mod log;
