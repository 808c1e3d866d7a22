//! Scenario: CreateTopics and DeleteTopics answer as Kafka's do.
//!
//! - Explicit replica assignments (`kafka-topics --create --replica-assignment 2:3,3:1`)
//!   place each partition's replicas on the brokers named, the first its leader. Before, the
//!   assignments were only counted and the topic placed round robin with the default
//!   replication factor.
//! - What Kafka refuses is refused, and nothing is created: an assignment naming a broker never
//!   registered, one named twice, partitions of unequal replica counts or not numbered from 0
//!   (INVALID_REPLICA_ASSIGNMENT); assignments given with a partition count, or a topic named
//!   twice or more in one request (INVALID_REQUEST, once per name, at its first entry, as
//!   Kafka's controller answers); a setting without a value (INVALID_CONFIG). Before, the
//!   first entry of a repeated name was created, and a setting without a value left out; then
//!   every entry of a repeated name was answered.
//! - CreatePartitions follows explicit assignments (`kafka-topics --alter --partitions 5
//!   --replica-assignment ...`): each new partition's replicas on the brokers named, the first
//!   its leader. One assignment too few, or one of another replication factor than the
//!   topic's, is INVALID_REPLICA_ASSIGNMENT; a topic named twice is INVALID_REQUEST once;
//!   nothing grows then. Before, assignments were always refused.
//! - DeleteTopics naming a topic twice, or giving its id twice, deletes it under neither entry
//!   (INVALID_REQUEST, once per name or id); an entry with both a name and an id, or neither,
//!   is INVALID_REQUEST, and does not count as naming the topic; a topic given both by name
//!   and by id, in two entries, is INVALID_REQUEST once (the entry by name, with the id) and
//!   deleted by neither. Before, a topic given twice by id was deleted, and then a topic given
//!   by name and by id was deleted by the id.

use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, TopicName,
};
use kafka_protocol::protocol::Request;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::{Client, versions};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// INVALID_REPLICA_ASSIGNMENT.
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
/// INVALID_REQUEST.
const INVALID_REQUEST: i16 = 42;
/// INVALID_CONFIG.
const INVALID_CONFIG: i16 = 40;
/// DeleteTopics' version here (topics by name).
const DELETE_TOPICS_VERSION: i16 = 5;

