//! `weir-bench cluster` (issue 7): does a lagging follower hurt the leader's clients?
//!
//! Three Weir brokers run in this process, each with its own runtime, data folder and loopback
//! ports (client and controller), as three processes would. For each flush policy a topic with
//! one partition, replication factor 3 and `min.insync.replicas=2` takes `acks=all` writes of
//! 1 KiB records at a fixed rate, timed from each record's intended send time:
//!
//! 1. with all three replicas in sync (for reference);
//! 2. after one follower has been shut down and a backlog written past it: with the follower
//!    stopped, the ISR is the leader and one follower — the baseline;
//! 3. while that follower, started again, copies the backlog from far behind as fast as it may —
//!    the same ISR, plus the catch-up's traffic on the leader. This phase lasts until the
//!    follower is back in the ISR.
//!
//! Phase 3's p99 is judged against phase 2's (at most 1.5×, the lagging consumer's bound), and
//! the catch-up's own speed is reported. Every write must be acknowledged: a lagging follower
//! must not stall the leader. All three brokers share this machine's disk and cores, so the
//! catch-up's writes and syncs compete with the leader's own — more than they would on three
//! machines. The follower copies within the brokers' catch-up budget
//! (`replica_catch_up_bytes_per_sec`: none by default; `--catch-up-bytes-per-sec` sets one).

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use weir::config::BrokerConfig;

use crate::baselines::{self, MIB, pattern};
use crate::broker::client::{self, CLIENT_TIMEOUT, Result, TimedProducer, now_ns};
use crate::broker::target::InProcess;
use crate::broker::workload::{LATENCY_LINGER_MS, Policy, THROUGHPUT_BATCH_BYTES};
use crate::progress;
use crate::report::{Figure, Latency, Report, Target};

/// Brokers in the cluster.
const NODES: usize = 3;
/// Record payload bytes.
const RECORD_BYTES: usize = 1024;
/// Offered rate of the timed phases, records per second.
const RATE: f64 = 5_000.0;
/// Untimed seconds at the rate before each timed phase.
const WARM_UP_SECS: f64 = 1.0;
/// Longest the catch-up phase is timed.
const CATCH_UP_MAX_SECS: f64 = 120.0;
/// How often the ISR is polled.
const POLL: Duration = Duration::from_millis(50);
/// The judged bound: catching up may cost the leader's producers this much of their p99.
const P99_RATIO_MAX: f64 = 1.5;

/// Options of the cluster command.
pub struct Options<'a> {
    /// Scratch folder for the brokers' data.
    pub dir: &'a Path,
    /// Shorter phases and a smaller backlog.
    pub quick: bool,
    /// The brokers' `replica_catch_up_bytes_per_sec`, if not their default.
    pub catch_up_bytes_per_sec: Option<u64>,
}

/// Sizes and durations.
struct Plan {
    /// Length of the two fixed-length timed phases.
    secs: f64,
    /// Bytes written past the stopped follower.
    backlog_bytes: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan { secs: 3.0, backlog_bytes: 512 * MIB }
        } else {
            Plan { secs: 5.0, backlog_bytes: 2048 * MIB }
        }
    }
}

/// One policy's outcome.
struct Outcome {
    policy: Policy,
    in_sync: Latency,
    stopped: Latency,
    catching_up: Latency,
    catch_up_secs: f64,
    /// Bytes the follower wrote to its disk while catching up.
    caught_up_bytes: u64,
    /// Whether the follower was back in the ISR when the phase ended.
    rejoined: bool,
}

/// The three brokers; any still running are shut down on drop.
struct Cluster {
    configs: Vec<BrokerConfig>,
    nodes: Vec<Option<InProcess>>,
    bootstrap: String,
}

