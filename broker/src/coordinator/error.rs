//! The coordinator's typed errors: [`GroupError`], the per-request outcomes Kafka clients
//! understand (mapped to wire codes at the edge), and [`PersistError`], what the caller reports
//! when a batch of `__consumer_offsets` records could not be made durable.
//!
//! One enum serves every group API because the APIs share nearly all of their errors; each
//! request type documents which variants it can carry.

use kafka_protocol::ResponseError;

/// Why a group request (or one partition or member inside it) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// UNKNOWN_SERVER_ERROR (-1): a request the coordinator cannot make sense of (e.g. a
    /// pending dynamic member rejoining with a `group.instance.id`), or an oversized write.
    #[error("unknown server error")]
    UnknownServerError,
    /// UNKNOWN_TOPIC_OR_PARTITION (3): a commit to a topic deleted, or made again under a new
    /// id, since the image the commit was checked against.
    #[error("the topic was deleted")]
    UnknownTopicOrPartition,
    /// OFFSET_METADATA_TOO_LARGE (12).
    #[error("offset metadata is larger than offset.metadata.max.bytes")]
    OffsetMetadataTooLarge,
    /// COORDINATOR_NOT_AVAILABLE (15): the group is being deleted, or its records could not be
    /// replicated in time; retry.
    #[error("the coordinator is not available")]
    CoordinatorNotAvailable,
    /// NOT_COORDINATOR (16): this node no longer owns the group (e.g. it lost the
    /// `__consumer_offsets` partition); find the coordinator again.
    #[error("this is not the group's coordinator")]
    NotCoordinator,
    /// ILLEGAL_GENERATION (22).
    #[error("the generation is not the group's current generation")]
    IllegalGeneration,
    /// INCONSISTENT_GROUP_PROTOCOL (23).
    #[error("the member's protocols are incompatible with the group's")]
    InconsistentGroupProtocol,
    /// INVALID_GROUP_ID (24): empty or unencodable.
    #[error("invalid group id")]
    InvalidGroupId,
    /// UNKNOWN_MEMBER_ID (25).
    #[error("unknown member id")]
    UnknownMemberId,
    /// INVALID_SESSION_TIMEOUT (26).
    #[error("session timeout outside the broker's allowed range")]
    InvalidSessionTimeout,
    /// REBALANCE_IN_PROGRESS (27): rejoin.
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    /// INVALID_REQUEST (42): a field that could never have come off the wire (a string longer
    /// than a Kafka string can be).
    #[error("invalid request")]
    InvalidRequest,
    /// NON_EMPTY_GROUP (68).
    #[error("the group is not empty")]
    NonEmptyGroup,
    /// GROUP_ID_NOT_FOUND (69).
    #[error("the group does not exist")]
    GroupIdNotFound,
    /// MEMBER_ID_REQUIRED (79): rejoin with the member id in the response (KIP-394).
    #[error("a member id is required; rejoin with the one assigned")]
    MemberIdRequired,
    /// GROUP_MAX_SIZE_REACHED (81).
    #[error("the group has reached group.max.size")]
    GroupMaxSizeReached,
    /// FENCED_INSTANCE_ID (82): another member has taken over this `group.instance.id`.
    #[error("fenced: another member has this group.instance.id")]
    FencedInstanceId,
    /// GROUP_SUBSCRIBED_TO_TOPIC (86).
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    /// INVALID_COMMIT_OFFSET_SIZE (28): the commit's records are more than the offsets topic
    /// takes in one batch.
    #[error("the commit is too large for the offsets topic")]
    InvalidCommitOffsetSize,
}

