//! The requests of the hostile workload: each API Weir answers, built as real clients build
//! it at a random advertised version, with numeric fields now and then at the edges of their
//! types, and the encoded body then mutated byte by byte.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use weir::log::encode::{RecordSpec, encode_batch};
use weir::protocol::api::SUPPORTED_APIS;

use super::PARTITIONS;

/// A small deterministic generator (SplitMix64) drawn from the seed.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(super) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// `plausible` most of the time, else a value at an edge of its type.
    fn edge<T: Edge>(&mut self, plausible: T) -> T {
        if self.chance(EDGE_PERCENT) { T::edge(self.below(5)) } else { plausible }
    }
}

/// How often a numeric field of a request takes an edge value instead of a plausible one.
const EDGE_PERCENT: usize = 15;

/// Integers with edges: 0, −1, 1, the smallest and the largest.
trait Edge: Copy {
    fn edge(which: usize) -> Self;
}

macro_rules! edges {
    ($($t:ty),*) => {$(
        impl Edge for $t {
            fn edge(which: usize) -> Self {
                [0, -1, 1, <$t>::MIN, <$t>::MAX][which % 5]
            }
        }
    )*};
}

edges!(i8, i16, i32, i64);

/// `text` as the protocol's string.
pub(super) fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn topic(text: &str) -> TopicName {
    TopicName(s(text))
}

fn group(text: &str) -> GroupId {
    GroupId(s(text))
}

