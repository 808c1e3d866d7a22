//! The classic consumer-group membership calls: JoinGroup (with KIP-394's MEMBER_ID_REQUIRED
//! round trip), SyncGroup, Heartbeat and LeaveGroup; and ListGroups.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::error::codes;
use super::{Client, ClientError, REQUEST_TIMEOUT, versions};

/// The consumer protocol type.
pub const PROTOCOL_TYPE: &str = "consumer";
/// The one assignor this client offers.
pub const ASSIGNOR: &str = "roundrobin";

/// Membership settings of a group member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberConfig {
    /// The group.
    pub group: String,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`: how long the coordinator waits for members to rejoin.
    pub rebalance_timeout: Duration,
}

/// A successful join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    /// The generation formed.
    pub generation: i32,
    /// This member's id.
    pub member_id: String,
    /// The leader's member id.
    pub leader: String,
    /// The protocol chosen.
    pub protocol: Option<String>,
    /// Every member with its subscription metadata (only the leader gets them).
    pub members: Vec<(String, Bytes)>,
}

impl Joined {
    /// Whether this member leads the generation (and must compute the assignment).
    pub fn is_leader(&self) -> bool {
        self.member_id == self.leader
    }
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn kafka(code: i16) -> Result<(), ClientError> {
    if code == codes::NONE { Ok(()) } else { Err(ClientError::Kafka(code)) }
}

impl Client {
    /// The groups the broker coordinates, with the answer's error code
    /// (COORDINATOR_LOAD_IN_PROGRESS comes with the groups known so far).
    pub async fn list_groups(&mut self) -> Result<(i16, Vec<String>), ClientError> {
        let request = ListGroupsRequest::default();
        let response = self.call(&request, versions::LIST_GROUPS, REQUEST_TIMEOUT).await?;
        let groups = response.groups.iter().map(|g| g.group_id.0.to_string()).collect();
        Ok((response.error_code, groups))
    }

    /// Joins `config.group` as `member_id` (empty for a new member) with `metadata` as the
    /// subscription. A MEMBER_ID_REQUIRED answer is followed by a second join with the id it
    /// gives, as every client does. The call waits up to the rebalance timeout plus slack.
    pub async fn join_group(
        &mut self,
        config: &MemberConfig,
        member_id: &str,
        metadata: Bytes,
    ) -> Result<Joined, ClientError> {
        let mut member_id = member_id.to_owned();
        for _ in 0..2 {
            let mut protocol = JoinGroupRequestProtocol::default();
            protocol.name = text(ASSIGNOR);
            protocol.metadata = metadata.clone();
            let mut request = JoinGroupRequest::default();
            request.group_id = group_id(&config.group);
            request.session_timeout_ms = config.session_timeout.as_millis() as i32;
            request.rebalance_timeout_ms = config.rebalance_timeout.as_millis() as i32;
            request.member_id = text(&member_id);
            request.protocol_type = text(PROTOCOL_TYPE);
            request.protocols = vec![protocol];
            let deadline = config.rebalance_timeout + REQUEST_TIMEOUT;
            let response = self.call(&request, versions::JOIN_GROUP, deadline).await?;
            if response.error_code == codes::MEMBER_ID_REQUIRED && !response.member_id.is_empty() {
                member_id = response.member_id.to_string();
                continue;
            }
            kafka(response.error_code)?;
            return Ok(Joined {
                generation: response.generation_id,
                member_id: response.member_id.to_string(),
                leader: response.leader.to_string(),
                protocol: response.protocol_name.map(|p| p.to_string()),
                members: response
                    .members
                    .iter()
                    .map(|m| (m.member_id.to_string(), m.metadata.clone()))
                    .collect(),
            });
        }
        Err(ClientError::Malformed("MEMBER_ID_REQUIRED twice"))
    }

    /// Syncs `joined`'s generation; the leader passes every member's assignment, followers
    /// none. Returns this member's assignment bytes.
    pub async fn sync_group(
        &mut self,
        config: &MemberConfig,
        joined: &Joined,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<Bytes, ClientError> {
        let mut request = SyncGroupRequest::default();
        request.group_id = group_id(&config.group);
        request.generation_id = joined.generation;
        request.member_id = text(&joined.member_id);
        request.assignments = assignments
            .into_iter()
            .map(|(member, assignment)| {
                let mut a = SyncGroupRequestAssignment::default();
                a.member_id = StrBytes::from_string(member);
                a.assignment = assignment;
                a
            })
            .collect();
        let deadline = config.rebalance_timeout + REQUEST_TIMEOUT;
        let response = self.call(&request, versions::SYNC_GROUP, deadline).await?;
        kafka(response.error_code)?;
        Ok(response.assignment)
    }

    /// Heartbeats as `member_id` of `generation`.
    pub async fn heartbeat(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
    ) -> Result<(), ClientError> {
        let mut request = HeartbeatRequest::default();
        request.group_id = group_id(group);
        request.generation_id = generation;
        request.member_id = text(member_id);
        let response = self.call(&request, versions::HEARTBEAT, REQUEST_TIMEOUT).await?;
        kafka(response.error_code)
    }

    /// Leaves `group` as `member_id`.
    pub async fn leave_group(&mut self, group: &str, member_id: &str) -> Result<(), ClientError> {
        let mut member = MemberIdentity::default();
        member.member_id = text(member_id);
        let mut request = LeaveGroupRequest::default();
        request.group_id = group_id(group);
        request.members = vec![member];
        let response = self.call(&request, versions::LEAVE_GROUP, REQUEST_TIMEOUT).await?;
        kafka(response.error_code)?;
        match response.members.first() {
            Some(m) => kafka(m.error_code),
            None => Err(ClientError::Malformed("no member in the LeaveGroup answer")),
        }
    }
}
