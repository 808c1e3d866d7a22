//! A Weir cluster inside the simulator: 3–5 nodes, the first ones voting in the metadata quorum
//! (combined broker and controller roles), the rest broker-only, and a client host. The driver
//! can reach each node's [`Broker`] to look at what it believes, and every step of the run is
//! watched by [`MetadataWatch`]: no two nodes may ever hold different metadata images at one
//! log offset (the image at an offset is a function of the committed records up to it, so this
//! is "no two controllers commit different records at one index, and every broker's image is a
//! prefix of the committed log"), and no node's image may go back within one life.
//!
//! The named fault scenarios in `scenarios/` and the cluster swarm ([`swarm`]) are built on it.

pub mod failover;
pub mod group;
pub mod producer;
mod replicas;
pub mod swarm;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use weir::config::{BrokerConfig, Role};
use weir::controller::image::MetadataImage;
use weir::controller::records::{NO_LEADER, PartitionRecord};
use weir::io::Env;
use weir::node::Broker;

use bytes::Bytes;

use crate::client::admin::ClusterView;
use crate::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use crate::client::{CallError, Client, ClientError};
use crate::node::{Boot, NodeStatus, boot, node_ip};
use crate::sim::{Host, Sim};
use crate::world::lock;

/// The client port of every node.
pub const CLIENT_PORT: u16 = 9092;
/// The controller port of every voter.
pub const CONTROLLER_PORT: u16 = 9093;
/// Each node's metrics listener port, when [`ClusterSpec::metrics`] asks for one.
pub const METRICS_PORT: u16 = 9644;
/// `offsets.topic.num.partitions` in the simulated cluster.
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 3;
/// How often the driver looks at every node's metadata.
pub const WATCH_STEP: Duration = Duration::from_millis(50);
/// How long a new or healed cluster may take to settle.
pub const SETTLE_BOUND: Duration = Duration::from_secs(30);
/// How long a booting node waits to be ready before saying so and waiting again.
const READY_WAIT: Duration = Duration::from_secs(5);

/// The cluster's size and timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Nodes (node ids 1..=nodes).
    pub nodes: usize,
    /// How many of them (the first ones) vote in the metadata quorum.
    pub voters: usize,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_ms: u64,
    /// `broker.session.timeout.ms`.
    pub session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_ms: u64,
    /// `default.replication.factor` (also the offsets topic's).
    pub replication: i32,
    /// `log.retention.check.interval.ms`.
    pub retention_check_ms: i64,
    /// `replica_catch_up_bytes_per_sec` (0: no limit).
    pub catch_up_bytes_per_sec: u64,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub checkpoint_ms: i64,
    /// `replica.high.watermark.checkpoint.interval.ms`.
    pub hw_checkpoint_ms: i64,
    /// `offsets.topic.segment.bytes`.
    pub offsets_segment_bytes: i64,
    /// `leader.imbalance.check.interval.seconds`, or `None` for
    /// `auto.leader.rebalance.enable=false`.
    pub leader_rebalance_secs: Option<u64>,
    /// `log_scrub_interval_ms` (0: no scrub).
    pub scrub_interval_ms: u64,
    /// `log_scrub_bytes_per_sec`.
    pub scrub_bytes_per_sec: u64,
    /// `connections_max_idle_ms`.
    pub connections_max_idle_ms: u64,
    /// `max_connections`.
    pub max_connections: usize,
    /// `max_connections_per_ip`.
    pub max_connections_per_ip: usize,
    /// `queued_max_request_bytes` (-1: no limit).
    pub queued_max_request_bytes: i64,
    /// `auto_create_topics_enable` (off unless a scenario asks).
    pub auto_create_topics: bool,
    /// `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: i64,
    /// Whether each node serves its metrics (on [`METRICS_PORT`]).
    pub metrics: bool,
}

