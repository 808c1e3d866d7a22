//! Client connections: frames in, responses out in request order.
//!
//! Requests on one connection are handled one after another up to the point where a handler has
//! done its ordered work (an append takes its offsets); what is left — waiting for a sync, a
//! fetch's long poll — runs while the next request is handled. Responses still leave in request
//! order, as Kafka's clients require. A malformed frame closes its connection with a log line,
//! once the answers owed for the requests before it are written; no other connection notices.
//! So does a connection left idle (see [`idle`]). A peer that closed or reset its connection is
//! written nothing more: the connection closes at once and stops counting as open (see
//! [`connections`]). The request being answered still finishes its work (a commit, a join, a
//! produce's sync), its answer discarded; the requests queued behind it are dropped, as Kafka,
//! reading one request of a connection at a time, never reads them (see `drain`).

pub mod accept;
pub mod connections;
pub mod handlers;
pub mod idle;
pub mod memory;
pub mod metrics;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, RequestHeader};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use self::connections::OpenConnection;
use self::idle::{Activity, IdleReader};
use crate::io::{BoxFuture, Conn};
use crate::node::Broker;
use crate::protocol::{
    DecodeError, Frame, FrameError, decode_request, encode_response, read_frame_body,
    read_frame_size,
};

/// Responses a connection may owe at once (requests read ahead of their answers).
pub const CONNECTION_IN_FLIGHT_MAX: usize = 16;
/// Bytes read at a time from a connection whose requests are no longer read.
const DISCARD_CHUNK: usize = 4096;

