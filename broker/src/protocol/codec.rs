//! Request decoding and response encoding.
//!
//! The header is parsed here, with the header version the API and version call for; the body
//! only when Weir advertises that API at that version. Everything read comes from a frame whose
//! size was already bounded.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader, api_versions_response::ApiVersion,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::api::{Request, Response, SUPPORTED_APIS, supported_range};
use super::frame::frame;

/// Bytes of a frame's size prefix.
const FRAME_SIZE_BYTES: usize = 4;

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

/// Encodes and frames a response to a request with `header`.
pub fn encode_response(header: &RequestHeader, response: &Response) -> Option<Bytes> {
    let key = response.key();
    let version = header.request_api_version;
    let mut response_header = ResponseHeader::default();
    response_header.correlation_id = header.correlation_id;
    let header_version = key.response_header_version(version);
    // Sized up front and framed in place: a fetch response is mostly record bytes, copied once
    // into this buffer rather than again on every growth and once more to prefix the size.
    let body_bytes = response_header
        .compute_size(header_version)
        .ok()
        .zip(response.compute_size(version).ok())
        .map_or(256, |(h, b)| h + b);
    let mut buf = BytesMut::with_capacity(FRAME_SIZE_BYTES + body_bytes);
    buf.put_u32(0);
    let encoded = response_header
        .encode(&mut buf, header_version)
        .map_err(|e| e.to_string())
        .and_then(|()| response.encode(&mut buf, version).map_err(|e| e.0));
    match encoded {
        Ok(()) => {
            let size = (buf.len() - FRAME_SIZE_BYTES) as u32;
            buf[..FRAME_SIZE_BYTES].copy_from_slice(&size.to_be_bytes());
            Some(buf.freeze())
        }
        Err(error) => {
            tracing::error!(?key, version, "cannot encode response: {error}");
            None
        }
    }
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