impl ClusterSpec {
    /// `nodes` combined nodes with the broker's default timing.
    pub fn combined(nodes: usize) -> ClusterSpec {
        let defaults = BrokerConfig::default();
        ClusterSpec {
            nodes,
            voters: nodes,
            heartbeat_ms: defaults.broker_heartbeat_interval_ms,
            session_timeout_ms: defaults.broker_session_timeout_ms,
            replica_lag_ms: defaults.replica_lag_time_max_ms,
            replication: 1,
            retention_check_ms: defaults.log_retention_check_interval_ms,
            catch_up_bytes_per_sec: defaults.replica_catch_up_bytes_per_sec,
            checkpoint_ms: defaults.log_checkpoint_interval_ms,
            hw_checkpoint_ms: defaults.replica_high_watermark_checkpoint_interval_ms,
            offsets_segment_bytes: defaults.offsets_topic_segment_bytes,
            leader_rebalance_secs: defaults
                .auto_leader_rebalance_enable
                .then_some(defaults.leader_imbalance_check_interval_seconds),
            scrub_interval_ms: defaults.log_scrub_interval_ms,
            scrub_bytes_per_sec: defaults.log_scrub_bytes_per_sec,
            connections_max_idle_ms: defaults.connections_max_idle_ms,
            max_connections: defaults.max_connections,
            max_connections_per_ip: defaults.max_connections_per_ip,
            queued_max_request_bytes: defaults.queued_max_request_bytes,
            auto_create_topics: false,
            producer_id_expiration_ms: defaults.producer_id_expiration_ms,
            metrics: false,
        }
    }

    /// The configuration of node `ix` (0-based; its node id is `ix + 1`).
    pub fn config(&self, ix: usize) -> BrokerConfig {
        let voters = (0..self.voters)
            .map(|v| format!("{}@{}:{CONTROLLER_PORT}", v + 1, node_ip(v)))
            .collect();
        let controller = ix < self.voters;
        BrokerConfig {
            node_id: node_id(ix),
            listener: SocketAddr::new(node_ip(ix), CLIENT_PORT),
            auto_create_topics_enable: self.auto_create_topics,
            offsets_topic_num_partitions: OFFSETS_TOPIC_PARTITIONS,
            group_initial_rebalance_delay_ms: 0,
            process_roles: if controller {
                vec![Role::Broker, Role::Controller]
            } else {
                vec![Role::Broker]
            },
            controller_listener: controller.then(|| SocketAddr::new(node_ip(ix), CONTROLLER_PORT)),
            controller_quorum_voters: voters,
            default_replication_factor: self.replication,
            broker_heartbeat_interval_ms: self.heartbeat_ms,
            broker_session_timeout_ms: self.session_timeout_ms,
            replica_lag_time_max_ms: self.replica_lag_ms,
            log_retention_check_interval_ms: self.retention_check_ms,
            replica_catch_up_bytes_per_sec: self.catch_up_bytes_per_sec,
            log_checkpoint_interval_ms: self.checkpoint_ms,
            replica_high_watermark_checkpoint_interval_ms: self.hw_checkpoint_ms,
            offsets_topic_segment_bytes: self.offsets_segment_bytes,
            auto_leader_rebalance_enable: self.leader_rebalance_secs.is_some(),
            leader_imbalance_check_interval_seconds: self.leader_rebalance_secs.unwrap_or(300),
            log_scrub_interval_ms: self.scrub_interval_ms,
            log_scrub_bytes_per_sec: self.scrub_bytes_per_sec,
            connections_max_idle_ms: self.connections_max_idle_ms,
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            queued_max_request_bytes: self.queued_max_request_bytes,
            producer_id_expiration_ms: self.producer_id_expiration_ms,
            metrics_listener: self.metrics.then(|| SocketAddr::new(node_ip(ix), METRICS_PORT)),
            ..BrokerConfig::default()
        }
    }
}

/// The node id of the `ix`-th node.
pub fn node_id(ix: usize) -> i32 {
    i32::try_from(ix + 1).unwrap_or(i32::MAX)
}

/// Where the running broker of one node is published (empty while it is down or booting).
pub(crate) type Slot = Arc<Mutex<Weak<Broker>>>;

