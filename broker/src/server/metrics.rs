//! The broker's metrics, served over HTTP in Prometheus' text format (`GET /metrics` on
//! `metrics_listener`, when one is configured), for operators' dashboards and alerts: requests
//! read by API and how long they took to answer, client connections, the partitions hosted and
//! led, the ones led with too few replicas in sync (under-replicated, and below
//! `min.insync.replicas`, where acks=all producers are refused), the ones that could not open,
//! each hosted partition's log start, log end, high watermark and size and the bytes and
//! records it took in and served, and the consumer groups
//! coordinated here with their members and committed offsets.
//!
//! Counters are atomics bumped on the request path; everything else is read from the broker's
//! state when scraped, so a scrape costs the broker nothing between scrapes. The listener is
//! small and strict: one request per connection, a request line and headers of at most
//! [`HEAD_BYTES_MAX`] read within [`HEAD_READ_TIMEOUT`], at most [`SCRAPES_MAX`] connections at
//! once and [`SCRAPES_PER_IP_MAX`] from one address; anything else is answered with an HTTP
//! error (or the connection closed) and changes nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::accept::Acceptor;
use crate::config::Role;
use crate::controller::image::MetadataImage;
use crate::controller::records::BrokerId;
use crate::coordinator::GroupsSummary;
use crate::io::{Conn, Listener, timeout};
use crate::node::Broker;

/// The largest request line and headers read from a scrape.
pub const HEAD_BYTES_MAX: usize = 8 << 10;
/// How long a scrape may take to send its request line and headers (a scraper sends them at
/// once).
pub const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long writing one answer may take before the connection is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// After a refusal, the request bytes still unread that are read and dropped (for at most
/// [`DRAIN_TIMEOUT`]) before the connection closes, so that closing with them unread does not
/// reset the connection before the peer has read the refusal.
const DRAIN_BYTES_MAX: usize = 64 << 10;
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// Scrape connections served at once; more are closed as they are accepted.
pub const SCRAPES_MAX: usize = 16;
/// Scrape connections served at once from any one address (so that one peer holding
/// connections open cannot take every place).
pub const SCRAPES_PER_IP_MAX: usize = 4;
/// The most group series (a group's members, or one of its committed offsets) a scrape
/// reports: any client may create groups and commit offsets, so their number has no bound of
/// its own, and they are copied under the group coordinator's lock. The groups past it (in id
/// order) are still counted, by a walk under that lock that copies nothing.
pub const GROUP_SERIES_MAX: usize = 10_000;
/// API keys are counted below this (Kafka's are under 100).
const API_KEYS: usize = 128;

/// Upper bounds of the request-duration histogram's buckets, in microseconds (from 100 µs, a
/// metadata answer, to 30 s, an admin request waiting out its timeout); one more bucket holds
/// the longer ones.
pub const DURATION_BOUNDS_US: [u64; 17] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000,
];

/// One API's request durations: a count per bucket (not cumulative; the last is past every
/// bound) and their sum.
#[derive(Debug)]
struct Durations {
    buckets: [AtomicU64; DURATION_BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

impl Default for Durations {
    fn default() -> Self {
        Durations { buckets: std::array::from_fn(|_| AtomicU64::new(0)), sum_us: AtomicU64::new(0) }
    }
}

/// Counters bumped on the request path.
#[derive(Debug)]
pub struct Metrics {
    /// Requests read and decoded, by API key.
    requests: Vec<AtomicU64>,
    /// How long requests took to answer, by API key.
    durations: Vec<Durations>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: (0..API_KEYS).map(|_| AtomicU64::new(0)).collect(),
            durations: (0..API_KEYS).map(|_| Durations::default()).collect(),
        }
    }
}

fn index(key: ApiKey) -> Option<usize> {
    usize::try_from(key as i16).ok().filter(|&k| k < API_KEYS)
}

