//! The cluster swarm: 3–5 nodes (3 or 5 voters, the rest broker-only), an admin task creating,
//! growing, reconfiguring (`min.insync.replicas`, `segment.bytes`) and deleting topics and
//! deleting records through random nodes, producers writing
//! with `acks=all` or `acks=1` to each partition's leader as Metadata names it (one of them
//! idempotent), a consumer reading from leaders and a consumer group committing through
//! whichever broker coordinates it (see [`super::group`]) — while
//! the nemesis kills, power-fails, pauses and skews nodes, replaces the disks of broker-only
//! nodes with empty ones, and partitions, cuts, clogs and resets the links between them. Then
//! everything heals and the checkers judge:
//!
//! - the [`MetadataWatch`](super::MetadataWatch) saw no split metadata and no image going back;
//! - within [`SETTLE_BOUND`] of the heal there is one active controller, every node is
//!   registered, unfenced and caught up, and every partition has a live leader;
//! - every partition of every surviving topic takes a write again;
//! - every `acks=all` acknowledged record is read back at its offset with its value, no value
//!   of the idempotent producer (which retries unanswered batches with the same sequence, to
//!   whichever broker leads by then) appears twice, and no offset ever showed two different
//!   records to a consumer (consumers read only below the
//!   high watermark, so what one sees is committed and never changes);
//! - the group's committed offsets: an acknowledged commit is never lost, an offset changes only
//!   by a commit that could have come after, and no partition has two owners in a generation;
//! - replica convergence: every in-sync replica holds exactly its leader's bytes up to the
//!   high watermark;
//! - every node's disk holds exactly the partition folders the committed image gives it (a
//!   deleted topic's data is gone everywhere);
//! - records deleted by DeleteRecords stay deleted: once an answer gave a low watermark, no
//!   fetch sent later returns a record below it, whichever broker leads by then. Acknowledged
//!   records below an offset some DeleteRecords asked for (answered or not) are not expected
//!   to survive.
//!
//! Topics have replication factor 1–3 (at most the node count), `min.insync.replicas` 1–2
//! (at most the replication factor) and `segment.bytes` of 1 GiB, 4 KiB or 1 KiB, with
//! `flush.policy=ack`: an `acks=all` record is acknowledged once every in-sync replica has
//! synced it, so kills, power failures and failovers may delay it but never lose it. Half the
//! topics with 1 KiB segments also have a `retention.bytes` of 4 KiB, checked every 1–5 s:
//! their acknowledged records are expected from the final log start on. An `acks=1` record is acknowledged by the leader
//! alone and may be lost to a failover, as in Kafka; it is checked only as far as consumers
//! see it.
//!
//! A node back on a new disk holds nothing and leaves every ISR; a partition whose last
//! in-sync replica it was is given up (no in-sync replica, no leader: nothing holds what it
//! acknowledged, and no unclean election is allowed), and its acknowledged records, its final
//! write and its convergence are not expected (nor the group's checks, if an offsets partition
//! was given up). A partition given up in a run that replaced no disk is a violation; one that
//! leads from an empty log shows as acknowledged records lost.
//!
//! With [`Options::disk_faults`] the nemesis also fails reads, writes and syncs, flips bits in
//! what reads return, and fills disks up (a full disk stays full across restarts until the
//! heal: appends are refused with KAFKA_STORAGE_ERROR and the log stays usable, while a
//! controller whose metadata store cannot write stops until restarted). A partition whose log a failed write or sync took offline stays offline
//! until its broker restarts (a failed sync may have dropped pages, so nothing is trusted
//! before recovery); its broker reports it to the controller, which moves the partition's
//! leadership to another in-sync replica and takes the broker out of its ISR. After the heal
//! every node is restarted once before the checks; a corrupt batch a reader catches by its CRC
//! is then the system working, counted, not a violation.
//!
//! Disk faults also bring latent sector errors (see [`crate::workload::damage`]): one nemesis
//! step in 8 flips a bit of a stored batch on one node's disk for good, up to 3 per seed. A
//! leader that meets such damage hands the partition to another in-sync replica, whose copy
//! serves it, so the final read asks again for a batch answered CORRUPT_MESSAGE; only where
//! every in-sync replica holds that batch damaged may it stay unread (its acknowledged records
//! are then exempt), and only there may the partition refuse acks=all writes for good (no
//! follower can copy past the damage to join the ISR again) and leave acknowledged records past
//! its high watermark unseen (below `min.insync.replicas` the high watermark a restarted leader
//! recovered cannot move). Convergence compares replicas apart from the batches damaged on
//! either. The batch may also be one of the group's partition of `__consumer_offsets`: the
//! group's checkers then excuse what losing its records allows (see
//! [`crate::checker::commits`] and [`crate::checker::ownership`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use weir::io::{Env, Instant, TaskHandle};
use weir::topics::OFFSETS_TOPIC;

