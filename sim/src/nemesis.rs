//! The nemesis: random faults drawn from a per-seed fault mix (swarm testing — each seed
//! enables a different subset of faults at different rates, so rare combinations get explored).
//!
//! It is driven from outside the executor: the driver runs the simulation for a random interval,
//! then asks the nemesis for one step, and at the end heals everything for the liveness phase.

use std::collections::BTreeMap;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::disk::DiskFaults;
use crate::net::AcceptFault;
use crate::node::NodeStatus;
use crate::sim::{Host, Sim};
use crate::trace::mix;

/// Most bytes a disk that fills up still takes.
const DISK_FULL_ROOM_MAX: u64 = 8 << 10;
/// Most accepts a host made to fail along with a reset of its connections fails.
const ACCEPT_FAILURES_MAX: u64 = 20;

/// The relative weights of each fault for one seed (0 disables a fault).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultMix {
    /// Kill a host's process (page cache survives).
    pub kill: u32,
    /// Cut a host's power (unsynced writes lost or torn).
    pub power_fail: u32,
    /// Pause a host for a while.
    pub pause: u32,
    /// Partition two sets of hosts, both ways.
    pub partition: u32,
    /// Cut one direction between two hosts.
    pub one_way: u32,
    /// Clog a link.
    pub clog: u32,
    /// Reset the connections between two hosts.
    pub reset: u32,
    /// Jump or drift a host's wall clock.
    pub clock: u32,
    /// Turn on disk faults on a host for a while (errors and corruption, or a full disk).
    pub disk: u32,
    /// Heal everything (partitions, clogs, pauses; restart down hosts).
    pub heal: u32,
    /// Replace a host's disk with an empty one and restart it (only hosts
    /// [`Nemesis::with_wipeable`] names).
    pub wipe: u32,
    /// Mean time between faults.
    pub interval_mean: Duration,
}

impl FaultMix {
    /// Draws a fault mix from `seed`: each fault is off with probability 1/3.
    pub fn from_seed(seed: u64) -> FaultMix {
        let mut rng = ChaCha8Rng::seed_from_u64(mix(seed ^ 0xfa17));
        let draw = |rng: &mut ChaCha8Rng, scale: u32| {
            if rng.next_u32().is_multiple_of(3) { 0 } else { 1 + rng.next_u32() % scale }
        };
        let mut weight = |scale: u32| draw(&mut rng, scale);
        let mut mix = FaultMix {
            kill: weight(10),
            power_fail: weight(10),
            pause: weight(5),
            partition: weight(10),
            one_way: weight(5),
            clog: weight(5),
            reset: weight(5),
            clock: weight(5),
            disk: weight(5),
            heal: 5 + weight(10),
            interval_mean: Duration::ZERO,
            wipe: 0,
        };
        // Drawn in this order so that the older faults' weights and the interval stay what
        // they were for every seed before disks could be replaced.
        mix.interval_mean = Duration::from_millis(100 + u64::from(rng.next_u32() % 2_000));
        mix.wipe = draw(&mut rng, 2);
        mix
    }

    /// A mix without disk-content faults, for workloads that cannot survive them.
    pub fn without_disk_faults(mut self) -> FaultMix {
        self.disk = 0;
        self
    }

    fn total(&self) -> u32 {
        self.kill
            + self.power_fail
            + self.pause
            + self.partition
            + self.one_way
            + self.clog
            + self.reset
            + self.clock
            + self.disk
            + self.heal
            + self.wipe
    }
}

/// Injects faults into a set of target hosts.
pub struct Nemesis {
    rng: ChaCha8Rng,
    mix: FaultMix,
    targets: Vec<Host>,
    peers: Vec<Host>,
    disk_baseline: DiskFaults,
    /// Hosts whose disk is full, and its capacity: a restart does not make room.
    full: BTreeMap<Host, u64>,
    wipeable: Vec<Host>,
    log: Vec<String>,
    power_failures: u64,
    wipes: u64,
    /// Draws whether a reset also makes a host fail accepts (see
    /// [`Nemesis::with_accept_failures`]); a stream of its own, so that the faults drawn for a
    /// seed stay what they were without it.
    accept_failures: Option<ChaCha8Rng>,
}

impl Nemesis {
    /// A nemesis for `targets` (client hosts are usually left out) with its own random stream.
    pub fn new(seed: u64, mix: FaultMix, targets: Vec<Host>) -> Nemesis {
        Nemesis {
            rng: ChaCha8Rng::seed_from_u64(mix_seed(seed)),
            mix,
            targets,
            peers: Vec::new(),
            disk_baseline: DiskFaults::default(),
            full: BTreeMap::new(),
            wipeable: Vec::new(),
            log: Vec::new(),
            power_failures: 0,
            wipes: 0,
            accept_failures: None,
        }
    }

