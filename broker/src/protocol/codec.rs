//! Request decoding and response encoding.
//!
//! The header is parsed here, with the header version the API and version call for; the body
//! only when Weir advertises that API at that version. Everything read comes from a frame whose
//! size was already bounded.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader, api_versions_response::ApiVersion,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::api::{Request, Response, SUPPORTED_APIS, supported_range};
use super::frame::{FRAME_SIZE_BYTES, frame};
use super::pieces::{Frame, Pieces, SHARE_MIN_BYTES};

/// Kafka's UNSUPPORTED_VERSION error code.
pub const UNSUPPORTED_VERSION: i16 = 35;

/// A request ready to be handled.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The request's header (API key, version, correlation id, client id).
    pub header: RequestHeader,
    /// The decoded body.
    pub request: Request,
}

/// Why a request could not be decoded, and what the connection should do about it.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Too short to hold a request header.
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    /// An API key Kafka does not define, or Weir does not answer. The connection is closed.
    #[error("unknown or unsupported API key {0}")]
    UnknownApi(i16),
    /// A known API at a version Weir does not advertise. `reply`, when present, is the
    /// UNSUPPORTED_VERSION answer to send (ApiVersions gets one in the v0 format, so that newer
    /// clients fall back); otherwise the connection is closed.
    #[error("unsupported version {version} of {key:?}")]
    UnsupportedVersion {
        /// The API.
        key: ApiKey,
        /// The version asked for.
        version: i16,
        /// The framed answer, if one can be given.
        reply: Option<Bytes>,
    },
    /// The header or body does not parse. The connection is closed.
    #[error("malformed {key:?} v{version} request")]
    Malformed {
        /// The API.
        key: ApiKey,
        /// The version.
        version: i16,
    },
}

/// Decodes one request frame.
pub fn decode_request(frame: Bytes) -> Result<Decoded, DecodeError> {
    const FIXED_HEADER_BYTES: usize = 8;
    if frame.len() < FIXED_HEADER_BYTES {
        return Err(DecodeError::TooShort(frame.len()));
    }
    let mut peek = &frame[..FIXED_HEADER_BYTES];
    let (raw_key, version, correlation_id) = (peek.get_i16(), peek.get_i16(), peek.get_i32());
    let key = ApiKey::try_from(raw_key).map_err(|_| DecodeError::UnknownApi(raw_key))?;
    let Some(range) = supported_range(key) else { return Err(DecodeError::UnknownApi(raw_key)) };
    if version < range.min || version > range.max {
        let reply = (key == ApiKey::ApiVersions).then(|| unsupported_api_versions(correlation_id));
        return Err(DecodeError::UnsupportedVersion { key, version, reply });
    }
    let malformed = DecodeError::Malformed { key, version };
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|_| DecodeError::Malformed { key, version })?;
    let request = match Request::decode(key, version, &mut body) {
        Some(Ok(request)) => request,
        Some(Err(error)) => {
            tracing::debug!(?key, version, "undecodable request: {}", error.0);
            return Err(malformed);
        }
        None => return Err(DecodeError::UnknownApi(raw_key)),
    };
    Ok(Decoded { header, request })
}

/// Encodes and frames a response to a request with `header`. A fetch's record batches are not
/// copied into the frame: it references them, and the socket write gathers them (see
/// [`Pieces`]).
pub fn encode_response(header: &RequestHeader, response: &Response) -> Option<Frame> {
    let key = response.key();
    let version = header.request_api_version;
    let mut response_header = ResponseHeader::default();
    response_header.correlation_id = header.correlation_id;
    let header_version = key.response_header_version(version);
    // Sized up front, so that the buffer never grows (copying what it holds).
    let body_bytes = response_header
        .compute_size(header_version)
        .ok()
        .zip(response.compute_size(version).ok())
        .map_or(256, |(h, b)| h + b);
    let mut buf = Pieces::new(FRAME_SIZE_BYTES + body_bytes, shared_fields(response));
    let encoded = response_header
        .encode(&mut buf, header_version)
        .map_err(|e| e.to_string())
        .and_then(|()| response.encode(&mut buf, version).map_err(|e| e.0));
    match encoded {
        Ok(()) => buf.finish(),
        Err(error) => {
            tracing::error!(?key, version, "cannot encode response: {error}");
            None
        }
    }
}

