//! One seed, one history: the same seed gives the same trace hash in the same process and in a
//! fresh one, and different seeds give different hashes.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use weir_sim::workload::echo;

const FAULT_PHASE: Duration = Duration::from_secs(10);

fn trace_from_binary(seed: u64) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_weir-sim"))
        .args(["--seed", &format!("{seed:#x}"), "--fault-secs", "10"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("seed {seed:#x}")),
        "the seed is not printed first: {stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    let hex = last
        .strip_prefix("trace 0x")
        .unwrap_or_else(|| panic!("the trace hash is not printed last: {stdout}"));
    u64::from_str_radix(hex, 16).unwrap()
}

#[test]
fn same_seed_same_trace_in_process_and_in_a_fresh_process() {
    for seed in [1u64, 0xdead_beef] {
        let a = echo::run(seed, FAULT_PHASE);
        let b = echo::run(seed, FAULT_PHASE);
        assert_eq!(
            a.trace_hash, b.trace_hash,
            "seed {seed:#x} replayed differently in one process"
        );
        assert_eq!(a.acked_writes, b.acked_writes);
        assert!(a.stats.polls > 1_000, "the workload did almost nothing: {:?}", a.stats);
        assert_eq!(
            trace_from_binary(seed),
            a.trace_hash,
            "seed {seed:#x} replayed differently in a fresh process"
        );
    }
}

#[test]
fn different_seeds_give_different_traces() {
    let hashes: std::collections::BTreeSet<u64> =
        (10..20).map(|seed| echo::run(seed, FAULT_PHASE).trace_hash).collect();
    assert_eq!(hashes.len(), 10);
}
