//! `weir-bench`: Weir measured on the real machine, every figure beside a baseline taken in
//! the same run (these machines are shared and noisy, so only ratios travel).
//!
//! - `baselines`: what the disk and loopback network can do;
//! - `log`: the partition log alone through the production runtime (issue 3);
//! - `broker`: a whole broker driven by librdkafka, optionally side by side with a `--peer`
//!   (issue 5);
//! - `cluster`: three brokers, and what a follower catching up from far behind costs the
//!   leader's producers (issue 7).
//!
//! A benchmark measures the real machine: clocks, files, sockets and threads are its subject,
//! so the workspace's bans on OS access (clippy.toml) are lifted for this whole crate.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod baselines;
mod broker;
mod cluster;
mod counting;
mod logbench;
mod machine;
mod memcap;
mod plot;
mod progress;
mod report;
mod sampler;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::report::Report;

/// Huge allocations are lazy, as in the `weir` binary (see `weir::runtime::alloc`), so the
/// in-process broker runs with the production allocator.
#[global_allocator]
static ALLOCATOR: weir::runtime::alloc::LazyHugeAlloc = weir::runtime::alloc::LazyHugeAlloc;

#[derive(Parser)]
#[command(name = "weir-bench", version, about = "Benchmarks of Weir against same-run baselines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Disk and loopback-network baselines.
    Baselines(Common),
    /// The partition log on the real disk: append (ack and interval) and read throughput.
    Log {
        #[command(flatten)]
        common: Common,
        /// Tasks appending concurrently (group commit needs several).
        #[arg(long, default_value_t = 16)]
        appenders: usize,
        /// Appends each appender keeps in flight under `flush.policy=ack` (written, waiting for
        /// their sync), as a producer keeps `max.in.flight.requests.per.connection` requests.
        #[arg(long, default_value_t = 5)]
        in_flight: usize,
    },
    /// A broker driven by librdkafka: produce, consume, latency, lagging consumer, memory.
    Broker {
        #[command(flatten)]
        common: Common,
        /// Also run the identical workload against the Kafka-compatible broker at ADDR.
        #[arg(long, value_name = "ADDR")]
        peer: Option<String>,
    },
    /// Three brokers: producers' latency while a follower catches up from far behind.
    Cluster {
        #[command(flatten)]
        common: Common,
        /// The brokers' `replica_catch_up_bytes_per_sec` (default: the broker's, no limit).
        #[arg(long, value_name = "BYTES")]
        catch_up_bytes_per_sec: Option<u64>,
    },
    /// A null broker that discards what it is sent, until killed: the client's ceiling, for
    /// any Kafka producer pointed at it (`broker` measures it in every run).
    Sink {
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:9093")]
        listen: std::net::SocketAddr,
    },
    /// One producer with the throughput settings against a broker already listening, for
    /// profiling that broker alone; prints the rate.
    Load {
        /// The broker.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// The topic.
        #[arg(long, default_value = "weir-bench-load")]
        topic: String,
        /// MiB of record values to send.
        #[arg(long, default_value_t = 2048, value_parser = load_mib())]
        mib: u64,
        /// The producer's `acks`.
        #[arg(long, default_value = "1", value_parser = ["0", "1", "all"])]
        acks: String,
        /// Each record's value size in bytes.
        #[arg(long, default_value_t = 1024, value_parser = load_record_bytes())]
        record_bytes: u32,
    },
}

#[derive(Args)]
struct Common {
    /// Scratch folder on the disk to measure (created, and emptied afterwards).
    #[arg(long, default_value = "weir-bench-data")]
    dir: PathBuf,
    /// A reduced matrix and shorter runs.
    #[arg(long)]
    quick: bool,
    /// Write the results as JSON here.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write an SVG plot of the results here.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Run in a memory cgroup of this many MiB, so that the page cache recycles its own pages
    /// as on a broker machine whose memory is full (0: uncapped; see docs/performance.md).
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MEMORY_CAP_MIB)]
    memory_cap_mib: u64,
}

/// `load --mib`: at least one MiB, at most a TiB.
fn load_mib() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=1 << 20)
}

/// `load --record-bytes`: at least one byte, at most a MiB.
fn load_record_bytes() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=1 << 20)
}

/// The default memory cap: well above the 256 MiB the broker and its clients may use, and
/// enough page cache to hold the logs a run reads back.
const DEFAULT_MEMORY_CAP_MIB: u64 = 4096;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The in-process brokers' logs, when asked for.
    if std::env::var_os("WEIR_LOG").is_some() {
        weir::runtime::init_logging();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let common = match &cli.command {
        Command::Sink { listen } => {
            let sink = broker::sink::Sink::start(*listen)?;
            eprintln!("null broker listening on {}; Ctrl-C ends it", sink.addr);
            loop {
                std::thread::park();
            }
        }
        Command::Load { bootstrap, topic, mib, acks, record_bytes } => {
            let load = broker::load::Load {
                bootstrap,
                topic,
                mib: *mib,
                acks,
                record_bytes: *record_bytes as usize,
            };
            return broker::load::run(&load);
        }
        Command::Baselines(common) => common,
        Command::Log { common, .. }
        | Command::Broker { common, .. }
        | Command::Cluster { common, .. } => common,
    };
    // Before any thread starts, so that every thread moves with the process.
    let cap = memcap::cap(common.memory_cap_mib);
    let scratch = scratch_dir(&common.dir)?;
    let mut report = Report {
        command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
        machine: machine::describe(&scratch),
        ..Report::default()
    };
    report.machine.memory_cap = memcap::describe(&cap, common.memory_cap_mib);
    if let Ok(cap) = &cap {
        eprintln!(
            "filling the capped memory with clean page cache ({} MiB)",
            common.memory_cap_mib
        );
        cap.fill(&scratch, common.memory_cap_mib)?;
    }
    let m = &report.machine;
    eprintln!(
        "machine: {} CPUs, {} MiB memory, kernel {}, data folder on: {}; memory {}",
        m.cpus, m.memory_mib, m.kernel, m.disk, m.memory_cap
    );
    let outcome = match &cli.command {
        Command::Baselines(c) => {
            baselines::measure(&scratch, baselines::Sizes::new(c.quick), &mut report).map(|_| ())
        }
        Command::Log { common, appenders, in_flight } => {
            let settings = logbench::Settings::new(common.quick, *appenders, *in_flight);
            logbench::run(&scratch, &settings, common.quick, &mut report)
        }
        Command::Cluster { common, catch_up_bytes_per_sec } => {
            let options = cluster::Options {
                dir: &scratch,
                quick: common.quick,
                catch_up_bytes_per_sec: *catch_up_bytes_per_sec,
            };
            cluster::run(&options, &mut report)
        }
        Command::Broker { common, peer } => {
            let options =
                broker::Options { dir: &scratch, peer: peer.clone(), quick: common.quick };
            broker::run(&options, &mut report)
        }
        Command::Sink { .. } | Command::Load { .. } => Ok(()),
    };
    let _ = std::fs::remove_dir_all(&scratch);
    outcome?;
    println!("{}", report.table());
    if let Some(path) = &common.out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        eprintln!("results written to {}", path.display());
    }
    if let Some(path) = &common.plot {
        std::fs::write(path, plot::svg(&report))?;
        eprintln!("plot written to {}", path.display());
    }
    Ok(())
}

/// A fresh folder for this run under `dir`.
fn scratch_dir(dir: &Path) -> Result<PathBuf> {
    let scratch = dir.join(format!("run-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    Ok(scratch)
}