/// The fields of `response` worth referencing rather than copying: a fetch's record batches.
fn shared_fields(response: &Response) -> Vec<Bytes> {
    let Response::Fetch(fetch) = response else { return Vec::new() };
    fetch
        .responses
        .iter()
        .flat_map(|topic| &topic.partitions)
        .filter_map(|partition| partition.records.clone())
        .filter(|records| records.len() >= SHARE_MIN_BYTES)
        .collect()
}

/// The list of APIs and versions Weir advertises, for ApiVersions.
pub fn advertised_versions() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|(key, range)| {
            let mut api = ApiVersion::default();
            api.api_key = *key as i16;
            api.min_version = range.min;
            api.max_version = range.max;
            api
        })
        .collect()
}

/// UNSUPPORTED_VERSION in the ApiVersions v0 format (response header v0, body v0), listing
/// what is supported: the reply Kafka gives so that a client falls back to a version both know.
fn unsupported_api_versions(correlation_id: i32) -> Bytes {
    let mut body = ApiVersionsResponse::default();
    body.error_code = UNSUPPORTED_VERSION;
    body.api_keys = advertised_versions();
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let mut buf = BytesMut::new();
    // Both encodings are of fixed, valid values: they cannot fail.
    let encoded = header.encode(&mut buf, 0).and_then(|()| body.encode(&mut buf, 0));
    debug_assert!(encoded.is_ok());
    frame(&buf)
}

/// The client id of a request, for logs.
pub fn client_id(header: &RequestHeader) -> &str {
    header.client_id.as_ref().map_or("", StrBytes::as_str)
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};

    use super::*;

    fn fetch_response(records: &[Bytes]) -> Response {
        let partitions = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_high_watermark(100)
                    .with_records(Some(r.clone()))
            })
            .collect();
        let topic = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(partitions);
        Response::Fetch(FetchResponse::default().with_responses(vec![topic]))
    }

    #[test]
    fn a_fetch_response_references_its_records_and_encodes_as_a_plain_buffer_would() {
        let big: Bytes = (0..3 * SHARE_MIN_BYTES).map(|i| i as u8).collect::<Vec<_>>().into();
        let small = Bytes::from_static(b"a few bytes of records");
        let response = fetch_response(&[big.clone(), small, big.slice(SHARE_MIN_BYTES..)]);
        for version in [4, 11, 12, 16] {
            let mut header = RequestHeader::default();
            header.request_api_key = ApiKey::Fetch as i16;
            header.request_api_version = version;
            header.correlation_id = 77;
            let frame = encode_response(&header, &response).expect("encodes");
            let referenced: Vec<_> = frame.pieces().iter().map(|p| p.as_ptr()).collect();
            assert!(referenced.contains(&big.as_ptr()), "v{version}: records were copied");
            assert!(referenced.contains(&big[SHARE_MIN_BYTES..].as_ptr()), "v{version}");

            let mut plain = BytesMut::new();
            plain.put_u32(0);
            ResponseHeader::default()
                .with_correlation_id(77)
                .encode(&mut plain, ApiKey::Fetch.response_header_version(version))
                .expect("header");
            response.encode(&mut plain, version).expect("body");
            let size = (plain.len() - FRAME_SIZE_BYTES) as u32;
            plain[..FRAME_SIZE_BYTES].copy_from_slice(&size.to_be_bytes());
            assert_eq!(frame.to_bytes(), plain.freeze(), "v{version}");
        }
    }
}
