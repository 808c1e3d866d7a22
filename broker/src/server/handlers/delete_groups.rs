//! DeleteGroups: removes empty groups and their offsets (tombstones in `__consumer_offsets`).

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId as WireGroupId};
use kafka_protocol::protocol::StrBytes;

use super::coordinator_error;
use super::group_common::{group_id, unavailable};
use crate::coordinator::{self, Response};
use crate::node::Broker;

/// Answers DeleteGroups.
pub async fn handle(broker: &Arc<Broker>, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let (ids, refused): (Vec<_>, Vec<_>) = request
        .groups_names
        .iter()
        .map(group_id)
        .partition(|g| coordinator_error(broker, &g.0).is_none());
    let asked = ids.clone();
    let mut out = DeleteGroupsResponse::default();
    let mut results = match broker.groups.call(|c, id, now| c.delete_groups(id, ids, now)).await {
        Ok(Response::DeleteGroups(deleted)) => {
            deleted.groups.into_iter().map(|(g, e)| (g, coordinator::error_code(e))).collect()
        }
        _ => asked.into_iter().map(|g| (g, unavailable())).collect::<Vec<_>>(),
    };
    for group in refused {
        let error = coordinator_error(broker, &group.0).map_or(unavailable(), |e| e.code());
        results.push((group, error));
    }
    for (group, error_code) in results {
        let mut r = DeletableGroupResult::default();
        r.group_id = WireGroupId(StrBytes::from_string(group.0));
        r.error_code = error_code;
        out.results.push(r);
    }
    out
}
