//! The single-node broker workload: one host runs a Weir broker; one or two client hosts run
//! producers (idempotent and not, acks=1 and acks=all) and a consumer group, all through the
//! simulated Kafka client in [`crate::client`]. The nemesis crashes, power-fails, pauses and
//! skews the broker and cuts, clogs and resets its links to the clients; with disk faults it also
//! fails and corrupts the broker's disk operations and damages up to three stored batches in
//! place (latent sector errors, see [`damage`]), of the workload's topics or of the group's
//! partition of `__consumer_offsets` (whose loss the group's checkers excuse as far as it
//! goes). Then everything heals,
//! clients drain, the broker crashes once more and restarts, a fresh client proves it takes
//! writes again and reads every partition from the start, and the checkers in
//! [`crate::checker`] judge the recorded history.
//!
//! Shape per seed (printed in the report): 1–2 client hosts, 2–4 producers, 2–3 consumers in one
//! group, topic `events` (3 partitions, `flush.policy=ack`) and, on half the seeds,
//! `events-interval` (3 partitions, `flush.policy=interval`).

mod consumer;
mod finale;
mod producer;
pub mod setup;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::io::TaskHandle;
use weir::topics::OFFSETS_TOPIC;

use crate::checker::{self, History};
use crate::nemesis::{FaultMix, Nemesis};
use crate::sim::{Host, Sim};
use crate::workload::damage::{self, Damage};
use crate::world::lock;

pub use super::{Options, Report};

pub use setup::{Shape, TopicSpec};

/// The broker's client port.
pub const BROKER_PORT: u16 = 9092;
/// The consumer group.
pub const GROUP: &str = "weir-sim";
/// How long clients run against a healed broker before producers stop.
pub const DRAIN_PRODUCING: Duration = Duration::from_secs(8);
/// How long producers may take to settle their last batch after being told to stop.
pub const DRAIN_SETTLE_MAX: Duration = Duration::from_secs(30);
/// How long consumers keep reading after producers stopped.
pub const DRAIN_CONSUMING: Duration = Duration::from_secs(4);
/// How long consumers may take to commit and leave after being told to stop.
pub const DRAIN_LEAVE_MAX: Duration = Duration::from_secs(15);
/// Within how long of the final restart every partition must take a write again.
pub const RECOVERY_BOUND: Duration = Duration::from_secs(20);
/// How long the final read may take.
pub const FINAL_READ_LIMIT: Duration = Duration::from_secs(60);

/// What every client task shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) history: Arc<Mutex<History>>,
    pub(crate) broker: SocketAddr,
    pub(crate) topics: Arc<Vec<TopicSpec>>,
    pub(crate) stop_producing: Arc<AtomicBool>,
    pub(crate) stop_consuming: Arc<AtomicBool>,
    /// Producer tasks still running.
    pub(crate) producers_live: Arc<AtomicUsize>,
    /// Consumer tasks still running.
    pub(crate) consumers_live: Arc<AtomicUsize>,
    /// Whether the broker's disk may corrupt reads (then a client catching a bad CRC is the
    /// system working, not a violation).
    pub(crate) disk_faults: bool,
}

impl Shared {
    /// Notes a batch that failed its checks at a client: expected under disk faults (the CRC
    /// did its job), a violation otherwise.
    pub(crate) fn corrupt_batch(&self, what: String) {
        self.with_history(|h| {
            if self.disk_faults {
                h.corruption_caught += 1;
            } else {
                h.anomalies.push(what);
            }
        });
    }

    /// Records in the history.
    pub(crate) fn with_history<T>(&self, f: impl FnOnce(&mut History) -> T) -> T {
        f(&mut lock(&self.history))
    }

    /// Every partition of every topic.
    pub(crate) fn partitions(&self) -> Vec<(String, i32)> {
        self.topics
            .iter()
            .flat_map(|t| (0..t.partitions).map(move |p| (t.name.clone(), p)))
            .collect()
    }
}

/// Counts a client task as live until dropped (a task that ends or is dropped).
pub(crate) struct LiveGuard(Arc<AtomicUsize>);

