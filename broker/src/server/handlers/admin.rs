//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
//! ElectLeaders, and DescribeCluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::elect_leaders_response::ReplicaElectionResult;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::produce::completion_error;
use super::{code, led_partition};
use crate::controller::image::MetadataImage;
use crate::controller::logic::{ControllerError, Election, NewTopic, PREFERRED_ELECTIONS_MAX};
use crate::controller::records::NO_LEADER;
use crate::controller::rpc::{Request, Response};
use crate::io::{Instant, timeout};
use crate::model::{Offset, TopicId};
use crate::node::{ADMIN_TIMEOUT, Broker};

/// Kafka's error for a refused topic operation.
pub(crate) fn controller_error(error: &ControllerError) -> ResponseError {
    match error {
        ControllerError::NotController => ResponseError::NotController,
        ControllerError::TopicExists(_) => ResponseError::TopicAlreadyExists,
        ControllerError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        ControllerError::BadName(_) => ResponseError::InvalidTopicException,
        ControllerError::BadPartitions(_) => ResponseError::InvalidPartitions,
        ControllerError::BadReplication { .. } => ResponseError::InvalidReplicationFactor,
        ControllerError::BadConfig(_) => ResponseError::InvalidConfig,
        ControllerError::Internal(_) => ResponseError::TopicAuthorizationFailed,
        ControllerError::StaleBroker(_) | ControllerError::Timeout => {
            ResponseError::RequestTimedOut
        }
        ControllerError::StalePartition(_) => ResponseError::FencedLeaderEpoch,
        ControllerError::IneligibleReplica(_) => ResponseError::IneligibleReplica,
        ControllerError::BadAssignment(_) => ResponseError::InvalidReplicaAssignment,
        ControllerError::NoReassignment(_) => ResponseError::NoReassignmentInProgress,
        ControllerError::ReplicationFactorChange { .. } => ResponseError::InvalidReplicationFactor,
    }
}

fn message(error: &ControllerError) -> Option<StrBytes> {
    Some(StrBytes::from_string(error.to_string()))
}

/// When a request asking the controller for changes must be done: its `timeout_ms` from now
/// (at most [`ADMIN_TIMEOUT`]), or [`ADMIN_TIMEOUT`] when it gives none (zero or less, which
/// for Kafka's controller means no deadline). Changes still unanswered then are not tried
/// again: the client stops waiting at its timeout, and may act on the failure.
pub(super) struct Deadline {
    at: Instant,
}

