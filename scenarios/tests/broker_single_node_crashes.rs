//! Fault scenario: one Weir broker serves producers (idempotent and plain, acks=1 and acks=all)
//! and a consumer group over the Kafka protocol while it is killed, power-failed, paused and
//! clock-skewed, and its links to the clients are cut, clogged and reset. After healing, a last
//! crash and a restart, every checker must pass: acknowledged writes survive, offsets are dense
//! and in producer order, idempotent producers never duplicate, no offset shows two records,
//! committed offsets never regress on their own, and each partition has one owner per
//! generation. A failure prints the seed and the command that replays it.

use std::time::Duration;

use weir_scenarios::assert_seeds_pass;
use weir_sim::workload::broker;

/// Seeds in the default test run (`weir-sim --workload broker --seeds A..B` runs more).
const SEEDS: u64 = 200;
/// Simulated time under faults per seed.
const FAULT_PHASE: Duration = Duration::from_secs(20);
/// Seeds run twice to prove the trace hash is a function of the seed.
const DETERMINISM_SEEDS: [u64; 3] = [3, 0xbeef, 0x5eed_0001];

fn replay(seed: u64) -> String {
    format!(
        "cargo run -p weir-sim --release -- --seed {seed:#x} --workload broker --fault-secs {} --verbose",
        FAULT_PHASE.as_secs()
    )
}

#[test]
fn single_broker_keeps_its_promises_across_crashes_power_failures_and_bad_links() {
    let run = |seed| {
        let report = broker::run(seed, FAULT_PHASE);
        (report.shape, report.violations)
    };
    assert_seeds_pass(0..SEEDS, run, replay);
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for seed in DETERMINISM_SEEDS {
        let first = broker::run(seed, FAULT_PHASE);
        let second = broker::run(seed, FAULT_PHASE);
        assert_eq!(
            first.trace_hash,
            second.trace_hash,
            "seed {seed:#x} replayed differently\n  replay: {}",
            replay(seed)
        );
        assert_eq!(first.counts, second.counts);
        assert_eq!(first.violations, second.violations);
    }
}
