//! A sealed segment's largest timestamp must survive a restart. The time index gets an entry
//! only when an offset entry is due (every `index.interval.bytes`), so the batches after the
//! last due one may raise the segment's largest timestamp without an entry of their own. After
//! a restart that timestamp is read back from the time index: unless sealing records the
//! segment's largest timestamp there, the segment reopens believing it ends older than it
//! does, and a timestamp lookup skips its newest batches (answering an offset in the next
//! segment), as would retention by time, deleting the segment early. The same holds for the
//! active segment reopened from a checkpoint of its index.
//!
//! Each batch here raises the largest timestamp and is far smaller than the index interval.
//! The log is rolled, written on and checkpointed, and its host killed; after the reopen a
//! lookup of each batch's timestamp must find that batch, and the log's largest timestamp must
//! be the last batch's.

use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::dir;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches in the segment that is sealed, and then in the active one.
const SEALED: i64 = 12;
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

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    sim.block_on(host, limit, move |env| async move {
        let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
        for n in 0..SEALED + ACTIVE {
            if n == SEALED {
                log.roll().await.map_err(|e| e.to_string())?;
            }
            log.append(batch(seed, n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        log.checkpoint().await.map_err(|e| e.to_string())
    })
    .ok_or("the appends did not finish")??;
    sim.kill(host);
    sim.start(host);
    let (max, lookups) = sim
        .block_on(host, limit, move |env| async move {
            let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
            let mut lookups = Vec::new();
            for n in 0..SEALED + ACTIVE {
                let found = log.offset_for_timestamp(timestamp(seed, n)).await;
                lookups.push(found.map_err(|e| e.to_string())?);
            }
            Ok::<_, String>((log.max_timestamp(), lookups))
        })
        .ok_or("the reopen did not finish")??;
    for (n, found) in (0..).zip(&lookups) {
        let want = Some((Offset(n), timestamp(seed, n)));
        ensure(*found == want, || {
            format!("looking up batch {n}'s timestamp found {found:?}, not {want:?}")
        })?;
    }
    let last = SEALED + ACTIVE - 1;
    let want = Some((timestamp(seed, last), Offset(last)));
    ensure(max == want, || format!("the largest timestamp is {max:?}, not {want:?}"))
}

#[test]
fn log_time_lookup_after_restart_sees_every_batch() {
    for_each_seed("log_time_lookup_after_restart_sees_every_batch", 0..8, scenario);
}