/// A node's boot: start the broker, publish it in `slot`, bind, and serve once ready (as
/// `weir serve` does: registered, caught up and loaded).
pub(crate) fn node_boot(config: BrokerConfig, slot: Slot) -> Boot {
    boot(move |env: Env| {
        let (config, slot) = (config.clone(), Arc::clone(&slot));
        async move {
            let broker = match Broker::start(env, config).await {
                Ok(broker) => broker,
                Err(e) => {
                    tracing::debug!("node did not start: {e}");
                    return;
                }
            };
            *lock(&slot) = Arc::downgrade(&broker);
            match broker.bind().await {
                Ok(listener) => {
                    while !broker.wait_ready(READY_WAIT).await {
                        tracing::debug!("node not ready yet");
                    }
                    broker.serve(listener).await
                }
                Err(e) => tracing::debug!("node could not bind: {e}"),
            }
        }
    })
}

/// A simulated cluster and its watch.
pub struct Cluster {
    /// The simulation.
    pub sim: Sim,
    /// The size and timing.
    pub spec: ClusterSpec,
    /// The nodes, in node-id order.
    pub nodes: Vec<Host>,
    /// A host for clients.
    pub client: Host,
    slots: Vec<Slot>,
    watch: MetadataWatch,
}

impl Cluster {
    /// Starts the cluster for `seed`.
    pub fn new(seed: u64, spec: ClusterSpec) -> Cluster {
        let sim = Sim::new(seed);
        let mut nodes = Vec::new();
        let mut slots = Vec::new();
        for ix in 0..spec.nodes {
            let slot: Slot = Arc::new(Mutex::new(Weak::new()));
            let host = sim.add_host(
                &format!("node{}", ix + 1),
                node_boot(spec.config(ix), Arc::clone(&slot)),
            );
            nodes.push(host);
            slots.push(slot);
        }
        let client = sim.add_client("client");
        Cluster { sim, spec, nodes, client, slots, watch: MetadataWatch::default() }
    }

    /// A new cluster for `seed`, run until it has settled (within [`SETTLE_BOUND`]).
    pub fn new_settled(seed: u64, spec: ClusterSpec) -> Result<Cluster, String> {
        let mut cluster = Cluster::new(seed, spec);
        cluster.settle("starting")?;
        Ok(cluster)
    }

    /// Runs until the cluster has settled, or says why it did not within [`SETTLE_BOUND`]
    /// (`when` names the moment, for the message).
    pub fn settle(&mut self, when: &str) -> Result<(), String> {
        if self.run_until(SETTLE_BOUND, Cluster::settled) {
            Ok(())
        } else {
            Err(format!("not settled within {SETTLE_BOUND:?} of {when}: {:?}", self.unsettled()))
        }
    }

    /// The metadata watch's verdict so far.
    pub fn watch_verdict(&self) -> Result<(), String> {
        match self.watch.violations.as_slice() {
            [] => Ok(()),
            lines => Err(lines.join("; ")),
        }
    }

    /// The client address of node `ix`.
    pub fn addr(&self, ix: usize) -> SocketAddr {
        SocketAddr::new(self.sim.ip(self.nodes[ix]), CLIENT_PORT)
    }

    /// The broker node `ix` runs now (none while it is down or before it started).
    pub fn broker(&self, ix: usize) -> Option<Arc<Broker>> {
        if self.sim.status(self.nodes[ix]) == NodeStatus::Down {
            return None;
        }
        lock(&self.slots[ix]).upgrade()
    }

