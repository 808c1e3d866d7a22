//! SyncGroup: the leader's assignment, held until durable, handed to every member.

use std::sync::Arc;

use bytes::Bytes;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::group_common::{from_opt, group_id, member_group_error, string, unavailable};
use crate::coordinator::{self, Generation, InstanceId, MemberId, Response, SyncRequest};
use crate::node::Broker;

/// Answers SyncGroup.
pub async fn handle(
    broker: &Arc<Broker>,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let req = SyncRequest {
        group_id: group_id(&request.group_id),
        generation: Generation(request.generation_id),
        member_id: MemberId(string(&request.member_id)),
        instance_id: from_opt(&request.group_instance_id).map(InstanceId),
        protocol_type: from_opt(&request.protocol_type),
        protocol_name: from_opt(&request.protocol_name),
        assignments: request
            .assignments
            .iter()
            // Copied: the group keeps them, and a slice would keep the whole request frame.
            .map(|a| (MemberId(string(&a.member_id)), Bytes::copy_from_slice(&a.assignment)))
            .collect(),
    };
    let mut out = SyncGroupResponse::default();
    // From v5 both must be given, as Kafka requires before anything else.
    if version >= 5 && (req.protocol_type.is_none() || req.protocol_name.is_none()) {
        out.error_code = ResponseError::InconsistentGroupProtocol.code();
        return out;
    }
    if let Some(error) = member_group_error(broker, &req.group_id.0) {
        out.error_code = error.code();
        return out;
    }
    let group = [req.group_id.clone()];
    match broker.groups.call(&group, |c, id, now| c.sync(id, req, now)).await {
        Ok(Response::Sync(synced)) => {
            out.error_code = coordinator::error_code(synced.error);
            if version >= 5 {
                out.protocol_type = synced.protocol_type.map(StrBytes::from_string);
                out.protocol_name = synced.protocol_name.map(StrBytes::from_string);
            }
            out.assignment = synced.assignment;
        }
        Ok(_) => out.error_code = unavailable(),
        Err(refused) => out.error_code = refused.code(),
    }
    out
}
