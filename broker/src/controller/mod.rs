//! The controller: the cluster's metadata kept by a Raft quorum of controller nodes, the way
//! KRaft does it. [`records`] are the metadata log's typed records, [`image`] what applying
//! them gives, [`logic`] the active controller's decisions, all sans-IO.

pub mod client;
pub mod codec;
pub mod image;
pub mod logic;
pub mod membership;
pub mod quorum;
pub mod records;
pub mod rpc;
pub mod rpc_response;
pub mod service;
