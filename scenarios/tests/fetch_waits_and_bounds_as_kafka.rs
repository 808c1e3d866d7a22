//! Scenario: a Fetch's long poll and byte bounds, as Kafka's. Partition 0 holds ten batches of
//! about 10 KB, partition 1 one batch of about 150 KB.
//!
//! - A consumer far behind that asks for `min_bytes` equal to its partition's limit is answered
//!   at once: the partition's read stops at the last whole batch within the limit, with more
//!   left, and counts as full. Before, the whole batches never reached `min_bytes` and every
//!   such fetch waited out `max_wait_ms`.
//! - `min_bytes` above `max_bytes` asks for no more than the response may hold, and is
//!   answered at once too.
//! - Only the response's first batch may go past `max_bytes`: partition 1's large batch,
//!   second in a request whose budget partition 0 half spent, waits for a fetch that starts
//!   with it, which then gets it whole. Before, it came whole in the first response too, past
//!   the budget.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::protocol::StrBytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::client::{Client, versions};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Bytes of each record's value.
const VALUE_BYTES: usize = 1_000;
/// Batches in partition 0, of [`SMALL_RECORDS`] records each.
const SMALL_BATCHES: usize = 10;
/// Records in each of partition 0's batches.
const SMALL_RECORDS: usize = 10;
/// Records in partition 1's one batch.
const LARGE_RECORDS: usize = 150;
/// The long poll each fetch asks for: an answer this late waited it out.
const MAX_WAIT: Duration = Duration::from_secs(5);
/// What an answer given at once may take, in simulated time.
const AT_ONCE: Duration = Duration::from_secs(1);

/// One fetch of `t` from offset 0: (partition, its limit) in order, with `min_bytes` and
/// `max_bytes`. Each partition's record bytes, and how long the answer took.
struct Ask {
    partitions: Vec<(i32, i32)>,
    min_bytes: i32,
    max_bytes: i32,
}

fn fetch(c: &mut Cluster, ask: Ask) -> Result<(Vec<(i32, usize)>, Duration), String> {
    let addr = c.addr(0);
    c.client_call(MAX_WAIT * 3, move |env| async move {
        let clock = std::sync::Arc::clone(&env.clock);
        let mut client = Client::new(env, addr, "reader");
        let mut request = FetchRequest::default();
        request.max_wait_ms = MAX_WAIT.as_millis() as i32;
        request.min_bytes = ask.min_bytes;
        request.max_bytes = ask.max_bytes;
        request.session_epoch = -1;
        let mut topic = FetchTopic::default();
        topic.topic = kafka_protocol::messages::TopicName(StrBytes::from_static_str("t"));
        for (partition, limit) in ask.partitions {
            let mut part = FetchPartition::default();
            part.partition = partition;
            part.partition_max_bytes = limit;
            topic.partitions.push(part);
        }
        request.topics = vec![topic];
        let start = clock.now();
        let response = client
            .call(&request, versions::FETCH, MAX_WAIT * 2)
            .await
            .map_err(|e| format!("fetch failed: {e}"))?;
        let took = clock.now() - start;
        let mut out = Vec::new();
        for p in response.responses.iter().flat_map(|t| &t.partitions) {
            ensure(p.error_code == 0, || {
                format!("partition {} answered {}", p.partition_index, p.error_code)
            })?;
            out.push((p.partition_index, p.records.as_ref().map_or(0, Bytes::len)));
        }
        Ok((out, took))
    })
    .ok_or("the fetch got no answer")?
}

/// Writes one batch of `records` records to `t`-`partition`.
fn produce(c: &mut Cluster, partition: i32, records: usize) -> Result<(), String> {
    let records = (0..records).map(|_| (None, Bytes::from(vec![b'v'; VALUE_BYTES]))).collect();
    c.produce_records(0, ("t", partition), records, Acks::All)
        .map(|_| ())
        .map_err(|e| format!("the write to t-{partition} failed: {e:?}"))
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "t", 2).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(1));
    for _ in 0..SMALL_BATCHES {
        produce(&mut c, 0, SMALL_RECORDS)?;
    }
    produce(&mut c, 1, LARGE_RECORDS)?;
    let small = SMALL_BATCHES * SMALL_RECORDS * VALUE_BYTES;
    let large = LARGE_RECORDS * VALUE_BYTES;

    // min_bytes equal to the partition's limit, which whole batches never fill exactly.
    let limit = 64 << 10;
    let ask = Ask { partitions: vec![(0, limit)], min_bytes: limit, max_bytes: 50 << 20 };
    let (got, took) = fetch(&mut c, ask)?;
    ensure(took < AT_ONCE, || format!("min_bytes of a full partition: answered after {took:?}"))?;
    ensure(got.iter().all(|&(_, n)| n > 0 && n <= limit as usize), || {
        format!("min_bytes of a full partition: got {got:?}")
    })?;

    // min_bytes above max_bytes.
    let ask = Ask { partitions: vec![(0, 1 << 20)], min_bytes: 10 << 20, max_bytes: 32 << 10 };
    let (got, took) = fetch(&mut c, ask)?;
    ensure(took < AT_ONCE, || format!("min_bytes above max_bytes: answered after {took:?}"))?;
    ensure(got.iter().all(|&(_, n)| n > 0), || format!("min_bytes above max_bytes: got {got:?}"))?;

    // The large batch second, with less of the budget left than it takes.
    let budget = (small + large / 2) as i32;
    let ask = Ask { partitions: vec![(0, 1 << 20), (1, 1 << 20)], min_bytes: 1, max_bytes: budget };
    let (got, _) = fetch(&mut c, ask)?;
    let total: usize = got.iter().map(|&(_, n)| n).sum();
    ensure(total <= budget as usize, || {
        format!("a response of {total} bytes for max_bytes {budget}: {got:?}")
    })?;
    ensure(got.iter().any(|&(p, n)| p == 0 && n >= small), || {
        format!("partition 0 not given whole: {got:?}")
    })?;
    // First, it comes whole, past the budget.
    let ask = Ask { partitions: vec![(1, 1 << 20), (0, 1 << 20)], min_bytes: 1, max_bytes: budget };
    let (got, _) = fetch(&mut c, ask)?;
    ensure(got.first().is_some_and(|&(p, n)| p == 1 && n >= large), || {
        format!("partition 1's batch, asked for first, not given whole: {got:?}")
    })?;
    c.watch_verdict()
}

#[test]
fn fetch_waits_and_bounds_as_kafka() {
    for_each_seed("fetch_waits_and_bounds_as_kafka", 0..2, scenario);
}
