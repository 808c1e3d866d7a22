//! The broker workload, identical for Weir and for a `--peer`: the produce matrix, consume
//! throughput from a freshly written log, produce-to-consume latency at fixed offered rates,
//! the lagging consumer, and produce-ack latency at 2,000 records/s with `linger.ms=0`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use super::client::{self, CLIENT_TIMEOUT, Result, now_ns};
use crate::baselines::{self, MIB, pattern};
use crate::counting::{DiskCounters, DiskSnapshot};
use crate::progress;
use crate::report::{self, Latency};
use crate::sampler::CONSUMED_BYTES;

/// Weir's `flush.policy` for a topic. A peer gets no such setting (it runs its own default);
/// the label only lines its rows up with Weir's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Policy {
    /// `flush.policy=ack` (Weir's default).
    Ack,
    /// `flush.policy=interval` (Kafka's behaviour).
    Interval,
}

impl Policy {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Ack => "ack",
            Policy::Interval => "interval",
        }
    }
}

/// How long and how large each part runs.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The reduced matrix.
    pub quick: bool,
    /// Longest one produce cell sends.
    pub cell_secs: f64,
    /// Most bytes one produce cell sends.
    pub cell_bytes: u64,
    /// Size of the log consumed.
    pub consume_bytes: u64,
    /// Length of each fixed-rate run.
    pub rate_secs: f64,
    /// Offered rates for produce-to-consume latency, as fractions of the measured maximum.
    pub fractions: Vec<f64>,
    /// Offered rate of the lagging-consumer runs, as a fraction of the measured maximum.
    pub lag_fraction: f64,
}

impl Plan {
    /// The default plan, or the reduced one.
    pub fn new(quick: bool) -> Plan {
        Plan {
            quick,
            cell_secs: if quick { 3.0 } else { 4.0 },
            cell_bytes: if quick { 256 * MIB } else { 1024 * MIB },
            consume_bytes: if quick { 256 * MIB } else { 1024 * MIB },
            rate_secs: if quick { 3.0 } else { 5.0 },
            fractions: vec![0.1, 0.5, 0.8],
            lag_fraction: 0.25,
        }
    }

    /// The produce matrix: (acks, record bytes, partitions, policy).
    pub fn cells(&self) -> Vec<(&'static str, usize, i32, Policy)> {
        let mut cells = Vec::new();
        let sizes: &[usize] = if self.quick { &[1024] } else { &[100, 1024, 10240] };
        let partitions: &[i32] = if self.quick { &[1] } else { &[1, 8] };
        for &p in partitions {
            for &size in sizes {
                for acks in ["0", "1", "all"] {
                    cells.push((acks, size, p, Policy::Ack));
                }
            }
        }
        cells.push(("1", 1024, 1, Policy::Interval));
        cells.push(("all", 1024, 1, Policy::Interval));
        cells
    }
}

/// Producer settings of the throughput runs.
pub const THROUGHPUT_LINGER_MS: &str = "5";
/// See [`THROUGHPUT_LINGER_MS`].
pub const THROUGHPUT_BATCH_BYTES: &str = "1000000";
/// Producer `linger.ms` of the produce-to-consume and lagging-consumer runs.
pub const LATENCY_LINGER_MS: &str = "1";
/// Untimed seconds at the offered rate before each lagging-consumer measurement.
const LAG_WARM_UP_SECS: f64 = 1.0;
/// How long the consume cell waits after writing its log before it reads: longer than the
/// broker counts itself as written to after a write.
const QUIET_BEFORE_READING: Duration =
    weir::partition::read_ahead::WRITES_RECENT.saturating_add(Duration::from_millis(500));
/// Offered rate of the produce-ack latency runs.
pub const ACK_RATE: f64 = 2000.0;

/// One produce cell's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// `acks`.
    pub acks: &'static str,
    /// Record payload bytes.
    pub size: usize,
    /// Partitions of the topic.
    pub partitions: i32,
    /// The topic's flush policy.
    pub policy: Policy,
    /// Payload MB/s.
    pub mbs: f64,
    /// Records per second.
    pub rps: f64,
    /// Records sent.
    pub records: u64,
    /// Seconds from the first send to the last acknowledgement.
    pub secs: f64,
    /// File syncs the broker issued meanwhile (in-process Weir only).
    pub syncs: Option<u64>,
    /// Seconds the broker spent in them.
    pub sync_secs: Option<f64>,
}