/// A valid batch of `n` small records.
fn batch(n: usize) -> Bytes {
    let specs: Vec<RecordSpec> = (0..n)
        .map(|i| RecordSpec {
            offset_delta: i as i32,
            timestamp: 1_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&specs, &Default::default()).unwrap_or_default()
}

/// Encodes `$request` at a random advertised version of its API: (key, version, body).
macro_rules! encoded {
    ($rng:expr, $key:ident, $request:expr) => {{
        let key = ApiKey::$key;
        let range = SUPPORTED_APIS.iter().find(|(k, _)| *k == key).map(|(_, r)| *r);
        range.and_then(|range| {
            let span = (range.max - range.min + 1) as usize;
            let version = range.min + $rng.below(span) as i16;
            let mut body = BytesMut::new();
            $request.encode(&mut body, version).ok().map(|()| (key, version, body.to_vec()))
        })
    }};
}

/// One request as a real client would build it, for a random API: (key, version, body).
pub(super) fn request(rng: &mut Rng, scratch_ids: &mut u32) -> Option<(ApiKey, i16, Vec<u8>)> {
    let partition = {
        let p = rng.below(PARTITIONS as usize + 1) as i32;
        rng.edge(p)
    };
    let offset = {
        let o = rng.below(12) as i64;
        rng.edge(o)
    };
    match rng.below(27) {
        0 => {
            let mut p = produce_request::PartitionProduceData::default();
            p.index = rng.edge(partition);
            p.records = Some(batch(1 + rng.below(4)));
            let mut t = produce_request::TopicProduceData::default();
            t.name = topic("precious");
            t.partition_data = vec![p];
            let mut r = ProduceRequest::default();
            r.acks = {
                let v = [-1, 1, 0][rng.below(3)];
                rng.edge(v)
            };
            r.timeout_ms = rng.edge(5_000);
            r.topic_data = vec![t];
            encoded!(rng, Produce, r)
        }
        1 => {
            let mut p = fetch_request::FetchPartition::default();
            p.partition = rng.edge(partition);
            p.fetch_offset = rng.edge(offset);
            p.current_leader_epoch = rng.edge(-1);
            p.last_fetched_epoch = rng.edge(-1);
            p.partition_max_bytes = rng.edge(1 << 20);
            let mut t = fetch_request::FetchTopic::default();
            t.topic = topic("precious");
            t.partitions = vec![p];
            let mut r = FetchRequest::default();
            r.replica_id = BrokerId(rng.edge(-1));
            r.max_wait_ms = rng.edge(100);
            r.min_bytes = rng.edge(1);
            r.max_bytes = rng.edge(4 << 20);
            r.session_epoch = rng.edge(-1);
            r.topics = vec![t];
            encoded!(rng, Fetch, r)
        }
        2 => {
            let mut p = list_offsets_request::ListOffsetsPartition::default();
            p.partition_index = rng.edge(partition);
            p.current_leader_epoch = rng.edge(-1);
            p.timestamp = {
                let v = [-1, -2, -3, 1_001][rng.below(4)];
                rng.edge(v)
            };
            let mut t = list_offsets_request::ListOffsetsTopic::default();
            t.name = topic("precious");
            t.partitions = vec![p];
            let mut r = ListOffsetsRequest::default();
            r.replica_id = BrokerId(rng.edge(-1));
            r.topics = vec![t];
            encoded!(rng, ListOffsets, r)
        }
        3 => {
            let mut r = MetadataRequest::default();
            if rng.chance(50) {
                let mut t = metadata_request::MetadataRequestTopic::default();
                t.name = Some(topic(["precious", "nope"][rng.below(2)]));
                r.topics = Some(vec![t]);
            }
            encoded!(rng, Metadata, r)
        }
        4 => {
            let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
            p.partition_index = rng.edge(partition);
            p.committed_offset = rng.edge(offset);
            p.committed_leader_epoch = rng.edge(-1);
            let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
            t.name = topic("precious");
            t.partitions = vec![p];
            let mut r = OffsetCommitRequest::default();
            r.group_id = group("g");
            r.generation_id_or_member_epoch = rng.edge(-1);
            r.retention_time_ms = rng.edge(-1);
            r.topics = vec![t];
            encoded!(rng, OffsetCommit, r)
        }
        5 => {
            let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
            t.name = topic("precious");
            t.partition_indexes = vec![0, 1];
            let mut ts = offset_fetch_request::OffsetFetchRequestTopics::default();
            ts.name = topic("precious");
            ts.partition_indexes = vec![0, 1];
            let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
            g.group_id = group("g");
            g.member_epoch = rng.edge(-1);
            g.topics = Some(vec![ts]);
            let mut r = OffsetFetchRequest::default();
            r.group_id = group("g");
            r.topics = Some(vec![t]);
            let (key, version, body) = encoded!(rng, OffsetFetch, r)?;
            // From v8 a request names its groups in a list instead.
            if version < 8 {
                return Some((key, version, body));
            }
            let mut r = OffsetFetchRequest::default();
            r.groups = vec![g];
            let mut body = BytesMut::new();
            r.encode(&mut body, version).ok().map(|()| (key, version, body.to_vec()))
        }
        6 => {
            let mut r = FindCoordinatorRequest::default();
            r.key = s("g");
            r.coordinator_keys = vec![s("g")];
            encoded!(rng, FindCoordinator, r)
        }
        7 => {
            let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
            protocol.name = s("range");
            protocol.metadata = Bytes::from_static(&[
                0, 1, 0, 0, 0, 1, 0, 8, b'p', b'r', b'e', b'c', b'i', b'o', b'u', b's', 0, 0, 0, 0,
            ]);
            let mut r = JoinGroupRequest::default();
            r.group_id = group("fuzz");
            r.session_timeout_ms = rng.edge(10_000);
            r.rebalance_timeout_ms = rng.edge(10_000);
            r.protocol_type = s("consumer");
            r.protocols = vec![protocol];
            encoded!(rng, JoinGroup, r)
        }
        8 => {
            let mut r = HeartbeatRequest::default();
            r.group_id = group("fuzz");
            r.generation_id = {
                let v = rng.below(3) as i32;
                rng.edge(v)
            };
            r.member_id = s("m");
            encoded!(rng, Heartbeat, r)
        }
        9 => {
            let mut m = leave_group_request::MemberIdentity::default();
            m.member_id = s("m");
            let mut r = LeaveGroupRequest::default();
            r.group_id = group("fuzz");
            r.member_id = s("m");
            r.members = vec![m];
            encoded!(rng, LeaveGroup, r)
        }
        10 => {
            let mut a = sync_group_request::SyncGroupRequestAssignment::default();
            a.member_id = s("m");
            a.assignment = Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
            let mut r = SyncGroupRequest::default();
            r.group_id = group("fuzz");
            r.generation_id = rng.edge(1);
            r.member_id = s("m");
            r.protocol_type = Some(s("consumer"));
            r.protocol_name = Some(s("range"));
            r.assignments = vec![a];
            encoded!(rng, SyncGroup, r)
        }
        11 => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![group("g"), group("fuzz")];
            encoded!(rng, DescribeGroups, r)
        }
        12 => encoded!(rng, ListGroups, ListGroupsRequest::default()),
        13 => {
            let mut r = ApiVersionsRequest::default();
            r.client_software_name = s("fuzz");
            r.client_software_version = s("1");
            encoded!(rng, ApiVersions, r)
        }
        14 => {
            *scratch_ids += 1;
            let mut c = create_topics_request::CreatableTopicConfig::default();
            c.name = s("retention.ms");
            c.value = Some(s("60000"));
            let mut t = create_topics_request::CreatableTopic::default();
            t.name = topic(&format!("scratch-{scratch_ids}"));
            t.num_partitions = {
                let v = 1 + rng.below(3) as i32;
                rng.edge(v)
            };
            t.replication_factor = rng.edge(1);
            t.configs = vec![c];
            let mut r = CreateTopicsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = rng.edge(5_000);
            r.validate_only = rng.chance(30);
            encoded!(rng, CreateTopics, r)
        }
        15 => {
            let name = format!("scratch-{}", rng.below(*scratch_ids as usize + 1));
            let mut state = delete_topics_request::DeleteTopicState::default();
            state.name = Some(topic(&name));
            // Names before v6, topic states from v6.
            let mut by_name = DeleteTopicsRequest::default();
            by_name.topic_names = vec![topic(&name)];
            by_name.timeout_ms = rng.edge(5_000);
            let mut by_state = DeleteTopicsRequest::default();
            by_state.topics = vec![state];
            by_state.timeout_ms = rng.edge(5_000);
            encoded!(rng, DeleteTopics, by_name).or_else(|| encoded!(rng, DeleteTopics, by_state))
        }
        16 => {
            let mut p = delete_records_request::DeleteRecordsPartition::default();
            p.partition_index = rng.edge(0);
            p.offset = rng.edge(offset.saturating_sub(1));
            let mut t = delete_records_request::DeleteRecordsTopic::default();
            t.name = topic("scratch");
            t.partitions = vec![p];
            let mut r = DeleteRecordsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = rng.edge(5_000);
            encoded!(rng, DeleteRecords, r)
        }
        17 => {
            let mut r = InitProducerIdRequest::default();
            r.transaction_timeout_ms = rng.edge(60_000);
            r.producer_id = ProducerId(rng.edge(-1));
            r.producer_epoch = rng.edge(-1);
            encoded!(rng, InitProducerId, r)
        }
        18 => {
            let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
            p.partition = rng.edge(partition);
            p.current_leader_epoch = rng.edge(-1);
            p.leader_epoch = {
                let v = rng.below(3) as i32;
                rng.edge(v)
            };
            let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
            t.topic = topic("precious");
            t.partitions = vec![p];
            let mut r = OffsetForLeaderEpochRequest::default();
            r.replica_id = BrokerId(rng.edge(-1));
            r.topics = vec![t];
            encoded!(rng, OffsetForLeaderEpoch, r)
        }
        19 => {
            let mut t = describe_configs_request::DescribeConfigsResource::default();
            t.resource_type = rng.edge(2);
            t.resource_name = s("precious");
            let mut b = describe_configs_request::DescribeConfigsResource::default();
            b.resource_type = rng.edge(4);
            b.resource_name = s("1");
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![t, b];
            r.include_synonyms = rng.chance(50);
            r.include_documentation = rng.chance(50);
            encoded!(rng, DescribeConfigs, r)
        }
        20 => {
            let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
            t.topic = topic("precious");
            t.partitions = vec![0, 1];
            let mut r = DescribeLogDirsRequest::default();
            r.topics = rng.chance(50).then(|| vec![t]);
            encoded!(rng, DescribeLogDirs, r)
        }
        21 => {
            let mut c = alter_configs_request::AlterableConfig::default();
            c.name = s("retention.ms");
            c.value = Some(s("120000"));
            let mut res = alter_configs_request::AlterConfigsResource::default();
            res.resource_type = rng.edge(2);
            res.resource_name = s("scratch");
            res.configs = vec![c];
            let mut r = AlterConfigsRequest::default();
            r.resources = vec![res];
            encoded!(rng, AlterConfigs, r)
        }
        22 => {
            let mut t = create_partitions_request::CreatePartitionsTopic::default();
            t.name = topic("scratch");
            t.count = {
                let v = 2 + rng.below(3) as i32;
                rng.edge(v)
            };
            if rng.chance(30) {
                let mut a = create_partitions_request::CreatePartitionsAssignment::default();
                a.broker_ids = vec![BrokerId(rng.edge(1))];
                t.assignments = Some(vec![a]);
            }
            let mut r = CreatePartitionsRequest::default();
            r.topics = vec![t];
            r.timeout_ms = rng.edge(5_000);
            r.validate_only = rng.chance(30);
            encoded!(rng, CreatePartitions, r)
        }
        23 => {
            let mut c = incremental_alter_configs_request::AlterableConfig::default();
            let (name, op, value) = [
                ("retention.ms", 0, "90000"),
                ("cleanup.policy", 2, "compact"),
                ("segment.ms", 1, ""),
            ][rng.below(3)];
            c.name = s(name);
            c.config_operation = rng.edge(op);
            c.value = (op != 1).then(|| s(value));
            let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
            res.resource_type = rng.edge(2);
            res.resource_name = s("scratch");
            res.configs = vec![c];
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = vec![res];
            encoded!(rng, IncrementalAlterConfigs, r)
        }
        24 => {
            let mut t = elect_leaders_request::TopicPartitions::default();
            t.topic = topic("precious");
            t.partitions = vec![0, 1];
            let mut r = ElectLeadersRequest::default();
            r.election_type = {
                let v = rng.below(2) as i8;
                rng.edge(v)
            };
            r.topic_partitions = rng.chance(50).then(|| vec![t]);
            r.timeout_ms = rng.edge(5_000);
            encoded!(rng, ElectLeaders, r)
        }
        25 => {
            let mut p = alter_partition_reassignments_request::ReassignablePartition::default();
            p.partition_index = rng.edge(0);
            p.replicas = rng.chance(50).then(|| vec![BrokerId(1)]);
            let mut t = alter_partition_reassignments_request::ReassignableTopic::default();
            t.name = topic("scratch");
            t.partitions = vec![p];
            let mut r = AlterPartitionReassignmentsRequest::default();
            r.timeout_ms = rng.edge(5_000);
            r.topics = vec![t];
            encoded!(rng, AlterPartitionReassignments, r)
        }
        _ => {
            let mut r = DescribeClusterRequest::default();
            r.endpoint_type = rng.edge(1);
            let which = rng.below(6);
            if which == 5 {
                empty_registry_request(rng)
            } else if which == 0 {
                encoded!(rng, DescribeCluster, r)
            } else if which == 4 {
                acl_request(rng)
            } else if which == 3 {
                let mut p = describe_quorum_request::PartitionData::default();
                p.partition_index = rng.edge(0);
                let mut t = describe_quorum_request::TopicData::default();
                t.topic_name =
                    topic(if rng.chance(50) { "__cluster_metadata" } else { "precious" });
                t.partitions = vec![p];
                let mut q = DescribeQuorumRequest::default();
                q.topics = vec![t];
                encoded!(rng, DescribeQuorum, q)
            } else if which == 1 {
                let mut t = describe_producers_request::TopicRequest::default();
                t.name = topic("precious");
                t.partition_indexes = vec![rng.edge(partition), rng.edge(0)];
                let mut p = DescribeProducersRequest::default();
                p.topics = vec![t];
                encoded!(rng, DescribeProducers, p)
            } else {
                let mut g = DeleteGroupsRequest::default();
                g.groups_names = vec![group("scratch-group")];
                encoded!(rng, DeleteGroups, g)
            }
        }
    }
}