/// What a handler gives back.
pub enum Reply {
    /// A response, ready now.
    Now(crate::protocol::Response),
    /// A response that completes later (after a sync, a long poll or a rebalance).
    Later(BoxFuture<'static, Option<crate::protocol::Response>>),
    /// No response at all (produce with acks=0), possibly after more work, which says whether
    /// to close the connection instead (a partition failed).
    Silent(Option<BoxFuture<'static, bool>>),
}

/// A request being timed for the metrics: from when it was read until the writer, taking the
/// connection's answers in request order, finds its answer ready (every kind of answer is
/// timed at that same point, whether it was ready at once or waited).
struct Timed {
    metrics: Arc<metrics::Metrics>,
    clock: Arc<dyn crate::io::Clock>,
    key: ApiKey,
    started: crate::io::Instant,
}

impl Timed {
    fn start(broker: &Broker, key: ApiKey) -> Timed {
        let clock = Arc::clone(&broker.env.clock);
        let started = clock.now();
        Timed { metrics: Arc::clone(&broker.metrics), clock, key, started }
    }

    /// The request's answer is ready, and its turn to be written has come (or, for one whose
    /// client left while it was being answered, its work is done). Requests whose answers are
    /// dropped unfinished — a fetch whose client left, those queued behind the one being
    /// answered when a connection closes — are not counted.
    fn done(self) {
        self.metrics.answered(self.key, self.clock.now() - self.started);
    }
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
    fn encode(header: &RequestHeader, response: &crate::protocol::Response) -> Outgoing {
        encode_response(header, response).map_or(Outgoing::Close, Outgoing::Frame)
    }
}

/// An answer a connection owes, in request order.
struct Owed {
    /// The answer, once the request's work is done.
    answer: BoxFuture<'static, Option<Outgoing>>,
    /// Whether the request still has work to do if the connection closes first (a commit, a
    /// join, a produce's sync); a fetch has only its answer to give.
    finish: bool,
}

/// The writer stops for good (its peer left, a write failed, or an answer could not be
/// encoded): the connection closes now and no longer counts as open. The request it was
/// answering, `current`, still finishes its work on a task of its own, its answer discarded,
/// as the request Kafka is handling when its client leaves does. The requests queued behind
/// it are dropped: Kafka, reading one request of a connection at a time, would not have read
/// them, and finished late they could undo what the client did since on a new connection (a
/// commit overwriting a newer one). Their appends are done, and `Partition::produce` sees them
/// synced.
fn drain(
    env: &crate::io::Env,
    activity: &Activity,
    current: Option<Owed>,
    rx: tokio::sync::mpsc::Receiver<Owed>,
) {
    activity.writer_gone(env.clock.now());
    // The reader sends nothing more: its next request finds the connection closed.
    drop(rx);
    if let Some(owed) = current.filter(|owed| owed.finish) {
        env.spawn("connection-drain", async move {
            owed.answer.await;
        });
    }
}

/// After a request that ends the connection, while the writer still writes the answers owed
/// for the requests before it: reads and discards whatever else comes, so that a peer that
/// closes meanwhile is noticed (and stops being owed anything) rather than waited on.
async fn discard_until_closed<R: AsyncRead + Unpin>(reader: &mut R, activity: &Activity) {
    let mut scratch = [0u8; DISCARD_CHUNK];
    loop {
        tokio::select! {
            biased;
            () = activity.writer_stopped() => return,
            read = reader.read(&mut scratch) => match read {
                Ok(0) | Err(_) => return activity.peer_left(),
                Ok(_) => {}
            },
        }
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
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Owed>(CONNECTION_IN_FLIGHT_MAX);
    let (paid, writer_open, env) = (Arc::clone(&activity), Arc::clone(&open), broker.env.clone());
    broker.env.spawn("connection-writer", async move {
        let _open = writer_open;
        // Each step ends early once the peer has left: nothing more is written to a peer that
        // is gone, and the request being answered finishes elsewhere (see `drain`).
        loop {
            let next = tokio::select! {
                biased;
                // The first request queued, if any, is the one being answered.
                () = paid.left() => return drain(&env, &paid, rx.try_recv().ok(), rx),
                next = rx.recv() => next,
            };
            let Some(mut owed) = next else { break };
            let outgoing = tokio::select! {
                biased;
                () = paid.left() => return drain(&env, &paid, Some(owed), rx),
                outgoing = &mut owed.answer => outgoing,
            };
            let mut frame = match outgoing {
                Some(Outgoing::Frame(frame)) => frame,
                Some(Outgoing::Close) => {
                    drain(&env, &paid, None, rx);
                    let _ = writer.shutdown().await;
                    return;
                }
                None => {
                    paid.paid(clock.now());
                    continue;
                }
            };
            // One gathered write per socket call: a fetch's records go out from where they
            // were read, not from a copy.
            let written = tokio::select! {
                biased;
                () = paid.left() => return drain(&env, &paid, None, rx),
                written = writer.write_all_buf(&mut frame) => written,
            };
            if written.is_err() {
                return drain(&env, &paid, None, rx);
            }
            paid.paid(clock.now());
        }
        paid.writer_gone(clock.now());
        let _ = writer.shutdown().await;
    });
    let max_bytes = broker.config.socket_request_max_bytes;
    let _open = open;
    loop {
        // A writer that stopped closes the connection: the reader stops too, even mid-frame.
        let read = tokio::select! {
            biased;
            () = activity.writer_stopped() => return,
            read = read_frame_size(&mut reader, max_bytes) => read,
        };
        let read = match read {
            Ok(len) => {
                // The body is read, and its buffer allocated, only once it fits within
                // `queued_max_request_bytes`.
                let lease = tokio::select! {
                    biased;
                    () = activity.writer_stopped() => return,
                    lease = broker.lease_request_memory(len) => lease,
                };
                tokio::select! {
                    biased;
                    () = activity.writer_stopped() => return,
                    read = read_frame_body(&mut reader, len) => read.map(|frame| (frame, lease)),
                }
            }
            Err(error) => Err(error),
        };
        let (frame, lease) = match read {
            Ok(read) => read,
            Err(FrameError::Closed) => return activity.peer_left(),
            Err(error @ FrameError::Io(_)) => {
                tracing::info!(%peer, "closing connection: {error}");
                return activity.peer_left();
            }
            Err(error) => {
                tracing::info!(%peer, "closing connection: {error}");
                drop(tx);
                return discard_until_closed(&mut reader, &activity).await;
            }
        };
        let decoded = decode_request(frame);
        // A produce's records are slices of its frame, held until they are appended; any
        // other request, or a frame that does not decode, is done with its bytes now (see
        // `memory`).
        let produce = ApiKey::Produce as i16;
        let lease =
            matches!(&decoded, Ok(d) if d.header.request_api_key == produce).then_some(lease);
        let decoded = match decoded {
            Ok(decoded) => decoded,
            Err(DecodeError::UnsupportedVersion { reply: Some(bytes), key, version }) => {
                tracing::debug!(%peer, ?key, version, "unsupported version; answering in the v0 format");
                activity.owe();
                let answer: BoxFuture<'static, Option<Outgoing>> =
                    Box::pin(async move { Some(Outgoing::Frame(Frame::whole(bytes))) });
                if tx.send(Owed { answer, finish: false }).await.is_err() {
                    return;
                }
                continue;
            }
            Err(error) => {
                tracing::info!(%peer, "closing connection: {error}");
                drop(tx);
                return discard_until_closed(&mut reader, &activity).await;
            }
        };
        if tx.is_closed() {
            return;
        }
        // Kept until the answer is written: only what the answer's header needs. The decoded
        // header's client id and tagged fields are slices of the frame, and would keep all of
        // it (a produce's records too) allocated until then.
        let header = RequestHeader::default()
            .with_request_api_key(decoded.header.request_api_key)
            .with_request_api_version(decoded.header.request_api_version)
            .with_correlation_id(decoded.header.correlation_id);
        let finish = header.request_api_key != ApiKey::Fetch as i16;
        let timed = Timed::start(&broker, decoded.request.key());
        let answer: BoxFuture<'static, Option<Outgoing>> =
            match handlers::handle(&broker, decoded, peer).await {
                Reply::Now(response) => {
                    let out = Outgoing::encode(&header, &response);
                    Box::pin(async move {
                        timed.done();
                        Some(out)
                    })
                }
                Reply::Later(later) => Box::pin(async move {
                    let response = later.await;
                    timed.done();
                    response.map(|r| Outgoing::encode(&header, &r))
                }),
                Reply::Silent(work) => Box::pin(async move {
                    let close = match work {
                        Some(work) => work.await,
                        None => false,
                    };
                    timed.done();
                    close.then_some(Outgoing::Close)
                }),
            };
        // A produce's append is done: what is left only waits (a sync, the followers).
        drop(lease);
        activity.owe();
        if tx.send(Owed { answer, finish }).await.is_err() {
            return;
        }
    }
}
