//! Model-based test of the partition log: random sequences of append, read, roll, retention,
//! DeleteRecords, truncation, restarting past the end and reopen (clean, after a kill, after a power failure) run against the real
//! log on the simulated disk and against a plain list of batches; every read must agree.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use weir::io::Env;
use weir::log::batch;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_sim::Sim;

#[derive(Clone, Debug)]
enum Op {
    /// Records (value sizes) and a timestamp age in hours.
    Append(Vec<u16>, u8),
    /// Read from a point (fraction of the log) with a byte budget.
    Read(u16, u32),
    Roll,
    /// Retention with a byte limit (or none) and an age limit in hours (or none).
    Retention(Option<u32>, Option<u8>),
    /// DeleteRecords up to a point (fraction of the log).
    DeleteRecords(u16),
    /// A follower's truncation to a point (fraction of the log).
    Truncate(u16),
    /// A follower starting its log again this far past its end.
    RestartAt(u16),
    Reopen,
    Crash {
        power: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop::collection::vec(0u16..600, 1..8), 0u8..200).prop_map(|(v, age)| Op::Append(v, age)),
        4 => (any::<u16>(), 1u32..20_000).prop_map(|(at, max)| Op::Read(at, max)),
        1 => Just(Op::Roll),
        1 => (prop::option::of(1_000u32..30_000), prop::option::of(1u8..150)).prop_map(|(b, h)| Op::Retention(b, h)),
        1 => any::<u16>().prop_map(Op::DeleteRecords),
        1 => any::<u16>().prop_map(Op::Truncate),
        1 => (1u16..2_000).prop_map(Op::RestartAt),
        1 => Just(Op::Reopen),
        1 => any::<bool>().prop_map(|power| Op::Crash { power }),
    ]
}

/// What the log should hold: batches as stored, in offset order.
#[derive(Default)]
struct Model {
    batches: Vec<(Offset, Bytes)>,
    log_start: Offset,
    next: Offset,
}

impl Model {
    fn point(&self, fraction: u16) -> Offset {
        let span = self.next.distance_from(self.log_start);
        Offset(self.log_start.0 + (span * u64::from(fraction) / u64::from(u16::MAX)) as i64)
    }

    /// Drops the batch holding `target` (or the log start, if higher) and all after it.
    fn truncate(&mut self, target: Offset) {
        let target = target.max(self.log_start);
        let at = self
            .batches
            .iter()
            .position(|(_, b)| batch::parse_header(b).unwrap().last_offset() >= target.0);
        if let Some(i) = at.filter(|_| target < self.next) {
            self.next = self.batches[i].0.max(self.log_start);
            self.batches.truncate(i);
        }
    }

