//! DescribeAcls, CreateAcls and DeleteAcls (`kafka-acls`, the admin clients' `describe_acls`,
//! `create_acls`, `delete_acls`): Weir has no authorizer, so each is answered as Kafka answers
//! them on a broker without one — SECURITY_DISABLED for the request (DescribeAcls) or for each
//! creation and each filter (CreateAcls, DeleteAcls) — and nothing changes. Tools that list
//! ACLs as they start (cluster consoles) take that for "no ACLs here"; an unsupported API
//! would be an error to them.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::code;

/// What a DescribeAcls answer says, as Kafka's does.
pub const NO_AUTHORIZER_DESCRIBE: &str = "No Authorizer is configured on the broker";
/// What each CreateAcls and DeleteAcls result says, as Kafka's does (its words differ from
/// DescribeAcls').
pub const NO_AUTHORIZER_CHANGE: &str = "No Authorizer is configured.";

fn message(text: &'static str) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(text))
}

/// Answers DescribeAcls: SECURITY_DISABLED, no resources.
pub fn describe() -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    response.error_code = code(ResponseError::SecurityDisabled);
    response.error_message = message(NO_AUTHORIZER_DESCRIBE);
    response
}

/// Answers CreateAcls: SECURITY_DISABLED for each creation, in order.
pub fn create(request: &CreateAclsRequest) -> CreateAclsResponse {
    let mut response = CreateAclsResponse::default();
    response.results = request
        .creations
        .iter()
        .map(|_| {
            let mut result = AclCreationResult::default();
            result.error_code = code(ResponseError::SecurityDisabled);
            result.error_message = message(NO_AUTHORIZER_CHANGE);
            result
        })
        .collect();
    response
}

/// Answers DeleteAcls: SECURITY_DISABLED for each filter, in order, with nothing matched.
pub fn delete(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    let mut response = DeleteAclsResponse::default();
    response.filter_results = request
        .filters
        .iter()
        .map(|_| {
            let mut result = DeleteAclsFilterResult::default();
            result.error_code = code(ResponseError::SecurityDisabled);
            result.error_message = message(NO_AUTHORIZER_CHANGE);
            result
        })
        .collect();
    response
}
