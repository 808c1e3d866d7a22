//! Scenario: a consumer far behind the log end (more than `CATCH_UP_BEHIND_RECORDS` offsets)
//! has its reads ahead spawned as background tasks, which production runs at the lowest CPU
//! priority so that a consumer catching up cannot slow producers down; a consumer near the end
//! has them spawned as ordinary tasks. Either way each read equals a fresh read of the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use weir::io::{BoxFuture, Env, Spawner, TaskHandle};
use weir::log::LogConfig;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::model::Offset;
use weir::partition::read_ahead::{CATCH_UP_BEHIND_RECORDS, READ_AHEAD_BYTES_MAX, ReadAheadBudget};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Records per batch: three batches put the first read ahead more than
/// [`CATCH_UP_BEHIND_RECORDS`] behind the end, and the second less.
const BATCH_RECORDS: i64 = (CATCH_UP_BEHIND_RECORDS * 5 / 8) as i64;
/// Batches in the log.
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

fn far_behind_reads_ahead_in_the_background(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    sim.block_on(host, LIMIT, |env| async move {
        let counting = Arc::new(Counting {
            inner: Arc::clone(&env.spawner),
            background: AtomicUsize::new(0),
            ordinary: AtomicUsize::new(0),
        });
        let env = Env { spawner: Arc::clone(&counting) as Arc<dyn Spawner>, ..env };
        let config = LogConfig { retention_ms: -1, ..LogConfig::default() };
        let partition = weir_scenarios::log::open_partition(env, config).await?;
        for n in 0..BATCHES {
            partition.append_replicated(&[batch(n)]).await.map_err(|e| e.to_string())?;
        }
        let end = partition.log.log_end_offset();
        let budget = ReadAheadBudget::new(READ_AHEAD_BYTES_MAX);
        let mut at = Offset(0);
        let mut reads = Vec::new();
        while at < end {
            let ahead = partition.read_in_order(at, READ_BYTES, end, &budget).await;
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
        let (background, ordinary) = (
            counting.background.load(Ordering::Relaxed),
            counting.ordinary.load(Ordering::Relaxed),
        );
        ensure(background == 1 && ordinary == 1, || {
            format!(
                "reads at {reads:?} of a log ending at {end:?}: {background} reads ahead in the \
                 background, {ordinary} ordinary; want 1 and 1 (the first starts {} behind the \
                 end, more than {CATCH_UP_BEHIND_RECORDS}; the second {} behind)",
                end.0 - BATCH_RECORDS,
                end.0 - 2 * BATCH_RECORDS
            )
        })?;
        ensure(partition.read_ahead.served() == 2, || {
            format!(
                "{} of the 3 reads were served from a read ahead, not 2",
                partition.read_ahead.served()
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