impl Deadline {
    pub(super) fn of(broker: &Broker, timeout_ms: i32) -> Deadline {
        let limit = u64::try_from(timeout_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .map_or(ADMIN_TIMEOUT, |ms| Duration::from_millis(ms).min(ADMIN_TIMEOUT));
        Deadline { at: broker.env.clock.now() + limit }
    }

    /// What is left of it (zero once it has passed).
    pub(super) fn left(&self, broker: &Broker) -> Duration {
        self.at.saturating_duration_since(broker.env.clock.now())
    }
}

/// Answers CreateTopics.
pub async fn create_topics(
    broker: &Arc<Broker>,
    request: CreateTopicsRequest,
    _version: i16,
) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    let deadline = Deadline::of(broker, request.timeout_ms);
    let mut repeated = Repeated::of(request.topics.iter().map(|t| t.name.0.to_string()));
    for wanted in request.topics {
        let named = repeated.entry(&wanted.name.0.to_string());
        if named == Named::Again {
            continue;
        }
        let mut result = CreatableTopicResult::default();
        result.name = wanted.name.clone();
        result.num_partitions = -1;
        result.replication_factor = -1;
        // As in Kafka: a topic named twice is created by neither entry (and refused once), and
        // a setting without a value is an error, not a setting left out.
        let refused = if named == Named::First {
            Some((ResponseError::InvalidRequest, "the topic is named more than once".to_owned()))
        } else {
            wanted.configs.iter().find(|c| c.value.is_none()).map(|c| {
                (ResponseError::InvalidConfig, format!("no value for the setting {}", &*c.name))
            })
        };
        if let Some((error, text)) = refused {
            result.error_code = code(error);
            result.error_message = Some(StrBytes::from_string(text));
            response.topics.push(result);
            continue;
        }
        let configs: Vec<(String, String)> = wanted
            .configs
            .iter()
            .filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string())))
            .collect();
        let assignments = match assignments_of(&wanted) {
            Ok(assignments) => assignments,
            Err((error, text)) => {
                result.error_code = code(error);
                result.error_message = Some(StrBytes::from_string(text));
                response.topics.push(result);
                continue;
            }
        };
        let (partitions, replication) = match assignments.first() {
            Some(first) => (assignments.len() as i32, first.len() as i16),
            None => (wanted.num_partitions, wanted.replication_factor),
        };
        let name = wanted.name.0.as_str();
        let topic = NewTopic {
            name: name.to_owned(),
            partitions: wanted.num_partitions,
            replication: i32::from(wanted.replication_factor),
            configs,
            assignments,
        };
        let created =
            broker.create_topic_within(topic, request.validate_only, deadline.left(broker)).await;
        match created {
            Ok(()) => {
                // As Kafka's (v5+): every setting of the topic as created, with its source.
                let overrides = wanted
                    .configs
                    .iter()
                    .filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string())));
                let mut in_force = broker.config.topic_config();
                if in_force.replace(overrides.collect()).is_ok() {
                    result.configs = Some(super::configs::created_configs(&in_force));
                }
                let image = super::metadata::image_of(broker);
                match image.topic(name).filter(|_| !request.validate_only) {
                    Some(topic) => {
                        result.topic_id = Uuid::from_bytes(topic.id.0);
                        result.num_partitions = topic.partitions.len() as i32;
                        result.replication_factor =
                            topic.partitions.values().next().map_or(1, |p| p.replicas.len() as i16);
                    }
                    None => {
                        result.num_partitions = if partitions == -1 {
                            broker.config.num_partitions
                        } else {
                            partitions
                        };
                        result.replication_factor = replication.max(1);
                    }
                }
            }
            Err(error) => {
                result.error_code = code(controller_error(&error));
                result.error_message = message(&error);
            }
        }
        response.topics.push(result);
    }
    response
}

