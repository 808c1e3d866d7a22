//! A partition log's settings, with Kafka's names and defaults. Parsing and validating them
//! from topic configs happens where topics are managed; here they are already typed.

use std::time::Duration;

/// What happens to old data (`cleanup.policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// Delete whole segments by age or size.
    #[default]
    Delete,
    /// Keep the newest record per key.
    Compact,
    /// Both: compact, and delete by age or size.
    CompactDelete,
}

impl CleanupPolicy {
    /// Whether the cleaner compacts this log (and keyless records are refused).
    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }

    /// Whether retention deletes segments of this log.
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }
}

/// Which timestamp a record carries (`message.timestamp.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampPolicy {
    /// The producer's timestamp is kept.
    #[default]
    CreateTime,
    /// The broker overwrites it with its wall clock at append.
    LogAppendTime,
}

/// When appended data is made durable (`flush.policy`, Weir's own setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// An append completes only once its bytes are synced; many appends share one sync (group
    /// commit). The default: an acknowledged write survives power loss.
    #[default]
    Ack,
    /// Sync every `flush.ms` / `flush.messages` (Kafka's behaviour: durability comes from
    /// replication, not the disk).
    Interval,
}

/// Settings of one partition log.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll the active segment once it is this old (by its first batch's time).
    pub segment_ms: i64,
    /// `retention.ms`: delete segments whose newest record is older; negative keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete the oldest segments while the log is larger; negative means no
    /// limit.
    pub retention_bytes: i64,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: usize,
    /// `delete.retention.ms`: how long a tombstone outlives compaction.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: compact once this share of the log is uncompacted.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a record stays uncompacted at least this long after its
    /// timestamp (no segment holding a newer one is cleaned).
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a record is compacted at most about this long after its
    /// timestamp, whatever the dirty ratio (and the active segment rolls at this age).
    pub max_compaction_lag_ms: i64,
    /// `message.timestamp.before.max.ms`: under CreateTime, how far before the broker's clock a
    /// produced record's timestamp may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: under CreateTime, how far after the broker's clock a
    /// produced record's timestamp may be.
    pub timestamp_after_max_ms: i64,
    /// `message.timestamp.type`.
    pub timestamp_policy: TimestampPolicy,
    /// `flush.policy`.
    pub flush_policy: FlushPolicy,
    /// `flush.ms`: under the interval policy, sync at least this often.
    pub flush_ms: i64,
    /// `flush.messages`: under the interval policy, sync after this many records.
    pub flush_messages: i64,
    /// `index.interval.bytes`: bytes of log between two offset-index entries.
    pub index_interval_bytes: u64,
    /// `segment.index.bytes`: roll when a segment's offset index would grow past this size.
    pub segment_index_bytes: u64,
}

/// Kafka's 7 days.
pub const WEEK_MS: i64 = 7 * 24 * 3_600_000;
/// Kafka's 1 day.
pub const DAY_MS: i64 = 24 * 3_600_000;
/// Kafka's default `message.timestamp.after.max.ms` (since 4.0): an hour.
pub const TIMESTAMP_AFTER_MAX_MS_DEFAULT: i64 = 3_600_000;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: WEEK_MS,
            retention_ms: WEEK_MS,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::Delete,
            max_message_bytes: super::batch::MESSAGE_MAX_BYTES_DEFAULT,
            delete_retention_ms: DAY_MS,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: TIMESTAMP_AFTER_MAX_MS_DEFAULT,
            timestamp_policy: TimestampPolicy::CreateTime,
            flush_policy: FlushPolicy::Ack,
            flush_ms: i64::MAX,
            flush_messages: i64::MAX,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 << 20,
        }
    }
}

impl LogConfig {
    /// How old the active segment may grow before it rolls: `segment.ms`, or on a compacted
    /// log `max.compaction.lag.ms` if sooner (the cleaner never touches the active segment, so
    /// records could otherwise wait in it past their lag), as Kafka's `LogConfig.maxSegmentMs`.
    pub fn roll_ms(&self) -> i64 {
        if self.cleanup_policy.compacts() {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

    /// `flush.ms` as a duration (saturating; `i64::MAX` means never by time).
    pub fn flush_interval(&self) -> Option<Duration> {
        (self.flush_ms >= 0 && self.flush_ms < i64::MAX)
            .then(|| Duration::from_millis(self.flush_ms as u64))
    }
}
