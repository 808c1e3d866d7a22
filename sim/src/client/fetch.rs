//! Fetch (v12, topics by name): a long poll for records from several partitions, decoded into
//! offsets, keys and values. Batches are checked (length, CRC) as a real client checks them; a
//! corrupt batch is reported, never silently skipped.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use weir::log::batch::BatchError;
use weir::log::records::records;
use weir::log::split::split_batches;

use kafka_protocol::ResponseError;

use super::admin::name;
use super::{Client, ClientError, versions};

/// Largest response asked for.
pub const FETCH_BYTES_MAX: i32 = 1 << 20;
/// Largest share of a response per partition.
pub const FETCH_PARTITION_BYTES_MAX: i32 = 256 << 10;
/// How much longer than the long poll the client waits for the answer.
pub const FETCH_DEADLINE_SLACK: Duration = Duration::from_secs(5);

/// One partition to fetch from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchWant {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The first offset wanted.
    pub offset: i64,
}

/// One record as fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedRecord {
    /// Its offset.
    pub offset: i64,
    /// Its key.
    pub key: Option<Bytes>,
    /// Its value (`None`: null).
    pub value: Option<Bytes>,
}

/// One partition's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset asked for.
    pub fetch_offset: i64,
    /// The error code.
    pub error_code: i16,
    /// The high watermark reported.
    pub high_watermark: i64,
    /// The log start offset reported.
    pub log_start_offset: i64,
    /// Records at or after `fetch_offset`, in the order they came.
    pub records: Vec<FetchedRecord>,
    /// Why a batch could not be read, if one could not (a whole batch that fails its checks).
    pub corrupt: Option<String>,
}

/// Decodes a partition's record bytes. A trailing partial batch is where the broker cut the
/// response at a size limit, as clients treat it; anything else wrong is corruption.
fn decode(bytes: &Bytes, from: i64) -> (Vec<FetchedRecord>, Option<String>) {
    let mut out = Vec::new();
    for batch in split_batches(bytes) {
        let batch = match batch {
            Ok(batch) => batch,
            Err(BatchError::TooShort { .. }) if !out.is_empty() => break,
            Err(e) => return (out, Some(e.to_string())),
        };
        match records(&batch) {
            Ok(recs) => {
                out.extend(recs.into_iter().filter(|r| r.offset >= from).map(|r| FetchedRecord {
                    offset: r.offset,
                    key: r.key,
                    value: r.value,
                }))
            }
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

impl Client {
    /// Fetches from every partition in `wants`, waiting up to `max_wait` for at least one byte.
    pub async fn fetch(
        &mut self,
        wants: &[FetchWant],
        max_wait: Duration,
    ) -> Result<Vec<FetchedPartition>, ClientError> {
        let mut request = FetchRequest::default();
        request.max_wait_ms = max_wait.as_millis() as i32;
        request.min_bytes = 1;
        request.max_bytes = FETCH_BYTES_MAX;
        request.isolation_level = 0;
        request.session_id = 0;
        request.session_epoch = -1;
        for want in wants {
            let mut part = FetchPartition::default();
            part.partition = want.partition;
            part.fetch_offset = want.offset;
            part.partition_max_bytes = FETCH_PARTITION_BYTES_MAX;
            match request.topics.iter_mut().find(|t| t.topic.0.as_str() == want.topic) {
                Some(topic) => topic.partitions.push(part),
                None => {
                    let mut topic = FetchTopic::default();
                    topic.topic = name(&want.topic);
                    topic.partitions.push(part);
                    request.topics.push(topic);
                }
            }
        }
        let deadline = max_wait + FETCH_DEADLINE_SLACK;
        let response = self.call(&request, versions::FETCH, deadline).await?;
        if response.error_code != 0 {
            return Err(ClientError::Kafka(response.error_code));
        }
        let mut out = Vec::new();
        for topic in &response.responses {
            for p in &topic.partitions {
                let topic_name = topic.topic.0.to_string();
                let Some(want) = wants
                    .iter()
                    .find(|w| w.topic == topic_name && w.partition == p.partition_index)
                else {
                    return Err(ClientError::Malformed("a partition that was not asked for"));
                };
                let (records, corrupt) = match &p.records {
                    Some(bytes) => decode(bytes, want.offset),
                    None => (Vec::new(), None),
                };
                out.push(FetchedPartition {
                    topic: topic_name,
                    partition: p.partition_index,
                    fetch_offset: want.offset,
                    error_code: p.error_code,
                    high_watermark: p.high_watermark,
                    log_start_offset: p.log_start_offset,
                    records,
                    corrupt,
                });
            }
        }
        Ok(out)
    }
}

impl Client {
    /// Every record of `topic`/`partition` from its log start up to the high watermark, by
    /// offset (null values read as empty). An error code, a corrupt batch or a gap below the high
    /// watermark is an error.
    pub async fn read_to_end(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<std::collections::BTreeMap<i64, Bytes>, String> {
        let mut out = std::collections::BTreeMap::new();
        let mut at = 0;
        loop {
            let want = FetchWant { topic: topic.to_owned(), partition, offset: at };
            let parts = self.fetch(&[want], Duration::from_millis(100)).await;
            let part = parts.map_err(|e| e.to_string())?.into_iter().next();
            let Some(p) = part else { return Err("no partition answer".to_owned()) };
            if p.error_code == ResponseError::OffsetOutOfRange.code() && at < p.log_start_offset {
                // Deleted below the log start: what is readable begins there.
                at = p.log_start_offset;
                continue;
            }
            if p.error_code != 0 {
                return Err(format!("error code {}", p.error_code));
            }
            if let Some(corrupt) = p.corrupt {
                return Err(format!("corrupt batch at {at}: {corrupt}"));
            }
            if p.records.is_empty() {
                return if at >= p.high_watermark {
                    Ok(out)
                } else {
                    Err(format!("nothing readable at {at} below {}", p.high_watermark))
                };
            }
            for r in p.records {
                at = r.offset + 1;
                out.insert(r.offset, r.value.unwrap_or_default());
            }
        }
    }
}
