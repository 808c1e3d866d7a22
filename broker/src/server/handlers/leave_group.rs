//! LeaveGroup: one member (before v3) or a batch of members, by member or instance id.

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::group_common::{from_opt, group_id, member_group_error, string, unavailable};
use crate::coordinator::{self, InstanceId, LeaveRequest, LeavingMember, MemberId, Response};
use crate::node::Broker;

/// Answers LeaveGroup.
pub async fn handle(
    broker: &Arc<Broker>,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let members = if version < 3 {
        vec![LeavingMember {
            member_id: MemberId(string(&request.member_id)),
            instance_id: None,
            reason: None,
        }]
    } else {
        request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: MemberId(string(&m.member_id)),
                instance_id: from_opt(&m.group_instance_id).map(InstanceId),
                reason: from_opt(&m.reason),
            })
            .collect()
    };
    let req = LeaveRequest { group_id: group_id(&request.group_id), members };
    let mut out = LeaveGroupResponse::default();
    if let Some(error) = member_group_error(broker, &req.group_id.0) {
        out.error_code = error.code();
        return out;
    }
    let group = [req.group_id.clone()];
    match broker.groups.call(&group, |c, id, now| c.leave(id, req, now)).await {
        Ok(Response::Leave(left)) => {
            let first_member_error = left.members.first().and_then(|m| m.error);
            // Before v3 the one member's outcome is the response's error.
            out.error_code = coordinator::error_code(if version < 3 {
                left.error.or(first_member_error)
            } else {
                left.error
            });
            if version >= 3 {
                out.members = left
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut r = MemberResponse::default();
                        r.member_id = StrBytes::from_string(m.member_id.0);
                        r.group_instance_id = m.instance_id.map(|i| StrBytes::from_string(i.0));
                        r.error_code = coordinator::error_code(m.error);
                        r
                    })
                    .collect();
            }
        }
        Ok(_) => out.error_code = unavailable(),
        Err(refused) => out.error_code = refused.code(),
    }
    out
}