impl Cell {
    /// Its name in tables.
    pub fn name(&self) -> String {
        let size = if self.size >= 1024 {
            format!("{} KiB", self.size / 1024)
        } else {
            format!("{} B", self.size)
        };
        format!(
            "produce acks={} {size} {}p flush.policy={}",
            self.acks,
            self.partitions,
            self.policy.name()
        )
    }
}

/// Consume throughput.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Consumed {
    /// Payload bytes in the log.
    pub log_bytes: u64,
    /// Records in it.
    pub records: u64,
    /// Payload MB/s.
    pub mbs: f64,
    /// Records per second.
    pub rps: f64,
}

/// Produce-to-consume latency at one offered rate.
#[derive(Clone, Debug, Serialize)]
pub struct RateLatency {
    /// The topic's flush policy.
    pub policy: Policy,
    /// Fraction of the measured maximum.
    pub fraction: f64,
    /// Records per second offered.
    pub rate: f64,
    /// The distribution.
    pub latency: Latency,
}

/// The lagging-consumer runs.
#[derive(Clone, Debug, Serialize)]
pub struct Lagging {
    /// Records per second offered.
    pub rate: f64,
    /// Producers' send-to-ack latency with no consumer.
    pub without: Latency,
    /// The same with one consumer group reading from offset 0 as fast as it can.
    pub with: Latency,
    /// What the consumer read meanwhile, MB/s.
    pub consumer_mbs: f64,
}

/// Everything measured on one broker.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The produce matrix.
    pub cells: Vec<Cell>,
    /// Consume throughput.
    pub consumed: Consumed,
    /// Produce-to-consume latency.
    pub rates: Vec<RateLatency>,
    /// The lagging consumer.
    pub lagging: Option<Lagging>,
    /// Produce-ack latency at 2,000 records/s, `linger.ms=0`, acks=all, per policy.
    pub acks: Vec<(Policy, Latency)>,
}

/// What the client reaches against a null broker.
#[derive(Clone, Debug, Serialize)]
pub struct Ceiling {
    /// acks 0, 1 and all, 1 KiB records, one partition.
    pub cells: Vec<Cell>,
    /// Consume throughput, as the brokers' consume phase measures it.
    pub consumed: Consumed,
    /// Produce-ack latency at [`ACK_RATE`], `linger.ms=0`, acks=all.
    pub ack: Latency,
}

/// One broker to run the workload on.
pub struct Run<'a> {
    /// For the admin client's futures.
    pub rt: &'a tokio::runtime::Runtime,
    /// Where clients connect.
    pub bootstrap: String,
    /// Whether it is Weir (and takes `flush.policy`).
    pub weir: bool,
    /// Its disk counters, for an in-process Weir.
    pub disk: Option<Arc<DiskCounters>>,
    /// Makes topic and group names unique to this run.
    pub tag: String,
    /// Sizes and durations.
    pub plan: &'a Plan,
}

