//! One file per Kafka API. Each handler turns a decoded request into a [`Reply`]; errors are
//! Kafka error codes in the response, never a panic or a dropped connection.

mod acls;
mod admin;
pub use admin::ELECT_LEADERS_PARTITIONS_MAX;
pub use configs::CONFIG_CHANGES_MAX;
mod api_versions;
mod authorized;
mod configs;
mod delete_groups;
mod describe_groups;
mod describe_producers;
mod describe_quorum;
mod empty_registries;
mod fetch;
mod find_coordinator;
mod group_common;
mod heartbeat;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod log_dirs;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod reassignments;
mod sync_group;

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::Reply;
use crate::controller::image::MetadataImage;
use crate::controller::membership::{Leadership, Membership};
use crate::groups::partition_for;
use crate::model::LeaderEpoch;
use crate::node::Broker;
use crate::partition::Partition;
use crate::partition::replica::Leading;
use crate::protocol::{Decoded, Request, Response};
use crate::topics::OFFSETS_TOPIC;

/// Dispatches one request.
pub async fn handle(broker: &Arc<Broker>, decoded: Decoded, peer: std::net::SocketAddr) -> Reply {
    let version = decoded.header.request_api_version;
    let client_id = crate::protocol::codec::client_id(&decoded.header).to_owned();
    broker.metrics.request(decoded.request.key());
    match decoded.request {
        Request::JoinGroup(r) => {
            let broker = Arc::clone(broker);
            let client = (client_id, format!("/{}", peer.ip()));
            Reply::Later(Box::pin(async move {
                Some(Response::JoinGroup(join_group::handle(&broker, r, version, client).await))
            }))
        }
        Request::SyncGroup(r) => {
            let broker = Arc::clone(broker);
            Reply::Later(Box::pin(async move {
                Some(Response::SyncGroup(sync_group::handle(&broker, r, version).await))
            }))
        }
        Request::Heartbeat(r) => {
            Reply::Now(Response::Heartbeat(heartbeat::handle(broker, r).await))
        }
        Request::LeaveGroup(r) => {
            Reply::Now(Response::LeaveGroup(leave_group::handle(broker, r, version).await))
        }
        Request::OffsetCommit(r) => {
            let broker = Arc::clone(broker);
            Reply::Later(Box::pin(async move {
                Some(Response::OffsetCommit(offset_commit::handle(&broker, r, version).await))
            }))
        }
        Request::OffsetFetch(r) => {
            Reply::Now(Response::OffsetFetch(offset_fetch::handle(broker, r, version).await))
        }
        Request::ListGroups(r) => {
            Reply::Now(Response::ListGroups(list_groups::handle(broker, r, version)))
        }
        Request::DescribeGroups(r) => {
            Reply::Now(Response::DescribeGroups(describe_groups::handle(broker, r, version)))
        }
        Request::DeleteGroups(r) => {
            Reply::Now(Response::DeleteGroups(delete_groups::handle(broker, r).await))
        }
        Request::OffsetDelete(r) => {
            Reply::Now(Response::OffsetDelete(offset_delete::handle(broker, r).await))
        }
        Request::ApiVersions(r) => {
            Reply::Now(Response::ApiVersions(api_versions::handle(&r, version)))
        }
        Request::Metadata(r) => {
            Reply::Now(Response::Metadata(metadata::handle(broker, r, version).await))
        }
        Request::Produce(r) => produce::handle(broker, r, version).await,
        Request::Fetch(r) => fetch::handle(broker, r, version).await,
        Request::ListOffsets(r) => {
            Reply::Now(Response::ListOffsets(list_offsets::handle(broker, r, version).await))
        }
        Request::CreateTopics(r) => {
            Reply::Now(Response::CreateTopics(admin::create_topics(broker, r, version).await))
        }
        Request::DeleteTopics(r) => {
            Reply::Now(Response::DeleteTopics(admin::delete_topics(broker, r, version).await))
        }
        Request::CreatePartitions(r) => {
            Reply::Now(Response::CreatePartitions(admin::create_partitions(broker, r).await))
        }
        Request::DeleteRecords(r) => {
            Reply::Now(Response::DeleteRecords(admin::delete_records(broker, r).await))
        }
        Request::ElectLeaders(r) => {
            Reply::Now(Response::ElectLeaders(admin::elect_leaders(broker, r, version).await))
        }
        Request::AlterPartitionReassignments(r) => Reply::Now(
            Response::AlterPartitionReassignments(reassignments::alter(broker, r, version).await),
        ),
        Request::ListPartitionReassignments(r) => {
            Reply::Now(Response::ListPartitionReassignments(reassignments::list(broker, &r)))
        }
        Request::DescribeCluster(r) => {
            Reply::Now(Response::DescribeCluster(admin::describe_cluster(broker, &r)))
        }
        Request::DescribeLogDirs(r) => {
            Reply::Now(Response::DescribeLogDirs(log_dirs::describe(broker, r)))
        }
        Request::DescribeConfigs(r) => {
            Reply::Now(Response::DescribeConfigs(configs::describe(broker, r)))
        }
        Request::AlterConfigs(r) => {
            Reply::Now(Response::AlterConfigs(configs::alter(broker, r).await))
        }
        Request::IncrementalAlterConfigs(r) => Reply::Now(Response::IncrementalAlterConfigs(
            configs::incremental_alter(broker, r).await,
        )),
        Request::DescribeAcls(_) => Reply::Now(Response::DescribeAcls(acls::describe())),
        Request::CreateAcls(r) => Reply::Now(Response::CreateAcls(acls::create(&r))),
        Request::DeleteAcls(r) => Reply::Now(Response::DeleteAcls(acls::delete(&r))),
        Request::DescribeClientQuotas(r) => {
            Reply::Now(Response::DescribeClientQuotas(empty_registries::describe_client_quotas(&r)))
        }
        Request::DescribeUserScramCredentials(r) => {
            Reply::Now(Response::DescribeUserScramCredentials(
                empty_registries::describe_user_scram_credentials(&r),
            ))
        }
        Request::ListTransactions(r) => {
            Reply::Now(Response::ListTransactions(empty_registries::list_transactions(&r)))
        }
        Request::DescribeQuorum(r) => {
            Reply::Now(Response::DescribeQuorum(describe_quorum::handle(broker, r, version).await))
        }
        Request::DescribeProducers(r) => {
            Reply::Now(Response::DescribeProducers(describe_producers::handle(broker, r).await))
        }
        Request::InitProducerId(r) => {
            Reply::Now(Response::InitProducerId(init_producer_id::handle(broker, r).await))
        }
        Request::FindCoordinator(r) => Reply::Now(Response::FindCoordinator(
            find_coordinator::handle(broker, r, version).await,
        )),
        Request::OffsetForLeaderEpoch(r) => {
            Reply::Now(Response::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(broker, r)))
        }
    }
}

