//! The shape one seed draws (hosts, topics, producers, consumers), the broker's boot, topic
//! creation before faults start, and spawning the client tasks.

use std::net::SocketAddr;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use weir::config::BrokerConfig;
use weir::io::{Env, TaskHandle};

use super::{BROKER_PORT, Shared, consumer, producer};
use crate::checker::history::Flush;
use crate::client::Client;
use crate::client::produce::Acks;
use crate::disk::DiskFaults;
use crate::node::{Boot, node_ip};
use crate::sim::{Host, Sim};
use crate::trace::mix;

/// Partitions of every workload topic.
pub const TOPIC_PARTITIONS: i32 = 3;
/// `offsets.topic.num.partitions` of the simulated broker.
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 3;
/// `offsets.topic.segment.bytes` of the broker.
pub const OFFSETS_SEGMENT_BYTES: i64 = 2_048;
/// `log.retention.check.interval.ms` of the broker: compaction and retention passes.
pub const RETENTION_CHECK_MS: i64 = 2_000;
/// `log_scrub_interval_ms`.
pub const SCRUB_INTERVAL_MS: u64 = 10_000;
/// `log_scrub_bytes_per_sec`: a pass over the workload's logs takes a second or two.
pub const SCRUB_BYTES_PER_SEC: u64 = 1 << 20;
/// How long creating the topics may take before the seed is declared broken.
pub const SETUP_LIMIT: Duration = Duration::from_secs(30);
/// The producer number of the final liveness writes (workload producers count from 1).
pub const LIVENESS_PRODUCER: u32 = 0;

/// One workload topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSpec {
    /// Its name.
    pub name: String,
    /// Its partition count.
    pub partitions: i32,
    /// Its flush policy.
    pub flush: Flush,
    /// Its `flush.ms` (interval topics only).
    pub flush_ms: u64,
}

/// One producer task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerSpec {
    /// Its number (in record values).
    pub number: u32,
    /// Index of its client host.
    pub host: usize,
    /// Idempotent (InitProducerId, sequences, acks=all) or not.
    pub idempotent: bool,
    /// Its usual acks (idempotent producers always use acks=all).
    pub acks: Acks,
    /// Chance per batch of sending with acks=0 instead, in thousandths (non-idempotent only).
    pub acks_none_per_mille: u64,
}

/// One consumer task (a member of [`super::GROUP`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerSpec {
    /// Its name (client id).
    pub name: String,
    /// Index of its client host.
    pub host: usize,
}

/// Everything one seed chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Client hosts.
    pub client_hosts: usize,
    /// Topics.
    pub topics: Vec<TopicSpec>,
    /// Producers.
    pub producers: Vec<ProducerSpec>,
    /// Consumers.
    pub consumers: Vec<ConsumerSpec>,
    /// The broker disk's ordinary latency per operation, at most (the nemesis restores it
    /// after disk faults): the longer a sync takes, the wider the windows crashes fall into.
    pub disk_latency_max: Duration,
}

impl Shape {
    /// The shape of `seed`.
    pub fn from_seed(seed: u64) -> Shape {
        let mut rng = ChaCha8Rng::seed_from_u64(mix(seed ^ 0x0b_5e_ed));
        let mut below = |n: u64| rng.next_u64() % n;
        let client_hosts = 1 + below(2) as usize;
        let mut topics = vec![TopicSpec {
            name: "events".to_owned(),
            partitions: TOPIC_PARTITIONS,
            flush: Flush::Ack,
            flush_ms: 0,
        }];
        if below(2) == 0 {
            topics.push(TopicSpec {
                name: "events-interval".to_owned(),
                partitions: TOPIC_PARTITIONS,
                flush: Flush::Interval,
                flush_ms: 100 + below(1_000),
            });
        }
        let producers = (1..=2 + below(3) as u32)
            .map(|number| {
                // The first is idempotent and the second not; the rest toss a coin.
                let idempotent = number == 1 || (number > 2 && below(2) == 0);
                ProducerSpec {
                    number,
                    host: below(client_hosts as u64) as usize,
                    idempotent,
                    acks: if idempotent || below(2) == 0 { Acks::All } else { Acks::Leader },
                    acks_none_per_mille: if idempotent || below(3) != 0 { 0 } else { 50 },
                }
            })
            .collect();
        let consumers = (0..2 + below(2))
            .map(|i| ConsumerSpec {
                name: format!("consumer{i}"),
                host: below(client_hosts as u64) as usize,
            })
            .collect();
        let disk_latency_max = Duration::from_micros([0, 1_000, 5_000, 20_000][below(4) as usize]);
        Shape { client_hosts, topics, producers, consumers, disk_latency_max }
    }

