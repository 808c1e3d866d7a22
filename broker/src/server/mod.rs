//! Client connections: frames in, responses out in request order.
//!
//! Requests on one connection are handled one after another up to the point where a handler has
//! done its ordered work (an append takes its offsets); what is left — waiting for a sync, a
//! fetch's long poll — runs while the next request is handled. Responses still leave in request
//! order, as Kafka's clients require. A malformed frame closes its connection with a log line,
//! once the answers owed for the requests before it are written; no other connection notices.
//! So does a connection left idle (see [`idle`]). A peer that closed or reset its connection is
//! owed nothing: the answers still pending for it are dropped at once, as Kafka drops them.

pub mod accept;
pub mod connections;
pub mod handlers;
pub mod idle;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use self::connections::OpenConnection;
use self::idle::{Activity, IdleReader};
use crate::io::{BoxFuture, Conn};
use crate::node::Broker;
use crate::protocol::{
    DecodeError, Frame, FrameError, decode_request, encode_response, read_frame,
};

/// Responses a connection may owe at once (requests read ahead of their answers).
pub const CONNECTION_IN_FLIGHT_MAX: usize = 16;

/// What a handler gives back.
pub enum Reply {
    /// A response, ready now.
    Now(crate::protocol::Response),
    /// A response that completes later (after a sync, a long poll or a rebalance).
    Later(BoxFuture<'static, Option<crate::protocol::Response>>),
    /// No response at all (produce with acks=0), possibly after more work.
    Silent(Option<BoxFuture<'static, ()>>),
}

/// What the writer does next.
enum Outgoing {
    /// Send this frame.
    Frame(Frame),
    /// A response could not be encoded: close the connection so the client retries, rather
    /// than leave it waiting.
    Close,
}

impl Outgoing {
    fn encode(
        header: &kafka_protocol::messages::RequestHeader,
        response: &crate::protocol::Response,
    ) -> Outgoing {
        encode_response(header, response).map_or(Outgoing::Close, Outgoing::Frame)
    }
}

/// Serves one client connection until it closes or misbehaves.
pub async fn serve_connection(
    broker: Arc<Broker>,
    conn: Box<dyn Conn>,
    peer: SocketAddr,
    open: OpenConnection,
) {
    // Open while either half runs: the writer may still owe answers once the reader stopped.
    let open = Arc::new(open);
    let (reader, mut writer) = tokio::io::split(conn);
    let activity = Arc::new(Activity::default());
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
    let clock = Arc::clone(&broker.env.clock);
    let mut reader = IdleReader::new(reader, Arc::clone(&clock), idle, Arc::clone(&activity));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<BoxFuture<'static, Option<Outgoing>>>(
        CONNECTION_IN_FLIGHT_MAX,
    );
    let (paid, writer_open) = (Arc::clone(&activity), Arc::clone(&open));
    broker.env.spawn("connection-writer", async move {
        let _open = writer_open;
        // Each step ends early once the peer has left: nothing is owed to a peer that is gone.
        let left = Arc::clone(&paid);
        loop {
            let next = tokio::select! {
                biased;
                () = left.left() => return paid.writer_gone(clock.now()),
                next = rx.recv() => next,
            };
            let Some(pending) = next else { break };
            let outgoing = tokio::select! {
                biased;
                () = left.left() => return paid.writer_gone(clock.now()),
                outgoing = pending => outgoing,
            };
            let mut frame = match outgoing {
                Some(Outgoing::Frame(frame)) => frame,
                Some(Outgoing::Close) => break,
                None => {
                    paid.paid(clock.now());
                    continue;
                }
            };
            // One gathered write per socket call: a fetch's records go out from where they
            // were read, not from a copy.
            let written = tokio::select! {
                biased;
                () = left.left() => return paid.writer_gone(clock.now()),
                written = writer.write_all_buf(&mut frame) => written,
            };
            if written.is_err() {
                paid.writer_gone(clock.now());
                return;
            }
            paid.paid(clock.now());
        }
        paid.writer_gone(clock.now());
        let _ = writer.shutdown().await;
    });
    let max_bytes = broker.config.socket_request_max_bytes;
    let _open = open;
    loop {
        let frame = match read_frame(&mut reader, max_bytes).await {
            Ok(frame) => frame,
            Err(FrameError::Closed) => return activity.peer_left(),
            Err(error @ FrameError::Io(_)) => {
                tracing::info!(%peer, "closing connection: {error}");
                return activity.peer_left();
            }
            Err(error) => {
                tracing::info!(%peer, "closing connection: {error}");
                return;
            }
        };
        let decoded = match decode_request(frame) {
            Ok(decoded) => decoded,
            Err(DecodeError::UnsupportedVersion { reply: Some(bytes), key, version }) => {
                tracing::debug!(%peer, ?key, version, "unsupported version; answering in the v0 format");
                activity.owe();
                if tx
                    .send(Box::pin(async move { Some(Outgoing::Frame(Frame::whole(bytes))) }))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Err(error) => {
                tracing::info!(%peer, "closing connection: {error}");
                return;
            }
        };
        let header = decoded.header.clone();
        let pending: BoxFuture<'static, Option<Outgoing>> =
            match handlers::handle(&broker, decoded, peer).await {
                Reply::Now(response) => {
                    let out = Outgoing::encode(&header, &response);
                    Box::pin(async move { Some(out) })
                }
                Reply::Later(later) => {
                    Box::pin(async move { later.await.map(|r| Outgoing::encode(&header, &r)) })
                }
                Reply::Silent(work) => Box::pin(async move {
                    if let Some(work) = work {
                        work.await;
                    }
                    None
                }),
            };
        activity.owe();
        if tx.send(pending).await.is_err() {
            return;
        }
    }
}
