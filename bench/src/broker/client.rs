//! The librdkafka side: topics, producers that time every delivery, consumers, and a pacer
//! for fixed offered rates. Every latency is measured from a record's *intended* send time
//! (start + i / rate), so a client that falls behind is charged for it (no coordinated
//! omission).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};

use crate::report;
use crate::sampler::PRODUCED_BYTES;

/// Errors of the benchmark.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How long client operations may take before the benchmark gives up.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Nanoseconds since the process's benchmark epoch (shared by producers and consumers).
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Creates a topic with `partitions` partitions of `replicas` replicas each and `configs`,
/// and waits until every partition has a leader.
pub fn create_topic(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    name: &str,
    (partitions, replicas): (i32, i32),
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replicas));
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let options = AdminOptions::new().operation_timeout(Some(CLIENT_TIMEOUT));
    for result in rt.block_on(admin.create_topics(&[topic], &options))? {
        if let Err((topic, code)) = result {
            return Err(format!("creating topic {topic}: {code}").into());
        }
    }
    let probe: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(metadata) = probe.fetch_metadata(Some(name), Duration::from_secs(5))
            && let Some(t) = metadata.topics().first()
            && t.error().is_none()
            && t.partitions().len() == partitions as usize
            && t.partitions().iter().all(|p| p.leader() >= 0)
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("topic {name} never got leaders").into())
}

/// What a producer's deliveries came to.
#[derive(Debug, Default)]
pub struct Tally {
    /// Records acknowledged.
    pub delivered: AtomicU64,
    /// Records that failed.
    pub failed: AtomicU64,
    /// The last failure.
    pub last_error: Mutex<Option<String>>,
    /// Send-to-acknowledgement latency (µs), while recording.
    pub latency: Mutex<Option<Histogram<u64>>>,
}

impl Tally {
    /// Starts recording latencies into a fresh histogram.
    pub fn record_latency(&self) {
        *self.latency.lock().unwrap_or_else(|p| p.into_inner()) = Some(report::histogram());
    }

    /// Stops recording and returns the histogram.
    pub fn take_latency(&self) -> Histogram<u64> {
        self.latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(report::histogram)
    }
}

/// Counts deliveries and times them.
pub struct Timed(pub Arc<Tally>);

impl ClientContext for Timed {}

impl ProducerContext for Timed {
    /// The intended send time, [`now_ns`].
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_ns: usize) {
        match result {
            Ok(message) => {
                self.0.delivered.fetch_add(1, Ordering::Relaxed);
                PRODUCED_BYTES.fetch_add(message.payload_len() as u64, Ordering::Relaxed);
                let mut latency = self.0.latency.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(h) = latency.as_mut() {
                    let micros = now_ns().saturating_sub(sent_ns as u64) / 1000;
                    report::record_us(h, micros);
                }
            }
            Err((error, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                *self.0.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(error.to_string());
            }
        }
    }
}

/// A producer with its tally.
pub struct TimedProducer {
    /// The client.
    pub producer: ThreadedProducer<Timed>,
    /// Its deliveries.
    pub tally: Arc<Tally>,
    /// Records handed to it.
    pub sent: u64,
}

/// Producer settings: everything but the bootstrap servers.
pub fn producer(bootstrap: &str, settings: &[(&str, String)]) -> Result<TimedProducer> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("compression.type", "none")
        .set("message.timeout.ms", "120000")
        // Bounds the client's share of the process's memory (the broker's is what we measure).
        .set("queue.buffering.max.kbytes", "65536");
    for (k, v) in settings {
        config.set(*k, v.as_str());
    }
    let tally = Arc::new(Tally::default());
    let producer = config.create_with_context(Timed(Arc::clone(&tally)))?;
    Ok(TimedProducer { producer, tally, sent: 0 })
}

