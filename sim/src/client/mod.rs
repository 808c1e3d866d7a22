//! A small Kafka client that runs inside the simulator, over a node's [`weir::io::Env`], built
//! on the broker's own [`weir::client::Connection`].
//!
//! It speaks the wire protocol with the `kafka-protocol` crate at the versions real clients send
//! (DESIGN notes, kafka-clients.md), one request at a time on one connection: no pipelining, so
//! every answer belongs to the request just sent and a failure is attributed exactly. Every call
//! has a deadline; a call that fails after its bytes may have left is reported as
//! indeterminate ([`CallError::is_indeterminate`]) and the connection is dropped, so the next
//! call reconnects and a late answer can never be mistaken for the next one.
//!
//! The operations live beside this file, one concern each: [`admin`] (Metadata, CreateTopics,
//! InitProducerId, ListOffsets, FindCoordinator), [`produce`], [`fetch`], [`group`] (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup), [`offsets`] (OffsetCommit, OffsetFetch) and
//! [`assignment`] (the consumer protocol's subscription and assignment bytes).

pub mod admin;
pub mod assignment;
pub mod error;
pub mod fetch;
pub mod group;
pub mod offsets;
pub mod produce;
pub mod reassign;
pub mod versions;

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use weir::client::Connection;
use weir::io::Env;

pub use error::{CallError, ClientError, codes};

pub use weir::client::{CONNECT_TIMEOUT, RESPONSE_BYTES_MAX};

/// The deadline of an ordinary call (everything but long polls and joins).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to one broker, opened on demand and dropped after any failure.
pub struct Client {
    conn: Connection,
}

impl Client {
    /// A client of the broker at `addr`, naming itself `client_id` in request headers. Nothing
    /// is opened until the first call.
    pub fn new(env: Env, addr: SocketAddr, client_id: &str) -> Client {
        Client { conn: Connection::new(env, addr, client_id) }
    }

    /// The node environment the client runs in.
    pub fn env(&self) -> &Env {
        self.conn.env()
    }

    /// The broker's address.
    pub fn addr(&self) -> SocketAddr {
        self.conn.addr()
    }

    /// Drops the connection; the next call opens a new one.
    pub fn disconnect(&mut self) {
        self.conn.disconnect();
    }

    /// Sends `request` at `version` and waits up to `deadline` for its response.
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        deadline: Duration,
    ) -> Result<R::Response, CallError> {
        self.conn.call(request, version, deadline).await
    }

    /// Sends `request` and expects no response (Produce with acks=0). Success only means the
    /// bytes were handed to the connection.
    pub async fn send_only<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        deadline: Duration,
    ) -> Result<(), CallError> {
        self.conn.send_only(request, version, deadline).await
    }
}
