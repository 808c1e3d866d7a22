//! Heartbeat: keeps a member's session alive and tells it when to rejoin.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest as WireHeartbeat, HeartbeatResponse};

use super::group_common::{from_opt, group_id, member_group_error, string, unavailable};
use crate::coordinator::{self, Generation, HeartbeatRequest, InstanceId, MemberId, Response};
use crate::node::Broker;

/// Answers Heartbeat.
pub async fn handle(broker: &Arc<Broker>, request: WireHeartbeat) -> HeartbeatResponse {
    let req = HeartbeatRequest {
        group_id: group_id(&request.group_id),
        generation: Generation(request.generation_id),
        member_id: MemberId(string(&request.member_id)),
        instance_id: from_opt(&request.group_instance_id).map(InstanceId),
    };
    let mut out = HeartbeatResponse::default();
    match member_group_error(broker, &req.group_id.0) {
        // As Kafka's coordinators do: answered blindly while the group loads, so that members
        // do not log and back off for an answer they do not expect (the Java consumer takes
        // it for an unexpected error); the first heartbeat after the load checks them.
        Some(ResponseError::CoordinatorLoadInProgress) => return out,
        Some(error) => {
            out.error_code = error.code();
            return out;
        }
        None => {}
    }
    let group = [req.group_id.clone()];
    out.error_code = match broker.groups.call(&group, |c, id, now| c.heartbeat(id, req, now)).await
    {
        Ok(Response::Heartbeat(beat)) => coordinator::error_code(beat.error),
        Ok(_) => unavailable(),
        Err(refused) => refused.code(),
    };
    out
}
