//! A timestamp lookup (ListOffsets by time) must find the first record at or after the
//! timestamp, wherever it lies between the time index's entries, and a sealed segment's largest
//! timestamp must survive a restart.
//!
//! - The time index gets an entry only with an offset entry (every `index.interval.bytes`), so a
//!   lookup must start from the last entry older than the timestamp: one that started from the
//!   first entry at or after it skipped the batches between that entry and the one before.
//! - Batches after the last due entry may raise the segment's largest timestamp without an
//!   entry of their own. After a restart that timestamp is read back from the time index: unless
//!   sealing records it there, the segment reopens believing it ends older than it does, and a
//!   lookup skips its newest batches (answering an offset in the next segment), as would
//!   retention by time, deleting the segment early. The same holds for the active segment
//!   reopened from a checkpoint of its index.
//!
//! Each batch here raises the largest timestamp and is far smaller than the index interval, and
//! the sealed segment spans several entries. The log is rolled, written on and checkpointed;
//! before and after its host is killed, a lookup of each batch's timestamp, and of one just
//! below it, must find that batch, and the log's largest timestamp must be the last batch's.

use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::dir;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches in the segment that is sealed, and then in the active one.
const SEALED: i64 = 60;
const ACTIVE: i64 = 12;

/// The default index interval, and no retention by time (the timestamps are old).
fn config() -> LogConfig {
    LogConfig { retention_ms: -1, ..LogConfig::default() }
}

/// The timestamp of batch `n`'s one record.
fn timestamp(seed: u64, n: i64) -> i64 {
    10_000 + n * 100 + (seed as i64 % 50)
}

fn batch(seed: u64, n: i64) -> Bytes {
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: timestamp(seed, n),
        key: Some(Bytes::from(format!("k{n}"))),
        value: Some(Bytes::from(vec![n as u8; 100 + (seed as usize % 100)])),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

/// A lookup of each batch's timestamp and of one just below it, each of which must find that
/// batch; and the log's largest timestamp.
async fn lookups(log: &Log, seed: u64) -> Result<(Vec<Lookup>, Option<Max>), String> {
    let mut found = Vec::new();
    for n in 0..SEALED + ACTIVE {
        for below in [0, 1] {
            let at = timestamp(seed, n) - below;
            found.push((n, at, log.offset_for_timestamp(at).await.map_err(|e| e.to_string())?));
        }
    }
    Ok((found, log.max_timestamp()))
}

/// Batch `n`, a timestamp looked up, and what the lookup found.
type Lookup = (i64, i64, Option<(Offset, i64)>);
/// The log's largest timestamp, and the batch holding it in each segment that holds it.
type Max = (i64, Vec<Offset>);

fn check(when: &str, seed: u64, (found, max): (Vec<Lookup>, Option<Max>)) -> Result<(), String> {
    for (n, at, found) in found {
        let want = Some((Offset(n), timestamp(seed, n)));
        ensure(found == want, || format!("{when}, looking up {at} found {found:?}, not {want:?}"))?;
    }
    let last = SEALED + ACTIVE - 1;
    let want = Some((timestamp(seed, last), vec![Offset(last)]));
    ensure(max == want, || format!("{when}, the largest timestamp is {max:?}, not {want:?}"))
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    let before = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            for n in 0..SEALED + ACTIVE {
                if n == SEALED {
                    log.roll().await.map_err(|e| e.to_string())?;
                }
                log.append(batch(seed, n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
            }
            log.checkpoint().await.map_err(|e| e.to_string())?;
            lookups(&log, seed).await
        })
        .ok_or("the appends did not finish")??;
    check("before the restart", seed, before)?;
    sim.kill(host);
    sim.start(host);
    let after = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            lookups(&log, seed).await
        })
        .ok_or("the reopen did not finish")??;
    check("after the restart", seed, after)
}

#[test]
fn log_time_lookup_finds_every_batch() {
    for_each_seed("log_time_lookup_finds_every_batch", 0..8, scenario);
}
