//! Many tasks append to one log at once on a disk whose writes take time, so they wait for one
//! another's writes. Some callers give up (their append future is dropped) at random moments —
//! while waiting for their turn, and while their write is under way. No other caller may lose
//! its batch or its answer, and a given-up write must not leave anything a later append or a
//! reader would take for data: at the end the log holds every acknowledged batch exactly once,
//! byte for byte at the offsets it was given, and nothing else but batches whose callers gave
//! up (each at most once).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weir::io::timeout;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::{FlushPolicy, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::{all_batches, dir};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Tasks appending concurrently.
const APPENDERS: usize = 12;
/// Batches each appends, one after the other.
const ROUNDS: usize = 15;
/// Records per batch.
const RECORDS: i32 = 2;
/// How long a write takes, at most.
const WRITE_LATENCY_MAX: Duration = Duration::from_millis(4);

/// The batch of `appender`'s `round`, as sent, or as stored from offset `at`.
fn batch(appender: usize, round: usize, at: Option<Offset>) -> Bytes {
    let records: Vec<RecordSpec> = (0..RECORDS)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000,
            key: Some(Bytes::from(format!("a{appender}-r{round}-{i}"))),
            value: Some(Bytes::from(vec![appender as u8; 100 + round])),
            headers: Vec::new(),
        })
        .collect();
    let options = match at {
        Some(at) => BatchOptions { base_offset: at.0, leader_epoch: 1, ..Default::default() },
        None => BatchOptions::default(),
    };
    encode_batch(&records, &options).expect("a valid batch")
}

/// Whose batch this stored one is: (appender, round), from its first key.
fn owner(stored: &Bytes) -> Result<(usize, usize), String> {
    let record = weir::log::records::record_iter(stored)
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("an empty batch")?
        .map_err(|e| e.to_string())?;
    let key = record.key.ok_or("a record without a key")?;
    let key = String::from_utf8_lossy(&key).into_owned();
    let mut parts = key.trim_start_matches('a').split(['-', 'r']).filter(|p| !p.is_empty());
    let mut next = || -> Result<usize, String> {
        parts.next().and_then(|p| p.parse().ok()).ok_or(format!("an unexpected key {key}"))
    };
    Ok((next()?, next()?))
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("writer");
    sim.set_disk_faults(
        host,
        DiskFaults {
            latency_min: Duration::from_micros(100),
            latency_max: WRITE_LATENCY_MAX,
            ..DiskFaults::default()
        },
    );
    let config = LogConfig { flush_policy: FlushPolicy::Interval, ..LogConfig::default() };
    let opened = config.clone();
    let log = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            Log::open(env, dir(), opened).await.map(Arc::new).map_err(|e| e.to_string())
        })
        .ok_or("the log did not open")??;
    let finished = Arc::new(AtomicUsize::new(0));
    // (appender, round) → the offset its append was given.
    let acked = Arc::new(Mutex::new(BTreeMap::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for appender in 0..APPENDERS {
        let (log, finished, acked, errors) =
            (Arc::clone(&log), Arc::clone(&finished), Arc::clone(&acked), Arc::clone(&errors));
        // Every third appender gives up on some of its appends after a while.
        let impatient = appender % 3 == 0;
        tasks.push(sim.spawn(host, "appender", move |env| async move {
            for round in 0..ROUNDS {
                let append = log.append(batch(appender, round, None), LeaderEpoch(1));
                let outcome = if impatient {
                    let patience = Duration::from_micros(
                        (seed ^ (appender * 31 + round * 7) as u64) % 3_000 + 50,
                    );
                    match timeout(&*env.clock, patience, append).await {
                        Ok(outcome) => outcome,
                        Err(_) => continue,
                    }
                } else {
                    append.await
                };
                match outcome {
                    Ok(info) => {
                        acked
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert((appender, round), info.base_offset);
                    }
                    Err(e) => {
                        let mut errors = errors.lock().unwrap_or_else(|p| p.into_inner());
                        errors.push(format!("appender {appender} round {round}: {e}"));
                        return;
                    }
                }
            }
            finished.fetch_add(1, Ordering::SeqCst);
        }));
    }
    sim.run_until(Duration::from_secs(120), || finished.load(Ordering::SeqCst) == APPENDERS);
    let errors = errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    ensure(errors.is_empty(), || format!("appends failed: {errors:?}"))?;
    ensure(finished.load(Ordering::SeqCst) == APPENDERS, || {
        format!(
            "{} of {APPENDERS} appenders finished: a batch was never answered",
            finished.load(Ordering::SeqCst)
        )
    })?;
    let stored = sim
        .block_on(host, Duration::from_secs(60), move |_| async move { all_batches(&log).await })
        .ok_or("the read did not finish")??;
    let acked = acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
    check(&stored, &acked).map_err(|e| format!("before a restart: {e}"))?;
    // Whatever a given-up write left in the files past the log's end is not data either.
    sim.restart(host);
    let reopened = sim
        .block_on(host, Duration::from_secs(60), move |env| async move {
            let log = Log::open(env, dir(), config).await.map_err(|e| e.to_string())?;
            all_batches(&log).await
        })
        .ok_or("the reopen did not finish")??;
    check(&reopened, &acked).map_err(|e| format!("after a restart: {e}"))
}

/// The log `stored` holds every batch of `acked` at the offset it was given, each batch at
/// most once, exactly as sent, and no batch of a patient appender that was not acknowledged.
fn check(stored: &[Bytes], acked: &BTreeMap<(usize, usize), Offset>) -> Result<(), String> {
    let mut seen = BTreeMap::new();
    let mut at = Offset(0);
    for b in stored {
        let (appender, round) = owner(b)?;
        ensure(seen.insert((appender, round), at).is_none(), || {
            format!("appender {appender}'s round {round} is in the log twice")
        })?;
        ensure(*b == batch(appender, round, Some(at)), || {
            format!("the batch at {at} is not appender {appender}'s round {round} as sent")
        })?;
        if let Some(&given) = acked.get(&(appender, round)) {
            ensure(given == at, || {
                format!("appender {appender}'s round {round} was given {given} but is at {at}")
            })?;
        } else {
            ensure(appender % 3 == 0, || {
                format!("appender {appender}'s round {round} is stored but was never acknowledged")
            })?;
        }
        at = Offset(at.0 + i64::from(RECORDS));
    }
    for (key, given) in acked {
        ensure(seen.contains_key(key), || {
            format!("acknowledged batch {key:?} at {given} is lost")
        })?;
    }
    Ok(())
}

#[test]
fn log_appenders_dropped_midway_lose_no_other_batch() {
    for_each_seed("log_appenders_dropped_midway_lose_no_other_batch", 0..16, scenario);
}