impl Cluster {
    fn start(dir: &Path, catch_up_bytes_per_sec: u64) -> Result<Cluster> {
        let ports = free_ports(2 * NODES)?;
        let voters: Vec<String> =
            (0..NODES).map(|i| format!("{}@{}", i + 1, ports[NODES + i])).collect();
        let configs: Vec<BrokerConfig> = (0..NODES)
            .map(|i| BrokerConfig {
                node_id: i as i32 + 1,
                listener: ports[i],
                controller_listener: Some(ports[NODES + i]),
                controller_quorum_voters: voters.clone(),
                data_dir: dir.join(format!("node{}", i + 1)),
                replica_catch_up_bytes_per_sec: catch_up_bytes_per_sec,
                ..BrokerConfig::default()
            })
            .collect();
        let bootstrap =
            ports[..NODES].iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        let mut cluster = Cluster { configs, nodes: Vec::new(), bootstrap };
        for config in &cluster.configs {
            cluster.nodes.push(Some(InProcess::start_with(config.clone())?));
        }
        cluster.wait_all_registered()?;
        Ok(cluster)
    }

    /// Waits until the metadata lists every broker (a topic with replication factor 3 is
    /// refused before that).
    fn wait_all_registered(&self) -> Result<()> {
        let probe: BaseConsumer =
            ClientConfig::new().set("bootstrap.servers", &self.bootstrap).create()?;
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        while Instant::now() < deadline {
            if probe
                .fetch_metadata(None, Duration::from_secs(5))
                .is_ok_and(|m| m.brokers().len() == NODES)
            {
                return Ok(());
            }
            std::thread::sleep(POLL);
        }
        Err("the brokers never all joined the cluster".into())
    }

    /// Shuts broker `id` down, keeping its data.
    fn halt(&mut self, id: i32) {
        if let Some(node) = self.slot(id).take() {
            node.halt();
        }
    }

    /// Starts broker `id` again over its data.
    fn restart(&mut self, id: i32) -> Result<()> {
        let config = self.configs[index(id)].clone();
        *self.slot(id) = Some(InProcess::start_with(config)?);
        Ok(())
    }

    fn slot(&mut self, id: i32) -> &mut Option<InProcess> {
        &mut self.nodes[index(id)]
    }

    /// Bytes broker `id` has written to its disk since it (last) started.
    fn written(&self, id: i32) -> u64 {
        self.nodes[index(id)].as_ref().map_or(0, |n| n.disk.snapshot().written)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().filter_map(Option::take) {
            node.halt();
        }
    }
}

fn index(id: i32) -> usize {
    usize::try_from(id - 1).unwrap_or(0)
}

/// `n` loopback addresses with ports free a moment ago.
fn free_ports(n: usize) -> Result<Vec<SocketAddr>> {
    let listeners =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<std::io::Result<Vec<_>>>()?;
    Ok(listeners.iter().map(TcpListener::local_addr).collect::<std::io::Result<Vec<_>>>()?)
}

/// Runs the cluster benchmark into `report`.
pub fn run(options: &Options<'_>, report: &mut Report) -> Result<()> {
    let plan = Plan::new(options.quick);
    let admin = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let tag = format!("{}-{}", std::process::id(), now_ns() % 1_000_000);
    let catch_up = options
        .catch_up_bytes_per_sec
        .unwrap_or(BrokerConfig::default().replica_catch_up_bytes_per_sec);
    let mut cluster = Cluster::start(&options.dir.join("weir-cluster"), catch_up)?;
    let mut outcomes = Vec::new();
    for policy in [Policy::Ack, Policy::Interval] {
        let outcome = lagging_follower(&mut cluster, &admin, &plan, &tag, policy)?;
        eprintln!(
            "cluster flush.policy={}: producers' p99 {} µs in sync, {} µs follower stopped, \
             {} µs while it caught up {:.0} MiB in {:.1} s",
            policy.name(),
            outcome.in_sync.p99_us,
            outcome.stopped.p99_us,
            outcome.catching_up.p99_us,
            outcome.caught_up_bytes as f64 / MIB as f64,
            outcome.catch_up_secs
        );
        outcomes.push(outcome);
    }
    drop(cluster);
    figures(report, &plan, &outcomes, catch_up);
    Ok(())
}