use super::group::{self, SharedGroup, TopicsNow};
use super::{Cluster, ClusterSpec};
use crate::client::Client;
use crate::client::admin::ClusterView;
use crate::client::codes;
use crate::client::fetch::FetchWant;
use crate::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use crate::nemesis::{FaultMix, Nemesis};
use crate::trace::mix;
use crate::workload::damage::{self, Damage};
pub use crate::workload::{Options, Report};
use crate::world::lock;

mod admin;
mod finale;

use admin::admin;
use finale::{final_convergence, final_folders, final_group, final_writes_and_reads};

/// Within how long of the heal the cluster must have settled.
pub const SETTLE_BOUND: Duration = Duration::from_secs(30);
/// Within how long of settling every partition must take a write and every node's folders
/// must match the image.
pub const FINAL_BOUND: Duration = Duration::from_secs(30);
/// The producers.
const PRODUCERS: u32 = 2;

/// One topic the admin task made.
#[derive(Clone, Debug)]
struct TopicState {
    name: String,
    partitions: i32,
    replication: i16,
    /// A delete was sent (answered or not): its records are no longer expected.
    deleting: bool,
    /// `retention.bytes` is set: acknowledged records below the final log start may have been
    /// deleted by retention.
    retained: bool,
}

/// One partition's batches damaged in place: the node index, first offset and last offset of
/// each.
type DamagedOn = Vec<(usize, i64, i64)>;

/// What the client tasks share.
#[derive(Default)]
struct Ledger {
    /// Topics whose creation was answered, in creation order.
    topics: Vec<TopicState>,
    /// `acks=all` acknowledged records: (topic, partition, offset) → value.
    acked: BTreeMap<(String, i32, i64), Bytes>,
    /// Records written with `acks=1` (answered; no survival promised).
    acked_by_leader: u64,
    /// Records the idempotent producer got acknowledged.
    acked_idempotent: u64,
    /// Every record ever read: (topic, partition, offset) → value.
    seen: BTreeMap<(String, i32, i64), Bytes>,
    /// The greatest offset DeleteRecords was asked to delete below, per partition (answered
    /// or not: either may have happened).
    delete_asked: BTreeMap<(String, i32), i64>,
    /// DeleteRecords answers without error, per partition: the low watermark and when the
    /// answer arrived.
    deleted: BTreeMap<(String, i32), Vec<(i64, Instant)>>,
    anomalies: Vec<String>,
    /// Corrupt batches readers caught (expected only under disk faults).
    corruption_caught: u64,
    /// Batches damaged in place (latent sector errors), by topic and partition.
    damaged: BTreeMap<(String, i32), DamagedOn>,
    disk_faults: bool,
    creates: u64,
    deletes: u64,
    record_deletes: u64,
    grown: u64,
    reconfigured: u64,
    /// Reassignments (and cancels) answered without error.
    reassigned: u64,
    produce_errors: u64,
    reads: u64,
}

impl Ledger {
    fn live_topics(&self) -> Vec<TopicState> {
        self.topics.iter().filter(|t| !t.deleting).cloned().collect()
    }

    /// The highest low watermark a DeleteRecords answer gave for `tp` before `sent`: no
    /// record below it may be read by a fetch sent at `sent`.
    fn deleted_before(&self, tp: &(String, i32), sent: Instant) -> Option<i64> {
        self.deleted.get(tp)?.iter().filter(|(_, at)| *at < sent).map(|(low, _)| *low).max()
    }

    /// Notes a record read at an offset; two different values at one offset is an anomaly.
    fn read(&mut self, key: (String, i32, i64), value: Bytes) {
        self.reads += 1;
        if let Some(acked) = self.acked.get(&key)
            && *acked != value
        {
            self.anomalies
                .push(format!("{}-{}@{}: acked {acked:?}, read {value:?}", key.0, key.1, key.2));
        }
        match self.seen.get(&key) {
            Some(before) if *before != value => {
                self.anomalies.push(format!(
                    "{}-{}@{}: read {before:?} and later {value:?}",
                    key.0, key.1, key.2
                ));
            }
            Some(_) => {}
            None => {
                self.seen.insert(key, value);
            }
        }
    }
}