/// A topic CreateTopics must refuse: its name, partition count, assignments, and the error.
type Refused = (&'static str, i32, Vec<(i32, Vec<i32>)>, i16);

/// A CreateTopics entry for `topic` with `assignments` (partition, replicas) and `partitions`.
fn entry(topic: &str, partitions: i32, assignments: &[(i32, Vec<i32>)]) -> CreatableTopic {
    let mut wanted = CreatableTopic::default();
    wanted.name = TopicName(StrBytes::from_string(topic.to_owned()));
    wanted.num_partitions = partitions;
    wanted.replication_factor = -1;
    wanted.assignments = assignments
        .iter()
        .map(|(partition, replicas)| {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = *partition;
            a.broker_ids = replicas.iter().map(|&r| BrokerId(r)).collect();
            a
        })
        .collect();
    wanted
}

/// `request` at `version` from an admin client at node `ix`: its answer.
fn call<R>(c: &mut Cluster, ix: usize, request: R, version: i16) -> Result<R::Response, String>
where
    R: Request + Send + Sync + 'static,
    R::Response: Send + 'static,
{
    let addr = c.addr(ix);
    c.client_call(Duration::from_secs(20), move |env| async move {
        Client::new(env, addr, "admin").call(&request, version, Duration::from_secs(15)).await
    })
    .ok_or_else(|| format!("{} got no answer", std::any::type_name::<R>()))?
    .map_err(|e| format!("{} v{version} failed: {e}", std::any::type_name::<R>()))
}

/// CreateTopics of `topics` in one request at node `ix`: each entry's error code, in order.
fn create_all(c: &mut Cluster, ix: usize, topics: Vec<CreatableTopic>) -> Result<Vec<i16>, String> {
    let mut request = CreateTopicsRequest::default();
    request.topics = topics;
    request.timeout_ms = 10_000;
    let response = call(c, ix, request, versions::CREATE_TOPICS)?;
    Ok(response.topics.iter().map(|t| t.error_code).collect())
}

/// CreatePartitions of `topics` at node `ix`: each entry's error code.
fn create_partitions(
    c: &mut Cluster,
    ix: usize,
    topics: Vec<CreatePartitionsTopic>,
) -> Result<Vec<i16>, String> {
    let mut request = CreatePartitionsRequest::default();
    request.topics = topics;
    request.timeout_ms = 10_000;
    let response = call(c, ix, request, versions::CREATE_PARTITIONS)?;
    Ok(response.results.iter().map(|r| r.error_code).collect())
}

/// One DeleteTopics answer: the topic's name and id as answered, and the error code.
type Deleted = (Option<String>, Uuid, i16);

/// DeleteTopics of `names` (by name, v5) or else `topics` (v6, by name or id) at node `ix`:
/// its answers.
fn delete(
    c: &mut Cluster,
    ix: usize,
    names: Vec<TopicName>,
    topics: Vec<DeleteTopicState>,
) -> Result<Vec<Deleted>, String> {
    ensure(names.is_empty() || topics.is_empty(), || {
        "names and entries: no one version has both".into()
    })?;
    let mut request = DeleteTopicsRequest::default();
    let version = if topics.is_empty() { DELETE_TOPICS_VERSION } else { 6 };
    request.topic_names = names;
    request.topics = topics;
    request.timeout_ms = 10_000;
    let response = call(c, ix, request, version)?;
    let answers = response.responses.iter();
    Ok(answers
        .map(|r| (r.name.as_ref().map(|n| n.0.to_string()), r.topic_id, r.error_code))
        .collect())
}

/// CreateTopics of `topic` with `assignments` and `partitions` at node `ix`: its error code.
fn create(
    c: &mut Cluster,
    ix: usize,
    topic: &str,
    partitions: i32,
    assignments: &[(i32, Vec<i32>)],
) -> Result<i16, String> {
    let answers = create_all(c, ix, vec![entry(topic, partitions, assignments)])?;
    answers.first().copied().ok_or_else(|| "no topic result".to_string())
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let via = seed as usize % 3;
    let (one, two, three) = (node_id(0), node_id(1), node_id(2));
    let wanted = [(1, vec![three, one]), (0, vec![two, three]), (2, vec![one, two])];
    let error = create(&mut c, via, "placed", -1, &wanted)?;
    ensure(error == 0, || format!("CreateTopics with assignments answered {error}"))?;
    c.run_for(Duration::from_secs(1));
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("placed").ok_or("the topic was not created")?;
    ensure(topic.partitions.len() == wanted.len(), || {
        format!("{} partitions, want {}", topic.partitions.len(), wanted.len())
    })?;
    for (partition, replicas) in &wanted {
        let p = topic.partitions.get(partition).ok_or("a partition is missing")?;
        ensure(&p.replicas == replicas && p.leader == replicas[0], || {
            format!(
                "partition {partition}: replicas {:?}, leader {}; want {replicas:?}",
                p.replicas, p.leader
            )
        })?;
    }

    let refused: [Refused; 5] = [
        ("unknown-broker", -1, vec![(0, vec![one, 99])], INVALID_REPLICA_ASSIGNMENT),
        ("named-twice", -1, vec![(0, vec![two, two])], INVALID_REPLICA_ASSIGNMENT),
        ("unequal", -1, vec![(0, vec![one, two]), (1, vec![three])], INVALID_REPLICA_ASSIGNMENT),
        ("gap", -1, vec![(0, vec![one]), (2, vec![two])], INVALID_REPLICA_ASSIGNMENT),
        ("and-a-count", 2, vec![(0, vec![one]), (1, vec![two])], INVALID_REQUEST),
    ];
    for (topic, partitions, assignments, want) in refused {
        let error = create(&mut c, via, topic, partitions, &assignments)?;
        ensure(error == want, || format!("CreateTopics of {topic} answered {error}, want {want}"))?;
    }
    // A name twice, one three times, and a setting without a value: one answer per name.
    let mut no_value = entry("no-value", 1, &[]);
    let mut config = CreatableTopicConfig::default();
    config.name = StrBytes::from_static_str("retention.ms");
    config.value = None;
    no_value.configs = vec![config];
    let thrice = || entry("thrice", 2, &[]);
    let topics = vec![
        entry("twice", 1, &[]),
        thrice(),
        entry("twice", 1, &[]),
        thrice(),
        no_value,
        thrice(),
    ];
    let request = CreateTopicsRequest::default().with_topics(topics).with_timeout_ms(10_000);
    let response = call(&mut c, via, request, versions::CREATE_TOPICS)?;
    let answers: Vec<(String, i16)> =
        response.topics.iter().map(|t| (t.name.0.to_string(), t.error_code)).collect();
    let want = [
        ("twice".to_owned(), INVALID_REQUEST),
        ("thrice".to_owned(), INVALID_REQUEST),
        ("no-value".to_owned(), INVALID_CONFIG),
    ];
    ensure(answers == want, || format!("CreateTopics answered {answers:?}, want {want:?}"))?;
    c.run_for(Duration::from_secs(1));
    let image = c.committed_image().ok_or("no committed image")?;
    let made: Vec<&String> =
        image.topics.values().map(|t| &t.name).filter(|n| *n != "placed").collect();
    ensure(made.is_empty(), || format!("refused topics were created: {made:?}"))?;

    // CreatePartitions with assignments: a wrong count or replication factor, or a topic
    // named twice, is refused and grows nothing; then they are followed.
    let grow = |count: i32, assignments: Vec<Vec<i32>>| {
        let mut grow = CreatePartitionsTopic::default();
        grow.name = TopicName(StrBytes::from_static_str("placed"));
        grow.count = count;
        grow.assignments = Some(
            assignments
                .into_iter()
                .map(|brokers| {
                    let mut assignment = CreatePartitionsAssignment::default();
                    assignment.broker_ids = brokers.into_iter().map(BrokerId).collect();
                    assignment
                })
                .collect(),
        );
        grow
    };
    let refusals: [(Vec<CreatePartitionsTopic>, Vec<i16>); 4] = [
        (vec![grow(5, vec![vec![two, one]])], vec![INVALID_REPLICA_ASSIGNMENT]),
        (vec![grow(5, Vec::new())], vec![INVALID_REPLICA_ASSIGNMENT]),
        (vec![grow(4, vec![vec![two]])], vec![INVALID_REPLICA_ASSIGNMENT]),
        (vec![grow(4, vec![vec![two, one]]), grow(4, vec![vec![two, one]])], vec![INVALID_REQUEST]),
    ];
    for (topics, want) in refusals {
        let answers = create_partitions(&mut c, via, topics)?;
        ensure(answers == want, || {
            format!("CreatePartitions answered {answers:?}, want {want:?}")
        })?;
    }
    c.run_for(Duration::from_secs(1));
    let count = c.committed_image().and_then(|i| i.topic("placed").map(|t| t.partitions.len()));
    ensure(count == Some(wanted.len()), || format!("placed has {count:?} partitions"))?;
    let answers =
        create_partitions(&mut c, via, vec![grow(5, vec![vec![two, one], vec![one, three]])])?;
    ensure(answers == [0], || format!("CreatePartitions with assignments answered {answers:?}"))?;
    c.run_for(Duration::from_secs(1));
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("placed").ok_or("placed is gone")?;
    for (partition, replicas) in [(3, vec![two, one]), (4, vec![one, three])] {
        let p = topic.partitions.get(&partition).ok_or("a new partition is missing")?;
        ensure(p.replicas == replicas && p.leader == replicas[0], || {
            format!("new partition {partition}: replicas {:?}, leader {}", p.replicas, p.leader)
        })?;
    }

    // DeleteTopics naming "placed" three times: one answer.
    let placed = TopicName(StrBytes::from_static_str("placed"));
    let answers = delete(&mut c, via, vec![placed.clone(), placed.clone(), placed], Vec::new())?;
    let name = |n: &str| Some(n.to_owned());
    ensure(answers == [(name("placed"), Uuid::nil(), INVALID_REQUEST)], || {
        format!("DeleteTopics of a name twice answered {answers:?}")
    })?;
    c.run_for(Duration::from_secs(1));
    let kept = c.committed_image().is_some_and(|i| i.topic("placed").is_some());
    ensure(kept, || "a topic named twice in DeleteTopics was deleted".to_string())?;

    // DeleteTopics (v6): "placed" by its id twice; an entry with both a name and an id, or
    // neither, refused; then "placed" by its name and its id, which the id deletes.
    let id = c.committed_image().and_then(|i| i.topic("placed").map(|t| t.id)).ok_or("no id")?;
    let by_id = |id: Uuid, name: Option<&'static str>| {
        let mut entry = DeleteTopicState::default();
        entry.topic_id = id;
        entry.name = name.map(|n| TopicName(StrBytes::from_static_str(n)));
        entry
    };
    let placed_id = Uuid::from_bytes(id.0);
    // Each refusal, with its answers: one per name or id given twice, one per entry else.
    let nil = Uuid::nil();
    let refusals = [
        (vec![by_id(placed_id, None), by_id(placed_id, None)], vec![(None, placed_id)]),
        (vec![by_id(placed_id, Some("placed"))], vec![(name("placed"), placed_id)]),
        (vec![by_id(nil, None), by_id(nil, None)], vec![(None, nil), (None, nil)]),
        (vec![by_id(nil, Some("placed")), by_id(nil, Some("placed"))], vec![(name("placed"), nil)]),
    ];
    for (topics, want) in refusals {
        let entries = topics.len();
        let answers = delete(&mut c, via, Vec::new(), topics)?;
        let want: Vec<Deleted> = want.into_iter().map(|(n, id)| (n, id, INVALID_REQUEST)).collect();
        ensure(answers == want, || {
            format!(
                "DeleteTopics v6 refusal of {entries} entries answered {answers:?}, want {want:?}"
            )
        })?;
    }
    c.run_for(Duration::from_secs(1));
    let kept = c.committed_image().is_some_and(|i| i.topic("placed").is_some());
    ensure(kept, || "a refused DeleteTopics deleted placed".to_string())?;
    // By its name and by its id, in either order: one answer, and not deleted.
    for both in [
        vec![by_id(nil, Some("placed")), by_id(placed_id, None)],
        vec![by_id(placed_id, None), by_id(nil, Some("placed"))],
    ] {
        let answers = delete(&mut c, via, Vec::new(), both)?;
        let want = [(name("placed"), placed_id, INVALID_REQUEST)];
        ensure(answers == want, || {
            format!("DeleteTopics of placed by name and by id answered {answers:?}")
        })?;
    }
    c.run_for(Duration::from_secs(1));
    let kept = c.committed_image().is_some_and(|i| i.topic("placed").is_some());
    ensure(kept, || "placed given by name and by id was deleted".to_string())?;
    let answers = delete(&mut c, via, Vec::new(), vec![by_id(placed_id, None)])?;
    ensure(answers == [(name("placed"), placed_id, 0)], || {
        format!("DeleteTopics of placed by its id answered {answers:?}")
    })?;
    c.run_for(Duration::from_secs(1));
    let gone = c.committed_image().is_some_and(|i| i.topic("placed").is_none());
    ensure(gone, || "placed was not deleted by its id".to_string())?;

    // An entry with both a name and an id is refused and does not count as naming its topic:
    // the entry by name alone deletes it, as in Kafka.
    let error = create(&mut c, via, "other", 1, &[])?;
    ensure(error == 0, || format!("CreateTopics of other answered {error}"))?;
    c.run_for(Duration::from_secs(1));
    let id = c.committed_image().and_then(|i| i.topic("other").map(|t| t.id)).ok_or("no id")?;
    let other_id = Uuid::from_bytes(id.0);
    let both = vec![by_id(nil, Some("other")), by_id(other_id, Some("other"))];
    let answers = delete(&mut c, via, Vec::new(), both)?;
    let want = [(name("other"), other_id, 0), (name("other"), other_id, INVALID_REQUEST)];
    ensure(answers == want, || format!("DeleteTopics of other answered {answers:?}"))?;
    c.run_for(Duration::from_secs(1));
    let gone = c.committed_image().is_some_and(|i| i.topic("other").is_none());
    ensure(gone, || "other was not deleted by its name".to_string())?;
    c.watch_verdict()
}

#[test]
fn create_topics_answers_as_kafka() {
    for_each_seed("create_topics_answers_as_kafka", 0..2, scenario);
}
