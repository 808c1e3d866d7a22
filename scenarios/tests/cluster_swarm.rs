//! The cluster swarm: 3–5 nodes (3 or 5 metadata voters, the rest broker-only) under every
//! node and network fault while topics are created and deleted and producers and a consumer
//! run. Metadata must never split (no two nodes hold different images at one offset, no image
//! goes back), the cluster must settle within a bound after the heal with every partition led
//! by a live broker, every acknowledged record must be read back at its offset, and every
//! node's disk must hold exactly the partitions the image gives it. A failure prints the seed
//! and the command that replays it; `ci/sweep` runs more seeds.

use std::time::Duration;

use weir_sim::workload::cluster::swarm;

/// Seeds in the default test run.
const SEEDS: u64 = 500;
/// Simulated time under faults per seed.
const FAULT_PHASE: Duration = Duration::from_secs(30);

fn replay(seed: u64) -> String {
    format!(
        "cargo run -p weir-sim --release -- --seed {seed:#x} --workload cluster --fault-secs {} --verbose",
        FAULT_PHASE.as_secs()
    )
}

#[test]
fn cluster_metadata_never_splits_and_every_partition_gets_a_live_leader() {
    let mut failures = Vec::new();
    let (mut compared, mut acked) = (0, 0);
    for seed in 0..SEEDS {
        let report = swarm::run(seed, FAULT_PHASE);
        compared += usize::from(!report.faults.is_empty());
        acked += report.acked;
        if !report.violations.is_empty() {
            let failure = format!(
                "seed {seed:#x} FAILED ({})\n    {}\n  replay: {}",
                report.shape,
                report.violations.join("\n    "),
                replay(seed)
            );
            println!("{failure}");
            failures.push(failure);
        }
    }
    assert!(compared > SEEDS as usize / 2, "the nemesis injected faults in only {compared} seeds");
    assert!(acked > SEEDS as usize * 100, "only {acked} records acknowledged in {SEEDS} seeds");
    assert!(
        failures.is_empty(),
        "{} of {SEEDS} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_same_seed_gives_the_same_cluster_trace() {
    for seed in [7, 0xc1u64, 0x5eed] {
        let first = swarm::run(seed, FAULT_PHASE);
        let second = swarm::run(seed, FAULT_PHASE);
        assert_eq!(first.trace_hash, second.trace_hash, "seed {seed:#x}: replay {}", replay(seed));
        assert_eq!(first.counts, second.counts);
    }
}

/// Seeds of the swarm with disk faults in the default test run.
const DISK_FAULT_SEEDS: std::ops::Range<u64> = 10_000..10_200;

#[test]
fn cluster_survives_disk_faults_too() {
    let options = swarm::Options { disk_faults: true };
    let mut failures = Vec::new();
    for seed in DISK_FAULT_SEEDS {
        let report = swarm::run_with(seed, FAULT_PHASE, options);
        if !report.violations.is_empty() {
            let failure = format!(
                "seed {seed:#x} FAILED ({})\n    {}\n  replay: {} --disk-faults",
                report.shape,
                report.violations.join("\n    "),
                replay(seed)
            );
            println!("{failure}");
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{} seeds failed:\n{}", failures.len(), failures.join("\n"));
}
