//! Helpers for scenarios that drive one partition log: a log whose every batch fills a segment,
//! small keyed batches that tell themselves apart, and reading a whole log back.

use std::path::PathBuf;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};

/// Records in a [`batch`].
pub const BATCH_RECORDS: i64 = 3;

/// The log's folder.
pub fn dir() -> PathBuf {
    PathBuf::from("events-0")
}

/// Settings under which each [`batch`] fills a segment: every append seals the one before.
pub fn segment_per_batch() -> LogConfig {
    LogConfig { segment_bytes: 1_000, ..LogConfig::default() }
}

/// Batch `n` — [`BATCH_RECORDS`] keyed records of 200 bytes of `n` — as a client sends it, or
/// (`stored`) as a log stores it from that offset in that epoch.
pub fn batch(n: u8, stored: Option<(Offset, LeaderEpoch)>) -> Bytes {
    let records: Vec<RecordSpec> = (0..BATCH_RECORDS as i32)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000,
            key: Some(Bytes::from(format!("k{n}-{i}"))),
            value: Some(Bytes::from(vec![n; 200])),
            headers: Vec::new(),
        })
        .collect();
    let options = match stored {
        Some((at, epoch)) => {
            BatchOptions { base_offset: at.0, leader_epoch: epoch.0, ..Default::default() }
        }
        None => BatchOptions::default(),
    };
    encode_batch(&records, &options).expect("a valid batch")
}

/// Every batch of the log, in order, read from its start to its end.
pub async fn all_batches(log: &Log) -> Result<Vec<Bytes>, String> {
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    let mut batches = Vec::new();
    while at < end {
        let read = log.read(at, 1 << 20, end).await.map_err(|e| e.to_string())?;
        if read.next_offset <= at {
            return Err(format!("a read at {at} made no progress (log end {end})"));
        }
        for b in split_batches(&read.records) {
            batches.push(b.map_err(|e| e.to_string())?);
        }
        at = read.next_offset;
    }
    Ok(batches)
}
