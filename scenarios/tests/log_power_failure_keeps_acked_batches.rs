//! Fault scenario: a partition log is appended under `flush.policy=ack` while its host is killed
//! or power-failed at random instants and its disk tears writes, fails syncs, corrupts reads and
//! flips bits of synced batches for good (latent sector errors, below the last checkpoint).
//! Every acknowledged batch must survive with its bytes and offset, but a damaged one, which must
//! fail its reads and nothing else's; nothing corrupt may be read; no offset may ever show two
//! different batches.

use std::time::Duration;

use weir_sim::workload::log;

/// Seeds in the default test run (`ci/sweep-log` runs more).
const SEEDS: u64 = 500;

#[test]
fn acked_batches_survive_kills_power_failures_and_disk_faults() {
    let mut failures = Vec::new();
    let mut acked = 0;
    for seed in 0..SEEDS {
        let report = log::run(seed, Duration::from_secs(20));
        acked += report.acked;
        if !report.violations.is_empty() {
            failures.push(format!(
                "seed {seed:#x}: {:?}\n  replay: cargo run -p weir-sim --release -- --seed {seed:#x} --workload log --fault-secs 20 --verbose",
                report.violations
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        acked > SEEDS as usize * 100,
        "the workload acknowledged too little to prove anything: {acked}"
    );
}
