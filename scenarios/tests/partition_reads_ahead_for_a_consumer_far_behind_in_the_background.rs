//! Scenario: while the broker is being written to, a consumer far behind the log end (more
//! bytes behind it than the read-ahead budget's catch-up threshold) has its reads ahead spawned
//! as background tasks, which production runs at the lowest CPU priority so that a consumer
//! catching up cannot slow writers down; a consumer near the end has them spawned as ordinary
//! tasks, and so does one far behind once nothing was written for `WRITES_RECENT`. Every read
//! equals a fresh read of the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use weir::io::{BoxFuture, Env, Spawner, TaskHandle};
use weir::log::LogConfig;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::model::Offset;
use weir::partition::Partition;
use weir::partition::read_ahead::{READ_AHEAD_BYTES_MAX, ReadAheadBudget, WRITES_RECENT};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Records per batch.
const BATCH_RECORDS: i64 = 1_000;
/// Batches in the log: with a catch-up threshold of one and a half batches, the first read
/// ahead (two batches behind the end) is for a consumer catching up, and the second (one
/// behind) is not.
const BATCHES: i64 = 3;
/// A read's byte budget: one batch (a read always takes a whole first batch and stops before
/// one that would exceed it).
const READ_BYTES: usize = 1;
/// Bound on each step of simulated time.
const LIMIT: Duration = Duration::from_secs(60);

/// The node's spawner, counting the reads ahead spawned each way.
struct Counting {
    inner: Arc<dyn Spawner>,
    background: AtomicUsize,
    ordinary: AtomicUsize,
}

impl Spawner for Counting {
    fn spawn(&self, name: &str, task: BoxFuture<'static, ()>) -> TaskHandle {
        if name.starts_with("read-ahead") {
            self.ordinary.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.spawn(name, task)
    }

    fn spawn_background(&self, name: &str, task: BoxFuture<'static, ()>) -> TaskHandle {
        if name.starts_with("read-ahead") {
            self.background.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.spawn(name, task)
    }
}

/// Batch `n`: [`BATCH_RECORDS`] small records from offset `n * BATCH_RECORDS`, as a leader
/// stored it.
fn batch(n: i64) -> Bytes {
    let records: Vec<RecordSpec> = (0..BATCH_RECORDS as i32)
        .map(|i| RecordSpec {
            offset_delta: i,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Vec::new(),
        })
        .collect();
    let options =
        BatchOptions { base_offset: n * BATCH_RECORDS, leader_epoch: 0, ..Default::default() };
    encode_batch(&records, &options).expect("a valid batch")
}

/// Reads the whole log in order from offset 0 with `budget`, checking each read against a
/// fresh one; the offsets read at.
async fn read_all(
    partition: &Arc<Partition>,
    budget: &Arc<ReadAheadBudget>,
) -> Result<Vec<Offset>, String> {
    let end = partition.log.log_end_offset();
    let mut at = Offset(0);
    let mut reads = Vec::new();
    while at < end {
        let ahead = partition.read_in_order(at, READ_BYTES, end, budget).await;
        let fresh = partition.log.read(at, READ_BYTES, end).await;
        let (ahead, fresh) = match (ahead, fresh) {
            (Ok(a), Ok(f)) => (a, f),
            (a, f) => return Err(format!("at {at:?}: {a:?} read in order, {f:?} afresh")),
        };
        ensure(ahead == fresh, || format!("at {at:?}: the read in order is not a fresh read"))?;
        ensure(ahead.next_offset > at, || format!("no progress at {at:?}"))?;
        reads.push(at);
        at = ahead.next_offset;
    }
    Ok(reads)
}

fn far_behind_reads_ahead_in_the_background(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    sim.block_on(host, LIMIT, |env| async move {
        let counting = Arc::new(Counting {
            inner: Arc::clone(&env.spawner),
            background: AtomicUsize::new(0),
            ordinary: AtomicUsize::new(0),
        });
        let clock = Arc::clone(&env.clock);
        let env = Env { spawner: Arc::clone(&counting) as Arc<dyn Spawner>, ..env };
        let config = LogConfig { retention_ms: -1, ..LogConfig::default() };
        let partition = weir_scenarios::log::open_partition(env, config).await?;
        for n in 0..BATCHES {
            partition.append_replicated(&[batch(n)]).await.map_err(|e| e.to_string())?;
        }
        let batch_bytes = batch(0).len() as u64;
        let budget = ReadAheadBudget::catching_up_beyond(READ_AHEAD_BYTES_MAX, batch_bytes * 3 / 2);
        let counts = || {
            (counting.background.load(Ordering::Relaxed), counting.ordinary.load(Ordering::Relaxed))
        };
        // Being written to: the read ahead two batches behind yields, the one a batch behind
        // does not.
        budget.note_write(clock.now());
        let reads = read_all(&partition, &budget).await?;
        ensure(counts() == (1, 1), || {
            let (background, ordinary) = counts();
            format!(
                "being written to, reads at {reads:?} of {BATCHES} batches of {batch_bytes} bytes: \
                 {background} reads ahead in the background, {ordinary} ordinary; want 1 and 1"
            )
        })?;
        ensure(partition.read_ahead.served() == 2, || {
            format!(
                "{} of the 3 reads were served from a read ahead, not 2",
                partition.read_ahead.served()
            )
        })?;
        // Nothing written for a while: no one to make way for.
        clock.sleep(WRITES_RECENT).await;
        let reads = read_all(&partition, &budget).await?;
        ensure(counts() == (1, 3), || {
            let (background, ordinary) = counts();
            format!(
                "written to {WRITES_RECENT:?} ago, reads at {reads:?}: {} more reads ahead in the \
                 background, {} more ordinary; want 0 and 2",
                background - 1,
                ordinary - 1
            )
        })
    })
    .ok_or("the scenario did not finish")?
}

#[test]
fn partition_reads_ahead_for_a_consumer_far_behind_in_the_background() {
    for_each_seed(
        "partition_reads_ahead_for_a_consumer_far_behind_in_the_background",
        0..4,
        far_behind_reads_ahead_in_the_background,
    );
}
