//! Scenario: with no authorizer, DescribeAcls, CreateAcls and DeleteAcls are answered as Kafka
//! answers them on a broker without one: SECURITY_DISABLED, with Kafka's messages, for the
//! request (DescribeAcls, no resources) or for each creation and each filter, in order (none
//! matched) — in every version advertised.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::admin::{call, said};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// SECURITY_DISABLED.
const SECURITY_DISABLED: i16 = 54;
/// Kafka's words for it in DescribeAcls, and in CreateAcls' and DeleteAcls' results.
const NO_AUTHORIZER_DESCRIBE: &str = "No Authorizer is configured on the broker";
const NO_AUTHORIZER_CHANGE: &str = "No Authorizer is configured.";
/// The versions each of the three APIs is advertised in.
const VERSIONS: std::ops::RangeInclusive<i16> = 1..=3;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    for version in VERSIONS {
        let mut describe = DescribeAclsRequest::default();
        describe.resource_type_filter = 1; // ANY
        describe.pattern_type_filter = 1; // ANY
        describe.operation = 1; // ANY
        describe.permission_type = 1; // ANY
        let answer = call(&mut c, 0, describe, version)?;
        ensure(
            answer.error_code == SECURITY_DISABLED
                && said(&answer.error_message, NO_AUTHORIZER_DESCRIBE)
                && answer.resources.is_empty(),
            || format!("DescribeAcls v{version}: {answer:?}"),
        )?;

        let creations: Vec<AclCreation> = ["a", "b"]
            .iter()
            .map(|name| {
                let mut a = AclCreation::default();
                a.resource_type = 2; // TOPIC
                a.resource_name = text(name);
                a.resource_pattern_type = 3; // LITERAL
                a.principal = text("User:alice");
                a.host = text("*");
                a.operation = 3; // READ
                a.permission_type = 3; // ALLOW
                a
            })
            .collect();
        let mut create = CreateAclsRequest::default();
        create.creations = creations;
        let answer = call(&mut c, 0, create, version)?;
        ensure(
            answer.results.len() == 2
                && answer.results.iter().all(|r| {
                    r.error_code == SECURITY_DISABLED
                        && said(&r.error_message, NO_AUTHORIZER_CHANGE)
                }),
            || format!("CreateAcls v{version} of two: {answer:?}"),
        )?;

        let filters: Vec<DeleteAclsFilter> = (0..3)
            .map(|_| {
                let mut f = DeleteAclsFilter::default();
                f.resource_type_filter = 1;
                f.pattern_type_filter = 1;
                f.operation = 1;
                f.permission_type = 1;
                f
            })
            .collect();
        let mut delete = DeleteAclsRequest::default();
        delete.filters = filters;
        let answer = call(&mut c, 0, delete, version)?;
        ensure(
            answer.filter_results.len() == 3
                && answer.filter_results.iter().all(|r| {
                    r.error_code == SECURITY_DISABLED
                        && said(&r.error_message, NO_AUTHORIZER_CHANGE)
                        && r.matching_acls.is_empty()
                }),
            || format!("DeleteAcls v{version} of three filters: {answer:?}"),
        )?;
    }
    c.watch_verdict()
}

#[test]
fn acl_requests_answer_security_disabled() {
    for_each_seed("acl_requests_answer_security_disabled", 0..2, scenario);
}
