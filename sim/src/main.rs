//! `weir-sim`: runs simulations by seed and prints what a failing seed needs to be replayed.
//!
//! `weir-sim --seed N` runs one seed and prints the seed first and the trace hash last;
//! `weir-sim --seeds A..B` sweeps a range; `weir-sim bench` measures the executor.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use weir_sim::bench::ping_pong;
use weir_sim::workload::echo;

/// As in the `weir` binary: hostile array counts in a request must not abort the process
/// (see `weir::runtime::alloc`; the hostile workload sends them).
#[global_allocator]
static ALLOCATOR: weir::runtime::alloc::LazyHugeAlloc = weir::runtime::alloc::LazyHugeAlloc;

#[derive(Parser)]
#[command(name = "weir-sim", about = "Deterministic simulation of Weir")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// One seed to run (decimal or 0x-hex).
    #[arg(long, value_parser = parse_seed)]
    seed: Option<u64>,
    /// A range of seeds to sweep, `A..B` (B excluded).
    #[arg(long)]
    seeds: Option<String>,
    /// Simulated seconds of faults before the final heal.
    #[arg(long, default_value_t = 30)]
    fault_secs: u64,
    /// Print the faults injected and per-seed details.
    #[arg(long, short)]
    verbose: bool,
    /// Which workload to run.
    #[arg(long, value_enum, default_value_t = Workload::Echo)]
    workload: Workload,
    /// Let the nemesis break the nodes' disks too: I/O errors, failed syncs, read corruption and
    /// full disks (broker and cluster workloads).
    #[arg(long)]
    disk_faults: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Workload {
    /// Echo servers with a durable append file, under every fault class.
    Echo,
    /// One partition log appended under crashes, power failures and disk faults.
    Log,
    /// One Weir broker with producers and a consumer group over the Kafka protocol, under
    /// crashes, power failures, pauses, clock jumps and faulty client links.
    Broker,
    /// A 3–5-node cluster (metadata quorum, broker-only nodes) with topics created, grown,
    /// reconfigured and deleted, records deleted, producers and a consumer, under faults on
    /// every node and link between them (broker-only nodes also get new, empty disks).
    Cluster,
    /// A 3-node cluster whose partition leader dies under acks=all writes: how long writes
    /// pause (median and worst over the seeds).
    Failover,
    /// One node sent requests of every API and version, with fields at the edges of their
    /// types and mutated bytes: no panic, every answer decodes, nothing else is damaged.
    Hostile,
}

#[derive(Subcommand)]
enum Command {
    /// Measures the executor with a ping-pong ring over the simulated network.
    Bench {
        /// Hosts in the ring.
        #[arg(long, default_value_t = 5)]
        hosts: usize,
        /// Simulated seconds to run.
        #[arg(long, default_value_t = 3_600)]
        seconds: u64,
    },
}

fn parse_seed(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|e| format!("bad seed {text:?}: {e}"))
}

fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let (a, b) = text.split_once("..").ok_or_else(|| format!("expected A..B, got {text:?}"))?;
    Ok((parse_seed(a)?, parse_seed(b)?))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    weir_sim::log_from_env();
    if let Some(Command::Bench { hosts, seconds }) = cli.command {
        bench(hosts, seconds);
        return ExitCode::SUCCESS;
    }
    let (first, end) = match (&cli.seed, &cli.seeds) {
        (Some(seed), None) => (*seed, seed.saturating_add(1)),
        (None, Some(range)) => match parse_range(range) {
            Ok(range) => range,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("give exactly one of --seed N or --seeds A..B (or a subcommand)");
            return ExitCode::from(2);
        }
    };
    let single = end - first == 1;
    let replay_workload = format!("{:?}", cli.workload).to_lowercase();
    let fault_secs = cli.fault_secs;
    let disk_faults = if cli.disk_faults { " --disk-faults" } else { "" };
    let replay_command = move |seed: u64| {
        format!(
            "cargo run -p weir-sim --release -- --seed {seed:#x} --workload {replay_workload} --fault-secs {fault_secs}{disk_faults} --verbose"
        )
    };
    let options = weir_sim::workload::Options { disk_faults: cli.disk_faults };
    let mut failed = Vec::new();
    let mut measured = Vec::new();
    for seed in first..end {
        if single || cli.verbose {
            println!("seed {seed:#x} (commit {}, {})", env!("WEIR_COMMIT"), rustc_version());
        }
        let fault_secs = Duration::from_secs(cli.fault_secs);
        let report =
            weir_sim::catch_panic(|| run_workload(cli.workload, seed, fault_secs, options))
                .unwrap_or_else(|panic| Outcome {
                    seed,
                    trace_hash: 0,
                    summary: "the run panicked".to_owned(),
                    faults: Vec::new(),
                    violations: vec![panic],
                    measured: None,
                });
        measured.extend(report.measured);
        if single || cli.verbose {
            print_report(&report, cli.verbose, &replay_command);
        }
        if !report.violations.is_empty() {
            if !(single || cli.verbose) {
                println!("seed {seed:#x} FAILED");
                print_report(&report, true, &replay_command);
            }
            failed.push(seed);
        }
    }
    if !measured.is_empty() {
        measured.sort();
        let median = measured[measured.len() / 2];
        let worst = measured[measured.len() - 1];
        println!(
            "writes paused: median {:.2}s, worst {:.2}s over {} seeds",
            median.as_secs_f64(),
            worst.as_secs_f64(),
            measured.len()
        );
    }
    if !single {
        println!(
            "{} seeds, {} failed{}",
            end - first,
            failed.len(),
            if failed.is_empty() { String::new() } else { format!(": {failed:#x?}") }
        );
    }
    if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// The parts of a report every workload shares.
