//! The durable partition log: RecordBatch v2 bytes as clients send them, validated and stamped in
//! place, and the segments, indexes, recovery, retention and compaction that keep them.
//!
//! [`batch`] is the only way bytes from a client or a disk become a trusted batch; everything that
//! must look inside one goes through [`records`].

pub mod batch;
pub mod encode;
pub mod inflate;
pub mod records;
pub mod split;
mod wire;

mod append;
pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod crc;
pub mod epochs;
pub mod error;
mod flush;
pub mod index;
mod open;
mod partition_log;
pub mod producers;
mod read;
mod repair;
mod retention;
mod sealed;
mod segment;
mod truncate;
mod walk;

pub(crate) use append::Shortage;
pub use append::{AppendInfo, ReplicatedAppend, ValidBatch};
pub use cleaner::{CleanOutcome, CleanStats};
pub use config::{CleanupPolicy, FlushPolicy, LogConfig, TimestampPolicy};
pub use error::{AppendError, MaintenanceError, Offline, OpenError, RECORD_ERRORS_MAX, ReadError};
pub use open::{PARTITION_CHECKPOINT, PartitionCheckpoint};
pub use partition_log::{Log, RecoveryPoint};
pub use read::{INDEX_SLACK_BYTES, ReadResult};
pub use repair::Repair;
pub use retention::RetentionOutcome;
pub use sealed::OPEN_INDEX_FILES;
