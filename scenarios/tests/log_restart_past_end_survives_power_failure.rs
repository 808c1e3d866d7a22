//! Fault scenario: a follower's whole log lies below its leader's log start (the leader deleted
//! the rest by retention while the follower was away), so the follower empties its log and
//! starts it again at the leader's start. The power fails at a random instant of that restart:
//! the log must reopen either exactly as it was or empty at the new start — never a mix (old
//! segments below a start they do not reach, a log ending below its start) — and take appends
//! at the offset it reports as its end.
//!
//! The same holds for a log so emptied that then starts again a little below its end: the
//! leader's start lay inside a batch, which the leader sends whole, so the follower's empty log
//! starts again at that batch's base.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use weir::io::Env;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Host, Sim};

/// Batches in the log before the restart (spread over several segments).
const BATCHES: usize = 24;
/// How far past the old end the leader's log starts: more than a segment's index can span
/// (relative offsets are 32 bits), so the new start must not land in an old segment.
const GAP: i64 = 5_000_000_000;

fn dir() -> PathBuf {
    PathBuf::from("events-0")
}

fn config() -> LogConfig {
    LogConfig { segment_bytes: 2_000, retention_ms: -1, ..LogConfig::default() }
}

fn batch(n: usize) -> Bytes {
    let records: Vec<RecordSpec> = (0..3)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000 + n as i64,
            key: Some(Bytes::from(format!("k{n}-{i}"))),
            value: Some(Bytes::from(vec![n as u8; 150])),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&records, &BatchOptions::default()).expect("a valid batch")
}

async fn open(env: Env) -> Result<Log, String> {
    Log::open(env, dir(), config()).await.map_err(|e| e.to_string())
}

/// Every batch of `log` from its start, as stored.
async fn all_batches(log: &Log) -> Result<Vec<Bytes>, String> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    let end = log.log_end_offset();
    while at < end {
        let read = log.read(at, 1 << 20, end).await.map_err(|e| format!("reading {at:?}: {e}"))?;
        for batch in split_batches(&read.records) {
            out.push(batch.map_err(|e| format!("splitting at {at:?}: {e}"))?);
        }
        at = read.next_offset;
    }
    Ok(out)
}

/// The log's batches and end, and the open log itself.
type Filled = (Vec<Bytes>, Offset, Arc<Log>);

