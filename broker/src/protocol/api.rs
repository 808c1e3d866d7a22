//! The APIs Weir answers and the versions it advertises, as two enums generated from one list:
//! [`Request`] (decoded bodies) and [`Response`] (bodies to encode).

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, VersionRange};

macro_rules! apis {
    ($($key:ident: $request:ident => $response:ident, $min:literal..=$max:literal;)*) => {
        /// A decoded request body.
        #[derive(Debug, Clone)]
        #[allow(missing_docs, clippy::large_enum_variant)]
        pub enum Request {
            $($key($request),)*
        }

        /// A response body.
        #[derive(Debug, Clone)]
        #[allow(missing_docs, clippy::large_enum_variant)]
        pub enum Response {
            $($key($response),)*
        }

        /// Every API Weir answers, with the versions it advertises.
        pub const SUPPORTED_APIS: &[(ApiKey, VersionRange)] = &[
            $((ApiKey::$key, VersionRange { min: $min, max: $max }),)*
        ];

        impl Request {
            /// Decodes the body of `key` at `version`; `None` if Weir does not answer `key`.
            pub(crate) fn decode(key: ApiKey, version: i16, body: &mut Bytes) -> Option<anyhow_free::Result<Request>> {
                match key {
                    $(ApiKey::$key => Some($request::decode(body, version).map(Request::$key).map_err(anyhow_free::Error::from)),)*
                    _ => None,
                }
            }

            /// The API this request belongs to.
            pub fn key(&self) -> ApiKey {
                match self {
                    $(Request::$key(_) => ApiKey::$key,)*
                }
            }
        }

        impl Response {
            /// Encodes the body at `version`.
            pub(crate) fn encode<B: kafka_protocol::protocol::buf::ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow_free::Result<()> {
                match self {
                    $(Response::$key(r) => r.encode(buf, version).map_err(anyhow_free::Error::from),)*
                }
            }

            /// Bytes [`Response::encode`] will write at `version`.
            pub(crate) fn compute_size(&self, version: i16) -> anyhow_free::Result<usize> {
                match self {
                    $(Response::$key(r) => r.compute_size(version).map_err(anyhow_free::Error::from),)*
                }
            }

            /// The API this response belongs to.
            pub fn key(&self) -> ApiKey {
                match self {
                    $(Response::$key(_) => ApiKey::$key,)*
                }
            }
        }
    };
}

apis! {
    Produce: ProduceRequest => ProduceResponse, 3..=13;
    Fetch: FetchRequest => FetchResponse, 4..=17;
    ListOffsets: ListOffsetsRequest => ListOffsetsResponse, 1..=10;
    Metadata: MetadataRequest => MetadataResponse, 0..=13;
    OffsetCommit: OffsetCommitRequest => OffsetCommitResponse, 2..=9;
    OffsetFetch: OffsetFetchRequest => OffsetFetchResponse, 1..=9;
    FindCoordinator: FindCoordinatorRequest => FindCoordinatorResponse, 0..=6;
    JoinGroup: JoinGroupRequest => JoinGroupResponse, 0..=9;
    Heartbeat: HeartbeatRequest => HeartbeatResponse, 0..=4;
    LeaveGroup: LeaveGroupRequest => LeaveGroupResponse, 0..=5;
    SyncGroup: SyncGroupRequest => SyncGroupResponse, 0..=5;
    DescribeGroups: DescribeGroupsRequest => DescribeGroupsResponse, 0..=5;
    ListGroups: ListGroupsRequest => ListGroupsResponse, 0..=5;
    ApiVersions: ApiVersionsRequest => ApiVersionsResponse, 0..=4;
    CreateTopics: CreateTopicsRequest => CreateTopicsResponse, 2..=7;
    DeleteTopics: DeleteTopicsRequest => DeleteTopicsResponse, 1..=6;
    DeleteRecords: DeleteRecordsRequest => DeleteRecordsResponse, 0..=2;
    InitProducerId: InitProducerIdRequest => InitProducerIdResponse, 0..=5;
    OffsetForLeaderEpoch: OffsetForLeaderEpochRequest => OffsetForLeaderEpochResponse, 2..=4;
    DescribeConfigs: DescribeConfigsRequest => DescribeConfigsResponse, 1..=4;
    DescribeLogDirs: DescribeLogDirsRequest => DescribeLogDirsResponse, 1..=4;
    AlterConfigs: AlterConfigsRequest => AlterConfigsResponse, 0..=2;
    CreatePartitions: CreatePartitionsRequest => CreatePartitionsResponse, 0..=3;
    DeleteGroups: DeleteGroupsRequest => DeleteGroupsResponse, 0..=2;
    IncrementalAlterConfigs: IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse, 0..=1;
    OffsetDelete: OffsetDeleteRequest => OffsetDeleteResponse, 0..=0;
    DescribeCluster: DescribeClusterRequest => DescribeClusterResponse, 0..=1;
    ElectLeaders: ElectLeadersRequest => ElectLeadersResponse, 0..=2;
    AlterPartitionReassignments: AlterPartitionReassignmentsRequest => AlterPartitionReassignmentsResponse, 0..=1;
    ListPartitionReassignments: ListPartitionReassignmentsRequest => ListPartitionReassignmentsResponse, 0..=0;
    DescribeProducers: DescribeProducersRequest => DescribeProducersResponse, 0..=0;
    DescribeQuorum: DescribeQuorumRequest => DescribeQuorumResponse, 0..=2;
    DescribeAcls: DescribeAclsRequest => DescribeAclsResponse, 1..=3;
    CreateAcls: CreateAclsRequest => CreateAclsResponse, 1..=3;
    DeleteAcls: DeleteAclsRequest => DeleteAclsResponse, 1..=3;
    DescribeClientQuotas: DescribeClientQuotasRequest => DescribeClientQuotasResponse, 0..=1;
    DescribeUserScramCredentials: DescribeUserScramCredentialsRequest => DescribeUserScramCredentialsResponse, 0..=0;
    ListTransactions: ListTransactionsRequest => ListTransactionsResponse, 0..=1;
}

/// The versions Weir advertises for `key`, if it answers it at all.
pub fn supported_range(key: ApiKey) -> Option<VersionRange> {
    SUPPORTED_APIS.iter().find(|(k, _)| *k == key).map(|(_, range)| *range)
}

/// Errors from the protocol crate, without exposing its error type in our signatures.
pub(crate) mod anyhow_free {
    /// A decode or encode failure inside the protocol crate.
    #[derive(Debug)]
    pub struct Error(pub(crate) String);

    impl<E: std::fmt::Display> From<E> for Error {
        fn from(e: E) -> Error {
            Error(e.to_string())
        }
    }

    /// Result with [`Error`].
    pub type Result<T> = std::result::Result<T, Error>;
}
