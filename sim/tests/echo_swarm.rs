//! The foundation workload over many seeds: echo integrity and acknowledged durability hold
//! under every fault the nemesis draws. A failure names the seed and the command that replays it.

use std::time::Duration;

use weir_sim::workload::echo;

/// Seeds run by default; `ci/sweep` runs more.
const SEEDS: u64 = 100;

#[test]
fn echo_workload_holds_across_seeds() {
    let mut failures = Vec::new();
    for seed in 0..SEEDS {
        let report = echo::run(seed, Duration::from_secs(20));
        if !report.violations.is_empty() {
            failures.push(format!(
                "seed {seed:#x}: {:?}\n  replay: cargo run -p weir-sim --release -- --seed {seed:#x} --fault-secs 20 --verbose",
                report.violations
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
