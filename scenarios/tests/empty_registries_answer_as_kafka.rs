//! Scenario: DescribeClientQuotas, DescribeUserScramCredentials and ListTransactions are
//! answered as Kafka answers them with no quotas, no SCRAM credentials and no transactions:
//! Kafka's checks of the request with its codes and words, and empty lists where the request is
//! sound — in every version advertised. ListTransactions v2 (a regular expression filter) is
//! not advertised and is refused (the connection closed).

use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeUserScramCredentialsRequest, ListTransactionsRequest,
};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::admin::{call, said};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Kafka's error codes.
const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_REQUEST: i16 = 42;
const RESOURCE_NOT_FOUND: i16 = 91;
const DUPLICATE_RESOURCE: i16 = 92;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A quota filter component: `entity` matched by `match_type`, with `name` as its match string.
fn component(entity: &str, match_type: i8, name: Option<&str>) -> ComponentData {
    let mut c = ComponentData::default();
    c.entity_type = text(entity);
    c.match_type = match_type;
    c._match = name.map(text);
    c
}

/// Kafka's refusal of a request: its code and its words.
type Refusal = (i16, &'static str);

/// Quota filters and Kafka's answer to each: `None` for a sound one (no entries), else the
/// refusal.
fn quota_cases() -> Vec<(Vec<ComponentData>, Option<Refusal>)> {
    vec![
        (vec![], None),
        (vec![component("user", 0, Some("alice"))], None),
        (vec![component("user", 1, None), component("client-id", 2, None)], None),
        (vec![component("ip", 0, Some("10.0.0.1"))], None),
        (vec![component("", 2, None)], Some((INVALID_REQUEST, "Invalid empty entity type."))),
        (
            vec![component("user", 2, None), component("user", 0, Some("bob"))],
            Some((INVALID_REQUEST, "Entity type user cannot appear more than once in the filter.")),
        ),
        (
            vec![component("group", 2, None)],
            Some((UNSUPPORTED_VERSION, "Unsupported entity type group")),
        ),
        (
            vec![component("user", 0, None)],
            Some((
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            )),
        ),
        (
            vec![component("client-id", 1, Some("x"))],
            Some((
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
            )),
        ),
        (
            vec![component("user", 2, Some("x"))],
            Some((
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
            )),
        ),
        (vec![component("user", 7, None)], Some((INVALID_REQUEST, "Unknown match type 7"))),
        (
            vec![component("ip", 2, None), component("user", 2, None)],
            Some((
                INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should not be \
                 used with user or clientId filter component.",
            )),
        ),
    ]
}

fn quotas(c: &mut Cluster) -> Result<(), String> {
    for version in 0..=1 {
        for (components, expected) in quota_cases() {
            for strict in [false, true] {
                let mut request = DescribeClientQuotasRequest::default();
                request.components = components.clone();
                request.strict = strict;
                let answer = call(c, 0, request, version)?;
                let right = match expected {
                    None => {
                        answer.error_code == 0
                            && said(&answer.error_message, "")
                            && answer.entries.as_ref().is_some_and(Vec::is_empty)
                    }
                    Some((code, words)) => {
                        answer.error_code == code
                            && said(&answer.error_message, words)
                            && answer.entries.is_none()
                    }
                };
                ensure(right, || {
                    format!(
                        "DescribeClientQuotas v{version} of {components:?} (strict {strict}): \
                         {answer:?}, expected {expected:?}"
                    )
                })?;
            }
        }
    }
    Ok(())
}

fn scram(c: &mut Cluster) -> Result<(), String> {
    for users in [None, Some(vec![])] {
        let mut request = DescribeUserScramCredentialsRequest::default();
        request.users = users.clone();
        let answer = call(c, 0, request, 0)?;
        ensure(answer.error_code == 0 && answer.results.is_empty(), || {
            format!("DescribeUserScramCredentials of every user ({users:?}): {answer:?}")
        })?;
    }
    let named: Vec<UserName> = ["alice", "bob", "alice", ""]
        .iter()
        .map(|name| {
            let mut u = UserName::default();
            u.name = text(name);
            u
        })
        .collect();
    let mut request = DescribeUserScramCredentialsRequest::default();
    request.users = Some(named);
    let answer = call(c, 0, request, 0)?;
    let results: Vec<(&str, i16, Option<&str>, usize)> = answer
        .results
        .iter()
        .map(|r| {
            (
                r.user.as_str(),
                r.error_code,
                r.error_message.as_ref().map(|m| m.as_str()),
                r.credential_infos.len(),
            )
        })
        .collect();
    let expected = vec![
        (
            "alice",
            DUPLICATE_RESOURCE,
            Some(
                "Cannot describe SCRAM credentials for the same user twice in a single request: \
                 alice",
            ),
            0,
        ),
        (
            "bob",
            RESOURCE_NOT_FOUND,
            Some("Attempt to describe a user credential that does not exist: bob"),
            0,
        ),
        (
            "",
            RESOURCE_NOT_FOUND,
            Some("Attempt to describe a user credential that does not exist: "),
            0,
        ),
    ];
    ensure(answer.error_code == 0 && results == expected, || {
        format!("DescribeUserScramCredentials of alice, bob, alice and \"\": {answer:?}")
    })
}

fn transactions(c: &mut Cluster) -> Result<(), String> {
    for version in 0..=1 {
        // v0 has no duration filter: only its default (-1) encodes there.
        let durations: &[i64] = if version == 0 { &[-1] } else { &[-1, 0, 60_000] };
        for &duration in durations {
            let mut request = ListTransactionsRequest::default();
            request.state_filters = ["Ongoing", "Bogus", "ongoing", "Bogus", "PrepareEpochFence"]
                .iter()
                .map(|s| text(s))
                .collect();
            request.producer_id_filters = vec![kafka_protocol::messages::ProducerId(7)];
            request.duration_filter = duration;
            let answer = call(c, 0, request, version)?;
            let unknown: Vec<&str> =
                answer.unknown_state_filters.iter().map(|s| s.as_str()).collect();
            ensure(
                answer.error_code == 0
                    && unknown == ["Bogus", "ongoing"]
                    && answer.transaction_states.is_empty(),
                || format!("ListTransactions v{version} (duration {duration}): {answer:?}"),
            )?;
        }
        let answer = call(c, 0, ListTransactionsRequest::default(), version)?;
        ensure(
            answer.error_code == 0
                && answer.unknown_state_filters.is_empty()
                && answer.transaction_states.is_empty(),
            || format!("ListTransactions v{version} with no filters: {answer:?}"),
        )?;
    }
    let mut request = ListTransactionsRequest::default();
    request.transactional_id_pattern = Some(text("orders-.*"));
    // As Kafka, a version not advertised is refused by closing the connection (only
    // ApiVersions is answered in a version the client did not ask for).
    let refused = call(c, 0, request, 2);
    ensure(refused.as_ref().is_err_and(|e| e.starts_with("connection failed mid-call")), || {
        format!("ListTransactions v2, which is not advertised: {refused:?}")
    })
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    quotas(&mut c)?;
    scram(&mut c)?;
    transactions(&mut c)?;
    c.watch_verdict()
}

#[test]
fn empty_registries_answer_as_kafka() {
    for_each_seed("empty_registries_answer_as_kafka", 0..2, scenario);
}