    /// A third of the connection resets also make the target host fail its next 1 to
    /// [`ACCEPT_FAILURES_MAX`] accepts, so that the connections made again meet a listener that
    /// must not give up: in three cases of four as a process out of file descriptors fails
    /// them (the connection waits), else by resetting the connection being accepted. For
    /// workloads whose servers retry failed accepts.
    pub fn with_accept_failures(mut self, seed: u64) -> Nemesis {
        self.accept_failures = Some(ChaCha8Rng::seed_from_u64(mix_seed(seed) ^ 0xacce));
        self
    }

    /// After a reset of `host`'s connections: maybe fail its next accepts, and say so.
    fn maybe_fail_accepts(&mut self, sim: &Sim, host: Host) -> String {
        let Some(rng) = self.accept_failures.as_mut() else { return String::new() };
        let draw = rng.next_u64();
        if !draw.is_multiple_of(3) {
            return String::new();
        }
        let count = 1 + (draw >> 8) % ACCEPT_FAILURES_MAX;
        let fault = if (draw >> 40).is_multiple_of(4) {
            AcceptFault::Aborted
        } else {
            AcceptFault::OutOfDescriptors
        };
        sim.fail_accepts(host, fault, count as u32);
        format!(", {} fails its next {count} accepts ({fault:?})", sim.name(host))
    }

    /// Network faults (partitions, one-way cuts, clogs, resets) then fall between a target and
    /// one of `peers`, in either direction, instead of among the targets; process, clock and
    /// disk faults still hit targets only. This is how clients get cut off from a broker without
    /// being crashed themselves.
    pub fn with_peers(mut self, peers: Vec<Host>) -> Nemesis {
        self.peers = peers;
        self
    }

    /// Disks go back to `faults` rather than to perfect when disk faults end (a restart, a
    /// heal): a baseline such as ordinary sync latency, which widens the windows between a
    /// write and its durability that a fault can fall into.
    pub fn with_disk_baseline(mut self, faults: DiskFaults) -> Nemesis {
        self.disk_baseline = faults;
        self
    }

    /// The disks of `hosts` may be replaced by empty ones (the mix's `wipe`): hosts whose
    /// data the system must be able to lose, such as broker-only nodes. (Controller voters are
    /// left out: a voter back empty votes only for empty candidates, which covers one at a
    /// time, but a majority of voters replaced before catching up loses the metadata log.)
    pub fn with_wipeable(mut self, hosts: Vec<Host>) -> Nemesis {
        self.wipeable = hosts;
        self
    }

    /// How many disks the nemesis has replaced so far.
    pub fn wipes(&self) -> u64 {
        self.wipes
    }

    /// How many power failures the nemesis has caused so far.
    pub fn power_failures(&self) -> u64 {
        self.power_failures
    }

    /// The mix in use.
    pub fn mix(&self) -> &FaultMix {
        &self.mix
    }

