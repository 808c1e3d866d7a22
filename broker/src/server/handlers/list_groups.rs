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
    let filter: Vec<GroupState> = if version >= 4 && !request.states_filter.is_empty() {
        STATES
            .iter()
            .copied()
            .filter(|s| {
                request.states_filter.iter().any(|f| f.as_str().eq_ignore_ascii_case(s.as_str()))
            })
            .collect()
    } else {
        Vec::new()
    };
    let listed = broker.groups.read(|c| c.list_groups(&filter));
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