impl Metrics {
    /// A request of `key` was read and decoded.
    pub fn request(&self, key: ApiKey) {
        if let Some(count) = index(key).and_then(|k| self.requests.get(k)) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests of `key` read so far.
    pub fn requests(&self, key: ApiKey) -> u64 {
        index(key).and_then(|k| self.requests.get(k)).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// A request of `key` had its answer ready (or, sent with acks=0, its work done) `took`
    /// after it was read. Counted in whole microseconds, rounded up, so that a duration just
    /// past a bound is not counted within it.
    pub fn answered(&self, key: ApiKey, took: Duration) {
        let Some(durations) = index(key).and_then(|k| self.durations.get(k)) else { return };
        let us = u64::try_from(took.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX);
        let bucket = DURATION_BOUNDS_US.partition_point(|&bound| bound < us);
        if let Some(count) = durations.buckets.get(bucket) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        let _ = durations
            .sum_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |sum| Some(sum.saturating_add(us)));
    }

    /// Requests of `key` answered so far, by bucket of [`DURATION_BOUNDS_US`] (the last past
    /// every bound), and the sum of their durations in microseconds.
    pub fn durations(&self, key: ApiKey) -> ([u64; DURATION_BOUNDS_US.len() + 1], u64) {
        let Some(d) = index(key).and_then(|k| self.durations.get(k)) else {
            return ([0; DURATION_BOUNDS_US.len() + 1], 0);
        };
        (d.buckets.each_ref().map(|c| c.load(Ordering::Relaxed)), d.sum_us.load(Ordering::Relaxed))
    }
}

/// Partitions this broker leads, as the metadata has them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Led {
    led: u64,
    under_replicated: u64,
    under_min_isr: u64,
}

fn led(broker: &Broker, image: &MetadataImage, node: BrokerId) -> Led {
    let mut counts = Led::default();
    let defaults = broker.config.topic_config();
    for topic in image.topics.values() {
        let mut config = defaults.clone();
        let min_isr = match config.replace(topic.configs.clone()) {
            Ok(()) => config.min_insync_replicas(),
            Err(_) => defaults.min_insync_replicas(),
        };
        for record in topic.partitions.values().filter(|r| r.leader == node) {
            counts.led += 1;
            // Replicas still being added by a reassignment are not yet expected in sync.
            let expected = record.replicas.iter().filter(|r| !record.adding.contains(r)).count();
            if record.isr.len() < expected {
                counts.under_replicated += 1;
            }
            if i64::try_from(record.isr.len()).unwrap_or(i64::MAX) < min_isr {
                counts.under_min_isr += 1;
            }
        }
    }
    counts
}

