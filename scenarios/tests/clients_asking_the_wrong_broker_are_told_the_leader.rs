//! Scenario: a client that sends a partition's produce or fetch to a broker that does not lead
//! it is told where the leader is (KIP-951), so that it can go there without asking for
//! metadata first, as Kafka's brokers tell it: Produce v10+ and Fetch v16+ answer
//! NOT_LEADER_OR_FOLLOWER with the partition's leader and leader epoch, and the answer lists
//! that leader's endpoint. Earlier versions carry neither. A fetch by topic id (v13+) of a topic
//! the broker does not host is NOT_LEADER_OR_FOLLOWER too, as by name, not UNKNOWN_TOPIC_ID:
//! the topic exists, this broker just does not lead it.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const LIMIT: Duration = Duration::from_secs(20);

/// What an answer said of the partition: its error, the leader and epoch it named, and the
/// endpoints (id, port) it listed.
type Told = (i16, i32, i32, Vec<(i32, i32)>);

fn one_record() -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 1_000,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

/// Produce (acks=all) of one record to `t`-0 at node `ix`, at `version` (by id from v13).
fn produce(c: &mut Cluster, ix: usize, id: Uuid, version: i16) -> Result<Told, String> {
    let addr = c.addr(ix);
    c.client_call(LIMIT, move |env| async move {
        let mut part = PartitionProduceData::default();
        part.index = 0;
        part.records = Some(one_record());
        let mut data = TopicProduceData::default();
        if version >= 13 {
            data.topic_id = id;
        } else {
            data.name = TopicName(StrBytes::from_static_str("t"));
        }
        data.partition_data = vec![part];
        let mut request = ProduceRequest::default();
        request.acks = -1;
        request.timeout_ms = 10_000;
        request.topic_data = vec![data];
        let answer = Client::new(env, addr, "producer").call(&request, version, LIMIT).await;
        let answer = answer.map_err(|e| format!("Produce v{version}: {e}"))?;
        let p = answer
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .ok_or("no partition answered")?;
        let nodes = answer.node_endpoints.iter().map(|n| (n.node_id.0, n.port)).collect();
        Ok((p.error_code, p.current_leader.leader_id.0, p.current_leader.leader_epoch, nodes))
    })
    .ok_or("Produce got no answer")?
}

/// Fetch of `t`-0 from offset 0 at node `ix`, by id, at `version` (13 or later).
fn fetch(c: &mut Cluster, ix: usize, id: Uuid, version: i16) -> Result<Told, String> {
    let addr = c.addr(ix);
    c.client_call(LIMIT, move |env| async move {
        let mut part = FetchPartition::default();
        part.partition = 0;
        part.partition_max_bytes = 1 << 20;
        part.current_leader_epoch = -1;
        part.last_fetched_epoch = -1;
        part.log_start_offset = -1;
        let mut topic = FetchTopic::default();
        topic.topic_id = id;
        topic.partitions = vec![part];
        let mut request = FetchRequest::default();
        request.replica_id = kafka_protocol::messages::BrokerId(-1);
        request.max_bytes = 1 << 20;
        request.topics = vec![topic];
        let answer = Client::new(env, addr, "consumer").call(&request, version, LIMIT).await;
        let answer = answer.map_err(|e| format!("Fetch v{version}: {e}"))?;
        let p = answer
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or("no partition answered")?;
        let nodes = answer.node_endpoints.iter().map(|n| (n.node_id.0, n.port)).collect();
        Ok((p.error_code, p.current_leader.leader_id.0, p.current_leader.leader_epoch, nodes))
    })
    .ok_or("Fetch got no answer")?
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_replicated_topic(0, "t", 1, 1, &[]).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(2));
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("t").ok_or("no topic")?;
    let (id, partition) = (Uuid::from_bytes(topic.id.0), &topic.partitions[&0]);
    let (leader, epoch) = (partition.leader, partition.leader_epoch);
    let leader_ix = c.ix_of(leader).ok_or("no leader")?;
    let other = (leader_ix + 1) % 3;
    let port = i32::from(c.addr(leader_ix).port());
    let told = (NOT_LEADER_OR_FOLLOWER, leader, epoch, vec![(leader, port)]);
    let untold = (NOT_LEADER_OR_FOLLOWER, -1, -1, Vec::new());

    for (version, wanted) in [(9, &untold), (10, &told), (12, &told), (13, &told)] {
        let got = produce(&mut c, other, id, version)?;
        ensure(got == *wanted, || format!("Produce v{version} at a follower: {got:?}"))?;
    }
    for (version, wanted) in [(13, &untold), (15, &untold), (16, &told), (17, &told)] {
        let got = fetch(&mut c, other, id, version)?;
        ensure(got == *wanted, || format!("Fetch v{version} at a follower: {got:?}"))?;
    }
    let at_leader = produce(&mut c, leader_ix, id, 10)?;
    ensure(at_leader == (0, -1, -1, Vec::new()), || {
        format!("Produce v10 at the leader: {at_leader:?}")
    })?;
    c.watch_verdict()
}

#[test]
fn clients_asking_the_wrong_broker_are_told_the_leader() {
    for_each_seed("clients_asking_the_wrong_broker_are_told_the_leader", 0..3, scenario);
}
