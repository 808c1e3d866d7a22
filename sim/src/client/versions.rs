//! The request versions this client sends: ones real clients send (notes/kafka-clients.md),
//! mostly kafka-python 3.0's and librdkafka's, so the broker is exercised on the paths that
//! matter in production.

/// Metadata (3), as kafka-python and librdkafka 2.16.
pub const METADATA: i16 = 13;
/// CreateTopics (19), as kafka-python.
pub const CREATE_TOPICS: i16 = 7;
/// DeleteTopics (20), as kafka-python: the last version that names topics only by name.
pub const DELETE_TOPICS: i16 = 5;
/// CreatePartitions (37): v1, as kafka-python (the last before flexible versions).
pub const CREATE_PARTITIONS: i16 = 1;
/// IncrementalAlterConfigs (44): v0, the last before flexible versions.
pub const INCREMENTAL_ALTER_CONFIGS: i16 = 0;
/// ElectLeaders (43): v2, as Kafka's `kafka-leader-election` tool (with an election type).
pub const ELECT_LEADERS: i16 = 2;
/// AlterPartitionReassignments (45): v0, as Kafka's `kafka-reassign-partitions` tool sends it.
pub const ALTER_PARTITION_REASSIGNMENTS: i16 = 0;
/// ListPartitionReassignments (46): v0, the only version.
pub const LIST_PARTITION_REASSIGNMENTS: i16 = 0;
/// DeleteRecords (21): v1, the last before flexible versions.
pub const DELETE_RECORDS: i16 = 1;
/// InitProducerId (22), as every librdkafka and kafka-python.
pub const INIT_PRODUCER_ID: i16 = 4;
/// Produce (0), as kafka-python.
pub const PRODUCE: i16 = 9;
/// Fetch (1), as kafka-python: the last version that names topics by name.
pub const FETCH: i16 = 12;
/// ListOffsets (2), as librdkafka 2.16.
pub const LIST_OFFSETS: i16 = 7;
/// FindCoordinator (10), as librdkafka (single key).
pub const FIND_COORDINATOR: i16 = 2;
/// JoinGroup (11), as librdkafka (KIP-394 member ids apply from v4).
pub const JOIN_GROUP: i16 = 5;
/// SyncGroup (14), as librdkafka.
pub const SYNC_GROUP: i16 = 3;
/// Heartbeat (12), as librdkafka.
pub const HEARTBEAT: i16 = 3;
/// LeaveGroup (13), as kafkajs: the first version with a member list.
pub const LEAVE_GROUP: i16 = 3;
/// OffsetCommit (8), as kafka-python.
pub const OFFSET_COMMIT: i16 = 8;
/// OffsetFetch (9), as librdkafka 2.0 (the last single-group form).
pub const OFFSET_FETCH: i16 = 7;
/// ListGroups (16), with the states filter of v4.
pub const LIST_GROUPS: i16 = 4;
/// ConsumerProtocolSubscription version written in JoinGroup metadata.
pub const SUBSCRIPTION: i16 = 1;
/// ConsumerProtocolAssignment version written in SyncGroup assignments.
pub const ASSIGNMENT: i16 = 1;
