//! Kafka requests written and answers read by hand on a simulated connection, for scenarios
//! about connections themselves rather than what a client does with them.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::AsyncReadExt;
use weir::io::Conn;

/// One request frame: size, header (v1 or v2 as the API's version needs), body; empty if the
/// body cannot be encoded at `version`.
pub fn frame<R: Encodable>(key: ApiKey, version: i16, correlation: i32, body: &R) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation;
    header.client_id = Some(StrBytes::from_static_str("scenario"));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    let encoded = header
        .encode(&mut buf, key.request_header_version(version))
        .and_then(|()| body.encode(&mut buf, version));
    if encoded.is_err() {
        return Vec::new();
    }
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.to_vec()
}

/// Reads one response frame; `None` at end of stream or on an error.
pub async fn answer(conn: &mut Box<dyn Conn>) -> Option<Vec<u8>> {
    let size = usize::try_from(conn.read_i32().await.ok()?).ok()?;
    let mut body = vec![0u8; size];
    conn.read_exact(&mut body).await.ok()?;
    Some(body)
}