/// DescribeAcls, CreateAcls or DeleteAcls, its codes now and then at their edges.
fn acl_request(rng: &mut Rng) -> Option<(ApiKey, i16, Vec<u8>)> {
    match rng.below(3) {
        0 => {
            let mut d = DescribeAclsRequest::default();
            d.resource_type_filter = rng.edge(1);
            d.pattern_type_filter = rng.edge(1);
            d.operation = rng.edge(1);
            d.permission_type = rng.edge(1);
            encoded!(rng, DescribeAcls, d)
        }
        1 => {
            let mut a = create_acls_request::AclCreation::default();
            a.resource_type = rng.edge(2);
            a.resource_name = s("precious");
            a.resource_pattern_type = rng.edge(3);
            a.principal = s("User:someone");
            a.host = s("*");
            a.operation = rng.edge(2);
            a.permission_type = rng.edge(3);
            let mut c = CreateAclsRequest::default();
            c.creations = vec![a];
            encoded!(rng, CreateAcls, c)
        }
        _ => {
            let mut f = delete_acls_request::DeleteAclsFilter::default();
            f.resource_type_filter = rng.edge(1);
            f.pattern_type_filter = rng.edge(1);
            f.operation = rng.edge(1);
            f.permission_type = rng.edge(1);
            let mut d = DeleteAclsRequest::default();
            d.filters = vec![f];
            encoded!(rng, DeleteAcls, d)
        }
    }
}