/// Kafka's code for an error.
/// Why this broker does not serve `topic`/`partition` as its leader now: the metadata does
/// not know it, or another broker leads it, or this one is fenced. `None`: it does.
pub(crate) fn leadership_error(
    broker: &Broker,
    topic: &str,
    partition: i32,
) -> Option<ResponseError> {
    match broker.membership()?.leadership(topic, partition) {
        Leadership::Unknown => Some(ResponseError::UnknownTopicOrPartition),
        Leadership::NotLeader => Some(ResponseError::NotLeaderOrFollower),
        Leadership::Leader => None,
    }
}

/// Why this broker cannot coordinate `group` now: the offsets topic does not exist yet
/// (COORDINATOR_NOT_AVAILABLE), another broker leads the group's offsets partition or this one
/// is fenced (NOT_COORDINATOR: the client finds the coordinator again), or the partition's
/// groups are still loading (COORDINATOR_LOAD_IN_PROGRESS). `None`: it can.
pub(crate) fn coordinator_error(broker: &Broker, group: &str) -> Option<ResponseError> {
    let membership = broker.membership()?;
    coordinator_error_in(broker, membership, &membership.image(), group)
}

/// [`coordinator_error`] as `image` has it, for a handler that checks more against the same
/// image: a commit is checked against an image in which this broker leads the group's
/// partition, so that the broker that takes the partition over has an image at least as new
/// (see `GroupCoordinator::set_live_topics`).
pub(crate) fn coordinator_error_in(
    broker: &Broker,
    membership: &Membership,
    image: &MetadataImage,
    group: &str,
) -> Option<ResponseError> {
    let Some(offsets) = image.topic(OFFSETS_TOPIC) else {
        return Some(ResponseError::CoordinatorNotAvailable);
    };
    let index = partition_for(group, offsets.partitions.len() as i32);
    match membership.leadership_in(image, OFFSETS_TOPIC, index) {
        Leadership::Leader if broker.groups.is_loaded(index) => None,
        Leadership::Leader => Some(ResponseError::CoordinatorLoadInProgress),
        Leadership::NotLeader | Leadership::Unknown => Some(ResponseError::NotCoordinator),
    }
}

