//! ApiVersions: the APIs and versions this broker answers.

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::protocol::codec::advertised_versions;

/// Answers ApiVersions (versions outside 0–4 are answered by the codec in the v0 format).
pub fn handle(_request: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = advertised_versions();
    response
}