    /// What the nemesis did, in order, with simulated times.
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// How long to run before the next step: exponential around the mix's mean.
    pub fn next_interval(&mut self) -> Duration {
        let uniform = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mean = self.mix.interval_mean.as_secs_f64();
        Duration::from_secs_f64((-mean * (1.0 - uniform).ln()).min(mean * 10.0))
    }

    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.rng.next_u64()) * n as u128) >> 64) as usize
    }

    fn pick(&mut self) -> Host {
        let at = self.below(self.targets.len());
        self.targets[at]
    }

    /// Injects one fault.
    pub fn step(&mut self, sim: &Sim) {
        let mut m = self.mix.clone();
        if self.wipeable.is_empty() {
            m.wipe = 0;
        }
        let total = m.total();
        if total == 0 || self.targets.is_empty() {
            return;
        }
        let mut roll = (self.rng.next_u32() % total) as i64;
        let weights = [
            m.kill,
            m.power_fail,
            m.pause,
            m.partition,
            m.one_way,
            m.clog,
            m.reset,
            m.clock,
            m.disk,
            m.heal,
            m.wipe,
        ];
        let mut choice = 9;
        for (i, w) in weights.iter().enumerate() {
            roll -= i64::from(*w);
            if roll < 0 {
                choice = i;
                break;
            }
        }
        if choice == 10 {
            let at = self.below(self.wipeable.len());
            let host = self.wipeable[at];
            self.wipes += 1;
            sim.wipe(host);
            self.full.remove(&host);
            sim.set_disk_faults(host, self.disk_baseline.clone());
            sim.start(host);
            self.log.push(format!(
                "{:>10.3}s new disk+restart {}",
                sim.now().as_secs_f64(),
                sim.name(host)
            ));
            return;
        }
        let host = self.pick();
        let name = sim.name(host);
        if (3..=6).contains(&choice) && !self.peers.is_empty() {
            let what = self.peer_fault(sim, choice, host);
            self.log.push(format!("{:>10.3}s {what}", sim.now().as_secs_f64()));
            return;
        }
        let what = match choice {
            0 => self.restart_after(sim, host, false),
            1 => self.restart_after(sim, host, true),
            2 => {
                if sim.status(host) == NodeStatus::Up {
                    sim.pause(host);
                }
                format!("pause {name}")
            }
            3 => {
                let split = 1 + self.below(self.targets.len().max(2) - 1);
                let mut hosts = self.targets.clone();
                for i in (1..hosts.len()).rev() {
                    let j = self.below(i + 1);
                    hosts.swap(i, j);
                }
                let (a, b) = hosts.split_at(split.min(hosts.len()));
                sim.partition(a, b);
                format!("partition {:?} | {:?}", names(sim, a), names(sim, b))
            }
            4 => {
                let other = self.pick();
                sim.partition_one_way(host, other);
                format!("one-way {name} -/-> {}", sim.name(other))
            }
            5 => {
                let other = self.pick();
                sim.clog(host, other);
                format!("clog {name} -> {}", sim.name(other))
            }
            6 => {
                let other = self.pick();
                sim.reset_connections(host, other);
                let accepts = self.maybe_fail_accepts(sim, host);
                format!("reset {name} <-> {}{accepts}", sim.name(other))
            }
            7 => {
                if self.rng.next_u32().is_multiple_of(2) {
                    let jump = (self.rng.next_u64() % 120_000) as i64 - 60_000;
                    sim.clock_jump(host, jump);
                    format!("clock {name} jumps {jump} ms")
                } else {
                    let drift = (self.rng.next_u64() % 2_000) as i64 - 1_000;
                    sim.clock_drift(host, drift);
                    format!("clock {name} drifts {drift} ppm")
                }
            }
            8 if self.rng.next_u32().is_multiple_of(3) => {
                // The disk fills up: a little room is left, then every write that grows a
                // file fails with `StorageFull` until the heal.
                let room = u64::from(self.rng.next_u32()) % DISK_FULL_ROOM_MAX;
                let capacity = sim.disk_usage(host) + room;
                self.full.insert(host, capacity);
                sim.set_disk_faults(host, self.restart_faults(host));
                format!("disk of {name} full at {capacity} bytes")
            }
            8 => {
                let faults = DiskFaults {
                    read_error: 0.01,
                    write_error: 0.01,
                    sync_error: 0.02,
                    read_corruption: 0.01,
                    latency_max: Duration::from_millis(20),
                    capacity_bytes: self.full.get(&host).copied(),
                    ..DiskFaults::default()
                };
                sim.set_disk_faults(host, faults);
                format!("disk faults on {name}")
            }
            _ => {
                self.heal(sim);
                "heal".to_owned()
            }
        };
        self.log.push(format!("{:>10.3}s {what}", sim.now().as_secs_f64()));
    }

    /// A network fault between target `host` and a random peer: `choice` is the fault's index
    /// in the mix (3 partition, 4 one-way, 5 clog, 6 reset).
    fn peer_fault(&mut self, sim: &Sim, choice: usize, host: Host) -> String {
        let at = self.below(self.peers.len());
        let peer = self.peers[at];
        let (name, other) = (sim.name(host), sim.name(peer));
        let outbound = self.rng.next_u32().is_multiple_of(2);
        let (from, to) = if outbound { (host, peer) } else { (peer, host) };
        let (from_name, to_name) = (sim.name(from), sim.name(to));
        match choice {
            3 => {
                sim.partition(&[host], &[peer]);
                format!("partition {name} | {other}")
            }
            4 => {
                sim.partition_one_way(from, to);
                format!("one-way {from_name} -/-> {to_name}")
            }
            5 => {
                sim.clog(from, to);
                format!("clog {from_name} -> {to_name}")
            }
            _ => {
                sim.reset_connections(host, peer);
                let accepts = self.maybe_fail_accepts(sim, host);
                format!("reset {name} <-> {other}{accepts}")
            }
        }
    }

    /// Kills or power-fails a host and starts it again at once (a crash-restart).
    fn restart_after(&mut self, sim: &Sim, host: Host, power: bool) -> String {
        if power {
            self.power_failures += 1;
            sim.power_fail(host);
        } else {
            sim.kill(host);
        }
        sim.set_disk_faults(host, self.restart_faults(host));
        sim.start(host);
        format!("{} {}", if power { "power-fail+restart" } else { "kill+restart" }, sim.name(host))
    }

    /// The disk faults a host restarts with: the baseline, and its full disk if it has one (a
    /// restart clears injected errors, not a lack of room).
    fn restart_faults(&self, host: Host) -> DiskFaults {
        DiskFaults { capacity_bytes: self.full.get(&host).copied(), ..self.disk_baseline.clone() }
    }

    /// Ends every fault: heals the network, resumes paused hosts, clears disk faults (making
    /// room on full disks) and starts hosts that are down.
    pub fn heal(&mut self, sim: &Sim) {
        sim.heal_all();
        self.full.clear();
        for &host in &self.targets {
            sim.set_disk_faults(host, self.disk_baseline.clone());
            match sim.status(host) {
                NodeStatus::Paused => sim.resume(host),
                NodeStatus::Down => sim.start(host),
                NodeStatus::Up => {}
            }
        }
    }
}

fn mix_seed(seed: u64) -> u64 {
    mix(seed ^ 0x006e_656d_6573_6973)
}

fn names(sim: &Sim, hosts: &[Host]) -> Vec<String> {
    hosts.iter().map(|&h| sim.name(h)).collect()
}
