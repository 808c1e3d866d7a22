//! A consumer's fetch of a batch damaged on the leader's disk (a latent sector error: it fails
//! its CRC however often it is read) must answer `CORRUPT_MESSAGE`, as Kafka does for a corrupt
//! record, and nothing else: a client shows that error to the application, where
//! `KAFKA_STORAGE_ERROR` (what was answered before) makes librdkafka refresh its metadata and
//! retry in silence for good. Fetches of the batches around it are served as if nothing were
//! wrong: those before it up to it, those after it to the end. So must a ListOffsets by
//! timestamp whose answer may lie in the damaged batch (the first record at or after its first
//! timestamp); one whose answer lies before it is answered.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::fetch::{FetchWant, FetchedPartition};
use weir_sim::client::produce::Acks;
use weir_sim::client::{Client, ClientError, codes};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};
use weir_sim::workload::log::locate;

/// Batches produced, and records in each.
const BATCHES: usize = 5;
const RECORDS: usize = 3;
/// Bytes of a batch's header, before its records.
const HEADER_BYTES: usize = 61;

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_replicated_topic(0, "data", 1, 1, &[]).map_err(|e| e.to_string())?;
    let mut bases = Vec::new();
    for n in 0..BATCHES {
        let values: Vec<String> = (0..RECORDS).map(|i| format!("batch {n} record {i}")).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let base = c
            .produce_batch(0, ("data", 0), &values, Acks::All)
            .map_err(|e| format!("batch {n} was not acknowledged: {e:?}"))?;
        bases.push(base);
    }
    // One of the batches in the middle, in its records (inside the CRC).
    let damaged = bases[1 + seed as usize % (BATCHES - 2)];
    let broker = c.broker(0).ok_or("the broker is not running")?;
    let partition = broker.catalog.partition("data", 0).ok_or("no partition data-0")?;
    let dir = partition.log.dir().to_path_buf();
    let node = c.nodes[0];
    let (path, position, bytes) = c
        .sim
        .block_on(node, Duration::from_secs(10), move |env| locate(env, dir, damaged))
        .flatten()
        .ok_or("the damaged batch was not found in its segment")?;
    let damaged_time = weir::log::batch::parse_header(&bytes)
        .map_err(|e| format!("the batch found does not parse: {e}"))?
        .base_timestamp();
    let within = HEADER_BYTES + seed as usize % (bytes.len() - HEADER_BYTES);
    c.sim
        .corrupt_file(node, &path, position + within as u64)
        .map_err(|e| format!("damaging the batch: {e}"))?;
    let end = (BATCHES * RECORDS) as i64;
    let addr = c.addr(0);
    let fetched = c
        .client_call(Duration::from_secs(60), move |env| async move {
            let mut client = Client::new(env, addr, "consumer");
            let mut out = Vec::new();
            for offset in 0..end {
                let want = FetchWant { topic: "data".to_owned(), partition: 0, offset };
                out.push((offset, client.fetch(&[want], Duration::ZERO).await));
            }
            out
        })
        .ok_or("the fetches did not finish")?;
    for (offset, answer) in fetched {
        check(offset, answer, damaged, end)?;
    }
    let looked_up = c
        .client_call(Duration::from_secs(60), move |env| async move {
            let mut client = Client::new(env, addr, "admin");
            let first = client.list_offsets("data", &[0], 0).await;
            let in_damaged = client.list_offsets("data", &[0], damaged_time).await;
            (first, in_damaged)
        })
        .ok_or("the offset lookups did not finish")?;
    let answer = |found: Result<BTreeMap<i32, Result<i64, i16>>, ClientError>| {
        found.map_err(|e| e.to_string()).map(|mut parts| parts.remove(&0))
    };
    let (first, in_damaged) = (answer(looked_up.0), answer(looked_up.1));
    ensure(first == Ok(Some(Ok(0))), || {
        format!("looking up timestamp 0 answered {first:?}, not offset 0")
    })?;
    ensure(in_damaged == Ok(Some(Err(codes::CORRUPT_MESSAGE))), || {
        format!(
            "looking up the damaged batch's first timestamp {damaged_time} answered \
             {in_damaged:?}, not CORRUPT_MESSAGE"
        )
    })?;
    c.watch_verdict()
}

/// Checks the fetch at `offset`: the damaged batch's offsets answer `CORRUPT_MESSAGE` alone;
/// any other offset gets the records from it on, up to the damaged batch or the end.
fn check(
    offset: i64,
    answer: Result<Vec<FetchedPartition>, ClientError>,
    damaged: i64,
    end: i64,
) -> Result<(), String> {
    let parts = answer.map_err(|e| format!("the fetch at {offset} failed: {e}"))?;
    let part = parts.first().ok_or_else(|| format!("the fetch at {offset} answered nothing"))?;
    let in_damaged = (damaged..damaged + RECORDS as i64).contains(&offset);
    if in_damaged {
        return ensure(
            part.error_code == codes::CORRUPT_MESSAGE && part.records.is_empty(),
            || {
                format!(
                    "the fetch at {offset}, in the damaged batch, answered error {} with {} records",
                    part.error_code,
                    part.records.len()
                )
            },
        );
    }
    // (The client drops the records of the first batch below the offset it asked for.)
    let last = if offset < damaged { damaged } else { end };
    let got: Vec<i64> = part.records.iter().map(|r| r.offset).collect();
    let want: Vec<i64> = (offset..last).collect();
    ensure(part.error_code == codes::NONE && part.corrupt.is_none() && got == want, || {
        format!(
            "the fetch at {offset} answered error {} ({:?}) with offsets {got:?}, not {want:?}",
            part.error_code, part.corrupt
        )
    })
}

#[test]
fn fetch_of_a_damaged_batch_answers_corrupt_message() {
    for_each_seed("fetch_of_a_damaged_batch_answers_corrupt_message", 0..6, scenario);
}