/// DescribeClientQuotas, DescribeUserScramCredentials or ListTransactions, names and codes now
/// and then at their edges.
fn empty_registry_request(rng: &mut Rng) -> Option<(ApiKey, i16, Vec<u8>)> {
    match rng.below(3) {
        0 => {
            let entities = ["user", "client-id", "ip", ""];
            let components = (0..rng.below(3))
                .map(|_| {
                    let mut c = describe_client_quotas_request::ComponentData::default();
                    c.entity_type = s(entities[rng.below(entities.len())]);
                    c.match_type = {
                        let m = rng.below(3) as i8;
                        rng.edge(m)
                    };
                    c._match = rng.chance(50).then(|| s("someone"));
                    c
                })
                .collect();
            let mut r = DescribeClientQuotasRequest::default();
            r.components = components;
            r.strict = rng.chance(50);
            encoded!(rng, DescribeClientQuotas, r)
        }
        1 => {
            let mut u = describe_user_scram_credentials_request::UserName::default();
            u.name = s("someone");
            let mut r = DescribeUserScramCredentialsRequest::default();
            r.users = rng.chance(50).then(|| vec![u.clone(), u]);
            encoded!(rng, DescribeUserScramCredentials, r)
        }
        _ => {
            let mut r = ListTransactionsRequest::default();
            r.state_filters = vec![s("Ongoing"), s("precious")];
            r.producer_id_filters = vec![ProducerId(rng.edge(0))];
            // v0 has no duration filter: its default (-1) encodes in every version.
            r.duration_filter = if rng.chance(50) { -1 } else { rng.edge(0) };
            encoded!(rng, ListTransactions, r)
        }
    }
}