/// Answers DeleteTopics (by name, or by id from v6).
pub async fn delete_topics(
    broker: &Arc<Broker>,
    request: DeleteTopicsRequest,
    _version: i16,
) -> DeleteTopicsResponse {
    let mut response = DeleteTopicsResponse::default();
    let deadline = Deadline::of(broker, request.timeout_ms);
    let mut wanted: Vec<(Option<String>, Uuid)> =
        request.topic_names.iter().map(|n| (Some(n.0.to_string()), Uuid::nil())).collect();
    wanted.extend(
        request.topics.iter().map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)),
    );
    // As in Kafka: a topic named twice, or given by the same id twice, is deleted by neither
    // entry, and refused once.
    let mut repeated =
        Repeated::of(wanted.iter().filter(|(_, id)| id.is_nil()).filter_map(|(n, _)| n.clone()));
    let mut repeated_ids = Repeated::of(
        wanted.iter().filter(|(name, id)| name.is_none() && !id.is_nil()).map(|(_, id)| *id),
    );
    let given_ids: BTreeSet<Uuid> = wanted
        .iter()
        .filter(|(name, id)| name.is_none() && !id.is_nil())
        .map(|(_, id)| *id)
        .collect();
    // The ids also given by the name of their topic, in an entry of its own that names it
    // once: as Kafka's, the topic is then deleted under neither entry, and only the entry by
    // name is answered.
    let image = super::metadata::image_of(broker);
    let id_of = |name: &str| image.topic(name).map(|t| Uuid::from_bytes(t.id.0));
    let claimed: BTreeSet<Uuid> = wanted
        .iter()
        .filter(|(_, id)| id.is_nil())
        .filter_map(|(name, _)| name.as_deref())
        .filter(|name| !repeated.repeats(&(*name).to_owned()))
        .filter_map(id_of)
        .filter(|id| given_ids.contains(id))
        .collect();
    for (name, id) in wanted {
        let named = match &name {
            Some(name) if id.is_nil() => repeated.entry(name),
            None if !id.is_nil() => repeated_ids.entry(&id),
            _ => Named::Once,
        };
        if named == Named::Again
            || (name.is_none() && named == Named::Once && claimed.contains(&id))
        {
            continue;
        }
        let mut result = DeletableTopicResult::default();
        result.topic_id = id;
        // As Kafka refuses them: an entry with both a name and an id, or neither; a name or an
        // id given twice; a name whose topic's id is given too.
        let refusal = match &name {
            Some(_) if !id.is_nil() => Some("a topic name and a topic id were both given"),
            None if id.is_nil() => Some("neither a topic name nor a topic id was given"),
            None if named == Named::First => Some("the topic id is given more than once"),
            Some(_) if named == Named::First => Some("the topic is named more than once"),
            Some(name) if id_of(name).is_some_and(|id| claimed.contains(&id)) => {
                result.topic_id = id_of(name).unwrap_or_default();
                Some("the topic name maps to a topic id also given")
            }
            _ => None,
        };
        if let Some(why) = refusal {
            result.name = name.map(|n| TopicName(StrBytes::from_string(n)));
            result.error_code = code(ResponseError::InvalidRequest);
            result.error_message = Some(StrBytes::from_static_str(why));
            response.responses.push(result);
            continue;
        }
        let image = super::metadata::image_of(broker);
        let name = match name {
            Some(name) => Some(name),
            None => image.topics.get(&TopicId(*id.as_bytes())).map(|t| t.name.clone()),
        };
        result.name = name.clone().map(|n| TopicName(StrBytes::from_string(n)));
        match name {
            None => result.error_code = code(ResponseError::UnknownTopicId),
            Some(name) => {
                let topic_id = image.topic(&name).map(|t| t.id);
                let delete = Request::DeleteTopic { name };
                match broker.change_within(delete, deadline.left(broker)).await {
                    Ok(_) => {
                        if let Some(id) = topic_id {
                            result.topic_id = Uuid::from_bytes(id.0);
                        }
                    }
                    Err(error) => {
                        result.error_code = code(controller_error(&error));
                        result.error_message = message(&error);
                    }
                }
            }
        }
        response.responses.push(result);
    }
    response
}

/// The topic names (or ids) a request gives more than once. As Kafka's controller does, such a
/// topic is acted on under none of its entries and refused once, at its first entry; its
/// other entries get no answer of their own.
struct Repeated<T> {
    /// Given more than once.
    repeated: BTreeSet<T>,
    /// Those of `repeated` whose first entry has been met.
    met: BTreeSet<T>,
}

/// How a request's entry names its topic (see [`Repeated`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Named {
    /// No other entry names it.
    Once,
    /// The first of several entries naming it: answered with the refusal.
    First,
    /// A later one: not answered.
    Again,
}

impl<T: Ord + Clone> Repeated<T> {
    fn of(given: impl Iterator<Item = T>) -> Repeated<T> {
        let mut seen = BTreeSet::new();
        let repeated = given.filter(|t| !seen.insert(t.clone())).collect();
        Repeated { repeated, met: BTreeSet::new() }
    }

    /// Whether `topic` is given more than once.
    fn repeats(&self, topic: &T) -> bool {
        self.repeated.contains(topic)
    }

    /// How the next entry, naming `topic`, names it.
    fn entry(&mut self, topic: &T) -> Named {
        if !self.repeats(topic) {
            Named::Once
        } else if self.met.insert(topic.clone()) {
            Named::First
        } else {
            Named::Again
        }
    }
}