type Shared = Arc<Mutex<Ledger>>;

/// The cluster a seed draws.
pub fn spec_for(seed: u64) -> ClusterSpec {
    let mut rng = ChaCha8Rng::seed_from_u64(mix(seed ^ 0xc1_u64 << 32));
    let nodes = 3 + (rng.next_u64() % 3) as usize;
    let voters = if nodes == 5 && rng.next_u64().is_multiple_of(2) { 5 } else { 3 };
    // The offsets topic's replication factor: 1 puts every group on one broker's disk.
    let replication = 1 + (rng.next_u64() % 3) as i32;
    // Retention passes every 1–5 s, so that topics with `retention.bytes` lose segments all
    // through the run.
    let retention_check_ms = 1_000 + (rng.next_u64() % 4_000) as i64;
    // `__consumer_offsets` in segments of 1–8 KiB, so that its commits are compacted (only
    // sealed segments are) under the same faults; drawn from the seed itself, not the stream,
    // so that every other choice stays what it was.
    let offsets_segment_bytes = 1_024 << (mix(seed ^ 0x0ff5) % 4);
    // Leadership given back to preferred replicas every 5–24 s (or never, in one seed of
    // four), so that it moves back under the same faults that moved it away; drawn from the
    // seed itself, as above.
    let leader_rebalance_secs = match mix(seed ^ 0x1ead) % 4 {
        0 => None,
        n => Some((5 << (n - 1)) + mix(seed ^ 0x1eae) % 5),
    };
    // A scrub pass every 5, 10 or 15 s at 64 KiB/s to 1 MiB/s (or none, in one seed of four), so that
    // latent damage is found and repaired under the same faults; drawn from the seed itself.
    let (scrub_interval_ms, scrub_bytes_per_sec) = match mix(seed ^ 0x5c2b) % 4 {
        0 => (0, 1),
        n => (5_000 * n, (64 << 10) << (mix(seed ^ 0x5c2c) % 5)),
    };
    // In one seed of four, client requests held within 1–8 KiB at once on each broker
    // (`queued_max_request_bytes`), so that produces, replicas' fetches and the group's
    // requests wait for one another's bytes under the same faults; drawn from the seed itself.
    let queued_max_request_bytes = match mix(seed ^ 0x9e3b) % 4 {
        0 => 1_024 << (mix(seed ^ 0x9e3c) % 4),
        _ => ClusterSpec::combined(nodes).queued_max_request_bytes,
    };
    ClusterSpec {
        voters,
        replication,
        retention_check_ms,
        offsets_segment_bytes,
        leader_rebalance_secs,
        scrub_interval_ms,
        scrub_bytes_per_sec,
        queued_max_request_bytes,
        ..ClusterSpec::combined(nodes)
    }
}

/// Runs one seed without disk faults: `fault_phase` of faults, then the heal and every checker.
pub fn run(seed: u64, fault_phase: Duration) -> Report {
    run_with(seed, fault_phase, Options::default())
}