/// The three phases of the module documentation under `policy`.
fn lagging_follower(
    cluster: &mut Cluster,
    admin: &tokio::runtime::Runtime,
    plan: &Plan,
    tag: &str,
    policy: Policy,
) -> Result<Outcome> {
    let bootstrap = cluster.bootstrap.clone();
    let topic = format!("bench-{tag}-follower-{}", policy.name());
    client::create_topic(
        admin,
        &bootstrap,
        &topic,
        (1, NODES as i32),
        &[("min.insync.replicas", "2"), ("flush.policy", policy.name())],
    )?;
    let probe: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &bootstrap).create()?;
    let (leader, _) = wait_isr(&probe, &topic, |isr| isr.len() == NODES)?;
    let mut producer = client::producer(
        &bootstrap,
        &[("acks", "all".to_owned()), ("linger.ms", LATENCY_LINGER_MS.to_owned())],
    )?;
    let payload = pattern(RECORD_BYTES);
    let never = AtomicBool::new(false);
    let in_sync = timed(&mut producer, &topic, &payload, plan.secs, &never, "all in sync")?;

    let follower = (1..=NODES as i32).find(|&id| id != leader).ok_or("no follower")?;
    cluster.halt(follower);
    wait_isr(&probe, &topic, |isr| !isr.contains(&follower))?;
    backlog(&bootstrap, &topic, plan.backlog_bytes)?;
    let stopped = timed(&mut producer, &topic, &payload, plan.secs, &never, "follower stopped")?;

    cluster.restart(follower)?;
    let restarted = Instant::now();
    let rejoined = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (bootstrap, topic, rejoined) =
            (bootstrap.clone(), topic.clone(), Arc::clone(&rejoined));
        std::thread::spawn(move || -> Result<f64> {
            let probe: BaseConsumer =
                ClientConfig::new().set("bootstrap.servers", &bootstrap).create()?;
            while restarted.elapsed().as_secs_f64() < CATCH_UP_MAX_SECS + WARM_UP_SECS {
                if let Ok((_, isr)) = client::leader_and_isr(&probe, &topic)
                    && isr.contains(&follower)
                {
                    rejoined.store(true, Ordering::Relaxed);
                    return Ok(restarted.elapsed().as_secs_f64());
                }
                std::thread::sleep(POLL);
            }
            Ok(restarted.elapsed().as_secs_f64())
        })
    };
    let catching_up = timed_from_now(
        &mut producer,
        &topic,
        &payload,
        CATCH_UP_MAX_SECS,
        &rejoined,
        "follower catching up",
    )?;
    let catch_up_secs = watcher.join().map_err(|_| "ISR watcher panicked")??;
    let caught_up_bytes = cluster.written(follower);
    let rejoined = rejoined.load(Ordering::Relaxed);
    let label =
        |phase: &str| format!("acks=all at {RATE:.0}/s, flush.policy={}, {phase}", policy.name());
    Ok(Outcome {
        policy,
        in_sync: Latency::from_histogram(&label("all in sync"), &in_sync),
        stopped: Latency::from_histogram(&label("follower stopped"), &stopped),
        catching_up: Latency::from_histogram(&label("follower catching up"), &catching_up),
        catch_up_secs,
        caught_up_bytes,
        rejoined,
    })
}

/// Waits until the ISR of `topic` satisfies `ok`; returns the leader and ISR then.
fn wait_isr(
    probe: &BaseConsumer,
    topic: &str,
    ok: impl Fn(&[i32]) -> bool,
) -> Result<(i32, Vec<i32>)> {
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    loop {
        if let Ok((leader, isr)) = client::leader_and_isr(probe, topic)
            && leader > 0
            && ok(&isr)
        {
            return Ok((leader, isr));
        }
        if Instant::now() > deadline {
            return Err(format!("the ISR of {topic} never reached the state wanted").into());
        }
        std::thread::sleep(POLL);
    }
}

/// One untimed second at the rate, then `secs` timed (or until `stop`).
fn timed(
    producer: &mut TimedProducer,
    topic: &str,
    payload: &[u8],
    secs: f64,
    stop: &AtomicBool,
    name: &str,
) -> Result<hdrhistogram::Histogram<u64>> {
    baselines::settle_disk()?;
    client::paced(RATE, WARM_UP_SECS, |_, intended| producer.send(topic, payload, intended))?;
    producer.flush()?;
    timed_from_now(producer, topic, payload, secs, stop, name)
}