/// The partition this broker leads, or why it cannot serve `topic`/`partition` as its leader.
pub(crate) fn led_partition(
    broker: &Broker,
    topic: &str,
    partition: i32,
) -> Result<Arc<Partition>, ResponseError> {
    if let Some(error) = leadership_error(broker, topic, partition) {
        return Err(error);
    }
    let led = broker
        .catalog
        .partition(topic, partition)
        .ok_or_else(|| absent_error(broker, topic, partition))?;
    if !led.leads() {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    Ok(led)
}

/// The partition this broker leads and its leader's view of one instant (see
/// [`Partition::leading`]), checked against a request's `current_leader_epoch` (see
/// [`epoch_check`]). As in Kafka, a replica hosted here checks the epoch before leadership: a
/// follower asked with a stale epoch answers FENCED_LEADER_EPOCH, not NOT_LEADER_OR_FOLLOWER.
pub(crate) fn led_at_epoch(
    broker: &Broker,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
) -> Result<(Arc<Partition>, Leading), ResponseError> {
    if let Some(hosted) = broker.catalog.partition(topic, partition) {
        epoch_check(current_leader_epoch, hosted.leader_epoch())?;
    }
    let led = led_partition(broker, topic, partition)?;
    let leading = led.leading().ok_or(ResponseError::NotLeaderOrFollower)?;
    epoch_check(current_leader_epoch, leading.epoch)?;
    Ok((led, leading))
}

/// A request's `current_leader_epoch` against the partition's `epoch`, as Kafka checks it: an
/// older one is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; a negative one (no
/// epoch given) passes.
pub(crate) fn epoch_check(asked: i32, epoch: LeaderEpoch) -> Result<(), ResponseError> {
    match asked {
        a if a < 0 || a == epoch.0 => Ok(()),
        a if a < epoch.0 => Err(ResponseError::FencedLeaderEpoch),
        _ => Err(ResponseError::UnknownLeaderEpoch),
    }
}

/// Why a partition this broker should hold is not open: its log failed to open
/// (`KAFKA_STORAGE_ERROR`, as Kafka answers for an offline replica; it is tried again), or it is
/// not known here.
pub(crate) fn absent_error(broker: &Broker, topic: &str, partition: i32) -> ResponseError {
    let unopened = broker.catalog.unopened();
    if unopened.iter().any(|(tp, _)| tp.topic == topic && tp.partition.0 == partition) {
        ResponseError::KafkaStorageError
    } else {
        ResponseError::UnknownTopicOrPartition
    }
}

/// Whether `topic`/`partition` exists in the cluster (on any broker).
pub(crate) fn partition_exists(broker: &Broker, topic: &str, partition: i32) -> bool {
    match broker.membership() {
        Some(membership) => membership.image().partition(topic, partition).is_some(),
        None => broker.catalog.partition(topic, partition).is_some(),
    }
}

pub(crate) fn code(error: ResponseError) -> i16 {
    error.code()
}