/// A counter's value as a sample.
fn read(counter: &AtomicU64) -> i64 {
    i64::try_from(counter.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
}

/// Escapes a label value as the text format asks (backslash, double quote and line feed):
/// topic names hold only `[a-zA-Z0-9._-]`, but a group id may hold anything.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The metrics as Prometheus' text format (version 0.0.4) has them.
pub fn render(broker: &Broker) -> String {
    let mut out = String::new();
    family(&mut out, "weir_requests_total", "counter", "Requests read and decoded, by API.");
    for (key, _) in crate::protocol::api::SUPPORTED_APIS {
        let _ = writeln!(
            out,
            "weir_requests_total{{api=\"{key:?}\"}} {}",
            broker.metrics.requests(*key)
        );
    }
    family(
        &mut out,
        "weir_request_duration_seconds",
        "histogram",
        "Time from a request read until its answer is ready and next to be written (a \
         connection's answers go out in request order), by API, for the APIs answered so far: \
         a long-polling fetch's wait, an acks=all produce's replication and a sync under \
         flush.policy=ack are part of it; writing the answer is not.",
    );
    for (key, _) in crate::protocol::api::SUPPORTED_APIS {
        let (buckets, sum_us) = broker.metrics.durations(*key);
        let count: u64 = buckets.iter().sum();
        if count == 0 {
            continue;
        }
        let mut below = 0;
        let bounds = DURATION_BOUNDS_US.iter().map(|&us| format!("{}", us as f64 / 1e6));
        for (le, n) in bounds.chain(std::iter::once("+Inf".to_owned())).zip(buckets) {
            below += n;
            let _ = writeln!(
                out,
                "weir_request_duration_seconds_bucket{{api=\"{key:?}\",le=\"{le}\"}} {below}"
            );
        }
        let sum = sum_us as f64 / 1e6;
        let _ = writeln!(out, "weir_request_duration_seconds_sum{{api=\"{key:?}\"}} {sum}");
        let _ = writeln!(out, "weir_request_duration_seconds_count{{api=\"{key:?}\"}} {count}");
    }
    family(&mut out, "weir_connections", "gauge", "Client connections open.");
    let _ = writeln!(out, "weir_connections {}", broker.open_connections());
    family(
        &mut out,
        "weir_request_memory_waits_total",
        "counter",
        "Request frames that waited for request memory (queued_max_request_bytes).",
    );
    let _ = writeln!(out, "weir_request_memory_waits_total {}", broker.request_memory_waits());

    // One image for every figure drawn from the metadata, so that they agree with each other.
    let membership = broker.membership();
    let image = membership.map(|m| m.image());
    // A node that is only a controller is no broker to fence; a broker not yet joined is.
    let fenced = match (membership, &image) {
        (Some(m), Some(image)) => m.is_fenced_in(image),
        _ => broker.config.has_role(Role::Broker),
    };
    family(
        &mut out,
        "weir_fenced",
        "gauge",
        "1 while this broker may not lead: fenced by the controller, not registered, or out of \
         touch with it for longer than its session (0 on a node that is only a controller).",
    );
    let _ = writeln!(out, "weir_fenced {}", u8::from(fenced));
    family(
        &mut out,
        "weir_active_controller",
        "gauge",
        "1 while this node leads the metadata quorum.",
    );
    let active = broker.controller.as_ref().is_some_and(|c| c.is_active());
    let _ = writeln!(out, "weir_active_controller {}", u8::from(active));

    let node: BrokerId = broker.config.node_id;
    // A fenced broker leads nothing, whatever its last image says (as its requests answer).
    let counts = match &image {
        Some(image) if !fenced => led(broker, image, node),
        _ => Led::default(),
    };
    let hosted = broker.catalog.partitions();
    family(&mut out, "weir_partitions", "gauge", "Partitions whose log is open here.");
    let _ = writeln!(out, "weir_partitions {}", hosted.len());
    family(
        &mut out,
        "weir_leader_partitions",
        "gauge",
        "Partitions led here: the metadata's leader, and not fenced.",
    );
    let _ = writeln!(out, "weir_leader_partitions {}", counts.led);
    family(
        &mut out,
        "weir_under_replicated_partitions",
        "gauge",
        "Partitions led here with fewer replicas in sync than assigned (less any a reassignment \
         is still adding).",
    );
    let _ = writeln!(out, "weir_under_replicated_partitions {}", counts.under_replicated);
    family(
        &mut out,
        "weir_under_min_isr_partitions",
        "gauge",
        "Partitions led here with fewer replicas in sync than min.insync.replicas (acks=all \
         refused).",
    );
    let _ = writeln!(out, "weir_under_min_isr_partitions {}", counts.under_min_isr);
    family(
        &mut out,
        "weir_offline_partitions",
        "gauge",
        "Partitions assigned here whose log could not be opened.",
    );
    let _ = writeln!(out, "weir_offline_partitions {}", broker.catalog.unopened().len());

    groups(&mut out, &broker.groups.figures(GROUP_SERIES_MAX));

    type Value = fn(&crate::partition::Partition) -> i64;
    let per_partition: [(&str, &str, Value); 4] = [
        ("weir_log_start_offset", "The first offset of each hosted partition's log.", |p| {
            p.log.log_start_offset().0
        }),
        ("weir_log_end_offset", "The offset the next record of each hosted partition gets.", |p| {
            p.log.log_end_offset().0
        }),
        ("weir_high_watermark", "Each hosted partition's high watermark.", |p| {
            p.high_watermark().0
        }),
        ("weir_log_size_bytes", "Bytes of each hosted partition's log segments.", |p| {
            i64::try_from(p.log.size_bytes()).unwrap_or(i64::MAX)
        }),
    ];
    let counted: [(&str, &str, Value); 4] = [
        (
            "weir_bytes_in_total",
            "Bytes of the batches producers appended to each hosted partition since it opened \
             here (a retry found to be a duplicate is not counted; on __consumer_offsets, the \
             group coordinator's own records are counted too).",
            |p| read(&p.traffic.bytes_in),
        ),
        ("weir_records_in_total", "Records in those batches.", |p| read(&p.traffic.records_in)),
        (
            "weir_bytes_out_total",
            "Bytes of batches each hosted partition served to consumers since it opened here.",
            |p| read(&p.traffic.bytes_out),
        ),
        (
            "weir_replication_bytes_out_total",
            "Bytes of batches each hosted partition served to followers since it opened here \
             (their repair reads included).",
            |p| read(&p.traffic.replication_bytes_out),
        ),
    ];
    let kinds = per_partition.into_iter().map(|f| (f, "gauge"));
    for ((name, help, value), kind) in kinds.chain(counted.into_iter().map(|f| (f, "counter"))) {
        family(&mut out, name, kind, help);
        for p in &hosted {
            let _ = writeln!(
                out,
                "{name}{{topic=\"{}\",partition=\"{}\"}} {}",
                label(&p.tp.topic),
                p.tp.partition.0,
                value(p)
            );
        }
    }
    out
}

/// The consumer groups this broker coordinates: how many in each state, each one's members and
/// committed offsets (a group's lag is the partition's high watermark less its offset), and
/// how many of those series were left out past [`GROUP_SERIES_MAX`].
fn groups(out: &mut String, summary: &GroupsSummary) {
    family(out, "weir_groups", "gauge", "Consumer groups coordinated here, by state.");
    for (state, count) in summary.states {
        let _ = writeln!(out, "weir_groups{{state=\"{}\"}} {count}", state.as_str());
    }
    family(out, "weir_group_members", "gauge", "Members of each consumer group coordinated here.");
    for g in &summary.groups {
        let _ =
            writeln!(out, "weir_group_members{{group=\"{}\"}} {}", label(g.id.as_str()), g.members);
    }
    family(
        out,
        "weir_group_committed_offset",
        "gauge",
        "Each consumer group's committed offset of each partition, for the groups coordinated \
         here.",
    );
    for g in &summary.groups {
        for (tp, offset) in &g.offsets {
            let _ = writeln!(
                out,
                "weir_group_committed_offset{{group=\"{}\",topic=\"{}\",partition=\"{}\"}} {}",
                label(g.id.as_str()),
                label(&tp.topic),
                tp.partition.0,
                offset.0
            );
        }
    }
    let help = format!(
        "Group series (a group's members, or one committed offset) left out of this scrape, \
         past the limit of {GROUP_SERIES_MAX}."
    );
    family(out, "weir_group_series_omitted", "gauge", &help);
    let _ = writeln!(out, "weir_group_series_omitted {}", summary.omitted);
}

/// What a scrape's request asked for.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Metrics,
    /// An HTTP status and its reason.
    Refused(u16, &'static str),
}

/// What a scrape's request line and headers (`head`) ask for.
fn parse(head: &[u8]) -> Asked {
    let Ok(text) = std::str::from_utf8(head) else { return Asked::Refused(400, "Bad Request") };
    let line = text.split("\r\n").next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Asked::Refused(400, "Bad Request");
    };
    if !version.starts_with("HTTP/1.") {
        return Asked::Refused(400, "Bad Request");
    }
    if method != "GET" {
        return Asked::Refused(405, "Method Not Allowed");
    }
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return Asked::Refused(404, "Not Found");
    }
    Asked::Metrics
}

