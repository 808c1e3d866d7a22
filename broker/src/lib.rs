//! Weir: a Kafka-compatible, durable, partitioned, replicated log broker.
//!
//! Every effect on the outside world goes through [`io::Env`]; [`runtime`] is the production
//! implementation and the `weir-sim` crate the simulated one. See DESIGN.md for the map.

pub mod catalog;
pub mod client;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod fetcher;
pub mod groups;
pub mod identity;
pub mod io;
pub mod log;
pub mod model;
pub mod node;
pub mod partition;
pub mod producer_ids;
pub mod protocol;
pub mod replication;
pub mod runtime;
pub mod scrub;
pub mod server;
pub mod topics;
