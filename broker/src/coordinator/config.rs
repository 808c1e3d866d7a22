//! The group coordinator's settings, named after Kafka's broker configs with the unit last.
//!
//! Defaults are Kafka's, so clients tuned against Kafka behave the same here. Tests usually want
//! `initial_rebalance_delay_ms = 0` so that the first generation forms at the next tick.

/// Group coordinator configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// `group.min.session.timeout.ms`: joins asking for a shorter session are refused with
    /// INVALID_SESSION_TIMEOUT.
    pub session_timeout_ms_min: i32,
    /// `group.max.session.timeout.ms`: joins asking for a longer session are refused.
    pub session_timeout_ms_max: i32,
    /// `group.initial.rebalance.delay.ms`: how long an empty group waits for more members before
    /// forming its first generation (extended while members keep arriving, up to the rebalance
    /// timeout).
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`: members per group; joins beyond it get GROUP_MAX_SIZE_REACHED.
    pub group_members_max: usize,
    /// How long a brand-new member's JoinGroup may stay parked before the member is dropped
    /// (Kafka's `classicGroupNewMemberJoinTimeoutMs`, 5 minutes): its socket is muted while
    /// parked, so a session timeout cannot detect that it went away.
    pub new_member_join_timeout_ms: i32,
    /// `offset.metadata.max.bytes`: longer commit metadata gets OFFSET_METADATA_TOO_LARGE.
    pub offset_metadata_bytes_max: usize,
    /// `offsets.retention.minutes`, in milliseconds: how long offsets of an empty group (or a
    /// simple consumer's offsets, since their commit) are kept.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are looked for.
    pub offsets_retention_check_interval_ms: i64,
}

impl Default for CoordinatorConfig {
    fn default() -> CoordinatorConfig {
        CoordinatorConfig {
            session_timeout_ms_min: 6_000,
            session_timeout_ms_max: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            group_members_max: usize::MAX,
            new_member_join_timeout_ms: 5 * 60 * 1_000,
            offset_metadata_bytes_max: 4_096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1_000,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
}

impl CoordinatorConfig {
    /// Kafka's defaults with no initial rebalance delay, which is what tests want.
    pub fn for_tests() -> CoordinatorConfig {
        CoordinatorConfig { initial_rebalance_delay_ms: 0, ..CoordinatorConfig::default() }
    }
}
