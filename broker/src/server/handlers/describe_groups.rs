//! DescribeGroups: state, protocol and members of each group. An unknown group is reported
//! Dead with no members, as Kafka does.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::group_common::group_id;
use super::{authorized, coordinator_error};
use crate::node::Broker;

/// Answers DescribeGroups.
pub fn handle(
    broker: &Arc<Broker>,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let ids: Vec<_> = request.groups.iter().map(group_id).collect();
    let mut out = DescribeGroupsResponse::default();
    for id in ids {
        if let Some(error) = coordinator_error(broker, &id.0) {
            let mut g = DescribedGroup::default();
            g.group_id = kafka_protocol::messages::GroupId(StrBytes::from_string(id.0));
            g.error_code = error.code();
            out.groups.push(g);
            continue;
        }
        let described =
            broker.groups.read_group(&id, |c| c.describe_groups(std::slice::from_ref(&id)));
        let Some(group) = described.map(|d| d.into_iter().next()) else {
            // Given up since the check above.
            let mut g = DescribedGroup::default();
            g.group_id = kafka_protocol::messages::GroupId(StrBytes::from_string(id.0));
            g.error_code = ResponseError::NotCoordinator.code();
            out.groups.push(g);
            continue;
        };
        let Some(group) = group else { continue };
        let mut g = DescribedGroup::default();
        g.group_id = kafka_protocol::messages::GroupId(StrBytes::from_string(group.group_id.0));
        if version >= 3 {
            g.authorized_operations =
                authorized::if_asked(request.include_authorized_operations, authorized::GROUP);
        }
        g.group_state = StrBytes::from_static_str(group.state.as_str());
        g.protocol_type = StrBytes::from_string(group.protocol_type);
        g.protocol_data = StrBytes::from_string(group.protocol_data);
        g.members = group
            .members
            .into_iter()
            .map(|m| {
                let mut member = DescribedGroupMember::default();
                member.member_id = StrBytes::from_string(m.member_id.0);
                if version >= 4 {
                    member.group_instance_id = m.instance_id.map(|i| StrBytes::from_string(i.0));
                }
                member.client_id = StrBytes::from_string(m.client_id);
                member.client_host = StrBytes::from_string(m.client_host);
                member.member_metadata = m.metadata;
                member.member_assignment = m.assignment;
                member
            })
            .collect();
        out.groups.push(g);
    }
    out
}
