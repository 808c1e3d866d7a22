//! A Kafka protocol client over a node's [`crate::io::Env`]: one connection to one broker, one
//! request at a time (no pipelining, so every answer belongs to the request just sent and a
//! failure is attributed exactly). The replica fetcher uses it to fetch from partition leaders,
//! and the simulator's test client builds its operations on it.
//!
//! Every call has a deadline; a call that fails after its bytes may have left is
//! indeterminate ([`CallError::is_indeterminate`]) and the connection is dropped, so the next
//! call reconnects and a late answer can never be mistaken for the next one.

mod error;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{
    Decodable, HeaderVersion, Request, StrBytes, encode_request_header_into_buffer,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::io::{Conn, Env, timeout};

pub use error::CallError;

/// Largest response frame the client accepts.
pub const RESPONSE_BYTES_MAX: usize = 64 << 20;
/// How long opening a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A connection unused for this long is dropped before the next call (Kafka clients'
/// `connections.max.idle.ms`): below the broker's own idle limit (10 minutes by default), so
/// the client, not a call, finds out the broker would have closed it.
pub const CLIENT_IDLE: Duration = Duration::from_secs(540);

/// A connection to one broker, opened on demand and dropped after any failure.
pub struct Connection {
    env: Env,
    addr: SocketAddr,
    client_id: String,
    conn: Option<Box<dyn Conn>>,
    correlation_id: i32,
    /// When the connection last finished an exchange.
    last_used: crate::io::Instant,
}

impl Connection {
    /// A client of the broker at `addr`, naming itself `client_id` in request headers. Nothing
    /// is opened until the first call.
    pub fn new(env: Env, addr: SocketAddr, client_id: &str) -> Connection {
        let last_used = env.clock.now();
        Connection {
            env,
            addr,
            client_id: client_id.to_owned(),
            conn: None,
            correlation_id: 0,
            last_used,
        }
    }

    /// The node environment the client runs in.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The broker's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops the connection; the next call opens a new one.
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    /// Sends `request` at `version` and waits up to `deadline` for its response.
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        deadline: Duration,
    ) -> Result<R::Response, CallError> {
        let frame = self.encode(request, version)?;
        let expect = (self.correlation_id, response_header_version::<R>(version));
        let result = self.exchange(frame, deadline, Some(expect)).await;
        let body = match result {
            Ok(Some(body)) => body,
            Ok(None) => return Err(CallError::BadResponse("no response read".to_owned())),
            Err(e) => {
                self.conn = None;
                return Err(e);
            }
        };
        decode_body::<R>(body, version).inspect_err(|_| self.conn = None)
    }

    /// Sends `request` and expects no response (Produce with acks=0). Success only means the
    /// bytes were handed to the connection.
    pub async fn send_only<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        deadline: Duration,
    ) -> Result<(), CallError> {
        let frame = self.encode(request, version)?;
        self.exchange(frame, deadline, None).await.map(|_| ()).inspect_err(|_| self.conn = None)
    }

    /// The frame of one request: size, header, body.
    fn encode<R: Request>(&mut self, request: &R, version: i16) -> Result<Bytes, CallError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_string(self.client_id.clone()));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        encode_request_header_into_buffer(&mut buf, &header)
            .map_err(|e| CallError::Encode(e.to_string()))?;
        request.encode(&mut buf, version).map_err(|e| CallError::Encode(e.to_string()))?;
        let size = i32::try_from(buf.len() - 4).map_err(|e| CallError::Encode(e.to_string()))?;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        Ok(buf.freeze())
    }

    /// Connects if need be, writes `frame`, and reads the answer when `expect` names its
    /// correlation id and response header version. Returns the response body after its header.
    async fn exchange(
        &mut self,
        frame: Bytes,
        deadline: Duration,
        expect: Option<(i32, i16)>,
    ) -> Result<Option<Bytes>, CallError> {
        let started = self.env.clock.now();
        self.ensure_connected().await?;
        let remaining = deadline.saturating_sub(self.env.clock.now() - started);
        let clock = std::sync::Arc::clone(&self.env.clock);
        let Some(conn) = self.conn.as_mut() else {
            return Err(CallError::Unreachable(std::io::ErrorKind::NotConnected));
        };
        let work = async move {
            conn.write_all(&frame).await.map_err(|e| CallError::Connection(e.kind()))?;
            match expect {
                None => Ok(None),
                Some((correlation_id, header_version)) => {
                    read_response(conn, correlation_id, header_version).await.map(Some)
                }
            }
        };
        let outcome = timeout(&*clock, remaining, work).await;
        self.last_used = self.env.clock.now();
        outcome.map_err(|_| CallError::TimedOut)?
    }

    async fn ensure_connected(&mut self) -> Result<(), CallError> {
        let now = self.env.clock.now();
        if self.conn.is_some() && now.saturating_duration_since(self.last_used) >= CLIENT_IDLE {
            self.conn = None;
        }
        self.last_used = now;
        if self.conn.is_some() {
            return Ok(());
        }
        let conn = timeout(&*self.env.clock, CONNECT_TIMEOUT, self.env.net.connect(self.addr))
            .await
            .map_err(|_| CallError::Unreachable(std::io::ErrorKind::TimedOut))?
            .map_err(|e| CallError::Unreachable(e.kind()))?;
        self.conn = Some(conn);
        Ok(())
    }
}

/// Reads one response frame and checks its header; returns the body.
async fn read_response(
    conn: &mut Box<dyn Conn>,
    correlation_id: i32,
    header_version: i16,
) -> Result<Bytes, CallError> {
    let size = conn.read_i32().await.map_err(|e| CallError::Connection(e.kind()))?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| (4..=RESPONSE_BYTES_MAX).contains(&s))
        .ok_or_else(|| CallError::BadResponse(format!("frame size {size}")))?;
    let mut body = vec![0u8; size];
    conn.read_exact(&mut body).await.map_err(|e| CallError::Connection(e.kind()))?;
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, header_version)
        .map_err(|e| CallError::BadResponse(format!("header: {e}")))?;
    if header.correlation_id != correlation_id {
        return Err(CallError::BadResponse(format!(
            "correlation id {} answers request {correlation_id}",
            header.correlation_id
        )));
    }
    Ok(body)
}

/// The response header version for `R` at `version`.
pub fn response_header_version<R: Request>(version: i16) -> i16 {
    <R::Response as HeaderVersion>::header_version(version)
}

fn decode_body<R: Request>(mut body: Bytes, version: i16) -> Result<R::Response, CallError> {
    let response = R::Response::decode(&mut body, version)
        .map_err(|e| CallError::BadResponse(format!("api {} v{version}: {e}", R::KEY)))?;
    if body.has_remaining() {
        return Err(CallError::BadResponse(format!(
            "api {} v{version}: {} bytes after the body",
            R::KEY,
            body.remaining()
        )));
    }
    Ok(response)
}