/// A member's place in a group it joined: what its requests name.
pub(super) struct Member<'a> {
    pub(super) group: &'a str,
    pub(super) member_id: &'a str,
    pub(super) generation: i32,
}

/// One request of a member of `m.group` with its real member id and generation, so that it
/// passes the coordinator's first checks and reaches what lies behind them; fields now and
/// then at their edges, as in [`request`].
pub(super) fn member_request(rng: &mut Rng, m: &Member<'_>) -> Option<(ApiKey, i16, Vec<u8>)> {
    let generation = rng.edge(m.generation);
    let (id, member) = (group(m.group), s(m.member_id));
    match rng.below(6) {
        0 => {
            let mut a = sync_group_request::SyncGroupRequestAssignment::default();
            a.member_id = member.clone();
            a.assignment = Bytes::from_static(&[
                0, 1, 0, 0, 0, 1, 0, 8, b'p', b'r', b'e', b'c', b'i', b'o', b'u', b's', 0, 0, 0, 1,
                0, 0, 0, 0, 0, 0, 0, 0,
            ]);
            let mut r = SyncGroupRequest::default();
            r.group_id = id;
            r.generation_id = generation;
            r.member_id = member;
            r.assignments = vec![a];
            // The protocol's type and name from v5.
            let plain = encoded!(rng, SyncGroup, r.clone());
            r.protocol_type = Some(s("consumer"));
            r.protocol_name = Some(s("roundrobin"));
            plain.filter(|(_, v, _)| *v < 5).or_else(|| encoded!(rng, SyncGroup, r))
        }
        1 => {
            let mut r = HeartbeatRequest::default();
            r.group_id = id;
            r.generation_id = generation;
            r.member_id = member;
            encoded!(rng, Heartbeat, r)
        }
        2 => {
            let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
            p.partition_index = {
                let i = rng.below(PARTITIONS as usize) as i32;
                rng.edge(i)
            };
            p.committed_offset = {
                let o = rng.below(8) as i64;
                rng.edge(o)
            };
            p.committed_leader_epoch = rng.edge(-1);
            let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
            t.name = topic("precious");
            t.partitions = vec![p];
            let mut r = OffsetCommitRequest::default();
            r.group_id = id;
            r.generation_id_or_member_epoch = generation;
            r.member_id = member;
            r.retention_time_ms = rng.edge(-1);
            r.topics = vec![t];
            encoded!(rng, OffsetCommit, r)
        }
        3 => {
            let mut t = offset_fetch_request::OffsetFetchRequestTopic::default();
            t.name = topic("precious");
            t.partition_indexes = vec![0, 1];
            let mut r = OffsetFetchRequest::default();
            r.group_id = id;
            r.topics = Some(vec![t]);
            encoded!(rng, OffsetFetch, r)
        }
        4 => {
            // One member id before v3, a list of members from v3.
            let mut by_id = LeaveGroupRequest::default();
            by_id.group_id = id.clone();
            by_id.member_id = member.clone();
            let mut identity = leave_group_request::MemberIdentity::default();
            identity.member_id = member;
            let mut by_list = LeaveGroupRequest::default();
            by_list.group_id = id;
            by_list.members = vec![identity];
            encoded!(rng, LeaveGroup, by_id).or_else(|| encoded!(rng, LeaveGroup, by_list))
        }
        _ => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![id];
            encoded!(rng, DescribeGroups, r)
        }
    }
}