    /// The node that is the active controller with a current image, if exactly one claims it.
    pub fn active_controller(&self) -> Option<usize> {
        let active: Vec<usize> = (0..self.spec.voters)
            .filter(|&ix| self.sim.status(self.nodes[ix]) == NodeStatus::Up)
            .filter(|&ix| {
                self.broker(ix).and_then(|b| b.controller.clone()).is_some_and(|c| c.is_active())
            })
            .collect();
        match active.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// The committed image as the active controller holds it.
    pub fn committed_image(&self) -> Option<Arc<MetadataImage>> {
        let ix = self.active_controller()?;
        Some(self.broker(ix)?.controller.as_ref()?.image())
    }

    /// Runs for `duration`, watching every node's metadata at each step.
    pub fn run_for(&mut self, duration: Duration) {
        let end = self.sim.now() + duration;
        while self.sim.now() < end {
            self.sim.run_for(WATCH_STEP.min(end - self.sim.now()));
            self.observe();
        }
    }

    /// Runs until `done` holds (checked at each watch step) or `limit` passes; whether it held.
    pub fn run_until(&mut self, limit: Duration, done: impl Fn(&Cluster) -> bool) -> bool {
        let end = self.sim.now() + limit;
        loop {
            if done(self) {
                return true;
            }
            if self.sim.now() >= end {
                return false;
            }
            self.sim.run_for(WATCH_STEP.min(end - self.sim.now()));
            self.observe();
        }
    }

    /// Runs until the committed image shows node `ix` fenced, for at most its session timeout
    /// and `slack`, or says it was not.
    pub fn await_fenced(&mut self, ix: usize, slack: Duration) -> Result<(), String> {
        let bound = Duration::from_millis(self.spec.session_timeout_ms) + slack;
        let fenced = self.run_until(bound, |c| {
            c.committed_image()
                .is_some_and(|i| i.brokers.get(&node_id(ix)).is_some_and(|b| b.fenced))
        });
        if fenced { Ok(()) } else { Err(format!("node{} not fenced within {bound:?}", ix + 1)) }
    }

    /// Starts node `ix` again, lets the cluster settle, and runs until the committed ISR of
    /// `topic`/`partition` has `members` members, for at most `limit`.
    pub fn restart_and_rejoin(
        &mut self,
        ix: usize,
        (topic, partition): (&str, i32),
        members: usize,
        limit: Duration,
    ) -> Result<(), String> {
        self.sim.start(self.nodes[ix]);
        self.settle("the restart")?;
        self.await_isr_size((topic, partition), members, limit)
            .map_err(|e| format!("node{} did not rejoin: {e}", ix + 1))
    }

    /// Runs until the committed ISR of `topic`/`partition` has `members` members, for at most
    /// `limit`.
    pub fn await_isr_size(
        &mut self,
        (topic, partition): (&str, i32),
        members: usize,
        limit: Duration,
    ) -> Result<(), String> {
        let reached = self.run_until(limit, |c| {
            c.committed_partition(topic, partition).is_some_and(|p| p.isr.len() == members)
        });
        if reached {
            Ok(())
        } else {
            Err(format!("the ISR of {topic}-{partition} did not reach {members} within {limit:?}"))
        }
    }

    /// Runs `f` as a task on the client host until it finishes or `limit` passes, watching
    /// the metadata at each step.
    pub fn client_call<T, F, Fut>(&mut self, limit: Duration, f: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(Env) -> Fut,
        Fut: std::future::Future<Output = T> + Send + 'static,
    {
        let slot: Arc<Mutex<Option<T>>> = Arc::new(Mutex::new(None));
        let out = Arc::clone(&slot);
        let _task = self.sim.spawn(self.client, "client-call", move |env| {
            let fut = f(env);
            async move {
                let value = fut.await;
                *lock(&out) = Some(value);
            }
        });
        self.run_until(limit, |_| lock(&slot).is_some());
        lock(&slot).take()
    }

    /// A client of node `ix`, for tasks on the client host.
    pub fn client_of(&self, env: Env, ix: usize, name: &str) -> Client {
        Client::new(env, self.addr(ix), name)
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1,
    /// `flush.policy=ack`) through node `ix`, once: Ok if created or already there, else the
    /// client's error (no answer within 30 s is a timeout: the outcome is open).
    pub fn create_topic(
        &mut self,
        ix: usize,
        topic: &str,
        partitions: i32,
    ) -> Result<(), ClientError> {
        let (addr, topic) = (self.addr(ix), topic.to_owned());
        self.client_call(Duration::from_secs(30), move |env| async move {
            let mut client = Client::new(env, addr, "driver");
            client.create_topic(&topic, partitions, &[("flush.policy", "ack")]).await
        })
        .unwrap_or(Err(ClientError::Call(CallError::TimedOut)))
    }

    /// Creates `topic` with `partitions` partitions of `replication` replicas and `configs`
    /// through node `ix`, once (as [`Cluster::create_topic`]).
    pub fn create_replicated_topic(
        &mut self,
        ix: usize,
        topic: &str,
        partitions: i32,
        replication: i16,
        configs: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        let (addr, topic) = (self.addr(ix), topic.to_owned());
        let configs: Vec<(String, String)> =
            configs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        self.client_call(Duration::from_secs(30), move |env| async move {
            let configs: Vec<(&str, &str)> =
                configs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let mut client = Client::new(env, addr, "driver");
            client.create_replicated_topic(&topic, partitions, replication, &configs).await
        })
        .unwrap_or(Err(ClientError::Call(CallError::TimedOut)))
    }

    /// Creates one-partition topics `<prefix>0`, `<prefix>1`, … with `replication` replicas
    /// until one's replicas exclude the active controller (so that cutting links among them
    /// leaves every replica able to reach the controller); its name and committed partition.
    pub fn create_topic_away_from_controller(
        &mut self,
        prefix: &str,
        replication: i16,
        configs: &[(&str, &str)],
    ) -> Result<(String, PartitionRecord), String> {
        const TRIES: usize = 12;
        for n in 0..TRIES {
            let controller = self.active_controller().map(node_id).ok_or("no active controller")?;
            let name = format!("{prefix}{n}");
            self.create_replicated_topic(0, &name, 1, replication, configs)
                .map_err(|e| e.to_string())?;
            let image = self.committed_image().ok_or("no committed image")?;
            let p = image.partition(&name, 0).ok_or("no partition")?.clone();
            if !p.replicas.contains(&controller) {
                return Ok((name, p));
            }
        }
        Err(format!("{TRIES} topics all had the active controller as a replica"))
    }

    /// `topic`/`partition` as the active controller last committed it.
    pub fn committed_partition(&self, topic: &str, partition: i32) -> Option<PartitionRecord> {
        self.committed_image()?.partition(topic, partition).cloned()
    }

    /// The cluster as node `ix` describes it in a Metadata answer.
    pub fn view_from(&mut self, ix: usize) -> Result<ClusterView, String> {
        let addr = self.addr(ix);
        self.client_call(Duration::from_secs(30), move |env| async move {
            Client::new(env, addr, "driver").cluster_view(None).await.map_err(|e| e.to_string())
        })
        .unwrap_or_else(|| Err("no answer".to_owned()))
    }

    /// Produces one record with acks=all to `topic`/`partition` at node `ix` (whether or not
    /// it leads): the offset, or the error code or client error as text.
    pub fn produce_at(
        &mut self,
        ix: usize,
        topic: &str,
        partition: i32,
        value: &str,
    ) -> Result<i64, ProduceFailure> {
        self.produce_with(ix, topic, partition, value, Acks::All)
    }

    /// Produces one record with `acks` to `topic`/`partition` at node `ix`: the offset, or the
    /// error code or client error.
    pub fn produce_with(
        &mut self,
        ix: usize,
        topic: &str,
        partition: i32,
        value: &str,
        acks: Acks,
    ) -> Result<i64, ProduceFailure> {
        self.produce_batch(ix, (topic, partition), &[value], acks)
    }

    /// Produces one batch of `values` with `acks` to `topic`/`partition` at node `ix`: the
    /// batch's base offset, or the error code or client error.
    pub fn produce_batch(
        &mut self,
        ix: usize,
        (topic, partition): (&str, i32),
        values: &[&str],
        acks: Acks,
    ) -> Result<i64, ProduceFailure> {
        let records = values.iter().map(|v| (None, Bytes::from((*v).to_owned()))).collect();
        self.produce_records(ix, (topic, partition), records, acks)
    }

    /// Produces one batch of `records` (keys and values) with `acks` to `topic`/`partition` at
    /// node `ix`: the batch's base offset, or the error code or client error.
    pub fn produce_records(
        &mut self,
        ix: usize,
        (topic, partition): (&str, i32),
        records: Vec<(Option<Bytes>, Bytes)>,
        acks: Acks,
    ) -> Result<i64, ProduceFailure> {
        let (addr, topic) = (self.addr(ix), topic.to_owned());
        let outcome = self.client_call(Duration::from_secs(30), move |env| async move {
            let batch = PartitionBatch { partition, base_sequence: 0, records };
            Client::new(env, addr, "driver").produce(&topic, acks, None, &[batch]).await
        });
        match outcome {
            Some(Ok(ProduceOutcome::Answered(acks))) => match acks.first() {
                Some(a) if a.error_code == 0 => Ok(a.base_offset),
                Some(a) => Err(ProduceFailure::Code(a.error_code)),
                None => Err(ProduceFailure::Other("no partition answer".to_owned())),
            },
            Some(Ok(ProduceOutcome::Unacknowledged)) => {
                Err(ProduceFailure::Other("unacknowledged".to_owned()))
            }
            Some(Err(e)) => Err(ProduceFailure::Other(e.to_string())),
            None => Err(ProduceFailure::Other("no answer".to_owned())),
        }
    }

    /// Produces one record with acks=all to the leader node `via` names, retrying (with fresh
    /// metadata) until acknowledged or `limit` passes: the offset.
    pub fn produce(
        &mut self,
        via: usize,
        topic: &str,
        partition: i32,
        value: &str,
        limit: Duration,
    ) -> Option<i64> {
        let end = self.sim.now() + limit;
        while self.sim.now() < end {
            if let Ok(view) = self.view_from(via)
                && let Some((leader, _)) = view.leader_addr(topic, partition)
                && let Some(ix) = (0..self.nodes.len()).find(|&ix| node_id(ix) == leader)
                && let Ok(offset) = self.produce_at(ix, topic, partition, value)
            {
                return Some(offset);
            }
            self.run_for(Duration::from_millis(200));
        }
        None
    }

    /// Every record of `topic`/`partition`, read from node `ix` from offset 0 up to its high
    /// watermark: offset → value.
    pub fn read_all(
        &mut self,
        ix: usize,
        topic: &str,
        partition: i32,
    ) -> Result<BTreeMap<i64, Bytes>, String> {
        let (addr, topic) = (self.addr(ix), topic.to_owned());
        self.client_call(Duration::from_secs(60), move |env| async move {
            Client::new(env, addr, "driver").read_to_end(&topic, partition).await
        })
        .unwrap_or_else(|| Err("no answer".to_owned()))
    }

    /// The node index of node id `id`.
    pub fn ix_of(&self, id: i32) -> Option<usize> {
        (0..self.nodes.len()).find(|&ix| node_id(ix) == id)
    }

    /// Looks at every running node's metadata now.
    pub fn observe(&mut self) {
        for ix in 0..self.nodes.len() {
            let Some(broker) = self.broker(ix) else { continue };
            let life = Arc::as_ptr(&broker) as usize;
            if let Some(controller) = &broker.controller {
                self.watch.see(ix, life, Source::Controller, &controller.image(), self.sim.now());
            }
            if let Some(membership) = broker.membership() {
                self.watch.see(ix, life, Source::Broker, &membership.image(), self.sim.now());
            }
        }
    }

    /// What the watch found wrong so far.
    pub fn violations(&self) -> Vec<String> {
        self.watch.violations.clone()
    }

    /// How many distinct metadata offsets the watch compared.
    pub fn offsets_watched(&self) -> usize {
        self.watch.at.len()
    }

    /// Whether the cluster has settled: one active controller; every node up, registered,
    /// unfenced and caught up with its image; every partition led by a live broker that has
    /// taken the role.
    pub fn settled(&self) -> bool {
        self.unsettled().is_none()
    }

    /// Why the cluster has not settled, if it has not.
    pub fn unsettled(&self) -> Option<String> {
        let Some(image) = self.committed_image() else {
            return Some("no single active controller".to_owned());
        };
        for ix in 0..self.nodes.len() {
            let Some(broker) = self.broker(ix) else {
                return Some(format!("node{} is down", ix + 1));
            };
            let Some(membership) = broker.membership() else {
                return Some(format!("node{} has not joined", ix + 1));
            };
            if membership.is_fenced() || !image.is_live(node_id(ix)) {
                return Some(format!("node{} is fenced", ix + 1));
            }
            if membership.image().offset < image.offset {
                return Some(format!(
                    "node{} is at metadata offset {} of {}",
                    ix + 1,
                    membership.image().offset,
                    image.offset
                ));
            }
        }
        for topic in image.topics.values() {
            // A partition with no in-sync replica was given up: its last one came back on a
            // new disk, and no replica holds what it acknowledged (see `given_up`).
            for p in topic.partitions.values().filter(|p| !p.isr.is_empty()) {
                if p.leader == NO_LEADER || !image.is_live(p.leader) {
                    return Some(format!("{}-{} has no live leader", topic.name, p.partition));
                }
                // Its leader names itself leader a moment before the partition takes the role
                // (one that could not open is left out: it is reported apart).
                let taking = self
                    .ix_of(p.leader)
                    .and_then(|ix| self.broker(ix))
                    .and_then(|b| b.catalog.partition(&topic.name, p.partition))
                    .is_some_and(|part| !part.leads());
                if taking {
                    return Some(format!(
                        "{}-{} has not taken leadership on node {}",
                        topic.name, p.partition, p.leader
                    ));
                }
                // With every node up, every replica a move adds catches up and it completes,
                // unless every in-sync copy holds a damaged batch: then no intact copy may be
                // left to copy it from, and a replica it moves to may wait out of sync (an
                // operator may cancel the move).
                let waiting = p.target().iter().any(|r| !p.isr.contains(r));
                let all_damaged = waiting
                    && p.isr.iter().all(|&r| {
                        self.ix_of(r)
                            .and_then(|ix| self.broker(ix))
                            .and_then(|b| b.catalog.partition(&topic.name, p.partition))
                            .is_some_and(|part| part.lasting_damage().is_some())
                    });
                if p.reassigning() && !all_damaged {
                    return Some(format!(
                        "{}-{} is still moving: adding {:?}, removing {:?}, ISR {:?}",
                        topic.name, p.partition, p.adding, p.removing, p.isr
                    ));
                }
            }
        }
        None
    }

    /// The partitions the committed image lists with no in-sync replica: their last one came
    /// back on a new disk, so no replica holds what it acknowledged, and they wait for an
    /// unclean election rather than lead from an empty log.
    pub fn given_up(&self) -> BTreeSet<(String, i32)> {
        let Some(image) = self.committed_image() else { return BTreeSet::new() };
        image
            .topics
            .values()
            .flat_map(|t| {
                t.partitions
                    .values()
                    .filter(|p| p.isr.is_empty())
                    .map(|p| (t.name.clone(), p.partition))
            })
            .collect()
    }
}

/// Why a produce was not acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProduceFailure {
    /// The broker answered with this error code.
    Code(i16),
    /// No usable answer.
    Other(String),
}

/// Which copy of the image a node holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    /// The controller's (voters only).
    Controller,
    /// The broker's own, followed from the controller.
    Broker,
}

/// The metadata agreement checker: the digest of every image seen at every offset, and each
/// node's last offset per life.
#[derive(Default)]
struct MetadataWatch {
    /// Offset → (digest, who first showed it).
    at: BTreeMap<u64, (u64, String)>,
    /// (node, source) → (life, last offset seen).
    last: BTreeMap<(usize, Source), (usize, u64)>,
    violations: Vec<String>,
}

/// Violations the watch keeps at most (the first ones tell the story).
const WATCH_VIOLATIONS_MAX: usize = 20;

impl MetadataWatch {
    fn see(
        &mut self,
        ix: usize,
        life: usize,
        source: Source,
        image: &MetadataImage,
        now: Duration,
    ) {
        let who = format!("node{} {:?} at {:.3}s", ix + 1, source, now.as_secs_f64());
        if let Some(&(seen_life, offset)) = self.last.get(&(ix, source))
            && seen_life == life
            && image.offset < offset
        {
            self.violate(format!(
                "{who}: image went back from offset {offset} to {}",
                image.offset
            ));
        }
        let before = self.last.insert((ix, source), (life, image.offset));
        if before.is_some_and(|(l, o)| l == life && o == image.offset) || image.offset == 0 {
            return;
        }
        let digest = digest(&image.encode_snapshot());
        match self.at.get(&image.offset) {
            None => {
                self.at.insert(image.offset, (digest, who));
            }
            Some((first, first_who)) if *first != digest => {
                let line = format!(
                    "split metadata at offset {}: {who} differs from {first_who}",
                    image.offset
                );
                self.violate(line);
            }
            Some(_) => {}
        }
    }

    fn violate(&mut self, line: String) {
        if self.violations.len() < WATCH_VIOLATIONS_MAX {
            self.violations.push(line);
        }
    }
}

/// FNV-1a over `bytes`: collisions between the images of one run are not a concern.
fn digest(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}
