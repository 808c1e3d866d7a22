//! A background thread that samples, every [`SAMPLE_MS`] ms, this process's resident memory and
//! the bytes the clients have produced and consumed so far — for the memory figure, and for the
//! plot of throughput and memory over time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::machine;
use crate::report::Series;

/// Sampling period.
pub const SAMPLE_MS: u64 = 200;

/// Payload bytes whose produce was acknowledged (all producers of the process).
pub static PRODUCED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Payload bytes consumed (all consumers of the process).
pub static CONSUMED_BYTES: AtomicU64 = AtomicU64::new(0);

/// One sample.
#[derive(Clone, Copy, Debug)]
struct Sample {
    secs: f64,
    rss_kib: u64,
    produced: u64,
    consumed: u64,
}

/// A running sampler; [`Sampler::finish`] stops it and returns the series.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Sample>>,
}

/// What a sampler saw.
pub struct Sampled {
    /// Largest resident set size seen, MiB.
    pub rss_max_mib: f64,
    /// Produce throughput (MB/s), consume throughput (MB/s) and resident memory (MiB) over time.
    pub series: Vec<Series>,
}

impl Sampler {
    /// Starts sampling.
    pub fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                samples.push(Sample {
                    secs: start.elapsed().as_secs_f64(),
                    rss_kib: machine::rss_kib().unwrap_or(0),
                    produced: PRODUCED_BYTES.load(Ordering::Relaxed),
                    consumed: CONSUMED_BYTES.load(Ordering::Relaxed),
                });
                std::thread::sleep(Duration::from_millis(SAMPLE_MS));
            }
            samples
        });
        Sampler { stop, thread }
    }

    /// Stops sampling; series names start with `label`.
    pub fn finish(self, label: &str) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().unwrap_or_default();
        let rss_max_mib = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0) as f64 / 1024.0;
        let rate = |pick: fn(&Sample) -> u64| -> Vec<(f64, f64)> {
            samples
                .windows(2)
                .map(|w| {
                    let dt = (w[1].secs - w[0].secs).max(1e-6);
                    (w[1].secs, pick(&w[1]).saturating_sub(pick(&w[0])) as f64 / dt / 1e6)
                })
                .collect()
        };
        let series = vec![
            Series {
                name: format!("{label} produce"),
                unit: "MB/s".to_owned(),
                points: rate(|s| s.produced),
            },
            Series {
                name: format!("{label} consume"),
                unit: "MB/s".to_owned(),
                points: rate(|s| s.consumed),
            },
            Series {
                name: format!("{label} RSS"),
                unit: "MiB".to_owned(),
                points: samples.iter().map(|s| (s.secs, s.rss_kib as f64 / 1024.0)).collect(),
            },
        ];
        Sampled { rss_max_mib, series }
    }
}
