//! An append writes a produced batch's records from the buffer the request was read into: only
//! the 61-byte header, stamped with the base offset and leader epoch (and, on LogAppendTime
//! topics, the broker's time and a new CRC), is a copy. The request's buffer is shared — other
//! partitions' batches and the decoded topic name point into it — so a log that needed the
//! batch to itself would copy every produced byte once more before writing it.
//!
//! The disk's files are wrapped to see where each written part lies. The caller's bytes must come back
//! unchanged, and the log must read back the stamped batch.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use weir::io::disk::WrapFiles;
use weir::log::batch::{BATCH_HEADER_BYTES, TimestampType, validate};
use weir::log::{Log, LogConfig, TimestampPolicy};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::hooked::{Hooked, Hooks};
use weir_scenarios::{ensure, log};
use weir_sim::Sim;

/// Where one written part lay in memory: its address and length.
type Part = (usize, usize);

/// Every gathered write's parts, in order.
#[derive(Clone, Default)]
struct Writes(Arc<Mutex<Vec<Vec<Part>>>>);

impl Writes {
    fn record(&self, parts: &[Bytes]) {
        let parts = parts.iter().map(|p| (p.as_ptr() as usize, p.len())).collect();
        self.0.lock().expect("not poisoned").push(parts);
    }

    fn last(&self) -> Option<Vec<Part>> {
        self.0.lock().expect("not poisoned").last().cloned()
    }
}

/// A file's writes are noted before they are passed on.
impl Hooks for Writes {
    fn write(&self, parts: &[Bytes]) {
        self.record(parts);
    }
}

/// A request holding batches `0..count` one after another behind a few bytes of other fields,
/// and each batch as a slice of it, as the produce request's decoder hands them over.
fn request(count: u8) -> (Bytes, Vec<Bytes>) {
    let mut frame = BytesMut::from(&b"frame, header and topic name"[..]);
    let mut ranges = Vec::new();
    for n in 0..count {
        let batch = log::batch(n, None);
        ranges.push(frame.len()..frame.len() + batch.len());
        frame.extend_from_slice(&batch);
    }
    let frame = frame.freeze();
    let batches = ranges.into_iter().map(|r| frame.slice(r)).collect();
    (frame, batches)
}

fn scenario(policy: TimestampPolicy) -> Result<(), String> {
    let sim = Sim::new(1);
    let host = sim.add_client("appender");
    let epoch = LeaderEpoch(4);
    sim.block_on(host, Duration::from_secs(60), move |env| async move {
        let writes = Writes::default();
        let watching = writes.clone();
        let disk = WrapFiles::new(Arc::clone(&env.disk), move |_path, inner| {
            Hooked::wrap(inner, watching.clone())
        });
        let env = weir::io::Env { disk: Arc::new(disk), ..env };
        let config = LogConfig { timestamp_policy: policy, ..LogConfig::default() };
        let log = Log::open(env.clone(), log::dir(), config).await.map_err(|e| e.to_string())?;
        let (frame, batches) = request(3);
        let sent = frame.to_vec();
        for (n, batch) in batches.iter().enumerate() {
            let info = log.append(batch.clone(), epoch).await.map_err(|e| e.to_string())?;
            let parts = writes.last().ok_or("the append wrote nothing")?;
            let records =
                (batch.as_ptr() as usize + BATCH_HEADER_BYTES, batch.len() - BATCH_HEADER_BYTES);
            ensure(
                parts.len() == 2 && parts[0].1 == BATCH_HEADER_BYTES && parts[1] == records,
                || {
                    format!(
                        "batch {n} was written as parts {parts:?}, not a 61-byte header and the \
                     records where the request holds them ({records:?})"
                    )
                },
            )?;
            ensure(info.base_offset == Offset(n as i64 * log::BATCH_RECORDS), || {
                format!("batch {n} was given offset {}", info.base_offset)
            })?;
        }
        ensure(frame[..] == sent[..], || "the append changed the caller's bytes".to_string())?;
        let stored = log::all_batches(&log).await?;
        ensure(stored.len() == batches.len(), || format!("{} batches read back", stored.len()))?;
        for (n, got) in stored.iter().enumerate() {
            let header = validate(got, usize::MAX).map_err(|e| format!("batch {n}: {e}"))?;
            let at = Offset(n as i64 * log::BATCH_RECORDS);
            let expected = log::batch(n as u8, Some((at, epoch)));
            match policy {
                TimestampPolicy::CreateTime => ensure(*got == expected, || {
                    format!("batch {n} reads back other than as sent, stamped at {at}")
                })?,
                TimestampPolicy::LogAppendTime => ensure(
                    header.timestamp_type() == TimestampType::LogAppend
                        && header.base_offset() == at.0
                        && header.partition_leader_epoch() == epoch.0
                        && got[BATCH_HEADER_BYTES..] == expected[BATCH_HEADER_BYTES..],
                    || format!("batch {n} reads back as {header:?}"),
                )?,
            }
        }
        Ok::<_, String>(())
    })
    .ok_or("the appends did not finish")?
}

#[test]
fn an_append_writes_the_records_from_the_request_buffer() {
    for policy in [TimestampPolicy::CreateTime, TimestampPolicy::LogAppendTime] {
        if let Err(e) = scenario(policy) {
            panic!("{policy:?}: {e}");
        }
    }
}