impl Run<'_> {
    fn topic_configs(&self, policy: Policy) -> Vec<(&'static str, &'static str)> {
        if self.weir { vec![("flush.policy", policy.name())] } else { Vec::new() }
    }

    fn topic(&self, name: &str, partitions: i32, policy: Policy) -> Result<String> {
        let topic = format!("bench-{}-{name}", self.tag);
        client::create_topic(
            self.rt,
            &self.bootstrap,
            &topic,
            (partitions, 1),
            &self.topic_configs(policy),
        )?;
        Ok(topic)
    }

    fn disk_snapshot(&self) -> Option<DiskSnapshot> {
        self.disk.as_ref().map(|d| d.snapshot())
    }

    /// Runs everything.
    pub fn all(&self, label: &str) -> Result<Outcome> {
        let mut cells = Vec::new();
        for (acks, size, partitions, policy) in self.plan.cells() {
            let cell = self.produce_cell(acks, size, partitions, policy)?;
            eprintln!("{label}: {}: {:.1} MB/s, {:.0} records/s", cell.name(), cell.mbs, cell.rps);
            cells.push(cell);
        }
        let consumed = self.consume()?;
        eprintln!(
            "{label}: consume {} MiB log: {:.1} MB/s, {:.0} records/s",
            consumed.log_bytes / MIB,
            consumed.mbs,
            consumed.rps
        );
        let max_rate = |policy: Policy| {
            cells
                .iter()
                .find(|c| {
                    c.acks == "1" && c.size == 1024 && c.partitions == 1 && c.policy == policy
                })
                .map_or(1000.0, |c| c.rps)
        };
        let mut rates = Vec::new();
        for policy in [Policy::Ack, Policy::Interval] {
            for &fraction in &self.plan.fractions {
                let rate = (max_rate(policy) * fraction).max(10.0);
                let latency = self.produce_to_consume(policy, fraction, rate)?;
                eprintln!(
                    "{label}: produce-to-consume {:.0}% ({rate:.0}/s) flush.policy={}: p50 {} µs, p99 {} µs",
                    fraction * 100.0,
                    policy.name(),
                    latency.p50_us,
                    latency.p99_us
                );
                rates.push(RateLatency { policy, fraction, rate, latency });
            }
        }
        let lagging = self.lagging(&consumed, max_rate(Policy::Ack) * self.plan.lag_fraction)?;
        eprintln!(
            "{label}: lagging consumer: producers' p99 {} µs without, {} µs with (consumer {:.0} MB/s)",
            lagging.without.p99_us, lagging.with.p99_us, lagging.consumer_mbs
        );
        let mut acks = Vec::new();
        for policy in [Policy::Ack, Policy::Interval] {
            let latency = self.ack_latency(policy)?;
            eprintln!(
                "{label}: produce-ack at {ACK_RATE}/s flush.policy={}: p99 {} µs",
                policy.name(),
                latency.p99_us
            );
            acks.push((policy, latency));
        }
        Ok(Outcome { cells, consumed, rates, lagging: Some(lagging), acks })
    }

    /// The produce cells with 1 KiB records and one partition (acks 0, 1 and all), the consume
    /// phase and the produce-ack latency at [`ACK_RATE`]: the part of the workload a null
    /// broker ([`super::sink`]) can answer, measured there as the clients' ceiling.
    pub fn ceiling(&self, label: &str) -> Result<Ceiling> {
        let mut cells = Vec::new();
        for acks in ["0", "1", "all"] {
            let cell = self.produce_cell(acks, 1024, 1, Policy::Ack)?;
            eprintln!("{label}: {}: {:.1} MB/s, {:.0} records/s", cell.name(), cell.mbs, cell.rps);
            cells.push(cell);
        }
        let consumed = self.consume()?;
        eprintln!("{label}: consume {} MiB: {:.1} MB/s", consumed.log_bytes / MIB, consumed.mbs);
        let ack = self.ack_latency(Policy::Ack)?;
        eprintln!("{label}: produce-ack at {ACK_RATE}/s: p99 {} µs", ack.p99_us);
        Ok(Ceiling { cells, consumed, ack })
    }

    fn produce_cell(
        &self,
        acks: &'static str,
        size: usize,
        partitions: i32,
        policy: Policy,
    ) -> Result<Cell> {
        let name = format!("produce-a{acks}-s{size}-p{partitions}-{}", policy.name());
        let topic = self.topic(&name, partitions, policy)?;
        let mut producer = client::producer(
            &self.bootstrap,
            &[
                ("acks", acks.to_owned()),
                ("linger.ms", THROUGHPUT_LINGER_MS.to_owned()),
                ("batch.size", THROUGHPUT_BATCH_BYTES.to_owned()),
            ],
        )?;
        let payload = pattern(size);
        producer.send(&topic, &payload, now_ns())?;
        producer.flush()?;
        let warm = producer.sent;
        let bar = progress::timed(&name, self.plan.cell_secs);
        let before = self.disk_snapshot();
        let budget = (self.plan.cell_bytes / size as u64).max(1);
        let start = Instant::now();
        let mut records = 0;
        while records < budget && start.elapsed().as_secs_f64() < self.plan.cell_secs {
            for _ in 0..64 {
                producer.send(&topic, &payload, 0)?;
            }
            records += 64;
            bar.set_position((start.elapsed().as_secs_f64() * 10.0) as u64);
        }
        producer.flush()?;
        let secs = start.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let used = match (self.disk_snapshot(), before) {
            (Some(after), Some(before)) => Some(after.since(&before)),
            _ => None,
        };
        let records = producer.sent - warm;
        Ok(Cell {
            acks,
            size,
            partitions,
            policy,
            mbs: (records * size as u64) as f64 / secs / 1e6,
            rps: records as f64 / secs,
            records,
            secs,
            syncs: used.map(|u| u.syncs),
            sync_secs: used.map(|u| u.sync_secs),
        })
    }

    /// Writes a log of `consume_bytes` of 1 KiB records (acks=1, the default policy), then
    /// reads it from offset 0.
    fn consume(&self) -> Result<Consumed> {
        const SIZE: usize = 1024;
        let topic = self.topic("consume", 1, Policy::Ack)?;
        let mut producer = client::producer(
            &self.bootstrap,
            &[
                ("acks", "1".to_owned()),
                ("linger.ms", THROUGHPUT_LINGER_MS.to_owned()),
                ("batch.size", THROUGHPUT_BATCH_BYTES.to_owned()),
            ],
        )?;
        let payload = pattern(SIZE);
        let records = self.plan.consume_bytes / SIZE as u64;
        let bar = progress::bar("consume: writing the log", records * SIZE as u64 / MIB, "MiB");
        for i in 0..records {
            producer.send(&topic, &payload, 0)?;
            if i % 4096 == 0 {
                bar.set_position(i * SIZE as u64 / MIB);
            }
        }
        producer.flush()?;
        bar.finish_and_clear();
        // The cell measures a consumer reading a log no one is writing to: it starts once the
        // broker has taken no write for longer than it counts itself as written to (its reads
        // for a consumer catching up yield to writers only while there are some; the lagging
        // consumer cell measures that case), on a settled disk, untimed.
        std::thread::sleep(QUIET_BEFORE_READING);
        baselines::settle_disk()?;
        let hw = client::high_watermark(&self.bootstrap, &topic, 0)?.max(0) as u64;
        let consumer =
            client::consumer(&self.bootstrap, &format!("bench-{}-consume", self.tag), &[])?;
        // The consumer learns the partition's leader before the clock starts: a librdkafka
        // consumer assigned a partition whose leader it does not know yet puts the offset
        // query off by half a second (its "timed offset query"), whatever the broker, and
        // that wait would be timed as if it were reading.
        consumer.fetch_metadata(Some(&topic), CLIENT_TIMEOUT)?;
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition_offset(&topic, 0, Offset::Beginning)?;
        consumer.assign(&assignment)?;
        let bar = progress::bar("consume: reading it from offset 0", hw, "records");
        let (mut got, mut bytes) = (0u64, 0u64);
        let start = Instant::now();
        let deadline = start + CLIENT_TIMEOUT * 2;
        let mut polls = 0u64;
        while got < hw {
            // The clock is read once per 1024 polls: once per record, it cost the reading
            // thread a tenth of its time on this machine, which is the client's to measure.
            polls += 1;
            if polls.is_multiple_of(1024) && Instant::now() >= deadline {
                break;
            }
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    got += 1;
                    let len = message.payload_len() as u64;
                    bytes += len;
                    CONSUMED_BYTES.fetch_add(len, Ordering::Relaxed);
                    if got % 4096 == 0 {
                        bar.set_position(got);
                    }
                }
                Some(Err(error)) => return Err(error.into()),
                None => {}
            }
        }
        let secs = start.elapsed().as_secs_f64();
        bar.finish_and_clear();
        if got < hw {
            return Err(format!("consumed only {got} of {hw} records").into());
        }
        Ok(Consumed {
            log_bytes: hw * SIZE as u64,
            records: hw,
            mbs: bytes as f64 / secs / 1e6,
            rps: got as f64 / secs,
        })
    }

    fn produce_to_consume(&self, policy: Policy, fraction: f64, rate: f64) -> Result<Latency> {
        const SIZE: usize = 1024;
        let percent = (fraction * 100.0).round();
        let name = format!("p2c-{}-{percent}", policy.name());
        let topic = self.topic(&name, 1, policy)?;
        let mut producer = client::producer(
            &self.bootstrap,
            &[("acks", "1".to_owned()), ("linger.ms", LATENCY_LINGER_MS.to_owned())],
        )?;
        baselines::settle_disk()?;
        let mut payload = pattern(SIZE);
        // A first record, so the consumer is fetching before the timed records start.
        client::stamp(&mut payload, now_ns());
        producer.send(&topic, &payload, now_ns())?;
        producer.flush()?;
        let consumer = client::consumer(
            &self.bootstrap,
            &format!("bench-{}-{name}", self.tag),
            &[("fetch.wait.max.ms", "100")],
        )?;
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition_offset(&topic, 0, Offset::Beginning)?;
        consumer.assign(&assignment)?;
        let stop = Arc::new(AtomicBool::new(false));
        let expected = Arc::new(AtomicU64::new(u64::MAX));
        let ready = Arc::new(AtomicBool::new(false));
        let reader = {
            let (stop, expected, ready) =
                (Arc::clone(&stop), Arc::clone(&expected), Arc::clone(&ready));
            std::thread::spawn(move || -> Result<hdrhistogram::Histogram<u64>> {
                let mut hist = report::histogram();
                let mut got = 0u64;
                let deadline = Instant::now() + CLIENT_TIMEOUT * 3;
                while got < expected.load(Ordering::Relaxed) && Instant::now() < deadline {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    match consumer.poll(Duration::from_millis(20)) {
                        Some(Ok(message)) => {
                            let now = now_ns();
                            CONSUMED_BYTES
                                .fetch_add(message.payload_len() as u64, Ordering::Relaxed);
                            if message.offset() == 0 {
                                ready.store(true, Ordering::Relaxed);
                                continue;
                            }
                            got += 1;
                            if let Some(sent) = message.payload().and_then(client::stamped) {
                                report::record_us(&mut hist, now.saturating_sub(sent) / 1000);
                            }
                        }
                        Some(Err(error)) => return Err(error.into()),
                        None => {}
                    }
                }
                Ok(hist)
            })
        };
        let wait = Instant::now() + CLIENT_TIMEOUT;
        while !ready.load(Ordering::Relaxed) && Instant::now() < wait {
            std::thread::sleep(Duration::from_millis(5));
        }
        let bar = progress::timed(&format!("{name} at {rate:.0}/s"), self.plan.rate_secs);
        let start = Instant::now();
        let sent = client::paced(rate, self.plan.rate_secs, |i, intended| {
            client::stamp(&mut payload, intended);
            if i % 256 == 0 {
                bar.set_position((start.elapsed().as_secs_f64() * 10.0) as u64);
            }
            producer.send(&topic, &payload, intended)
        });
        let flushed = producer.flush();
        expected.store(sent.as_ref().map_or(0, |n| *n), Ordering::Relaxed);
        if sent.is_err() || flushed.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let hist = reader.join().map_err(|_| "consumer thread panicked")??;
        bar.finish_and_clear();
        sent?;
        flushed?;
        let label = format!(
            "produce-to-consume {percent}% of max ({rate:.0}/s) flush.policy={}",
            policy.name()
        );
        Ok(Latency::from_histogram(&label, &hist))
    }

    /// Producers at a fixed rate into the consumed log's topic, first alone, then while a new
    /// consumer group reads that topic from offset 0 as fast as it can (starting over at the
    /// end, so it lags throughout).
    fn lagging(&self, consumed: &Consumed, rate: f64) -> Result<Lagging> {
        const SIZE: usize = 1024;
        let topic = format!("bench-{}-consume", self.tag);
        let mut producer = client::producer(
            &self.bootstrap,
            &[("acks", "1".to_owned()), ("linger.ms", LATENCY_LINGER_MS.to_owned())],
        )?;
        let payload = pattern(SIZE);
        producer.send(&topic, &payload, now_ns())?;
        producer.flush()?;
        let mut timed = |name: &str| -> Result<hdrhistogram::Histogram<u64>> {
            baselines::settle_disk()?;
            // One untimed second at the rate first: the broker may still be draining what
            // the previous phase left (writeback, a client backlog), which is not this
            // phase's latency.
            client::paced(rate, LAG_WARM_UP_SECS, |_, intended| {
                producer.send(&topic, &payload, intended)
            })?;
            producer.flush()?;
            let bar = progress::timed(name, self.plan.rate_secs);
            producer.tally.record_latency();
            let start = Instant::now();
            client::paced(rate, self.plan.rate_secs, |i, intended| {
                if i % 256 == 0 {
                    bar.set_position((start.elapsed().as_secs_f64() * 10.0) as u64);
                }
                producer.send(&topic, &payload, intended)
            })?;
            producer.flush()?;
            bar.finish_and_clear();
            Ok(producer.tally.take_latency())
        };
        let without = timed(&format!("lagging: producers alone at {rate:.0}/s"))?;
        let consumer = client::consumer(
            &self.bootstrap,
            &format!("bench-{}-lagging", self.tag),
            &[("enable.partition.eof", "true"), ("enable.auto.commit", "true")],
        )?;
        consumer.subscribe(&[topic.as_str()])?;
        let stop = Arc::new(AtomicBool::new(false));
        let read = Arc::new(AtomicU64::new(0));
        let reader = {
            let (stop, read, topic) = (Arc::clone(&stop), Arc::clone(&read), topic.clone());
            std::thread::spawn(move || -> Result<()> {
                while !stop.load(Ordering::Relaxed) {
                    match consumer.poll(Duration::from_millis(50)) {
                        Some(Ok(message)) => {
                            let len = message.payload_len() as u64;
                            read.fetch_add(len.max(1), Ordering::Relaxed);
                            CONSUMED_BYTES.fetch_add(len, Ordering::Relaxed);
                        }
                        Some(Err(KafkaError::PartitionEOF(partition))) => {
                            consumer.seek(&topic, partition, Offset::Beginning, CLIENT_TIMEOUT)?;
                        }
                        Some(Err(error)) => return Err(error.into()),
                        None => {}
                    }
                }
                Ok(())
            })
        };
        let joined = Instant::now() + CLIENT_TIMEOUT;
        while read.load(Ordering::Relaxed) == 0 && Instant::now() < joined {
            std::thread::sleep(Duration::from_millis(10));
        }
        let before = read.load(Ordering::Relaxed);
        let start = Instant::now();
        let with = timed(&format!(
            "lagging: with a consumer from offset 0 ({} MiB log)",
            consumed.log_bytes / MIB
        ));
        let consumer_mbs = read.load(Ordering::Relaxed).saturating_sub(before) as f64
            / start.elapsed().as_secs_f64()
            / 1e6;
        stop.store(true, Ordering::Relaxed);
        reader.join().map_err(|_| "consumer thread panicked")??;
        let with = with?;
        Ok(Lagging {
            rate,
            without: Latency::from_histogram(
                &format!("producers' send-to-ack at {rate:.0}/s, no consumer"),
                &without,
            ),
            with: Latency::from_histogram(
                &format!("producers' send-to-ack at {rate:.0}/s, lagging consumer"),
                &with,
            ),
            consumer_mbs,
        })
    }

    fn ack_latency(&self, policy: Policy) -> Result<Latency> {
        const SIZE: usize = 1024;
        let name = format!("ack-{}", policy.name());
        let topic = self.topic(&name, 1, policy)?;
        let mut producer = client::producer(
            &self.bootstrap,
            &[("acks", "all".to_owned()), ("linger.ms", "0".to_owned())],
        )?;
        let payload = pattern(SIZE);
        producer.send(&topic, &payload, now_ns())?;
        producer.flush()?;
        baselines::settle_disk()?;
        let bar = progress::timed(&format!("{name} at {ACK_RATE}/s"), self.plan.rate_secs);
        producer.tally.record_latency();
        let start = Instant::now();
        client::paced(ACK_RATE, self.plan.rate_secs, |i, intended| {
            if i % 256 == 0 {
                bar.set_position((start.elapsed().as_secs_f64() * 10.0) as u64);
            }
            producer.send(&topic, &payload, intended)
        })?;
        producer.flush()?;
        bar.finish_and_clear();
        let label = format!(
            "produce-ack acks=all linger.ms=0 at {ACK_RATE}/s flush.policy={}",
            policy.name()
        );
        Ok(Latency::from_histogram(&label, &producer.tally.take_latency()))
    }
}