/// Values that break arithmetic and bounds when a field takes them.
const EDGES: [&[u8]; 9] = [
    &[0, 0, 0, 0],
    &[0xff, 0xff, 0xff, 0xff],
    &[0x7f, 0xff, 0xff, 0xff],
    &[0x80, 0, 0, 0],
    &[0x7f, 0xff],
    &[0x80, 0],
    &[0xff],
    &[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0x80, 0, 0, 0, 0, 0, 0, 0],
];

/// `body` mutated as the seed draws: windows overwritten, cut short, grown, or a bit flipped.
/// Returns whether the body is left as built.
pub(super) fn mutate(rng: &mut Rng, body: &mut Vec<u8>) -> bool {
    match rng.below(10) {
        0 => true,
        1 => {
            body.truncate(rng.below(body.len() + 1));
            false
        }
        2 => {
            let extra = 1 + rng.below(64);
            body.extend((0..extra).map(|_| rng.next() as u8));
            false
        }
        3 if !body.is_empty() => {
            let at = rng.below(body.len());
            body[at] ^= 1 << rng.below(8);
            false
        }
        _ => {
            for _ in 0..1 + rng.below(3) {
                if body.is_empty() {
                    break;
                }
                let at = rng.below(body.len());
                let edge: Vec<u8> = if rng.chance(25) {
                    (0..1 + rng.below(8)).map(|_| rng.next() as u8).collect()
                } else {
                    EDGES[rng.below(EDGES.len())].to_vec()
                };
                for (i, b) in edge.into_iter().enumerate() {
                    if let Some(slot) = body.get_mut(at + i) {
                        *slot = b;
                    }
                }
            }
            false
        }
    }
}
