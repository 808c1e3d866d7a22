//! Kafka requests written and answers read by hand on a simulated connection, for scenarios
//! about connections themselves rather than what a client does with them.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, RequestHeader, TopicName};
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

/// A consumer's Fetch (v12) of partition 0 of `topic` from offset 0 that waits up to `wait`
/// for a byte: a long poll, on an empty partition.
pub fn long_poll(topic: &'static str, wait: Duration) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition_max_bytes = 1 << 20;
    p.current_leader_epoch = -1;
    p.last_fetched_epoch = -1;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_static_str(topic));
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
    r.min_bytes = 1;
    r.max_bytes = 1 << 20;
    r.session_epoch = -1;
    r.topics = vec![t];
    r
}