/// Runs one seed: `fault_phase` of faults, then the heal and every checker.
pub fn run_with(seed: u64, fault_phase: Duration, options: Options) -> Report {
    let spec = spec_for(seed);
    let mut cluster = Cluster::new(seed, spec);
    let shared: Shared = Arc::default();
    lock(&shared).disk_faults = options.disk_faults;
    let stop_admin = Arc::new(AtomicBool::new(false));
    let mut violations = Vec::new();
    if !cluster.run_until(SETTLE_BOUND, Cluster::settled) {
        violations.push(format!("the new cluster did not settle: {:?}", cluster.unsettled()));
    }
    let mut tasks = Vec::new();
    let addrs: Vec<_> = (0..spec.nodes).map(|ix| cluster.addr(ix)).collect();
    let addrs = Arc::new(addrs);
    let group_ledger = SharedGroup::default();
    {
        let (shared, stop, addrs) =
            (Arc::clone(&shared), Arc::clone(&stop_admin), Arc::clone(&addrs));
        let group = Arc::clone(&group_ledger);
        tasks.push(
            cluster.sim.spawn(cluster.client, "admin", move |env| {
                admin(env, addrs, (shared, group), stop)
            }),
        );
    }
    let stop_producing = Arc::new(AtomicBool::new(false));
    for number in 1..=PRODUCERS {
        let (shared, stop, addrs) =
            (Arc::clone(&shared), Arc::clone(&stop_producing), Arc::clone(&addrs));
        tasks.push(cluster.sim.spawn(cluster.client, "producer", move |env| {
            producer(env, addrs, shared, stop, number)
        }));
    }
    {
        let (shared, stop, addrs) =
            (Arc::clone(&shared), Arc::clone(&stop_producing), Arc::clone(&addrs));
        tasks.push(cluster.sim.spawn(cluster.client, "idempotent-producer", move |env| {
            idempotent_producer(env, addrs, shared, stop)
        }));
    }
    {
        let (shared, stop, addrs) =
            (Arc::clone(&shared), Arc::clone(&stop_producing), Arc::clone(&addrs));
        tasks.push(
            cluster
                .sim
                .spawn(cluster.client, "consumer", move |env| consumer(env, addrs, shared, stop)),
        );
    }
    let topics_now: TopicsNow = {
        let shared = Arc::clone(&shared);
        Arc::new(move || {
            lock(&shared).live_topics().into_iter().map(|t| (t.name, t.partitions)).collect()
        })
    };
    for number in 1..=group::MEMBERS {
        let (group_ledger, topics, stop, addrs) = (
            Arc::clone(&group_ledger),
            Arc::clone(&topics_now),
            Arc::clone(&stop_producing),
            Arc::clone(&addrs),
        );
        tasks.push(cluster.sim.spawn(cluster.client, "group-member", move |env| {
            group::member(env, addrs, group_ledger, topics, stop, number)
        }));
    }
    let faults = FaultMix::from_seed(seed);
    let faults = if options.disk_faults { faults } else { faults.without_disk_faults() };
    let broker_only = cluster.nodes[spec.voters.min(spec.nodes)..].to_vec();
    let mut nemesis = Nemesis::new(seed, faults, cluster.nodes.clone())
        .with_wipeable(broker_only)
        .with_accept_failures(seed);
    let mut damage = Damage::default();
    let mut rng = mix(seed ^ 0xda_a6e);
    let end = cluster.sim.now() + fault_phase;
    while cluster.sim.now() < end {
        let step = nemesis.next_interval().min(end - cluster.sim.now());
        cluster.run_for(step);
        if cluster.sim.now() < end {
            nemesis.step(&cluster.sim);
            rng = mix(rng);
            if options.disk_faults
                && rng.is_multiple_of(damage::DAMAGE_ONE_STEP_IN)
                && damage.count() < damage::DAMAGED_BATCHES_MAX
            {
                damage_one(&cluster, (&shared, &group_ledger), &mut damage, mix(rng));
            }
        }
    }
    nemesis.heal(&cluster.sim);
    if options.disk_faults {
        // Logs (and controllers) a failed write or sync took offline recover on restart.
        for &node in &cluster.nodes {
            cluster.sim.kill(node);
            cluster.sim.start(node);
        }
    }
    stop_admin.store(true, Ordering::Relaxed);
    let healed = cluster.sim.now();
    if cluster.run_until(SETTLE_BOUND, Cluster::settled) {
        tracing::debug!("settled {:?} after the heal", cluster.sim.now() - healed);
    } else {
        violations.push(format!(
            "not settled within {SETTLE_BOUND:?} of the heal: {}",
            cluster.unsettled().unwrap_or_default()
        ));
    }
    // Let the producers write to the settled cluster, then stop every client task.
    cluster.run_for(Duration::from_secs(3));
    stop_producing.store(true, Ordering::Relaxed);
    cluster.run_for(Duration::from_secs(6));
    tasks.iter().for_each(TaskHandle::abort);
    let given_up = cluster.given_up();
    if !given_up.is_empty() && nemesis.wipes() == 0 {
        violations
            .push(format!("partitions without an in-sync replica, no disk replaced: {given_up:?}"));
    }
    if violations.is_empty() {
        violations.extend(final_writes_and_reads(&mut cluster, &shared, &given_up));
        violations.extend(final_convergence(&mut cluster, &shared, &given_up));
        violations.extend(final_folders(&mut cluster));
        if given_up.iter().any(|(t, _)| t == OFFSETS_TOPIC) {
            tracing::info!("the group's checks are skipped: an offsets partition was given up");
        } else {
            violations.extend(final_group(&mut cluster, &group_ledger, &topics_now));
        }
    }
    violations.extend(cluster.violations());
    let ledger = lock(&shared);
    violations.extend(ledger.anomalies.iter().take(20).cloned());
    let (assignments, commits, offset_reads) = group::counts(&group_ledger);
    let counts = format!(
        "{} topics created, {} grown, {} reconfigured, {} moved, {} deleted, {} DeleteRecords answered, {} records acked by all ({} idempotent), {} by the leader, {} reads, {} produce errors, {} corrupt batches caught, {} metadata offsets compared, {assignments} group assignments, {commits} commits acked, {offset_reads} committed offsets read, {} disks replaced, {} partitions given up",
        ledger.creates,
        ledger.grown,
        ledger.reconfigured,
        ledger.reassigned,
        ledger.deletes,
        ledger.record_deletes,
        ledger.acked.len(),
        ledger.acked_idempotent,
        ledger.acked_by_leader,
        ledger.reads,
        ledger.produce_errors,
        ledger.corruption_caught,
        cluster.offsets_watched(),
        nemesis.wipes(),
        given_up.len()
    );
    let counts = if spec.queued_max_request_bytes > 0 {
        let waits: u64 = (0..cluster.nodes.len())
            .filter_map(|ix| cluster.broker(ix))
            .map(|b| b.request_memory_waits())
            .sum();
        format!(
            "{counts}, {waits} request frames waited for request memory (brokers up at the end)"
        )
    } else {
        counts
    };
    Report {
        seed,
        trace_hash: cluster.sim.trace_hash(),
        simulated: cluster.sim.now(),
        shape: match spec.queued_max_request_bytes {
            bytes if bytes > 0 => {
                format!("{} nodes, {} voters, requests within {bytes} B", spec.nodes, spec.voters)
            }
            _ => format!("{} nodes, {} voters", spec.nodes, spec.voters),
        },
        counts,
        acked: ledger.acked.len(),
        faults: fault_log(&nemesis, damage),
        violations,
    }
}