/// A CreateTopics entry's explicit assignments, in partition order (empty if it gives none),
/// or the error to answer, as Kafka's: INVALID_REQUEST if it also gives a partition count or
/// a replication factor, INVALID_REPLICA_ASSIGNMENT if its partitions are not 0, 1, 2, ….
/// The controller checks the brokers.
fn assignments_of(wanted: &CreatableTopic) -> Result<Vec<Vec<i32>>, (ResponseError, String)> {
    if wanted.assignments.is_empty() {
        return Ok(Vec::new());
    }
    if wanted.num_partitions != -1 || wanted.replication_factor != -1 {
        let text = "both assignments and a partition count or replication factor were given";
        return Err((ResponseError::InvalidRequest, text.to_owned()));
    }
    let mut assignments: Vec<_> = wanted.assignments.iter().collect();
    assignments.sort_by_key(|a| a.partition_index);
    for (i, a) in assignments.iter().enumerate() {
        if a.partition_index != i as i32 {
            let text = format!("partitions must be numbered 0 to {}", assignments.len() - 1);
            return Err((ResponseError::InvalidReplicaAssignment, text));
        }
    }
    Ok(assignments.iter().map(|a| a.broker_ids.iter().map(|b| b.0).collect()).collect())
}

/// Answers CreatePartitions.
pub async fn create_partitions(
    broker: &Arc<Broker>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut response = CreatePartitionsResponse::default();
    let deadline = Deadline::of(broker, request.timeout_ms);
    let mut repeated = Repeated::of(request.topics.iter().map(|t| t.name.0.to_string()));
    for wanted in request.topics {
        let named = repeated.entry(&wanted.name.0.to_string());
        if named == Named::Again {
            continue;
        }
        let mut result = CreatePartitionsTopicResult::default();
        result.name = wanted.name.clone();
        if named == Named::First {
            // As in Kafka: a topic named twice is grown by neither entry, and refused once.
            result.error_code = code(ResponseError::InvalidRequest);
            result.error_message = Some(StrBytes::from_static_str("duplicate topic in request"));
            response.results.push(result);
            continue;
        }
        // An empty list is not "none": as in Kafka, it is too few for a topic that grows.
        let current = super::metadata::image_of(broker)
            .topic(wanted.name.0.as_str())
            .map(|t| t.partitions.len() as i32);
        if wanted.assignments.as_ref().is_some_and(Vec::is_empty)
            && current.is_some_and(|current| wanted.count > current)
        {
            result.error_code = code(ResponseError::InvalidReplicaAssignment);
            let text = "no assignments given for the new partitions";
            result.error_message = Some(StrBytes::from_static_str(text));
            response.results.push(result);
            continue;
        }
        let assignments = wanted
            .assignments
            .iter()
            .flatten()
            .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
            .collect();
        let change = Request::CreatePartitions {
            name: wanted.name.0.to_string(),
            count: wanted.count,
            assignments,
            validate_only: request.validate_only,
        };
        if let Err(error) = broker.change_within(change, deadline.left(broker)).await {
            result.error_code = code(controller_error(&error));
            result.error_message = message(&error);
        }
        response.results.push(result);
    }
    response
}

/// Answers DeleteRecords: advances each partition's log start offset (−1 means the high
/// watermark), never past the high watermark, and answers once every replica that may be
/// elected leader has advanced its own (the low watermark, as Kafka's DeleteRecords), or with
/// REQUEST_TIMED_OUT when that takes longer than the request's `timeout_ms`. Every partition's
/// start is advanced before any is waited for, so the followers of all of them catch up at
/// once and the request waits for the slowest, not for their sum.
///
/// As in Kafka, records are not deleted from an internal topic (INVALID_TOPIC_EXCEPTION:
/// the groups' offsets would go with them), nor from a topic whose `cleanup.policy` does not
/// include `delete` (POLICY_VIOLATION: a compacted topic's newest value of a key is kept for
/// ever).
pub async fn delete_records(
    broker: &Arc<Broker>,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    let deadline = Deadline::of(broker, request.timeout_ms);
    // (topic, partition) of the response, the partition, and the start it was advanced to.
    let mut advanced = Vec::new();
    for wanted in request.topics {
        let mut out = DeleteRecordsTopicResult::default();
        out.name = wanted.name;
        for part in wanted.partitions {
            let mut p = DeleteRecordsPartitionResult::default();
            p.partition_index = part.partition_index;
            p.low_watermark = -1;
            match advance_log_start(broker, out.name.0.as_str(), part.partition_index, part.offset)
                .await
            {
                Ok((partition, start)) => {
                    advanced.push(((response.topics.len(), out.partitions.len()), partition, start))
                }
                Err(error) => p.error_code = code(error),
            }
            out.partitions.push(p);
        }
        response.topics.push(out);
    }
    for ((topic, index), partition, start) in advanced {
        let p = &mut response.topics[topic].partitions[index];
        let low = partition.wait_low_watermark(start);
        match timeout(&*broker.env.clock, deadline.left(broker), low).await {
            Ok(Ok(low)) => p.low_watermark = low.0,
            Ok(Err(error)) => p.error_code = code(completion_error(&error)),
            Err(_) => p.error_code = code(ResponseError::RequestTimedOut),
        }
    }
    response
}

