//! Scenario: a consumer reads a partition in order (`Partition::read_in_order`), so after each
//! read the partition reads the next range ahead. Every read must return exactly what a fresh
//! read of the log returns at that moment — also when the log was cut and rewritten, or its
//! start moved past the range, after the read ahead began — and reads ahead must stay within
//! their byte budget and give it back.

use std::sync::Arc;
use std::time::Duration;

use weir::io::Env;
use weir::log::{LogConfig, ReadError, ReadResult};
use weir::model::{LeaderEpoch, Offset};
use weir::partition::Partition;
use weir::partition::read_ahead::{READ_AHEAD_BYTES_MAX, READ_AHEAD_HOLD, ReadAheadBudget};
use weir_scenarios::log::{BATCH_RECORDS, batch};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{Host, Sim};

/// Batches in the log.
const BATCHES: u8 = 12;
/// A read's byte budget: two of the scenario's batches.
const READ_BYTES: usize = 1_500;
/// Bound on each step of simulated time.
const LIMIT: Duration = Duration::from_secs(60);

async fn open(env: Env) -> Result<Arc<Partition>, String> {
    let config = LogConfig { segment_bytes: 4_000, retention_ms: -1, ..LogConfig::default() };
    weir_scenarios::log::open_partition(env, config).await
}