/// A simulation holding the open log of [`BATCHES`] batches, synced.
fn filled(seed: u64) -> Result<(Sim, Host, Filled), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("follower");
    // Every disk operation takes time, so a power failure can fall between any two.
    let latency = DiskFaults {
        latency_min: Duration::from_micros(20),
        latency_max: Duration::from_micros(400),
        ..DiskFaults::default()
    };
    sim.set_disk_faults(host, latency);
    let filled = sim
        .block_on(host, Duration::from_secs(600), |env| async move {
            let log = open(env).await?;
            for n in 0..BATCHES {
                log.append(batch(n), LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>((all_batches(&log).await?, log.log_end_offset(), Arc::new(log)))
        })
        .ok_or("the appends did not finish")??;
    ensure(filled.0.len() == BATCHES, || format!("{} batches appended", filled.0.len()))?;
    Ok((sim, host, filled))
}

/// How far below its end the emptied log starts again in the second case.
const BACK: i64 = 2;

/// Which restart: past the end of a log holding batches, or (`below`) of that log once emptied,
/// to [`BACK`] below its end.
#[derive(Clone, Copy)]
struct Case {
    below: bool,
}

/// The log before the restart that is interrupted: its batches, its span and the open log; and
/// the offset that restart starts at.
type Prepared = (Vec<Bytes>, (Offset, Offset), Arc<Log>, Offset);

fn prepare(seed: u64, case: Case) -> Result<(Sim, Host, Prepared), String> {
    let (sim, host, (before, end, log)) = filled(seed)?;
    let past = Offset(end.0 + GAP);
    if !case.below {
        return Ok((sim, host, (before, (Offset(0), end), log, past)));
    }
    let emptied = Arc::clone(&log);
    sim.block_on(host, Duration::from_secs(600), move |_| async move {
        emptied.restart_at(past).await.map_err(|e| e.to_string())
    })
    .ok_or("the first restart did not finish")??;
    Ok((sim, host, (Vec::new(), (past, past), log, Offset(past.0 - BACK))))
}

/// How long the restart takes, undisturbed, in the simulation of `seed`.
fn restart_duration(seed: u64, case: Case) -> Result<Duration, String> {
    let (sim, host, (_, _, log, start)) = prepare(seed, case)?;
    let began = sim.now();
    sim.block_on(host, Duration::from_secs(600), move |_| async move {
        log.restart_at(start).await.map_err(|e| e.to_string())
    })
    .ok_or("the restart did not finish")??;
    Ok(sim.now() - began)
}

fn scenario(seed: u64, case: Case) -> Result<bool, String> {
    let whole = restart_duration(seed, case)?;
    let (sim, host, (before, old_span, log, start)) = prepare(seed, case)?;
    let done = Arc::new(AtomicBool::new(false));
    let finished = Arc::clone(&done);
    let _task = sim.spawn(host, "restart", move |_| async move {
        if log.restart_at(start).await.is_ok() {
            finished.store(true, Ordering::SeqCst);
        }
    });
    // A random instant within the restart (or just after it).
    let fraction = (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as f64 / (1u64 << 24) as f64;
    sim.run_for(whole.mul_f64(fraction * 1.1));
    let completed = done.load(Ordering::SeqCst);
    sim.power_fail(host);
    sim.start(host);
    let (span, batches, appended) = sim
        .block_on(host, Duration::from_secs(600), |env| async move {
            let log = open(env).await?;
            let span = (log.log_start_offset(), log.log_end_offset());
            let batches = all_batches(&log).await?;
            let info = log.append(batch(99), LeaderEpoch(4)).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((span, batches, info.base_offset))
        })
        .ok_or("the reopen did not finish")??;
    let old = span == old_span && batches == before;
    let new = span == (start, start) && batches.is_empty();
    ensure(old || new, || {
        format!(
            "reopened spanning [{}, {}) with {} batches: neither the old log [{}, {}) nor an \
             empty one at {start}",
            span.0,
            span.1,
            batches.len(),
            old_span.0,
            old_span.1
        )
    })?;
    ensure(!completed || new, || "a completed restart was undone by the power failure".into())?;
    ensure(appended == span.1, || format!("the next append went to {appended}, not {}", span.1))?;
    // What was appended after the restart reopens as it was, after the original log's batches
    // (if they survived) and nothing else.
    sim.power_fail(host);
    sim.start(host);
    let (again, batches_again) = sim
        .block_on(host, Duration::from_secs(600), |env| async move {
            let log = open(env).await?;
            let span = (log.log_start_offset(), log.log_end_offset());
            Ok::<_, String>((span, all_batches(&log).await?))
        })
        .ok_or("the second reopen did not finish")??;
    ensure(again == (span.0, Offset(appended.0 + 3)), || {
        format!("after the append the log reopened spanning [{}, {})", again.0, again.1)
    })?;
    let tail = batches_again.len().checked_sub(1).map(|n| &batches_again[n..]);
    ensure(batches_again.len() == batches.len() + 1 && tail.is_some(), || {
        format!("{} batches after the append, {} before", batches_again.len(), batches.len())
    })?;
    // Past the end, a power failure after the new start's checkpoint reopens the new log
    // before the restart finished. Below the end, the emptied log's old segment (empty, at the
    // old start) outlives the new start's checkpoint until the restart's last sync, so such a
    // power failure reopens the old log: there, what must be seen is power failures late in
    // the restart, past that checkpoint.
    Ok(if case.below { !completed && fraction * 1.1 > 0.5 } else { new && !completed })
}

/// Runs `case` over 48 seeds; some power failures must land between the checkpoint and the
/// end of the restart (see the end of [`scenario`]), or the crash-ordering argument was not
/// exercised.
fn sweep(name: &str, case: Case) {
    let interrupted_after_commit = std::sync::Mutex::new(0);
    for_each_seed(name, 0..48, |seed| {
        let mid = scenario(seed, case)?;
        *interrupted_after_commit.lock().unwrap_or_else(|p| p.into_inner()) += usize::from(mid);
        Ok(())
    });
    let mid = *interrupted_after_commit.lock().unwrap_or_else(|p| p.into_inner());
    assert!(mid > 0, "no power failure fell inside a restart after its checkpoint");
}

#[test]
fn log_restart_past_end_survives_power_failure() {
    sweep("log_restart_past_end_survives_power_failure", Case { below: false });
}

#[test]
fn log_emptied_restarting_below_its_end_survives_power_failure() {
    sweep("log_restart_past_end_survives_power_failure", Case { below: true });
}