/// DeleteRecords' advance of one partition's log start to `offset` (−1: the high watermark):
/// the partition and its new start, durable.
async fn advance_log_start(
    broker: &Arc<Broker>,
    topic: &str,
    index: i32,
    offset: i64,
) -> Result<(Arc<crate::partition::Partition>, Offset), ResponseError> {
    let partition = led_partition(broker, topic, index)?;
    if crate::topics::is_internal(topic) {
        return Err(ResponseError::InvalidTopicException);
    }
    if !partition.log.config().cleanup_policy.deletes() {
        return Err(ResponseError::PolicyViolation);
    }
    let hw = partition.high_watermark();
    let target = if offset == -1 { hw } else { Offset(offset) };
    if target.0 < 0 || target > hw {
        return Err(ResponseError::OffsetOutOfRange);
    }
    match partition.log.delete_records_before(target, hw).await {
        Ok(start) => Ok((partition, start)),
        Err(error) => {
            tracing::warn!(partition = %partition.tp, "delete records failed: {error}");
            Err(ResponseError::KafkaStorageError)
        }
    }
}

/// Answers DescribeCluster.
pub fn describe_cluster(
    broker: &Arc<Broker>,
    request: &DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.cluster_authorized_operations = super::authorized::if_asked(
        request.include_cluster_authorized_operations,
        super::authorized::CLUSTER,
    );
    response.cluster_id = StrBytes::from_string(broker.config.cluster_id.clone());
    let image = super::metadata::image_of(broker);
    let brokers = super::metadata::brokers(broker, &image);
    response.controller_id = super::metadata::controller_id(broker, &brokers);
    response.brokers = brokers
        .into_iter()
        .map(|b| {
            let mut out = DescribeClusterBroker::default();
            out.broker_id = b.node_id;
            out.host = b.host;
            out.port = b.port;
            out.rack = b.rack;
            out
        })
        .collect();
    response
}

/// The most partitions one ElectLeaders may name: more is refused as an invalid request.
pub const ELECT_LEADERS_PARTITIONS_MAX: usize = 100_000;

/// Why a partition's change (an election, a reassignment) was not made, with a message
/// (`None`: made).
pub(super) type Refusal = Option<(ResponseError, String)>;