/// Damages a stored batch of a live topic's partition, or of the group's partition of
/// `__consumer_offsets`, on a node, by `pick`, and notes it.
fn damage_one(
    cluster: &Cluster,
    (shared, group): (&Shared, &SharedGroup),
    damage: &mut Damage,
    pick: u64,
) {
    let mut partitions: Vec<(String, i32)> = lock(shared)
        .live_topics()
        .into_iter()
        .flat_map(|t| (0..t.partitions).map(move |p| (t.name.clone(), p)))
        .collect();
    let offsets = weir::groups::partition_for(group::GROUP, super::OFFSETS_TOPIC_PARTITIONS);
    partitions.push((OFFSETS_TOPIC.to_owned(), offsets));
    let ix = (mix(pick) % cluster.nodes.len() as u64) as usize;
    let Some(d) = damage.damage_one(&cluster.sim, cluster.nodes[ix], &partitions, pick) else {
        return;
    };
    if d.tp.0 == OFFSETS_TOPIC {
        damage::note_group_records(&mut lock(group).history, &d.batch);
    } else {
        lock(shared).damaged.entry(d.tp).or_default().push((ix, d.base, d.last));
    }
}

/// The nemesis's faults and the batches damaged, in time order.
fn fault_log(nemesis: &Nemesis, damage: Damage) -> Vec<String> {
    let mut faults = nemesis.log().to_vec();
    faults.extend(damage.log);
    // Every line starts with its time, right-aligned to one width; the sort is stable.
    faults.sort_by_key(|line| line.split_once('s').map(|(at, _)| at.to_owned()));
    faults
}

/// A number below `n` from the task's random stream.
fn below(env: &Env, n: u64) -> u64 {
    env.entropy.next_u64() % n.max(1)
}

/// A client of a random node.
fn any_node(env: &Env, addrs: &[std::net::SocketAddr], name: &str) -> Client {
    let at = below(env, addrs.len() as u64) as usize;
    Client::new(env.clone(), addrs[at], name)
}