/// `secs` timed at the rate (or until `stop`), every record acknowledged.
fn timed_from_now(
    producer: &mut TimedProducer,
    topic: &str,
    payload: &[u8],
    secs: f64,
    stop: &AtomicBool,
    name: &str,
) -> Result<hdrhistogram::Histogram<u64>> {
    eprintln!("cluster: timing {name}");
    let bar = progress::timed(name, secs);
    producer.tally.record_latency();
    let start = Instant::now();
    client::paced_until(RATE, secs, stop, |i, intended| {
        if i % 256 == 0 {
            bar.set_position((start.elapsed().as_secs_f64() * 10.0) as u64);
        }
        producer.send(topic, payload, intended)
    })?;
    producer.flush()?;
    bar.finish_and_clear();
    Ok(producer.tally.take_latency())
}

/// Writes `bytes` of 1 KiB records to `topic` as fast as acks=1 allows.
fn backlog(bootstrap: &str, topic: &str, bytes: u64) -> Result<()> {
    let mut producer = client::producer(
        bootstrap,
        &[
            ("acks", "1".to_owned()),
            ("linger.ms", "5".to_owned()),
            ("batch.size", THROUGHPUT_BATCH_BYTES.to_owned()),
        ],
    )?;
    let payload = pattern(RECORD_BYTES);
    let records = bytes / RECORD_BYTES as u64;
    let bar = progress::bar("backlog past the stopped follower", records, "records");
    for i in 0..records {
        producer.send(topic, &payload, now_ns())?;
        if i % 4096 == 0 {
            bar.set_position(i);
        }
    }
    producer.flush()?;
    bar.finish_and_clear();
    Ok(())
}

fn figures(report: &mut Report, plan: &Plan, outcomes: &[Outcome], catch_up: u64) {
    let s = "cluster";
    for o in outcomes {
        let policy = o.policy.name();
        for (latency, phase) in [(&o.in_sync, "all 3 in sync"), (&o.stopped, "follower stopped")] {
            report.push(Figure::plain(
                s,
                &format!("producers' p99, flush.policy={policy}, {phase}"),
                "µs",
                latency.p99_us,
                &format!("p50 {} µs, {} records", latency.p50_us, latency.count),
            ));
        }
        let caught_mib = o.caught_up_bytes as f64 / MIB as f64;
        let note = if o.rejoined {
            format!(
                "p50 {} µs, {} records; the follower copied {caught_mib:.0} MiB and rejoined \
                 the ISR {:.1} s after it started",
                o.catching_up.p50_us, o.catching_up.count, o.catch_up_secs
            )
        } else {
            format!(
                "p50 {} µs, {} records; the follower had NOT rejoined the ISR after {:.0} s \
                 ({caught_mib:.0} MiB copied)",
                o.catching_up.p50_us, o.catching_up.count, o.catch_up_secs
            )
        };
        report.push(
            Figure::plain(
                s,
                &format!(
                    "producers' p99, flush.policy={policy}, follower catching up {} MiB",
                    plan.backlog_bytes / MIB
                ),
                "µs",
                o.catching_up.p99_us,
                &note,
            )
            .against("p99 with the follower stopped", o.stopped.p99_us)
            .target(Target::ratio_at_most(P99_RATIO_MAX, "≤ 1.5× follower stopped")),
        );
        report.push(Figure::plain(
            s,
            &format!("follower catch-up, flush.policy={policy}"),
            "MB/s",
            o.caught_up_bytes as f64 / o.catch_up_secs.max(1e-3) / 1e6,
            "bytes the restarted follower wrote to its disk until it rejoined the ISR, over that \
             time (including its start-up)",
        ));
        for latency in [&o.in_sync, &o.stopped, &o.catching_up] {
            report.latencies.push(latency.clone());
        }
    }
    report.notes.push(format!(
        "cluster: three Weir brokers in this process (own runtimes, folders and ports) sharing \
         the machine's disk and cores; topic with 1 partition, replication factor 3, \
         min.insync.replicas=2; producers acks=all, linger.ms={LATENCY_LINGER_MS}, \
         {RECORD_BYTES} B records at {RATE:.0}/s, latency from each record's intended send \
         time; {} s per fixed phase; backlog {} MiB written with acks=1 while the follower was \
         stopped; replica_catch_up_bytes_per_sec={}",
        plan.secs,
        plan.backlog_bytes / MIB,
        if catch_up == 0 { "0 (no limit)".to_owned() } else { catch_up.to_string() }
    ));
}
