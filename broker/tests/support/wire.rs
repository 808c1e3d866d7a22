//! Kafka requests written and answers read by hand over a plain TCP connection, for what the
//! clients cannot send (hostile frames, APIs librdkafka has no call for).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes, encode_request_header_into_buffer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::TestBroker;

/// How long an answer may take.
const WAIT: Duration = Duration::from_secs(10);

/// `body` with its 4-byte length in front.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A whole request frame: header and `body` in `version`.
pub fn request<R: Encodable>(key: ApiKey, version: i16, correlation: i32, body: &R) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation;
    header.client_id = Some(StrBytes::from_static_str("wire-test"));
    let mut buf = BytesMut::new();
    encode_request_header_into_buffer(&mut buf, &header).unwrap();
    body.encode(&mut buf, version).unwrap();
    frame(&buf)
}

/// Reads one response frame, or `None` if the broker closed the connection.
pub async fn read_response(stream: &mut TcpStream) -> Option<Bytes> {
    let read = async {
        let size = stream.read_u32().await.ok()?;
        let mut buf = vec![0u8; size as usize];
        stream.read_exact(&mut buf).await.ok()?;
        Some(Bytes::from(buf))
    };
    tokio::time::timeout(WAIT, read).await.unwrap_or(None)
}

/// A new connection to `broker` that has sent `bytes`.
pub async fn send_raw(broker: &TestBroker, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}