/// A random partition of a live topic and its leader's address as `view` names it; with no
/// leader known, `view` is refreshed from a random node and there is no target this time.
async fn target(
    env: &Env,
    addrs: &[std::net::SocketAddr],
    shared: &Shared,
    view: &mut ClusterView,
) -> Option<(TopicState, i32, std::net::SocketAddr)> {
    let live = lock(shared).live_topics();
    let topic = live.get(below(env, live.len() as u64) as usize).cloned()?;
    let partition = below(env, topic.partitions as u64) as i32;
    match view.leader_addr(&topic.name, partition) {
        Some((_, leader)) => Some((topic, partition, leader)),
        None => {
            if let Ok(v) = any_node(env, addrs, "client").cluster_view(None).await {
                *view = v;
            }
            None
        }
    }
}

/// Writes small acks=all batches to random partitions of live topics, each to the partition's
/// leader as a random node's Metadata names it.
async fn producer(
    env: Env,
    addrs: Arc<Vec<std::net::SocketAddr>>,
    shared: Shared,
    stop: Arc<AtomicBool>,
    number: u32,
) {
    let mut view = ClusterView::default();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        env.clock.sleep(Duration::from_millis(20 + below(&env, 200))).await;
        let Some((topic, partition, leader)) = target(&env, &addrs, &shared, &mut view).await
        else {
            continue;
        };
        let records: Vec<(Option<Bytes>, Bytes)> = (0..1 + below(&env, 3))
            .map(|_| {
                seq += 1;
                (None, Bytes::from(format!("p{number}-{seq}")))
            })
            .collect();
        let batch = PartitionBatch { partition, base_sequence: 0, records: records.clone() };
        let mut client = Client::new(env.clone(), leader, "producer");
        let acks = if below(&env, 4) == 0 { Acks::Leader } else { Acks::All };
        match client.produce(&topic.name, acks, None, &[batch]).await {
            Ok(ProduceOutcome::Answered(answers))
                if acks == Acks::Leader && answers[0].error_code == codes::NONE =>
            {
                lock(&shared).acked_by_leader += records.len() as u64;
            }
            Ok(ProduceOutcome::Answered(acks)) if acks[0].error_code == codes::NONE => {
                let mut l = lock(&shared);
                for (i, (_, value)) in records.into_iter().enumerate() {
                    let key = (topic.name.clone(), partition, acks[0].base_offset + i as i64);
                    if let Some(before) = l.acked.insert(key.clone(), value.clone()) {
                        l.anomalies.push(format!(
                            "{}-{}@{}: acked twice, {before:?} then {value:?}",
                            key.0, key.1, key.2
                        ));
                    }
                    if let Some(seen) = l.seen.get(&key).cloned()
                        && seen != value
                    {
                        l.anomalies.push(format!(
                            "{}-{}@{}: read {seen:?} before {value:?} was acked there",
                            key.0, key.1, key.2
                        ));
                    }
                }
            }
            _ => {
                lock(&shared).produce_errors += 1;
                view = ClusterView::default();
            }
        }
    }
}

/// Attempts at one idempotent batch before it is given up (and never sent again).
const IDEMPOTENT_ATTEMPTS_MAX: u32 = 12;
/// Prefix of the idempotent producer's values.
const IDEMPOTENT_PREFIX: &str = "i-";

