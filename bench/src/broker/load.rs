//! `weir-bench load`: one librdkafka producer, with the throughput cells' settings, against a
//! broker already listening (`weir serve`, the null broker of `weir-bench sink`, or any other
//! Kafka-compatible broker), until it has sent the bytes asked for. It starts no broker and
//! measures no baseline, so that a standalone broker can be profiled alone (`perf record -p`)
//! and its CPU time per byte read off `/proc` by whoever runs it. The rate is what the broker
//! acknowledged, except with `--acks 0`, where it is how fast the client sent.

use std::time::Instant;

use super::client::{self, Result};
use super::workload::{THROUGHPUT_BATCH_BYTES, THROUGHPUT_LINGER_MS};
use crate::baselines::pattern;

/// What to send, and where.
pub struct Load<'a> {
    /// The broker's address.
    pub bootstrap: &'a str,
    /// The topic (created on first use by a broker that creates topics so).
    pub topic: &'a str,
    /// MiB of record values to send.
    pub mib: u64,
    /// The producer's `acks`.
    pub acks: &'a str,
    /// Each record's value size.
    pub record_bytes: usize,
}

/// Sends `load.mib` MiB of `load.record_bytes`-byte records and prints the rate.
pub fn run(load: &Load<'_>) -> Result<()> {
    let mut producer = client::producer(
        load.bootstrap,
        &[
            ("acks", load.acks.to_owned()),
            ("linger.ms", THROUGHPUT_LINGER_MS.to_owned()),
            ("batch.size", THROUGHPUT_BATCH_BYTES.to_owned()),
        ],
    )?;
    let payload = pattern(load.record_bytes);
    // The first record finds the topic's leader; it is not timed.
    producer.send(load.topic, &payload, client::now_ns())?;
    producer.flush()?;
    // Whole records, at least the MiB asked for.
    let budget = (load.mib << 20).div_ceil(load.record_bytes as u64);
    let start = Instant::now();
    for _ in 0..budget {
        producer.send(load.topic, &payload, 0)?;
    }
    producer.flush()?;
    let sent = budget;
    let secs = start.elapsed().as_secs_f64();
    let bytes = sent * load.record_bytes as u64;
    println!(
        "{:.1} MiB in {sent} records of {} B to {} at {}: {secs:.2} s, {:.0} MB/s, {:.0} records/s \
         (acks={}, linger.ms={THROUGHPUT_LINGER_MS}, batch.size={THROUGHPUT_BATCH_BYTES}, \
         compression none)",
        bytes as f64 / f64::from(1u32 << 20),
        load.record_bytes,
        load.topic,
        load.bootstrap,
        bytes as f64 / secs / 1e6,
        sent as f64 / secs,
        load.acks,
    );
    Ok(())
}