impl TimedProducer {
    /// Sends one record, waiting while the client's queue is full. `sent_ns` is the intended
    /// send time ([`now_ns`]) the delivery is timed from.
    pub fn send(&mut self, topic: &str, payload: &[u8], sent_ns: u64) -> Result<()> {
        let mut record =
            BaseRecord::<(), [u8], usize>::with_opaque_to(topic, sent_ns as usize).payload(payload);
        loop {
            match self.producer.send(record) {
                Ok(()) => {
                    self.sent += 1;
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err((error, _)) => return Err(error.into()),
            }
        }
    }

    /// Waits until every record sent so far is acknowledged (or failed).
    pub fn flush(&self) -> Result<()> {
        self.producer.flush(CLIENT_TIMEOUT)?;
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        while self.done() < self.sent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let failed = self.tally.failed.load(Ordering::Relaxed);
        if failed > 0 {
            let last = self.tally.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
            return Err(format!("{failed} records failed: {}", last.unwrap_or_default()).into());
        }
        Ok(())
    }

    fn done(&self) -> u64 {
        self.tally.delivered.load(Ordering::Relaxed) + self.tally.failed.load(Ordering::Relaxed)
    }
}

/// A consumer with `settings` over the defaults below.
pub fn consumer(bootstrap: &str, group: &str, settings: &[(&str, &str)]) -> Result<BaseConsumer> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        // Bounds the client's prefetch buffer (its share of the process's memory).
        .set("queued.max.messages.kbytes", "65536");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    Ok(config.create()?)
}

/// The leader and in-sync replicas of `topic`'s partition 0, as the cluster's metadata says.
pub fn leader_and_isr(probe: &BaseConsumer, topic: &str) -> Result<(i32, Vec<i32>)> {
    let metadata = probe.fetch_metadata(Some(topic), Duration::from_secs(5))?;
    let partition = metadata
        .topics()
        .first()
        .and_then(|t| t.partitions().iter().find(|p| p.id() == 0))
        .ok_or_else(|| format!("no metadata for {topic}"))?;
    Ok((partition.leader(), partition.isr().to_vec()))
}

/// The high watermark of `topic`/`partition`.
pub fn high_watermark(bootstrap: &str, topic: &str, partition: i32) -> Result<i64> {
    let probe: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    Ok(probe.fetch_watermarks(topic, partition, CLIENT_TIMEOUT)?.1)
}

/// Calls `send(i, intended_ns)` for records i = 0, 1, … at `rate` per second for `secs`
/// seconds; returns how many were sent.
pub fn paced(rate: f64, secs: f64, send: impl FnMut(u64, u64) -> Result<()>) -> Result<u64> {
    paced_until(rate, secs, &AtomicBool::new(false), send)
}

/// [`paced`], ending early once `stop` is set.
pub fn paced_until(
    rate: f64,
    secs: f64,
    stop: &AtomicBool,
    mut send: impl FnMut(u64, u64) -> Result<()>,
) -> Result<u64> {
    let start_ns = now_ns();
    let total = (rate * secs).round() as u64;
    let mut sent = 0u64;
    while sent < total && !stop.load(Ordering::Relaxed) {
        let elapsed = (now_ns() - start_ns) as f64 / 1e9;
        let due = ((elapsed * rate) as u64 + 1).min(total);
        while sent < due {
            let intended = start_ns + (sent as f64 * 1e9 / rate) as u64;
            send(sent, intended)?;
            sent += 1;
        }
        if sent < total {
            let next = start_ns + (sent as f64 * 1e9 / rate) as u64;
            let wait = next.saturating_sub(now_ns());
            if wait > 0 {
                std::thread::sleep(Duration::from_nanos(wait.min(1_000_000)));
            }
        }
    }
    Ok(sent)
}

/// A payload of `len` bytes that starts with `sent_ns` (little-endian), for latency probes.
pub fn stamp(payload: &mut [u8], sent_ns: u64) {
    if let Some(head) = payload.get_mut(..8) {
        head.copy_from_slice(&sent_ns.to_le_bytes());
    }
}

/// The send time stamped by [`stamp`].
pub fn stamped(payload: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(payload.get(..8)?.try_into().ok()?))
}