/// An idempotent producer: an id from InitProducerId, per-partition sequences, and every
/// failed or unanswered batch retried with the same sequence — to whichever broker leads the
/// partition by then — as Kafka's producer does. A batch it gives up on (too many attempts, or
/// an answer that ends the sequence) is never sent again, and the producer starts over with a
/// fresh id, so each value is only ever sent under one (producer id, sequence): the checker
/// demands that no value appears twice in a partition.
async fn idempotent_producer(
    env: Env,
    addrs: Arc<Vec<std::net::SocketAddr>>,
    shared: Shared,
    stop: Arc<AtomicBool>,
) {
    let mut view = ClusterView::default();
    let mut identity = None;
    let mut sequences: BTreeMap<(String, i32), i32> = BTreeMap::new();
    let mut next = 0u64;
    while !stop.load(Ordering::Relaxed) {
        env.clock.sleep(Duration::from_millis(20 + below(&env, 200))).await;
        let Some(id) = identity else {
            identity = any_node(&env, &addrs, "idempotent").init_producer_id(None).await.ok();
            sequences.clear();
            continue;
        };
        let Some((topic, partition, _)) = target(&env, &addrs, &shared, &mut view).await else {
            continue;
        };
        let key = (topic.name.clone(), partition);
        let records: Vec<(Option<Bytes>, Bytes)> = (0..1 + below(&env, 3))
            .map(|_| {
                next += 1;
                (None, Bytes::from(format!("{IDEMPOTENT_PREFIX}{next}")))
            })
            .collect();
        let batch = PartitionBatch {
            partition,
            base_sequence: sequences.get(&key).copied().unwrap_or(0),
            records: records.clone(),
        };
        let mut done = false;
        for _ in 0..IDEMPOTENT_ATTEMPTS_MAX {
            let Some((_, leader)) = view.leader_addr(&topic.name, partition) else {
                if let Ok(v) = any_node(&env, &addrs, "idempotent").cluster_view(None).await {
                    view = v;
                }
                env.clock.sleep(Duration::from_millis(100)).await;
                continue;
            };
            let mut client = Client::new(env.clone(), leader, "idempotent");
            let batches = std::slice::from_ref(&batch);
            match client.produce(&topic.name, Acks::All, Some(id), batches).await {
                Ok(ProduceOutcome::Answered(acks)) if acks[0].error_code == codes::NONE => {
                    let mut l = lock(&shared);
                    for (i, (_, value)) in records.iter().enumerate() {
                        let at = (topic.name.clone(), partition, acks[0].base_offset + i as i64);
                        l.acked.insert(at, value.clone());
                    }
                    l.acked_idempotent += records.len() as u64;
                    *sequences.entry(key.clone()).or_insert(0) += records.len() as i32;
                    done = true;
                    break;
                }
                Ok(ProduceOutcome::Answered(acks))
                    if [
                        codes::OUT_OF_ORDER_SEQUENCE_NUMBER,
                        codes::UNKNOWN_PRODUCER_ID,
                        codes::INVALID_PRODUCER_EPOCH,
                    ]
                    .contains(&acks[0].error_code) =>
                {
                    break;
                }
                _ => {
                    lock(&shared).produce_errors += 1;
                    view = ClusterView::default();
                    env.clock.sleep(Duration::from_millis(100)).await;
                }
            }
        }
        if !done {
            // Never send these values again: start over under a fresh id.
            identity = None;
        }
    }
}

/// Reads random partitions of live topics from their leaders, from where it last stopped.
async fn consumer(
    env: Env,
    addrs: Arc<Vec<std::net::SocketAddr>>,
    shared: Shared,
    stop: Arc<AtomicBool>,
) {
    let mut view = ClusterView::default();
    let mut positions: BTreeMap<(String, i32), i64> = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        env.clock.sleep(Duration::from_millis(20 + below(&env, 200))).await;
        let Some((topic, partition, leader)) = target(&env, &addrs, &shared, &mut view).await
        else {
            continue;
        };
        let at = positions.entry((topic.name.clone(), partition)).or_insert(0);
        let want = FetchWant { topic: topic.name.clone(), partition, offset: *at };
        let mut client = Client::new(env.clone(), leader, "consumer");
        let sent = env.clock.now();
        match client.fetch(&[want], Duration::from_millis(200)).await {
            Ok(parts) => {
                for p in parts {
                    if p.error_code == codes::OFFSET_OUT_OF_RANGE && p.log_start_offset > *at {
                        // Deleted below the log start: go on from there.
                        *at = p.log_start_offset;
                        continue;
                    }
                    if p.error_code != codes::NONE {
                        view = ClusterView::default();
                        continue;
                    }
                    let mut l = lock(&shared);
                    let tp = (p.topic.clone(), p.partition);
                    if let Some(low) = l.deleted_before(&tp, sent)
                        && let Some(r) = p.records.iter().find(|r| r.offset < low)
                    {
                        let message = format!(
                            "{}-{}@{}: read after DeleteRecords answered a low watermark of {low}",
                            p.topic, p.partition, r.offset
                        );
                        l.anomalies.push(message);
                    }
                    if let Some(c) = p.corrupt {
                        if l.disk_faults {
                            l.corruption_caught += 1;
                        } else {
                            l.anomalies.push(format!(
                                "{}-{}: corrupt batch read: {c}",
                                p.topic, p.partition
                            ));
                        }
                    }
                    for r in p.records {
                        *at = r.offset + 1;
                        l.read(
                            (p.topic.clone(), p.partition, r.offset),
                            r.value.unwrap_or_default(),
                        );
                    }
                }
            }
            Err(_) => view = ClusterView::default(),
        }
    }
}
