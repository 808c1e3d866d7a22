//! A damaged batch in a compacted segment must fail only the reads of its own offsets, as in a
//! segment without gaps (`log_reads_walk_past_a_damaged_batch`). A read that meets damage
//! believes the batches after it only if they continue each other's offsets exactly to the next
//! index entry: a batch's base offset lies outside its CRC. Compaction leaves gaps, which broke
//! every such chain, so a damaged batch cost the reads of every intact batch after it to the
//! segment's end: on `__consumer_offsets`, a coordinator that loaded its groups past one lost
//! the records of the rest of the segment, and handed out generations it had handed out before.
//! Now each gap gets an index entry on either side of it, and the runs between them chain.
//!
//! A compacted log of one-record batches, in runs of one to four kept records (by seed) between
//! gaps of two, is cleaned and reopened; one kept batch (by seed) is damaged in place, in its records or its
//! length field. Then, from every offset the log covers: a read of an offset the damaged batch
//! may hold (any between its intact neighbours: the gaps beside it too) must fail as corrupt,
//! and any other read must return stored batches exactly, starting with the one holding the
//! offset or the first after it, and stopping before the damaged one.
//!
//! (A flipped base offset in a compacted segment is not covered: where offsets may have gaps, a
//! batch whose base offset a latent error raised, without overlapping the next, still reads as
//! a batch at those offsets.)

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::split::split_batches;
use weir::log::{CleanOutcome, Log, LogConfig, ReadError};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::log::segment_batches;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{Host, Sim};

/// Batches appended, one record each.
const BATCHES: i64 = 120;
/// Batches of a run with keys of their own (kept), by seed; each run is followed by
/// [`SHARED_IN_RUN`] batches whose keys every run shares (superseded but for the newest).
fn kept_in_run(seed: u64) -> i64 {
    1 + (seed % 4) as i64
}
const SHARED_IN_RUN: i64 = 2;

fn dir() -> PathBuf {
    PathBuf::from("compact-0")
}

/// Segments of about 40 batches, an index entry only every 4 KiB: without the entries at gaps
/// a segment holds one or two.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4_000,
        index_interval_bytes: 4_096,
        retention_ms: -1,
        cleanup_policy: weir::log::CleanupPolicy::Compact,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

fn batch(seed: u64, n: i64) -> Bytes {
    let run = kept_in_run(seed) + SHARED_IN_RUN;
    let key = if n % run < kept_in_run(seed) {
        format!("own-{n}")
    } else {
        format!("shared-{}", n % run)
    };
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 1_000 + n,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(vec![n as u8; 40])),
        headers: Vec::new(),
    };
    encode_batch(&[record], &BatchOptions::default()).expect("a valid batch")
}

/// A batch as stored: which segment file, where, its offsets and its bytes.
#[derive(Clone)]
struct Stored {
    file: PathBuf,
    position: usize,
    base: i64,
    last: i64,
    bytes: Bytes,
}

/// Every batch of every sealed segment file of the log, in offset order.
fn stored_batches(sim: &Sim, host: Host) -> Result<Vec<Stored>, String> {
    let mut names = sim.durable_names(host, dir()).map_err(|e| e.to_string())?;
    names.retain(|n| n.ends_with(".log"));
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let file = dir().join(name);
        let bytes = sim.durable_contents(host, &file).map_err(|e| e.to_string())?;
        for (position, len, base, last) in segment_batches(&bytes) {
            let bytes = Bytes::copy_from_slice(&bytes[position..position + len]);
            out.push(Stored { file: file.clone(), position, base, last, bytes });
        }
    }
    Ok(out)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(600);
    sim.block_on(host, limit, move |env| async move {
        let log = Log::open(env.clone(), dir(), config()).await.map_err(|e| e.to_string())?;
        for n in 0..BATCHES {
            log.append(batch(seed, n), LeaderEpoch(0)).await.map_err(|e| e.to_string())?;
        }
        let end = log.log_end_offset();
        let outcome = log.clean(env.clock.wall_ms(), end).await.map_err(|e| e.to_string())?;
        ensure(matches!(outcome, CleanOutcome::Cleaned(_)), || format!("{outcome:?}"))?;
        log.close().await.map_err(|e| e.to_string())
    })
    .ok_or("the appends did not finish")??;
    let stored = stored_batches(&sim, host)?;
    let gaps = stored.windows(2).filter(|w| w[1].base != w[0].last + 1).count();
    ensure(gaps >= 10, || format!("only {gaps} gaps left by the clean"))?;
    // A kept batch in a segment of several, neither its segment's first nor last (whose reads
    // start or end at a segment boundary anyway), by seed.
    let inner: Vec<usize> = (1..stored.len().saturating_sub(1))
        .filter(|&i| stored[i - 1].file == stored[i].file && stored[i + 1].file == stored[i].file)
        .collect();
    let damaged = *inner.get(seed as usize % inner.len().max(1)).ok_or("no inner batch")?;
    // In its length field (outside the CRC) or in its records.
    let within =
        if (seed / 7).is_multiple_of(2) { 8 + seed as usize % 4 } else { 61 + seed as usize % 20 };
    let target = &stored[damaged];
    sim.corrupt_durable_file(host, &target.file, (target.position + within) as u64)
        .map_err(|e| format!("damaging {}: {e}", target.file.display()))?;
    sim.kill(host);
    sim.start(host);
    // The damaged batch may have held any offset between its intact neighbours.
    let (first, last) = (stored[damaged - 1].last + 1, stored[damaged + 1].base - 1);
    let stored2 = stored.clone();
    sim.block_on(host, limit, move |env| async move {
        let log = Log::open(env, dir(), config()).await.map_err(|e| e.to_string())?;
        let upper = log.log_end_offset();
        let stored = stored2;
        for from in log.log_start_offset().0..stored.last().map_or(0, |s| s.last + 1) {
            let read = log.read(Offset(from), 1 << 20, upper).await;
            if (first..=last).contains(&from) {
                ensure(matches!(read, Err(ReadError::Corrupt { .. })), || {
                    format!("reading {from}, which the damaged batch may hold, gave {read:?}")
                })?;
                continue;
            }
            let read = read.map_err(|e| {
                format!("reading {from} (the batch at {first}..={last} is damaged): {e}")
            })?;
            let got: Vec<Bytes> = split_batches(&read.records)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("reading {from}: {e}"))?;
            let holder = stored.iter().position(|s| s.last >= from).ok_or("past the end")?;
            let stop = if holder < damaged { damaged } else { stored.len() };
            let want: Vec<&Bytes> = stored[holder..stop].iter().map(|s| &s.bytes).collect();
            ensure(!got.is_empty() && got.len() <= want.len(), || {
                format!("reading {from} returned {} batches", got.len())
            })?;
            ensure(got.iter().zip(&want).all(|(g, w)| g == *w), || {
                format!("reading {from} returned batches other than those stored from {holder}")
            })?;
        }
        Ok(())
    })
    .ok_or("the reads did not finish")?
}

#[test]
fn log_compacted_reads_walk_past_a_damaged_batch() {
    for_each_seed("log_compacted_reads_walk_past_a_damaged_batch", 0..42, scenario);
}