    fn drop_below(&mut self, start: Offset) {
        self.log_start = self.log_start.max(start);
        let keep = self.log_start;
        self.batches.retain(|(_, b)| batch::parse_header(b).unwrap().last_offset() >= keep.0);
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 6_000,
        index_interval_bytes: 512,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn dir() -> PathBuf {
    PathBuf::from("model-0")
}

fn make_batch(values: &[u16], timestamp: i64) -> Bytes {
    let records: Vec<RecordSpec> = values
        .iter()
        .enumerate()
        .map(|(i, &len)| RecordSpec {
            offset_delta: i as i32,
            timestamp,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![i as u8; usize::from(len)])),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&records, &BatchOptions::default()).unwrap()
}

async fn run_ops(
    env: Env,
    log: Arc<Log>,
    ops: Vec<Op>,
    model: &mut Model,
) -> Result<Option<Op>, String> {
    for (i, op) in ops.into_iter().enumerate() {
        match &op {
            Op::Append(values, age) => {
                let ts = env.clock.wall_ms() - i64::from(*age) * 3_600_000;
                let raw = make_batch(values, ts);
                let info = log
                    .append(raw.clone(), LeaderEpoch(7))
                    .await
                    .map_err(|e| format!("append: {e}"))?;
                if info.base_offset != model.next {
                    return Err(format!(
                        "op {i}: append got offset {} but the model expects {}",
                        info.base_offset, model.next
                    ));
                }
                let mut stored = raw.to_vec();
                batch::stamp(&mut stored, info.base_offset.0, 7).unwrap();
                model.next = info.last_offset.next();
                model.batches.push((info.base_offset, Bytes::from(stored)));
            }
            Op::Read(at, max) => check_read(&log, model, model.point(*at), *max as usize)
                .await
                .map_err(|e| format!("op {i}: {e}"))?,
            Op::Roll => log.roll().await.map_err(|e| format!("roll: {e}"))?,
            Op::Retention(bytes, hours) => {
                let mut config = config();
                config.retention_bytes = bytes.map_or(-1, i64::from);
                config.retention_ms = hours.map_or(-1, |h| i64::from(h) * 3_600_000);
                log.set_config(config);
                let outcome =
                    log.apply_retention(model.next).await.map_err(|e| format!("retention: {e}"))?;
                log.set_config(self::config());
                if outcome.log_start < model.log_start {
                    return Err(format!("op {i}: retention moved the log start back"));
                }
                let starts_batch = outcome.log_start == model.next
                    || model.batches.iter().any(|(o, _)| *o == outcome.log_start);
                if !starts_batch && outcome.segments > 0 {
                    return Err(format!(
                        "op {i}: retention cut inside a batch at {}",
                        outcome.log_start
                    ));
                }
                model.drop_below(outcome.log_start);
            }
            Op::DeleteRecords(at) => {
                let target = model.point(*at);
                let start = log
                    .delete_records_before(target, model.next)
                    .await
                    .map_err(|e| format!("delete records: {e}"))?;
                if start != target.max(model.log_start) {
                    return Err(format!(
                        "op {i}: DeleteRecords to {target} left the log start at {start}"
                    ));
                }
                model.drop_below(start);
            }
            Op::Truncate(at) => {
                let target = model.point(*at);
                let end = log.truncate_to(target).await.map_err(|e| format!("truncate: {e}"))?;
                model.truncate(target);
                if end != model.next {
                    return Err(format!(
                        "op {i}: truncating to {target} ended the log at {end}, the model at {}",
                        model.next
                    ));
                }
            }
            Op::RestartAt(past) => {
                let start = Offset(model.next.0 + i64::from(*past));
                log.restart_at(start).await.map_err(|e| format!("restart at {start}: {e}"))?;
                model.batches.clear();
                model.log_start = start;
                model.next = start;
            }
            Op::Reopen | Op::Crash { .. } => return Ok(Some(op)),
        }
        if log.log_start_offset() != model.log_start || log.log_end_offset() != model.next {
            return Err(format!(
                "op {i}: log spans [{}, {}) but the model [{}, {})",
                log.log_start_offset(),
                log.log_end_offset(),
                model.log_start,
                model.next
            ));
        }
    }
    Ok(None)
}

/// Reads from `from` and compares with the model: the batch holding `from` first, then the
/// following batches in order, within budget (the first batch always).
async fn check_read(log: &Log, model: &Model, from: Offset, max: usize) -> Result<(), String> {
    let result = log.read(from, max, model.next).await.map_err(|e| format!("read {from}: {e}"))?;
    let expected: Vec<&Bytes> = model
        .batches
        .iter()
        .filter(|(_, b)| batch::parse_header(b).unwrap().last_offset() >= from.0)
        .map(|(_, b)| b)
        .collect();
    let got: Vec<Bytes> = split_batches(&result.records).map(|b| b.unwrap()).collect();
    if expected.is_empty() {
        return if got.is_empty() {
            Ok(())
        } else {
            Err(format!("read {from} past the end returned data"))
        };
    }
    if got.is_empty() {
        return Err(format!("read {from} returned nothing though data exists"));
    }
    if got.len() > 1 && result.records.len() > max {
        return Err(format!(
            "read {from} returned {} bytes over a budget of {max}",
            result.records.len()
        ));
    }
    for (i, batch) in got.iter().enumerate() {
        if expected.get(i) != Some(&batch) {
            return Err(format!("read {from}: batch {i} differs from the model"));
        }
    }
    Ok(())
}

fn run_case(seed: u64, ops: Vec<Op>) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("host");
    let mut model = Model::default();
    let mut remaining = ops;
    loop {
        let batch_ops = remaining.clone();
        let outcome = {
            let model_ref = &mut model;
            // The model lives outside the simulation; move it in and back out.
            let taken = std::mem::take(model_ref);
            let result = sim.block_on(host, Duration::from_secs(3_600), move |env| async move {
                let mut model = taken;
                let log = match Log::open(env.clone(), dir(), config()).await {
                    Ok(log) => Arc::new(log),
                    Err(e) => return (model, Err(format!("open: {e}"))),
                };
                if log.log_start_offset() != model.log_start || log.log_end_offset() != model.next {
                    let e = format!(
                        "reopened log spans [{}, {}) but the model [{}, {})",
                        log.log_start_offset(),
                        log.log_end_offset(),
                        model.log_start,
                        model.next
                    );
                    return (model, Err(e));
                }
                let stop = run_ops(env, Arc::clone(&log), batch_ops, &mut model).await;
                if let Ok(Some(Op::Reopen)) = stop
                    && let Err(e) = log.close().await
                {
                    return (model, Err(format!("close: {e}")));
                }
                (model, stop)
            });
            let (back, result) = result.ok_or("the simulation stalled")?;
            *model_ref = back;
            result?
        };
        let Some(stop) = outcome else {
            if std::env::var("LOG_MODEL_DEBUG").is_ok() {
                eprintln!(
                    "case done: next={} start={} batches={}",
                    model.next,
                    model.log_start,
                    model.batches.len()
                );
            }
            return Ok(());
        };
        if let Op::Crash { power } = stop {
            if power {
                sim.power_fail(host)
            } else {
                sim.kill(host)
            }
            sim.start(host);
        }
        let done = remaining
            .iter()
            .position(|o| matches!(o, Op::Reopen | Op::Crash { .. }))
            .unwrap_or(remaining.len());
        remaining.drain(..=done.min(remaining.len() - 1));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn log_agrees_with_a_list_of_batches(seed in any::<u64>(), ops in prop::collection::vec(op(), 1..60)) {
        if let Err(e) = run_case(seed, ops.clone()) {
            prop_assert!(false, "seed {seed:#x}: {e}\nops: {ops:?}");
        }
    }
}