/// The position just past the blank line ending `buf`'s head, once it is whole.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4)
}

/// Reads a request line and headers. `None`: the peer left or failed first; `Some(Err(()))`:
/// they run past [`HEAD_BYTES_MAX`].
async fn read_head(conn: &mut Box<dyn Conn>) -> Option<Result<Vec<u8>, ()>> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&buf) {
            buf.truncate(end);
            return Some(Ok(buf));
        }
        if buf.len() >= HEAD_BYTES_MAX {
            return Some(Err(()));
        }
        let room = (HEAD_BYTES_MAX - buf.len()).min(chunk.len());
        match conn.read(&mut chunk[..room]).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Scrapes being served: in all, and by peer address.
#[derive(Debug, Default)]
struct Slots {
    taken: Mutex<(usize, BTreeMap<IpAddr, usize>)>,
}

/// One scrape's place among [`Slots`], given back when dropped (however its task ends).
struct Slot {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, BTreeMap<IpAddr, usize>)> {
        self.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for a scrape from `ip`, if there is room within [`SCRAPES_MAX`] and
    /// [`SCRAPES_PER_IP_MAX`].
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let ip = ip.to_canonical();
        let mut taken = self.lock();
        let from_ip = taken.1.get(&ip).copied().unwrap_or(0);
        if taken.0 >= SCRAPES_MAX || from_ip >= SCRAPES_PER_IP_MAX {
            return None;
        }
        taken.0 += 1;
        taken.1.insert(ip, from_ip + 1);
        Some(Slot { slots: Arc::clone(self), ip })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut taken = self.slots.lock();
        taken.0 = taken.0.saturating_sub(1);
        if let Some(n) = taken.1.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                taken.1.remove(&self.ip);
            }
        }
    }
}

