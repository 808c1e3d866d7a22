//! Scenario: group requests answer as Kafka's do where a client or `kafka-consumer-groups`
//! would notice, on a 3-node cluster.
//!
//! - The empty group id is a group's for OffsetCommit, OffsetFetch and DeleteGroups (a client
//!   without a group of its own storing offsets), as in Kafka; JoinGroup with it is
//!   INVALID_GROUP_ID from every broker, not NOT_COORDINATOR from all but one.
//! - OffsetDelete of partitions the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION, not a
//!   success that deleted nothing; the partitions it has are deleted as before.
//! - OffsetCommit of a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION even at a
//!   broker that does not coordinate the group: finding the coordinator again would not help.
//! - SyncGroup v5+ without a protocol type or name is INCONSISTENT_GROUP_PROTOCOL.
//! - Asked for them, DescribeGroups, Metadata and DescribeCluster report the operations a client
//!   may perform (all that Kafka's ACLs know: there is no authorizer), instead of "not given".
//! - OffsetCommit v2–v4's `retention_time_ms` keeps the offsets that long after the commit, as
//!   in Kafka, where before it was ignored and they were kept for `offsets.retention.minutes`;
//!   −1 still means the broker's retention.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    DescribeClusterRequest, DescribeGroupsRequest, GroupId, JoinGroupRequest, MetadataRequest,
    OffsetCommitRequest, OffsetDeleteRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::group::{commit_simple, committed_simple, find};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const INVALID_GROUP_ID: i16 = 24;
/// Kafka's `AclOperation` READ, as a bit.
const READ: i32 = 1 << 3;
const LIMIT: Duration = Duration::from_secs(30);
/// The retention time an OffsetCommit v2 gives its offset.
const RETAINED_MS: i64 = 60_000;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Runs `f` with a client of `addr` on the client host.
fn with_client<T, F, Fut>(c: &mut Cluster, addr: SocketAddr, f: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    c.client_call(LIMIT * 2, move |env| f(Client::new(env, addr, "checker"))).ok_or("no answer")?
}

