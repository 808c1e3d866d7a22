//! Partition replication, sans-IO (DESIGN.md §3): state machines that take the clock, fetches
//! and committed metadata as inputs and return what to answer and what to ask the controller
//! for. The shells that fetch, append and call the controller live with the broker.
//!
//! [`leader`]: the leader's view — followers' positions, the ISR, the high watermark, `acks=all`.
//! [`follower`]: where a follower's log diverges from a new leader's (KIP-101, KIP-279).
//! [`catch_up`]: the byte rate followers out of the ISR may copy at.

pub mod catch_up;
pub mod follower;
pub mod leader;

pub use leader::{
    AckStatus, Assignment, IsrProposal, LeaderConfig, LeaderReplica, LogEnds, ReplicationError,
};