/// Reads and drops what the peer still sends, up to [`DRAIN_BYTES_MAX`] or its end.
async fn drain(conn: &mut Box<dyn Conn>) {
    let mut chunk = [0u8; 1024];
    let mut dropped = 0;
    while dropped < DRAIN_BYTES_MAX {
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => dropped += n,
        }
    }
}

/// Answers one scrape on `conn` and closes it.
async fn answer(broker: Weak<Broker>, mut conn: Box<dyn Conn>, clock: Arc<dyn crate::io::Clock>) {
    let asked = match timeout(&*clock, HEAD_READ_TIMEOUT, read_head(&mut conn)).await {
        Ok(Some(Ok(head))) => parse(&head),
        Ok(Some(Err(()))) => Asked::Refused(431, "Request Header Fields Too Large"),
        Ok(None) | Err(_) => return,
    };
    let (status, reason, body) = match asked {
        Asked::Metrics => match broker.upgrade() {
            Some(broker) => (200, "OK", render(&broker)),
            None => (503, "Service Unavailable", String::new()),
        },
        Asked::Refused(status, reason) => (status, reason, format!("{reason}\n")),
    };
    let kind =
        if status == 200 { "text/plain; version=0.0.4; charset=utf-8" } else { "text/plain" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        conn.write_all(response.as_bytes()).await?;
        conn.shutdown().await
    };
    let written = timeout(&*clock, WRITE_TIMEOUT, write).await;
    if status != 200 && matches!(written, Ok(Ok(()))) {
        let _ = timeout(&*clock, DRAIN_TIMEOUT, drain(&mut conn)).await;
    }
}