    /// The broker disk's faults when nothing is wrong with it.
    pub fn disk_baseline(&self) -> DiskFaults {
        DiskFaults { latency_max: self.disk_latency_max, ..DiskFaults::default() }
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        let topics: Vec<String> = self
            .topics
            .iter()
            .map(|t| match t.flush {
                Flush::Ack => format!("{} (ack)", t.name),
                Flush::Interval => format!("{} (interval {} ms)", t.name, t.flush_ms),
            })
            .collect();
        let producers: Vec<String> = self
            .producers
            .iter()
            .map(|p| {
                let kind = if p.idempotent { "idempotent" } else { "plain" };
                format!("p{} {kind} {:?}@client{}", p.number, p.acks, p.host)
            })
            .collect();
        format!(
            "{} client hosts; topics {}; producers {}; {} consumers; disk latency up to {:?}",
            self.client_hosts,
            topics.join(", "),
            producers.join(", "),
            self.consumers.len(),
            self.disk_latency_max
        )
    }
}

/// The broker's configuration: listening on the first host's address.
pub fn broker_config() -> BrokerConfig {
    BrokerConfig {
        listener: SocketAddr::new(node_ip(0), BROKER_PORT),
        auto_create_topics_enable: false,
        offsets_topic_num_partitions: OFFSETS_TOPIC_PARTITIONS,
        group_initial_rebalance_delay_ms: 0,
        // Commits in small segments, cleaned every 2 s: `__consumer_offsets` is compacted
        // under crashes, power failures and disk faults while the commits checker watches.
        offsets_topic_segment_bytes: OFFSETS_SEGMENT_BYTES,
        log_retention_check_interval_ms: RETENTION_CHECK_MS,
        // A scrub pass every 10 s, so that latent damage is found under crashes and power
        // failures too (with one replica, noted and reported; nothing to repair it from).
        log_scrub_interval_ms: SCRUB_INTERVAL_MS,
        log_scrub_bytes_per_sec: SCRUB_BYTES_PER_SEC,
        ..BrokerConfig::default()
    }
}

/// The broker host's boot: open the broker's state, bind, serve once ready, until killed.
pub fn broker_boot(_shape: &Shape) -> Boot {
    crate::workload::cluster::node_boot(broker_config(), Default::default())
}

/// Writes the topics and producers into the history before anything runs.
pub(crate) fn record_shape(shared: &Shared, shape: &Shape) {
    shared.with_history(|h| {
        for t in &shape.topics {
            h.topics.insert(t.name.clone(), (t.partitions, t.flush));
        }
        h.producers.insert(LIVENESS_PRODUCER, false);
        for p in &shape.producers {
            h.producers.insert(p.number, p.idempotent);
        }
    });
}

/// Creates the workload topics from `host` before faults start.
pub(crate) fn create_topics(sim: &Sim, host: Host, shared: &Shared) -> Result<(), String> {
    let (addr, topics) = (shared.broker, shared.topics.clone());
    let created = sim.block_on(host, SETUP_LIMIT, move |env: Env| async move {
        let mut client = Client::new(env.clone(), addr, "setup");
        for t in topics.iter() {
            let flush_ms = t.flush_ms.to_string();
            let configs: Vec<(&str, &str)> = match t.flush {
                Flush::Ack => vec![("flush.policy", "ack")],
                Flush::Interval => vec![("flush.policy", "interval"), ("flush.ms", &flush_ms)],
            };
            while let Err(e) = client.create_topic(&t.name, t.partitions, &configs).await {
                if e.code().is_some() {
                    return Err(format!("creating {}: {e}", t.name));
                }
                env.clock.sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    });
    created.unwrap_or_else(|| Err(format!("topics not created within {SETUP_LIMIT:?}")))
}

/// Spawns every producer and consumer on its client host; their handles, to stop stragglers.
pub(crate) fn spawn_clients(
    sim: &Sim,
    hosts: &[Host],
    shared: &Shared,
    shape: &Shape,
) -> Vec<TaskHandle> {
    let mut tasks = Vec::new();
    for spec in &shape.producers {
        let (shared, spec) = (shared.clone(), spec.clone());
        let host = hosts[spec.host];
        tasks.push(sim.spawn(host, "producer", move |env| producer::run(env, shared, spec)));
    }
    for spec in &shape.consumers {
        let (shared, spec) = (shared.clone(), spec.clone());
        let host = hosts[spec.host];
        tasks.push(sim.spawn(host, "consumer", move |env| consumer::run(env, shared, spec)));
    }
    tasks
}