struct Outcome {
    seed: u64,
    trace_hash: u64,
    summary: String,
    faults: Vec<String>,
    violations: Vec<String>,
    /// A duration the workload measures (the failover workload's write pause).
    measured: Option<Duration>,
}

fn run_workload(
    workload: Workload,
    seed: u64,
    fault_phase: Duration,
    options: weir_sim::workload::Options,
) -> Outcome {
    match workload {
        Workload::Echo => {
            let r = echo::run(seed, fault_phase);
            Outcome {
                seed,
                trace_hash: r.trace_hash,
                summary: format!(
                    "simulated {:.1}s, {} polls, {} acked writes, {} echoes",
                    r.simulated.as_secs_f64(),
                    r.stats.polls,
                    r.acked_writes,
                    r.echoes_ok
                ),
                faults: r.faults,
                violations: r.violations,
                measured: None,
            }
        }
        Workload::Log => {
            let r = weir_sim::workload::log::run(seed, fault_phase);
            Outcome {
                seed,
                trace_hash: r.trace_hash,
                summary: format!(
                    "{} acked batches, {} crashes, {} batches damaged",
                    r.acked, r.crashes, r.damaged
                ),
                faults: Vec::new(),
                violations: r.violations,
                measured: None,
            }
        }
        Workload::Broker => {
            weir_outcome(weir_sim::workload::broker::run_with(seed, fault_phase, options))
        }
        Workload::Cluster => {
            weir_outcome(weir_sim::workload::cluster::swarm::run_with(seed, fault_phase, options))
        }
        Workload::Failover => {
            let (report, pause) = weir_sim::workload::cluster::failover::run(seed);
            Outcome { measured: pause, ..weir_outcome(report) }
        }
        Workload::Hostile => weir_outcome(weir_sim::workload::hostile::run(seed)),
    }
}

/// The outcome of a workload that runs Weir itself.
fn weir_outcome(r: weir_sim::workload::Report) -> Outcome {
    Outcome {
        seed: r.seed,
        trace_hash: r.trace_hash,
        summary: format!(
            "simulated {:.1}s; {}\n  {}",
            r.simulated.as_secs_f64(),
            r.shape,
            r.counts
        ),
        faults: r.faults,
        violations: r.violations,
        measured: None,
    }
}

fn rustc_version() -> &'static str {
    option_env!("RUSTC_VERSION").unwrap_or("rustc 1.95.0")
}

fn print_report(report: &Outcome, verbose: bool, replay_command: &dyn Fn(u64) -> String) {
    if verbose {
        for fault in &report.faults {
            println!("  {fault}");
        }
    }
    println!("  {}", report.summary);
    for violation in &report.violations {
        println!("  VIOLATION: {violation}");
    }
    if !report.violations.is_empty() {
        println!("  replay: {}", replay_command(report.seed));
    }
    println!("trace {:#018x}", report.trace_hash);
}

/// Wall-clock measurement belongs to this benchmark only: it compares simulated time with real
/// time, which is the point of the exercise.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn bench(hosts: usize, seconds: u64) {
    for (label, think) in [
        ("idle-heavy (10 ms think time)", Duration::from_millis(10)),
        ("busy (no think time)", Duration::ZERO),
    ] {
        let simulated = if think.is_zero() {
            Duration::from_secs(seconds / 60).max(Duration::from_secs(1))
        } else {
            Duration::from_secs(seconds)
        };
        let started = std::time::Instant::now();
        let report = ping_pong(1, hosts, simulated, think);
        let wall = started.elapsed();
        println!(
            "{label}: {hosts} hosts, {:.0} s simulated in {:.3} s wall",
            report.simulated.as_secs_f64(),
            wall.as_secs_f64()
        );
        println!(
            "  {} round trips, {} events, {:.2} M events/s, {:.0}x real time",
            report.round_trips,
            report.events,
            report.events as f64 / wall.as_secs_f64() / 1e6,
            report.simulated.as_secs_f64() / wall.as_secs_f64()
        );
    }
}
