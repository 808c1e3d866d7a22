//! Shared helpers for the fault scenarios in `tests/`.

pub mod admin;
pub mod group;
pub mod held;
pub mod hooked;
pub mod log;
pub mod refusing;
pub mod replicas;
pub mod wire;
pub mod writes;

/// Runs `scenario` for every seed in `seeds` (or only the seed in `WEIR_SEED`, decimal or
/// 0x-hex, when it is set) and panics listing every failing (or panicking) seed with the
/// command that replays it: `WEIR_SEED=<seed> cargo test -p weir-scenarios --test <test>`. `WEIR_LOG=weir=info`
/// prints the nodes' logs.
pub fn for_each_seed(
    test: &str,
    seeds: std::ops::Range<u64>,
    scenario: impl Fn(u64) -> Result<(), String>,
) {
    weir_sim::log_from_env();
    let seeds: Vec<u64> = match std::env::var("WEIR_SEED") {
        Ok(text) => vec![parse_seed(&text)],
        Err(_) => seeds.collect(),
    };
    let mut failures = Vec::new();
    for &seed in &seeds {
        if let Err(why) = weir_sim::catch_panic(|| scenario(seed)).and_then(|outcome| outcome) {
            let failure = format!(
                "seed {seed:#x} FAILED: {why}\n  replay: WEIR_SEED={seed:#x} cargo test -p weir-scenarios --test {test}"
            );
            println!("{failure}");
            failures.push(failure);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} seeds failed:\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n")
    );
}

/// Runs `run` for every seed in `seeds`; it returns a one-line description of what the seed
/// drew and the violations found. Panics listing every failing (or panicking) seed with its
/// violations and `replay(seed)`, the command that replays it.
pub fn assert_seeds_pass(
    seeds: impl IntoIterator<Item = u64>,
    mut run: impl FnMut(u64) -> (String, Vec<String>),
    replay: impl Fn(u64) -> String,
) {
    let mut failures = Vec::new();
    let mut count = 0;
    for seed in seeds {
        count += 1;
        let (shape, violations) = weir_sim::catch_panic(|| run(seed))
            .unwrap_or_else(|panic| ("the run panicked".to_owned(), vec![panic]));
        if !violations.is_empty() {
            let failure = format!(
                "seed {seed:#x} FAILED ({shape})\n    {}\n  replay: {}",
                violations.join("\n    "),
                replay(seed)
            );
            println!("{failure}");
            failures.push(failure);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn parse_seed(text: &str) -> u64 {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("WEIR_SEED={text:?} is not a seed: {e}"))
}

/// Fails with `why` unless `condition` holds.
pub fn ensure(condition: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(why()) }
}

/// Checks that every write in `acked` reads back from `read` (offset to value, as
/// `Cluster::read_all` returns it) at its offset with its value; `label` names the partition
/// in the error.
pub fn acked_read_back<'a>(
    label: &str,
    read: &std::collections::BTreeMap<i64, impl AsRef<[u8]> + std::fmt::Debug>,
    acked: impl IntoIterator<Item = &'a weir_sim::workload::cluster::producer::Acked>,
) -> Result<(), String> {
    for a in acked {
        ensure(read.get(&a.offset).is_some_and(|v| v.as_ref() == a.value.as_bytes()), || {
            format!("{label}@{}: acked {:?}, read {:?}", a.offset, a.value, read.get(&a.offset))
        })?;
    }
    Ok(())
}
