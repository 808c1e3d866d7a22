//! What can go wrong with a call, split by what the caller may conclude from it.
//!
//! The split is the point: a checker may treat a request that was never sent as not having
//! happened, but a request that was sent and got no answer (a timeout, a reset, a closed
//! connection, an answer that would not decode) may or may not have taken effect. Such an
//! outcome is *indeterminate* and must never be guessed either way. [`CallError`] lives with
//! the broker's client; [`ClientError`] adds the broker's answers.

pub use weir::client::CallError;

/// Why a higher-level client operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The exchange itself failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The broker answered with a Kafka error code.
    #[error("broker error code {0}")]
    Kafka(i16),
    /// The broker's answer lacked something the request asked for.
    #[error("malformed answer: {0}")]
    Malformed(&'static str),
}

impl ClientError {
    /// Whether the operation may have taken effect (see [`CallError::is_indeterminate`]). An
    /// error code is an answer, so it is determinate at this level; callers that know a code
    /// leaves the outcome open (a storage error after an append) decide for themselves.
    pub fn is_indeterminate(&self) -> bool {
        match self {
            ClientError::Call(e) => e.is_indeterminate(),
            ClientError::Kafka(_) | ClientError::Malformed(_) => false,
        }
    }

    /// The Kafka error code, if the broker answered with one.
    pub fn code(&self) -> Option<i16> {
        match self {
            ClientError::Kafka(code) => Some(*code),
            _ => None,
        }
    }
}

/// Kafka error codes the client and workloads act on.
pub mod codes {
    /// No error.
    pub const NONE: i16 = 0;
    /// OFFSET_OUT_OF_RANGE.
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    /// CORRUPT_MESSAGE.
    pub const CORRUPT_MESSAGE: i16 = 2;
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// LEADER_NOT_AVAILABLE.
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    /// NOT_LEADER_OR_FOLLOWER.
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    /// REQUEST_TIMED_OUT.
    pub const REQUEST_TIMED_OUT: i16 = 7;
    /// COORDINATOR_LOAD_IN_PROGRESS.
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// COORDINATOR_NOT_AVAILABLE.
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// NOT_COORDINATOR.
    pub const NOT_COORDINATOR: i16 = 16;
    /// INVALID_TOPIC_EXCEPTION.
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    /// ILLEGAL_GENERATION.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// UNKNOWN_MEMBER_ID.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// REBALANCE_IN_PROGRESS.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// TOPIC_ALREADY_EXISTS.
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    /// NOT_CONTROLLER.
    pub const NOT_CONTROLLER: i16 = 41;
    /// POLICY_VIOLATION.
    pub const POLICY_VIOLATION: i16 = 44;
    /// OUT_OF_ORDER_SEQUENCE_NUMBER.
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    /// DUPLICATE_SEQUENCE_NUMBER.
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    /// INVALID_PRODUCER_EPOCH.
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    /// KAFKA_STORAGE_ERROR.
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    /// UNKNOWN_PRODUCER_ID.
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    /// MEMBER_ID_REQUIRED (KIP-394): re-join with the member id given.
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    /// PREFERRED_LEADER_NOT_AVAILABLE.
    pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE.
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
    /// ELECTION_NOT_NEEDED.
    pub const ELECTION_NOT_NEEDED: i16 = 84;
    /// INVALID_REPLICATION_FACTOR.
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    /// INVALID_REPLICA_ASSIGNMENT.
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    /// INVALID_REQUEST.
    pub const INVALID_REQUEST: i16 = 42;
    /// NO_REASSIGNMENT_IN_PROGRESS.
    pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
}