impl LiveGuard {
    pub(crate) fn new(live: &Arc<AtomicUsize>) -> LiveGuard {
        live.fetch_add(1, Ordering::Relaxed);
        LiveGuard(Arc::clone(live))
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs one seed with the default options (no disk faults).
pub fn run(seed: u64, fault_phase: Duration) -> Report {
    run_with(seed, fault_phase, Options::default())
}

/// Runs one seed: clients under faults for `fault_phase`, then heal, drain, a last crash and
/// restart, liveness, the final read, and every checker.
pub fn run_with(seed: u64, fault_phase: Duration, options: Options) -> Report {
    let sim = Sim::new(seed);
    let shape = Shape::from_seed(seed);
    let broker = sim.add_host("broker", setup::broker_boot(&shape));
    sim.set_disk_faults(broker, shape.disk_baseline());
    let clients: Vec<Host> =
        (0..shape.client_hosts).map(|i| sim.add_client(&format!("client{i}"))).collect();
    let shared = Shared {
        history: Arc::new(Mutex::new(History::default())),
        broker: SocketAddr::new(sim.ip(broker), BROKER_PORT),
        topics: Arc::new(shape.topics.clone()),
        stop_producing: Arc::new(AtomicBool::new(false)),
        stop_consuming: Arc::new(AtomicBool::new(false)),
        producers_live: Arc::new(AtomicUsize::new(0)),
        consumers_live: Arc::new(AtomicUsize::new(0)),
        disk_faults: options.disk_faults,
    };
    setup::record_shape(&shared, &shape);
    let mut violations = Vec::new();
    let mut tasks = Vec::new();
    match setup::create_topics(&sim, clients[0], &shared) {
        Ok(()) => tasks = setup::spawn_clients(&sim, &clients, &shared, &shape),
        Err(e) => violations.push(format!("setup: {e}")),
    }
    let mix = FaultMix::from_seed(seed);
    let mix = if options.disk_faults { mix } else { mix.without_disk_faults() };
    let mut nemesis = Nemesis::new(seed, mix, vec![broker])
        .with_peers(clients.clone())
        .with_disk_baseline(shape.disk_baseline())
        .with_accept_failures(seed);
    let mut damage = Damage::default();
    fault_phase_run(&sim, (&mut nemesis, &mut damage, broker), &shared, fault_phase, seed);
    nemesis.heal(&sim);
    drain(&sim, &shared);
    // Whatever is still running (a producer deep in retries) stops here, before the final
    // crash and read: what it had in flight stays indeterminate.
    tasks.iter().for_each(TaskHandle::abort);
    finale::crash_and_restart(&sim, broker, &shared, seed);
    violations.extend(finale::liveness(&sim, clients[0], &shared));
    violations.extend(finale::final_read(&sim, clients[0], &shared));
    violations.extend(finale::final_offsets(&sim, clients[0], &shared));
    let history = lock(&shared.history);
    violations.extend(checker::check(&history).into_lines());
    Report {
        seed,
        trace_hash: sim.trace_hash(),
        simulated: sim.now(),
        shape: shape.describe(),
        counts: finale::counts(&history),
        acked: finale::acked_records(&history),
        faults: fault_log(&nemesis, damage),
        violations,
    }
}

/// Runs the nemesis for `duration`, recording the broker's power failures in the history.
/// With disk faults on, one step in [`damage::DAMAGE_ONE_STEP_IN`] also damages a stored batch
/// (see [`damage`]).
fn fault_phase_run(
    sim: &Sim,
    (nemesis, damage, broker): (&mut Nemesis, &mut Damage, Host),
    shared: &Shared,
    duration: Duration,
    seed: u64,
) {
    let mut rng = crate::trace::mix(seed ^ 0xda_a6e);
    let end = sim.now() + duration;
    while sim.now() < end {
        let step = nemesis.next_interval();
        sim.run_for(step.min(end - sim.now()));
        let before = nemesis.power_failures();
        nemesis.step(sim);
        for _ in before..nemesis.power_failures() {
            shared.with_history(History::power_failure);
        }
        rng = crate::trace::mix(rng);
        if shared.disk_faults
            && rng.is_multiple_of(damage::DAMAGE_ONE_STEP_IN)
            && damage.count() < damage::DAMAGED_BATCHES_MAX
        {
            let pick = crate::trace::mix(rng);
            let mut targets = shared.partitions();
            targets.push(offsets_partition());
            if let Some(d) = damage.damage_one(sim, broker, &targets, pick) {
                shared.with_history(|h| note_damage(h, d));
            }
        }
    }
}

/// The partition of `__consumer_offsets` that holds [`GROUP`]'s records.
fn offsets_partition() -> (String, i32) {
    let partitions = setup::OFFSETS_TOPIC_PARTITIONS;
    (OFFSETS_TOPIC.to_owned(), weir::groups::partition_for(GROUP, partitions))
}

/// Records a damaged batch: in a topic of the workload, its offsets; in `__consumer_offsets`,
/// the group records it held.
fn note_damage(history: &mut History, d: damage::Damaged) {
    if d.tp.0 == OFFSETS_TOPIC {
        damage::note_group_records(history, &d.batch);
    } else {
        history.damaged.entry(d.tp).or_default().insert(d.base, d.last);
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

/// Lets clients work against the healed broker, then stops producers (waiting for their last
/// batch to settle) and consumers (waiting for them to commit and leave).
fn drain(sim: &Sim, shared: &Shared) {
    sim.run_for(DRAIN_PRODUCING);
    shared.stop_producing.store(true, Ordering::Relaxed);
    sim.run_until(DRAIN_SETTLE_MAX, || shared.producers_live.load(Ordering::Relaxed) == 0);
    sim.run_for(DRAIN_CONSUMING);
    shared.stop_consuming.store(true, Ordering::Relaxed);
    sim.run_until(DRAIN_LEAVE_MAX, || shared.consumers_live.load(Ordering::Relaxed) == 0);
}
