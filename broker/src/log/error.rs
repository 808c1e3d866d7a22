//! The log's typed errors, one per operation. The server maps them to Kafka error codes at the
//! edge.

use std::io;

use super::batch::BatchError;
use crate::model::Offset;

/// Why a log cannot be used any more until the broker restarts and recovers it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Offline {
    /// A sync failed: data the OS said it held may be gone (fsyncgate), so nothing after the
    /// last successful sync can be trusted.
    #[error("fsync failed ({0:?}); the log is offline until recovered from disk")]
    SyncFailed(io::ErrorKind),
    /// A write failed: the file's tail is in an unknown state.
    #[error("write failed ({0:?}); the log is offline until recovered from disk")]
    WriteFailed(io::ErrorKind),
    /// The log was closed.
    #[error("the log is closed")]
    Closed,
}

/// Most records one refusal names ([`AppendError::TimestampOutOfRange`]), so that the answer
/// to a batch of many bad records stays small; the message says how many there were.
pub const RECORD_ERRORS_MAX: usize = 100;

/// Why an append was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The batch is malformed, corrupt or too large; nothing was written.
    #[error("invalid batch: {0}")]
    Invalid(#[from] BatchError),
    /// A compacted log refuses records without a key; nothing was written.
    #[error("a record without a key cannot be appended to a compacted log")]
    KeylessOnCompacted,
    /// Under CreateTime, records whose timestamps lie outside the topic's bounds
    /// (`message.timestamp.before.max.ms` / `after.max.ms` around the broker's clock); nothing
    /// was written.
    #[error(
        "{count} record(s) have timestamps out of range, the first (record {}) {first}; timestamps must lie within [{lower}, {upper}]",
        records.first().map_or(0, |r| *r)
    )]
    TimestampOutOfRange {
        /// The positions in the batch of the first records out of range (at most
        /// [`RECORD_ERRORS_MAX`]).
        records: Vec<u32>,
        /// How many records are out of range.
        count: u64,
        /// The first such record's timestamp.
        first: i64,
        /// The earliest timestamp allowed.
        lower: i64,
        /// The latest timestamp allowed.
        upper: i64,
    },
    /// The disk is full; the batch was not written.
    #[error("disk full")]
    DiskFull,
    /// The process has no file descriptor left to start a new segment or record a new leader
    /// epoch; the batch was not written.
    #[error("out of file descriptors")]
    OutOfDescriptors,
    /// The log is offline (and the batch was not appended, or, if the failure happened during
    /// the write or sync, may or may not be on disk).
    #[error(transparent)]
    Offline(#[from] Offline),
    /// The batch comes from an older leader epoch than one that already wrote to this log.
    #[error("leader epoch {got} is older than the log's latest epoch {latest}")]
    StaleEpoch {
        /// The epoch of the append.
        got: crate::model::LeaderEpoch,
        /// The newest epoch in the log.
        latest: crate::model::LeaderEpoch,
    },
    /// A follower append did not continue the log where it ends.
    #[error("batch at offset {got} does not continue the log at {expected}")]
    OutOfOrder {
        /// The log end offset.
        expected: Offset,
        /// The batch's base offset.
        got: Offset,
    },
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The offset is before the log start or after the log end.
    #[error("offset {offset} is outside the log [{log_start}, {log_end}]")]
    OutOfRange {
        /// The offset asked for.
        offset: Offset,
        /// The first offset kept.
        log_start: Offset,
        /// The offset the next append gets.
        log_end: Offset,
    },
    /// Stored bytes failed their checksum twice: the disk holds corrupt data at this offset.
    #[error("stored batch at offset {offset} is corrupt: {cause}")]
    Corrupt {
        /// Offset of the batch, as far as it could be told.
        offset: Offset,
        /// What failed.
        cause: BatchError,
        /// The first offset past the damage from which reads go on, where the batches after
        /// the damaged one vouch for where they start (see `walk::walk_past`); `None` if that
        /// is not known.
        resume: Option<Offset>,
    },
    /// The disk failed the read.
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
    /// The log is offline.
    #[error(transparent)]
    Offline(#[from] Offline),
}

impl ReadError {
    /// Stored bytes at `offset` failed their checks, with no word on where reads go on.
    pub fn corrupt(offset: Offset, cause: BatchError) -> ReadError {
        ReadError::Corrupt { offset, cause, resume: None }
    }
}

/// Why a log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The disk failed.
    #[error("opening log {dir}: {source}")]
    Io {
        /// The log's folder.
        dir: String,
        /// The cause.
        source: io::Error,
    },
    /// The checkpoint after recovery failed.
    #[error("checkpointing log {dir} after recovery: {source}")]
    Checkpoint {
        /// The log's folder.
        dir: String,
        /// The cause.
        source: MaintenanceError,
    },
}

/// Why a background operation (flush, checkpoint, retention, compaction) failed.
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    /// The disk failed.
    #[error("disk: {0}")]
    Io(#[from] io::Error),
    /// The log is offline.
    #[error(transparent)]
    Offline(#[from] Offline),
    /// Stored data failed its checksum.
    #[error("corrupt data: {0}")]
    Corrupt(#[from] BatchError),
    /// A stored batch, starting at `offset` as far as a walk could tell, fails its checks.
    #[error("the stored batch at offset {offset} is corrupt: {cause}")]
    Damaged {
        /// Where the batch starts.
        offset: Offset,
        /// What failed.
        cause: BatchError,
    },
    /// The compaction cleaner's offset map cannot hold even the first key of the dirty section,
    /// so no pass could ever make progress.
    #[error(
        "the key of {key_bytes} bytes at offset {offset} does not fit the cleaner's offset map of {map_bytes_max} bytes"
    )]
    CleanerMapTooSmall {
        /// The record whose key did not fit.
        offset: Offset,
        /// Its key's length.
        key_bytes: usize,
        /// The map's budget.
        map_bytes_max: usize,
    },
}