/// Appends batches `first..first + count` (by fill byte `fill + n`) at the log end.
async fn append(partition: &Partition, first: u8, count: u8, fill: u8) -> Result<(), String> {
    for n in first..first + count {
        let at = Offset(i64::from(n) * BATCH_RECORDS);
        let stored = batch(fill.wrapping_add(n), Some((at, LeaderEpoch(0))));
        partition.append_replicated(&[stored]).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn setup(seed: u64) -> Result<(Sim, Host, Arc<Partition>), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let partition = sim
        .block_on(host, LIMIT, |env| async move {
            let partition = open(env).await?;
            append(&partition, 0, BATCHES, 0).await?;
            Ok::<_, String>(partition)
        })
        .ok_or("opening the log did not finish")??;
    Ok((sim, host, partition))
}

/// What one read returned.
type Read = Result<ReadResult, ReadError>;

/// A read's outcome in a line: where it ends and how many bytes, or its error.
fn describe(read: &Read) -> String {
    match read {
        Ok(r) => format!("{} bytes up to {:?}", r.records.len(), r.next_offset),
        Err(e) => format!("error: {e}"),
    }
}

/// Whether both reads succeeded with the same result.
fn same(a: &Read, b: &Read) -> bool {
    matches!((a, b), (Ok(x), Ok(y)) if x == y)
}

/// Reads in order from `start` (served from a read ahead if one is ready), then afresh, with
/// the same budget and bound: both results.
fn read_both(
    sim: &Sim,
    host: Host,
    partition: &Arc<Partition>,
    budget: &Arc<ReadAheadBudget>,
    start: Offset,
) -> Result<(Read, Read), String> {
    let (partition, budget) = (Arc::clone(partition), Arc::clone(budget));
    sim.block_on(host, LIMIT, move |_| async move {
        let upper = partition.log.log_end_offset();
        let ahead = partition.read_in_order(start, READ_BYTES, upper, &budget).await;
        let fresh = partition.log.read(start, READ_BYTES, upper).await;
        (ahead, fresh)
    })
    .ok_or_else(|| format!("the reads at {start:?} did not finish"))
}

/// Reading the whole log in order: each read after the first is served from the read ahead
/// the one before started, and equals a fresh read.
fn in_order(seed: u64) -> Result<(), String> {
    let (sim, host, partition) = setup(seed)?;
    let budget = ReadAheadBudget::new(READ_AHEAD_BYTES_MAX);
    let end = partition.log.log_end_offset();
    let (mut at, mut reads) = (Offset(0), 0u64);
    while at < end {
        let (ahead, fresh) = read_both(&sim, host, &partition, &budget, at)?;
        ensure(same(&ahead, &fresh), || {
            format!("at {at:?}: {} read in order, {} afresh", describe(&ahead), describe(&fresh))
        })?;
        let ahead = ahead.map_err(|e| e.to_string())?;
        ensure(ahead.next_offset > at, || format!("no progress at {at:?}"))?;
        at = ahead.next_offset;
        reads += 1;
    }
    let served = partition.read_ahead.served();
    ensure(reads > 2 && served == reads - 1, || {
        format!("{served} of {reads} reads were served from a read ahead, not all but the first")
    })?;
    sim.run_for(READ_AHEAD_HOLD * 2);
    ensure(budget.reserved() == 0, || format!("{} bytes still reserved", budget.reserved()))
}

/// The log is cut below a range read ahead and rewritten with other batches at the same
/// offsets: the next read returns the new batches.
fn after_a_cut(seed: u64) -> Result<(), String> {
    let (sim, host, partition) = setup(seed)?;
    let budget = ReadAheadBudget::new(READ_AHEAD_BYTES_MAX);
    let (first, _) = read_both(&sim, host, &partition, &budget, Offset(0))?;
    let next = first.map_err(|e| e.to_string())?.next_offset;
    let cut_batch = u8::try_from(next.0 / BATCH_RECORDS).map_err(|e| e.to_string())?;
    let p = Arc::clone(&partition);
    sim.block_on(host, LIMIT, move |_| async move {
        p.truncate_to(next).await.map_err(|e| e.to_string())?;
        append(&p, cut_batch, BATCHES - cut_batch, 100).await
    })
    .ok_or("the cut did not finish")??;
    let (ahead, fresh) = read_both(&sim, host, &partition, &budget, next)?;
    ensure(same(&ahead, &fresh), || {
        format!("after the cut: {} read in order, {} afresh", describe(&ahead), describe(&fresh))
    })?;
    ensure(partition.read_ahead.served() == 0, || {
        "a read ahead from before the cut was served".to_owned()
    })
}

/// The log start moves past a range read ahead (DeleteRecords): reading it is out of range,
/// as a fresh read is.
fn after_the_start_moved(seed: u64) -> Result<(), String> {
    let (sim, host, partition) = setup(seed)?;
    let budget = ReadAheadBudget::new(READ_AHEAD_BYTES_MAX);
    let (first, _) = read_both(&sim, host, &partition, &budget, Offset(0))?;
    let next = first.map_err(|e| e.to_string())?.next_offset;
    let p = Arc::clone(&partition);
    sim.block_on(host, LIMIT, move |_| async move {
        let end = p.log.log_end_offset();
        p.log.delete_records_before(Offset(next.0 + 1), end).await.map_err(|e| e.to_string())
    })
    .ok_or("deleting records did not finish")??;
    let (ahead, fresh) = read_both(&sim, host, &partition, &budget, next)?;
    let out_of_range = |r: &Read| matches!(r, Err(ReadError::OutOfRange { .. }));
    ensure(out_of_range(&ahead) && out_of_range(&fresh), || {
        let (ahead, fresh) = (describe(&ahead), describe(&fresh));
        format!("below the new log start: {ahead} read in order, {fresh} afresh")
    })
}

/// A budget too small for one read turns reading ahead off; a read ahead nobody takes gives
/// its bytes back after the hold.
fn within_the_budget(seed: u64) -> Result<(), String> {
    let (sim, host, partition) = setup(seed)?;
    let small = ReadAheadBudget::new(READ_BYTES - 1);
    for start in [Offset(0), Offset(2 * BATCH_RECORDS)] {
        let (ahead, fresh) = read_both(&sim, host, &partition, &small, start)?;
        ensure(same(&ahead, &fresh), || {
            format!("at {start:?}: {} read in order, {} afresh", describe(&ahead), describe(&fresh))
        })?;
    }
    ensure(partition.read_ahead.served() == 0, || "read ahead beyond the budget".to_owned())?;
    let budget = ReadAheadBudget::new(READ_AHEAD_BYTES_MAX);
    read_both(&sim, host, &partition, &budget, Offset(0))?.0.map_err(|e| e.to_string())?;
    ensure(budget.reserved() > 0, || "nothing was read ahead".to_owned())?;
    sim.run_for(READ_AHEAD_HOLD * 2);
    ensure(budget.reserved() == 0, || {
        format!("{} bytes still reserved after the hold", budget.reserved())
    })
}

#[test]
fn partition_read_ahead_in_order() {
    for_each_seed("partition_read_ahead_serves_only_what_a_fresh_read_would", 0..8, in_order);
}

#[test]
fn partition_read_ahead_after_a_cut() {
    for_each_seed("partition_read_ahead_serves_only_what_a_fresh_read_would", 0..8, after_a_cut);
}

#[test]
fn partition_read_ahead_after_the_start_moved() {
    for_each_seed(
        "partition_read_ahead_serves_only_what_a_fresh_read_would",
        0..8,
        after_the_start_moved,
    );
}

#[test]
fn partition_read_ahead_within_the_budget() {
    for_each_seed(
        "partition_read_ahead_serves_only_what_a_fresh_read_would",
        0..8,
        within_the_budget,
    );
}
