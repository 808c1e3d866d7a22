//! Production networking: tokio TCP with Nagle's algorithm off (Kafka requests are small and
//! latency-sensitive; batching happens in the protocol, not in the kernel).

use std::io;
use std::net::SocketAddr;

use crate::io::{BoxFuture, Conn, Listener, Net};

impl Conn for tokio::net::TcpStream {
    fn abort(self: Box<Self>) {
        // With a zero linger, closing sends a reset and drops what the peer has not
        // acknowledged, instead of retransmitting it until it arrives.
        if let Err(e) = self.set_zero_linger() {
            tracing::debug!("a connection could not be set to reset on close: {e}");
        }
    }
}

/// Real TCP sockets.
pub struct TcpNet;

struct TcpListener(tokio::net::TcpListener, SocketAddr);

impl Net for TcpNet {
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let local = listener.local_addr()?;
            Ok(Box::new(TcpListener(listener, local)) as Box<dyn Listener>)
        })
    }

    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Conn>>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn Conn>)
        })
    }
}

impl Listener for TcpListener {
    fn accept(&self) -> BoxFuture<'_, io::Result<(Box<dyn Conn>, SocketAddr)>> {
        Box::pin(async move {
            let (stream, peer) = self.0.accept().await?;
            // A connection reset before this point may refuse the option; its first read
            // then fails, and that is where its end is noticed.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, "TCP_NODELAY refused: {e}");
            }
            Ok((Box::new(stream) as Box<dyn Conn>, peer))
        })
    }

    fn local_addr(&self) -> SocketAddr {
        self.1
    }
}
