//! DescribeClientQuotas, DescribeUserScramCredentials and ListTransactions (`kafka-configs
//! --describe --entity-type clients/users/ips`, `kafka-transactions list`, the admin clients'
//! `describe_client_quotas`, `describe_user_scram_credentials`, `list_transactions`): Weir holds
//! no client quotas, no SCRAM credentials and no transactions, so each is answered as Kafka
//! answers it when it has none — the same checks of the request, with Kafka's codes and words,
//! and an empty list where the request is sound. Nothing changes. Consoles and the `kafka-configs`
//! tool call these as they list a cluster's state; an unsupported API would be an error to them.
//! Setting quotas or credentials (AlterClientQuotas, AlterUserScramCredentials) is not
//! advertised: Weir would not enforce them.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, ListTransactionsRequest, ListTransactionsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::code;

/// The quota entity types Kafka knows (`ClientQuotaEntity`): case-sensitive.
const QUOTA_ENTITY_TYPES: [&str; 3] = ["user", "client-id", "ip"];
/// The IP entity, which Kafka does not let a filter combine with the others.
const QUOTA_ENTITY_IP: &str = "ip";
/// Filter component match types: the entity named, the default entity, any entity.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

/// The transaction states Kafka knows by name (case-sensitive); a state filter naming anything
/// else is answered back in `unknown_state_filters`.
const TRANSACTION_STATES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

fn text(s: String) -> Option<StrBytes> {
    Some(StrBytes::from_string(s))
}

/// Why Kafka refuses a DescribeClientQuotas filter, with its words; `None`: it is sound.
fn quota_filter_error(request: &DescribeClientQuotasRequest) -> Option<(ResponseError, String)> {
    let invalid = |words: String| Some((ResponseError::InvalidRequest, words));
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for component in &request.components {
        let entity = component.entity_type.as_str();
        if entity.is_empty() {
            return invalid("Invalid empty entity type.".to_owned());
        }
        if !seen.insert(entity) {
            return invalid(format!(
                "Entity type {entity} cannot appear more than once in the filter."
            ));
        }
        if !QUOTA_ENTITY_TYPES.contains(&entity) {
            return Some((
                ResponseError::UnsupportedVersion,
                format!("Unsupported entity type {entity}"),
            ));
        }
        let matched = component._match.is_some();
        match component.match_type {
            MATCH_EXACT if !matched => {
                return invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".to_owned(),
                );
            }
            MATCH_DEFAULT if matched => {
                return invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .to_owned(),
                );
            }
            MATCH_ANY if matched => {
                return invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .to_owned(),
                );
            }
            MATCH_EXACT | MATCH_DEFAULT | MATCH_ANY => {}
            other => return invalid(format!("Unknown match type {other}")),
        }
    }
    if seen.contains(QUOTA_ENTITY_IP) && seen.len() > 1 {
        return invalid(
            "Invalid entity filter component combination. IP filter component should not be used \
             with user or clientId filter component."
                .to_owned(),
        );
    }
    None
}

/// Answers DescribeClientQuotas: a filter Kafka would refuse gets its code and words and no
/// entries (null, as Kafka's error answer); a sound one matches nothing here: no error, an
/// empty message (Kafka's default for the field) and an empty list of entries.
pub fn describe_client_quotas(
    request: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let mut response = DescribeClientQuotasResponse::default();
    match quota_filter_error(request) {
        Some((error, words)) => {
            response.error_code = code(error);
            response.error_message = text(words);
            response.entries = None;
        }
        None => {
            response.error_message = text(String::new());
            response.entries = Some(Vec::new());
        }
    }
    response
}

/// Answers DescribeUserScramCredentials: asked for every user (no names, or null), the empty
/// list; asked for named users, one result per distinct name, in the order first named: a name
/// given more than once is DUPLICATE_RESOURCE, any other RESOURCE_NOT_FOUND (no user has
/// credentials here), each with Kafka's words and no credentials.
pub fn describe_user_scram_credentials(
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let names: Vec<&StrBytes> = request.users.iter().flatten().map(|u| &u.name).collect();
    let mut response = DescribeUserScramCredentialsResponse::default();
    response.error_message = text(String::new());
    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &names {
        *times.entry(name.as_str()).or_default() += 1;
    }
    let mut answered: BTreeSet<&str> = BTreeSet::new();
    for name in &names {
        if !answered.insert(name.as_str()) {
            continue;
        }
        let twice = times.get(name.as_str()).is_some_and(|&n| n > 1);
        let mut result = DescribeUserScramCredentialsResult::default();
        result.user = (*name).clone();
        if twice {
            result.error_code = code(ResponseError::DuplicateResource);
            result.error_message = text(format!(
                "Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
            ));
        } else {
            result.error_code = code(ResponseError::ResourceNotFound);
            result.error_message =
                text(format!("Attempt to describe a user credential that does not exist: {name}"));
        }
        response.results.push(result);
    }
    response
}

/// Answers ListTransactions: no transactions (Weir refuses transactional producers), and each
/// distinct state filter that is not one of Kafka's state names back in
/// `unknown_state_filters`. The producer-id and duration filters only narrow a list that is
/// already empty; Kafka does not check them either.
pub fn list_transactions(request: &ListTransactionsRequest) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for state in &request.state_filters {
        if !TRANSACTION_STATES.contains(&state.as_str()) && seen.insert(state.as_str()) {
            response.unknown_state_filters.push(state.clone());
        }
    }
    response
}