/// The index of `group`'s coordinator (asking for it creates the offsets topic).
fn coordinator_of(c: &mut Cluster, group: &str) -> Result<usize, String> {
    let (addrs, group) = ((0..3).map(|ix| c.addr(ix)).collect::<Vec<_>>(), group.to_owned());
    let id = c
        .client_call(LIMIT, move |env| async move { find(&env, &addrs, &group).await })
        .ok_or("no coordinator found")??;
    c.ix_of(id).ok_or_else(|| format!("an unknown coordinator {id}"))
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    let addrs: Vec<SocketAddr> = (0..3).map(|ix| c.addr(ix)).collect();
    let t0 = ("t".to_owned(), 0);

    // The empty group id stores offsets, and is deleted as any group is.
    let home = coordinator_of(&mut c, "")?;
    commit_simple(&mut c, addrs[home], "", &t0, 7)?;
    let got = committed_simple(&mut c, addrs[home], "", &t0)?;
    ensure(got == 7, || format!("the empty group's committed offset is {got}"))?;
    let deleted = with_client(&mut c, addrs[home], |mut client| async move {
        let mut request = DeleteGroupsRequest::default();
        request.groups_names = vec![GroupId(text(""))];
        let answer = client.call(&request, 2, LIMIT).await.map_err(|e| e.to_string())?;
        Ok(answer.results.first().map(|r| r.error_code))
    })?;
    ensure(deleted == Some(0), || format!("DeleteGroups of the empty group: {deleted:?}"))?;
    for addr in addrs.clone() {
        let joined = with_client(&mut c, addr, |mut client| async move {
            let mut request = JoinGroupRequest::default();
            request.group_id = GroupId(text(""));
            request.session_timeout_ms = 10_000;
            request.rebalance_timeout_ms = 10_000;
            request.protocol_type = text("consumer");
            let mut protocol = JoinGroupRequestProtocol::default();
            protocol.name = text("range");
            request.protocols = vec![protocol];
            let answer = client.call(&request, 5, LIMIT).await.map_err(|e| e.to_string())?;
            Ok(answer.error_code)
        })?;
        ensure(joined == INVALID_GROUP_ID, || format!("JoinGroup of the empty group: {joined}"))?;
    }

    // OffsetDelete of partitions that do not exist, beside one that does.
    let group = format!("g-{seed}");
    let home = coordinator_of(&mut c, &group)?;
    commit_simple(&mut c, addrs[home], &group, &t0, 5)?;
    let named = group.clone();
    let answer = with_client(&mut c, addrs[home], |mut client| async move {
        let mut request = OffsetDeleteRequest::default();
        request.group_id = GroupId(text(&named));
        request.topics = [("nosuch", 0), ("t", 99), ("t", 0)]
            .into_iter()
            .map(|(topic, partition)| {
                let mut p = OffsetDeleteRequestPartition::default();
                p.partition_index = partition;
                let mut t = OffsetDeleteRequestTopic::default();
                t.name = TopicName(text(topic));
                t.partitions = vec![p];
                t
            })
            .collect();
        let answer = client.call(&request, 0, LIMIT).await.map_err(|e| e.to_string())?;
        let codes: BTreeMap<(String, i32), i16> = answer
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| ((t.name.0.to_string(), p.partition_index), p.error_code))
            })
            .collect();
        Ok((answer.error_code, codes))
    })?;
    let wanted = BTreeMap::from([
        (("nosuch".to_owned(), 0), UNKNOWN_TOPIC_OR_PARTITION),
        (("t".to_owned(), 0), 0),
        (("t".to_owned(), 99), UNKNOWN_TOPIC_OR_PARTITION),
    ]);
    ensure(answer == (0, wanted), || format!("OffsetDelete: {answer:?}"))?;
    let got = committed_simple(&mut c, addrs[home], &group, &t0)?;
    ensure(got == -1, || format!("t-0's offset is {got} after its deletion"))?;

    // A commit of a partition that does not exist, at a broker that does not coordinate.
    let elsewhere = (home + 1) % 3;
    let named = group.clone();
    let codes = with_client(&mut c, addrs[elsewhere], |mut client| async move {
        let wanted = BTreeMap::from([(("nosuch".to_owned(), 0), 1)]);
        client.offset_commit(&named, -1, "", &wanted).await.map_err(|e| e.to_string())
    })?;
    ensure(codes.values().all(|&code| code == UNKNOWN_TOPIC_OR_PARTITION), || {
        format!("a commit of an unknown partition at a broker not coordinating: {codes:?}")
    })?;

    // SyncGroup v5 without a protocol type.
    let named = group.clone();
    let synced = with_client(&mut c, addrs[home], |mut client| async move {
        let mut request = SyncGroupRequest::default();
        request.group_id = GroupId(text(&named));
        request.generation_id = 1;
        request.member_id = text("m");
        request.protocol_name = Some(text("range"));
        let answer = client.call(&request, 5, LIMIT).await.map_err(|e| e.to_string())?;
        Ok(answer.error_code)
    })?;
    ensure(synced == INCONSISTENT_GROUP_PROTOCOL, || format!("SyncGroup v5: {synced}"))?;

    // Authorized operations, asked for.
    let named = group.clone();
    let operations = with_client(&mut c, addrs[home], |mut client| async move {
        let mut describe = DescribeGroupsRequest::default();
        describe.groups = vec![GroupId(text(&named))];
        describe.include_authorized_operations = true;
        let described = client.call(&describe, 5, LIMIT).await.map_err(|e| e.to_string())?;
        let mut metadata = MetadataRequest::default();
        let mut topic = MetadataRequestTopic::default();
        topic.name = Some(TopicName(text("t")));
        metadata.topics = Some(vec![topic]);
        metadata.include_topic_authorized_operations = true;
        metadata.include_cluster_authorized_operations = true;
        let meta = client.call(&metadata, 10, LIMIT).await.map_err(|e| e.to_string())?;
        let mut cluster = DescribeClusterRequest::default();
        cluster.include_cluster_authorized_operations = true;
        let cluster = client.call(&cluster, 0, LIMIT).await.map_err(|e| e.to_string())?;
        Ok([
            described.groups.first().map_or(i32::MIN, |g| g.authorized_operations),
            meta.topics.first().map_or(i32::MIN, |t| t.topic_authorized_operations),
            meta.cluster_authorized_operations,
            cluster.cluster_authorized_operations,
        ])
    })?;
    let [group_ops, topic_ops, cluster_ops, described_cluster_ops] = operations;
    ensure(group_ops & READ != 0 && topic_ops & READ != 0, || {
        format!("group and topic operations: {operations:?}")
    })?;
    ensure(cluster_ops != i32::MIN && cluster_ops == described_cluster_ops, || {
        format!("cluster operations: {operations:?}")
    })?;

    // OffsetCommit v2's retention time: a simple group's offset kept for a minute is gone at
    // the first retention check after that minute (one every 10 minutes by default), while
    // one committed with −1 keeps the broker's retention (7 days).
    let kept = [("kept-a-minute", RETAINED_MS), ("kept-by-default", -1)];
    for (name, retention_ms) in kept {
        let home = coordinator_of(&mut c, name)?;
        let committed = with_client(&mut c, addrs[home], move |mut client| async move {
            let mut partition = OffsetCommitRequestPartition::default();
            partition.partition_index = 0;
            partition.committed_offset = 9;
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = TopicName(text("t"));
            topic.partitions = vec![partition];
            let mut request = OffsetCommitRequest::default();
            request.group_id = GroupId(text(name));
            request.generation_id_or_member_epoch = -1;
            request.retention_time_ms = retention_ms;
            request.topics = vec![topic];
            let answer = client.call(&request, 2, LIMIT).await.map_err(|e| e.to_string())?;
            let codes = answer.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code);
            Ok(codes.collect::<Vec<i16>>())
        })?;
        ensure(committed == [0], || format!("OffsetCommit v2 to {name}: {committed:?}"))?;
    }
    c.run_for(Duration::from_secs(11 * 60));
    for ((name, _), want) in kept.into_iter().zip([-1, 9]) {
        let home = coordinator_of(&mut c, name)?;
        let got = committed_simple(&mut c, addrs[home], name, &t0)?;
        ensure(got == want, || format!("{name}'s offset after 11 minutes is {got}, want {want}"))?;
    }
    c.watch_verdict()
}

#[test]
fn group_requests_answer_as_kafka() {
    for_each_seed("group_requests_answer_as_kafka", 0..2, scenario);
}