impl GroupError {
    /// The Kafka error this is.
    pub fn response_error(self) -> ResponseError {
        match self {
            GroupError::UnknownServerError => ResponseError::UnknownServerError,
            GroupError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
            GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
            GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
            GroupError::NotCoordinator => ResponseError::NotCoordinator,
            GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
            GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
            GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
            GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
            GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
            GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
            GroupError::InvalidRequest => ResponseError::InvalidRequest,
            GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
            GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
            GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
            GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
            GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
            GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
            GroupError::InvalidCommitOffsetSize => ResponseError::InvalidCommitOffsetSize,
        }
    }

    /// The wire error code.
    pub fn code(self) -> i16 {
        self.response_error().code()
    }
}

/// The wire code of an optional error: 0 for success.
pub fn error_code(error: Option<GroupError>) -> i16 {
    error.map_or(0, GroupError::code)
}

/// Why a batch of records could not be appended to `__consumer_offsets` durably.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PersistError {
    /// This node is not (or no longer) the leader of the `__consumer_offsets` partition.
    #[error("not the leader of the offsets partition")]
    NotLeader,
    /// The local log failed (I/O error, fsync failure; the log is offline).
    #[error("storage error")]
    Storage,
    /// Too few in-sync replicas to accept the write.
    #[error("not enough replicas")]
    NotEnoughReplicas,
    /// The write was not replicated in time.
    #[error("timed out")]
    TimedOut,
    /// The batch is larger than the partition accepts.
    #[error("record batch too large")]
    TooLarge,
}

impl PersistError {
    /// What a client is told, as Kafka's coordinator maps append errors
    /// (`appendGroupMetadataErrorToResponseError`, `CoordinatorOperationExceptionHelper`).
    pub fn group_error(self) -> GroupError {
        match self {
            PersistError::NotLeader | PersistError::Storage => GroupError::NotCoordinator,
            PersistError::NotEnoughReplicas | PersistError::TimedOut => {
                GroupError::CoordinatorNotAvailable
            }
            PersistError::TooLarge => GroupError::UnknownServerError,
        }
    }

    /// What an offset commit's client is told: as [`PersistError::group_error`], but
    /// INVALID_COMMIT_OFFSET_SIZE for a commit too large for the offsets topic, as Kafka's
    /// `OffsetMetadataManager` answers.
    pub fn commit_error(self) -> GroupError {
        match self {
            PersistError::TooLarge => GroupError::InvalidCommitOffsetSize,
            other => other.group_error(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_kafka() {
        assert_eq!(GroupError::MemberIdRequired.code(), 79);
        assert_eq!(GroupError::FencedInstanceId.code(), 82);
        assert_eq!(GroupError::RebalanceInProgress.code(), 27);
        assert_eq!(GroupError::UnknownMemberId.code(), 25);
        assert_eq!(GroupError::IllegalGeneration.code(), 22);
        assert_eq!(GroupError::InconsistentGroupProtocol.code(), 23);
        assert_eq!(GroupError::InvalidSessionTimeout.code(), 26);
        assert_eq!(GroupError::GroupMaxSizeReached.code(), 81);
        assert_eq!(GroupError::GroupIdNotFound.code(), 69);
        assert_eq!(GroupError::NonEmptyGroup.code(), 68);
        assert_eq!(GroupError::GroupSubscribedToTopic.code(), 86);
        assert_eq!(error_code(None), 0);
    }

    #[test]
    fn persist_errors_map_like_kafka() {
        assert_eq!(PersistError::Storage.group_error(), GroupError::NotCoordinator);
        assert_eq!(PersistError::NotLeader.group_error(), GroupError::NotCoordinator);
        assert_eq!(PersistError::TimedOut.group_error(), GroupError::CoordinatorNotAvailable);
        assert_eq!(PersistError::TooLarge.group_error(), GroupError::UnknownServerError);
        assert_eq!(PersistError::TooLarge.commit_error(), GroupError::InvalidCommitOffsetSize);
        assert_eq!(PersistError::Storage.commit_error(), GroupError::NotCoordinator);
        assert_eq!(GroupError::InvalidCommitOffsetSize.code(), 28);
    }
}