/// Answers ElectLeaders (`kafka-leader-election`): elects the preferred replica (election type
/// 0, and every v0 request) or, for a partition without a leader, a live replica (type 1,
/// unclean; see [`crate::controller::logic::ControllerLogic::elect_leaders`]) of each partition
/// named (at most [`ELECT_LEADERS_PARTITIONS_MAX`], each once), or of every partition that
/// needs an election when none is named. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
/// ELECTION_NOT_NEEDED where the leader already is the one asked for, and
/// PREFERRED_LEADER_NOT_AVAILABLE (or ELIGIBLE_LEADERS_NOT_AVAILABLE) where the controller
/// found no replica it may elect; REQUEST_TIMED_OUT where the controller's change did not reach
/// this broker in time. The outcome is read from this broker's metadata once it holds the
/// controller's change.
pub async fn elect_leaders(
    broker: &Arc<Broker>,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    let election = match (version, request.election_type) {
        (0, _) | (_, 0) => Election::Preferred,
        (_, 1) => Election::Unclean,
        _ => {
            response.error_code = code(ResponseError::InvalidRequest);
            return response;
        }
    };
    let named = request
        .topic_partitions
        .as_ref()
        .map(|topics| topics.iter().map(|t| t.partitions.len()).sum::<usize>());
    if named.is_some_and(|n| n > ELECT_LEADERS_PARTITIONS_MAX) {
        // v0 has no error code of its own: its client hears of the refusal as no result.
        response.error_code = code(ResponseError::InvalidRequest);
        return response;
    }
    let Some(membership) = broker.membership() else {
        response.error_code = code(ResponseError::NotController);
        return response;
    };
    let image = || membership.image();
    // Whether the partition is led as the election asks (`None`: no such partition).
    let led = |image: &MetadataImage, topic: &str, partition: i32| {
        image.partition(topic, partition).map(|p| match election {
            Election::Preferred => p.replicas.first() == Some(&p.leader),
            Election::Unclean => p.leader != NO_LEADER,
        })
    };
    let before = image();
    let asked: BTreeSet<(String, i32)> = match &request.topic_partitions {
        Some(topics) => topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
            .collect(),
        None => before
            .topics
            .values()
            .flat_map(|t| t.partitions.keys().map(|&p| (t.name.clone(), p)))
            .filter(|(t, p)| led(&before, t, *p) == Some(false))
            .collect(),
    };
    // Every partition asked for goes to the controller, which decides from its own image, in
    // entries of at most as many elections as it makes at a time; the outcome is read from
    // this broker's image once it holds the controller's change.
    let deadline = Deadline::of(broker, request.timeout_ms);
    let asked: Vec<(String, i32)> = asked.into_iter().collect();
    let mut outcome: BTreeMap<(String, i32), Refusal> = BTreeMap::new();
    for chunk in asked.chunks(PREFERRED_ELECTIONS_MAX) {
        let change = Request::ElectLeaders { election, partitions: chunk.to_vec() };
        let changed = match broker.change_within(change, deadline.left(broker)).await {
            Ok(Response::Done { offset, .. }) if image().offset < offset => {
                Err(ControllerError::Timeout)
            }
            other => other,
        };
        let after = image();
        for (topic, partition) in chunk {
            let refusal = match &changed {
                Err(error) => Some((controller_error(error), error.to_string())),
                Ok(_) => {
                    let epoch = |image: &MetadataImage| {
                        image.partition(topic, *partition).map(|p| p.leader_epoch)
                    };
                    match (led(&after, topic, *partition), election) {
                        (None, _) => Some((
                            ResponseError::UnknownTopicOrPartition,
                            "no such partition".to_owned(),
                        )),
                        (Some(true), _) if epoch(&before) == epoch(&after) => Some((
                            ResponseError::ElectionNotNeeded,
                            "already led by the replica asked for".to_owned(),
                        )),
                        (Some(true), _) => None,
                        (Some(false), Election::Preferred) => Some((
                            ResponseError::PreferredLeaderNotAvailable,
                            "the preferred replica is not live, in sync and whole".to_owned(),
                        )),
                        (Some(false), Election::Unclean) => Some((
                            ResponseError::EligibleLeadersNotAvailable,
                            "no replica may lead".to_owned(),
                        )),
                    }
                }
            };
            outcome.insert((topic.clone(), *partition), refusal);
        }
    }
    let mut by_topic: BTreeMap<String, Vec<(i32, Refusal)>> = BTreeMap::new();
    for ((topic, partition), error) in outcome {
        by_topic.entry(topic).or_default().push((partition, error));
    }
    for (topic, partitions) in by_topic {
        let mut result = ReplicaElectionResult::default();
        result.topic = TopicName(StrBytes::from_string(topic));
        for (partition, error) in partitions {
            let mut p = elect_leaders_response::PartitionResult::default();
            p.partition_id = partition;
            if let Some((error, why)) = error {
                p.error_code = code(error);
                p.error_message = Some(StrBytes::from_string(why));
            }
            result.partition_result.push(p);
        }
        response.replica_election_results.push(result);
    }
    response
}
