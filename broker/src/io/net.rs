//! Networking: listening and connecting with TCP-like byte streams.
//!
//! A [`Conn`] is an ordered, reliable byte stream (tokio's `AsyncRead`/`AsyncWrite`). Bytes are
//! never reordered or lost in the middle of a stream; a network fault shows up as delay or as the
//! whole connection failing (`ConnectionReset`, `BrokenPipe`, or end of stream). Addresses are
//! `SocketAddr`s: in production real IPs, in simulation one IP per node.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncWrite};

use super::BoxFuture;

/// A node's network stack.
pub trait Net: Send + Sync {
    /// Listens on `addr`; port 0 picks a free port (see [`Listener::local_addr`]).
    /// `AddrInUse` if something already listens there.
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Listener>>>;

    /// Opens a connection to `addr`. `ConnectionRefused` if nothing listens there; `TimedOut`
    /// if the peer cannot be reached. Callers wanting a shorter bound wrap it in a timeout.
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Conn>>>;
}

/// A bound listening socket. Dropping it stops listening.
pub trait Listener: Send + Sync {
    /// Waits for the next incoming connection and returns it with the peer's address.
    ///
    /// `NotConnected` means the listener is closed for good. Any other error is about this
    /// attempt alone (too many open files, a connection reset before it was accepted): the
    /// listener still listens, and a later call may succeed.
    fn accept(&self) -> BoxFuture<'_, io::Result<(Box<dyn Conn>, SocketAddr)>>;

    /// The address actually bound (with the chosen port when 0 was asked for).
    fn local_addr(&self) -> SocketAddr;
}

/// One end of an established connection. Dropping it closes the connection: the peer reads
/// end of stream once everything sent before has arrived — even bytes still held up by a
/// network partition, which arrive when it heals.
pub trait Conn: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {
    /// Closes the connection abortively (TCP's reset, `SO_LINGER` 0): bytes written but not
    /// yet delivered to the peer are discarded, never to arrive, and the peer's reads fail.
    /// For a request given up on, which must not reach its peer later.
    fn abort(self: Box<Self>);
}