/// Serves scrapes on `listener` until it closes (or the broker is gone).
pub async fn serve(broker: Weak<Broker>, listener: Box<dyn Listener>) {
    let Some((clock, env, addr)) =
        broker.upgrade().map(|b| (Arc::clone(&b.env.clock), b.env.clone(), listener.local_addr()))
    else {
        return;
    };
    tracing::info!(%addr, "metrics listening");
    let mut acceptor = Acceptor::new(listener, Arc::clone(&clock), "metrics");
    let slots = Arc::new(Slots::default());
    while let Some((conn, peer)) = acceptor.next().await {
        let Some(slot) = slots.take(peer.ip()) else {
            tracing::debug!(
                %peer,
                "closing a metrics connection: {SCRAPES_MAX} scrapes, or {SCRAPES_PER_IP_MAX} \
                 from its address, are being served"
            );
            conn.abort();
            continue;
        };
        let (broker, clock) = (broker.clone(), Arc::clone(&clock));
        env.spawn("metrics-scrape", async move {
            let _slot = slot;
            answer(broker, conn, clock).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_as_http_asks_them() {
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Asked::Metrics);
        assert_eq!(parse(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Asked::Metrics);
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Asked::Refused(404, "Not Found"));
        assert_eq!(
            parse(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Asked::Refused(405, "Method Not Allowed")
        );
        for bad in [
            &b"GET /metrics\r\n\r\n"[..],
            b"GET /metrics SPDY/3\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
            b"\r\n\r\n",
        ] {
            assert_eq!(parse(bad), Asked::Refused(400, "Bad Request"), "{bad:?}");
        }
    }

    #[test]
    fn a_head_ends_at_its_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn scrapes_are_limited_in_all_and_by_address() {
        let slots = Arc::new(Slots::default());
        let a = IpAddr::from([10, 0, 0, 1]);
        let from_a: Vec<Slot> = (0..SCRAPES_PER_IP_MAX).filter_map(|_| slots.take(a)).collect();
        assert_eq!(from_a.len(), SCRAPES_PER_IP_MAX);
        assert!(slots.take(a).is_none(), "a fifth from one address");
        let others: Vec<Slot> = (0..SCRAPES_MAX)
            .filter_map(|i| slots.take(IpAddr::from([10, 1, 0, u8::try_from(i).unwrap_or(0)])))
            .collect();
        assert_eq!(others.len(), SCRAPES_MAX - SCRAPES_PER_IP_MAX, "all places taken");
        drop(from_a);
        assert!(slots.take(a).is_some(), "given back when dropped");
        drop(others);
        assert_eq!(slots.lock().0, 0);
        assert!(slots.lock().1.is_empty());
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn requests_are_counted_by_api() {
        let m = Metrics::default();
        m.request(ApiKey::Produce);
        m.request(ApiKey::Produce);
        m.request(ApiKey::Fetch);
        assert_eq!(m.requests(ApiKey::Produce), 2);
        assert_eq!(m.requests(ApiKey::Fetch), 1);
        assert_eq!(m.requests(ApiKey::Metadata), 0);
    }

    #[test]
    fn durations_fall_in_the_first_bucket_whose_bound_they_do_not_pass() {
        let m = Metrics::default();
        let us = Duration::from_micros;
        let just_past = Duration::from_nanos(100_001);
        for took in [us(0), us(100), just_past, us(1_000_000), us(30_000_001), Duration::MAX] {
            m.answered(ApiKey::Fetch, took);
        }
        let (buckets, sum_us) = m.durations(ApiKey::Fetch);
        let mut expected = [0; DURATION_BOUNDS_US.len() + 1];
        // 0 and 100 µs within 100 µs; a nanosecond past it within 250 µs; 1 s within 1 s; past
        // 30 s beyond.
        expected[0] = 2;
        expected[1] = 1;
        expected[12] = 1;
        expected[DURATION_BOUNDS_US.len()] = 2;
        assert_eq!(buckets, expected);
        assert_eq!(sum_us, u64::MAX, "the sum saturates rather than wraps");
        assert_eq!(m.durations(ApiKey::Produce), ([0; DURATION_BOUNDS_US.len() + 1], 0));
    }

    #[test]
    fn groups_are_rendered_with_their_ids_escaped_and_the_omitted_series_counted() {
        use crate::coordinator::{GroupFigures, GroupId, GroupState};
        use crate::model::{Offset, TopicPartition};
        let summary = GroupsSummary {
            states: [
                (GroupState::Empty, 1),
                (GroupState::PreparingRebalance, 0),
                (GroupState::CompletingRebalance, 0),
                (GroupState::Stable, 2),
            ],
            groups: vec![GroupFigures {
                id: GroupId::from("a\"b\\c\nd\re f"),
                members: 2,
                offsets: vec![(TopicPartition::new("t", 3), Offset(7))],
            }],
            omitted: 4,
        };
        let mut out = String::new();
        groups(&mut out, &summary);
        let escaped = "a\\\"b\\\\c\\nd\re f";
        for line in [
            "weir_groups{state=\"Empty\"} 1".to_owned(),
            "weir_groups{state=\"Stable\"} 2".to_owned(),
            format!("weir_group_members{{group=\"{escaped}\"}} 2"),
            format!(
                "weir_group_committed_offset{{group=\"{escaped}\",topic=\"t\",partition=\"3\"}} 7"
            ),
            "weir_group_series_omitted 4".to_owned(),
        ] {
            assert!(out.lines().any(|l| l == line), "{line} not in:\n{out}");
        }
        // Every line is a comment or one series: no id broke a line.
        let series = out.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(series, 4 + 1 + 1 + 1);
    }
}
