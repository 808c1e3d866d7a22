//! JoinGroup: through the group coordinator; the reply waits for the rebalance's join phase.

use std::sync::Arc;

use bytes::Bytes;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::group_common::{from_opt, group_id, member_group_error, string, unavailable};
use crate::coordinator::{self, JoinRequest, MemberId, Protocol, Response};
use crate::node::Broker;

/// Answers JoinGroup.
pub async fn handle(
    broker: &Arc<Broker>,
    request: JoinGroupRequest,
    version: i16,
    client: (String, String),
) -> JoinGroupResponse {
    let req = JoinRequest {
        version,
        group_id: group_id(&request.group_id),
        member_id: MemberId(string(&request.member_id)),
        instance_id: from_opt(&request.group_instance_id).map(coordinator::InstanceId),
        client_id: client.0,
        client_host: client.1,
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: string(&request.protocol_type),
        protocols: request
            .protocols
            .iter()
            // Copied: the group keeps it, and a slice would keep the whole request frame.
            .map(|p| Protocol::new(p.name.to_string(), Bytes::copy_from_slice(&p.metadata)))
            .collect(),
        reason: from_opt(&request.reason),
    };
    let mut out = JoinGroupResponse::default();
    if version < 7 {
        out.protocol_name = Some(StrBytes::default());
    }
    if let Some(error) = member_group_error(broker, &req.group_id.0) {
        out.error_code = error.code();
        return out;
    }
    let group = [req.group_id.clone()];
    match broker.groups.call(&group, |c, id, now| c.join(id, req, now)).await {
        Ok(Response::Join(joined)) => {
            out.error_code = coordinator::error_code(joined.error);
            out.generation_id = joined.generation.0;
            if version >= 7 {
                out.protocol_type = joined.protocol_type.map(StrBytes::from_string);
            }
            out.protocol_name =
                Some(StrBytes::from_string(joined.protocol_name.unwrap_or_default()))
                    .filter(|name| version < 7 || !name.is_empty());
            out.leader = StrBytes::from_string(joined.leader.0);
            out.skip_assignment = version >= 9 && joined.skip_assignment;
            out.member_id = StrBytes::from_string(joined.member_id.0);
            out.members = joined
                .members
                .into_iter()
                .map(|m| {
                    let mut member = JoinGroupResponseMember::default();
                    member.member_id = StrBytes::from_string(m.member_id.0);
                    if version >= 5 {
                        member.group_instance_id =
                            m.instance_id.map(|i| StrBytes::from_string(i.0));
                    }
                    member.metadata = m.metadata;
                    member
                })
                .collect();
        }
        Ok(_) => out.error_code = unavailable(),
        Err(refused) => out.error_code = refused.code(),
    }
    out
}
