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
    let mut ids = Vec::new();
    let mut results = Vec::new();
    for group in request.groups_names.iter().map(group_id) {
        match coordinator_error(broker, &group.0) {
            Some(error) => results.push((group, error.code())),
            None => ids.push(group),
        }
    }
    let mut out = DeleteGroupsResponse::default();
    if !ids.is_empty() {
        let asked = ids.clone();
        match broker.groups.call(&asked, |c, id, now| c.delete_groups(id, ids, now)).await {
            Ok(Response::DeleteGroups(deleted)) => results
                .extend(deleted.groups.into_iter().map(|(g, e)| (g, coordinator::error_code(e)))),
            Ok(_) => results.extend(asked.into_iter().map(|g| (g, unavailable()))),
            Err(refused) => results.extend(asked.into_iter().map(|g| (g, refused.code()))),
        }
    }
    for (group, error_code) in results {
        let mut r = DeletableGroupResult::default();
        r.group_id = WireGroupId(StrBytes::from_string(group.0));
        r.error_code = error_code;
        out.results.push(r);
    }
    out
}
