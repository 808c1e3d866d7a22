//! ListGroups: every group, optionally filtered by state (v4+); while some offsets partition
//! this broker leads is still loading, those known so far with COORDINATOR_LOAD_IN_PROGRESS.

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId as WireGroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::coordinator::GroupState;
use crate::node::Broker;

const STATES: [GroupState; 5] = [
    GroupState::Empty,
    GroupState::PreparingRebalance,
    GroupState::CompletingRebalance,
    GroupState::Stable,
    GroupState::Dead,
];

/// Answers ListGroups.
pub fn handle(
    broker: &Arc<Broker>,
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let filter = if version >= 4 { &request.states_filter[..] } else { &[] };
    let listed = filtered(filter, |states| broker.groups.read(|c| c.list_groups(states)));
    let mut out = ListGroupsResponse::default();
    // As Kafka answers while its groups load: the groups known so far, and the error.
    if broker.groups.loading() {
        out.error_code = super::code(kafka_protocol::ResponseError::CoordinatorLoadInProgress);
    }
    let wants_classic = request.types_filter.is_empty()
        || request.types_filter.iter().any(|t| t.as_str().eq_ignore_ascii_case("classic"));
    if version >= 5 && !wants_classic {
        return out;
    }
    for group in listed {
        let mut g = ListedGroup::default();
        g.group_id = WireGroupId(StrBytes::from_string(group.group_id.0));
        g.protocol_type = StrBytes::from_string(group.protocol_type);
        if version >= 4 {
            g.group_state = StrBytes::from_static_str(group.state.as_str());
        }
        if version >= 5 {
            g.group_type = StrBytes::from_static_str("classic");
        }
        out.groups.push(g);
    }
    out
}

/// What a ListGroups states `filter` lists, given `list` (every group in the states it is
/// given, or in any state for none): every group for an empty filter; else the groups in the
/// states it names, matched ignoring case, and none where it names no state a classic group can
/// be in, as Kafka's answers.
fn filtered<T>(filter: &[StrBytes], list: impl FnOnce(&[GroupState]) -> Vec<T>) -> Vec<T> {
    if filter.is_empty() {
        return list(&[]);
    }
    let named = |s: &GroupState| filter.iter().any(|f| f.as_str().eq_ignore_ascii_case(s.as_str()));
    let states: Vec<GroupState> = STATES.iter().copied().filter(named).collect();
    if states.is_empty() { Vec::new() } else { list(&states) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists the states it is asked for, or "every" for none.
    fn list(states: &[GroupState]) -> Vec<String> {
        if states.is_empty() {
            return vec!["every".to_owned()];
        }
        states.iter().map(|s| s.as_str().to_owned()).collect()
    }

    #[test]
    fn a_states_filter_lists_the_states_it_names_and_none_for_unknown_names() {
        assert_eq!(filtered(&[], list), ["every"]);
        let named = [StrBytes::from_static_str("stable"), StrBytes::from_static_str("Dead")];
        assert_eq!(filtered(&named, list), ["Stable", "Dead"]);
        // Assigning and Reconciling are states of the consumer protocol's groups only.
        let unknown = [StrBytes::from_static_str("Assigning")];
        assert_eq!(filtered(&unknown, list), Vec::<String>::new());
    }
}
