//! What a run measured, in one serialisable shape: figures (each beside its same-run baseline,
//! as a ratio, with the acceptance target it answers), latency distributions, and time series
//! for the plot. The summary table printed at the end and the JSON written by `--out` are both
//! views of this.

use serde::Serialize;

/// A latency distribution, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    /// What was timed.
    pub name: String,
    /// Samples recorded.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

impl Latency {
    /// Summarises a histogram of microsecond samples.
    pub fn from_histogram(name: &str, h: &hdrhistogram::Histogram<u64>) -> Latency {
        Latency {
            name: name.to_owned(),
            count: h.len(),
            p50_us: h.value_at_quantile(0.50) as f64,
            p99_us: h.value_at_quantile(0.99) as f64,
            p999_us: h.value_at_quantile(0.999) as f64,
            max_us: h.max() as f64,
        }
    }
}

/// A new histogram for microsecond latencies from 1 µs to 100 s, 3 significant digits.
pub fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 100_000_000, 3)
        .expect("constant histogram bounds are valid")
}

/// Records a latency in microseconds, clamped into the histogram's range.
pub fn record_us(h: &mut hdrhistogram::Histogram<u64>, micros: u64) {
    h.saturating_record(micros.max(1));
}

/// How a figure is judged.
#[derive(Clone, Copy, Debug, Serialize)]
pub enum Rule {
    /// value / baseline ≥ bound.
    RatioAtLeast,
    /// value / baseline ≤ bound.
    RatioAtMost,
    /// value ≥ bound (in the figure's unit).
    AtLeast,
    /// value ≤ bound (in the figure's unit).
    AtMost,
}

/// An acceptance target.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// The rule.
    pub rule: Rule,
    /// Its bound.
    pub bound: f64,
    /// As the issue states it.
    pub text: String,
}

impl Target {
    /// A target on the ratio to the baseline.
    pub fn ratio_at_least(bound: f64, text: &str) -> Target {
        Target { rule: Rule::RatioAtLeast, bound, text: text.to_owned() }
    }
    /// A target on the ratio to the baseline.
    pub fn ratio_at_most(bound: f64, text: &str) -> Target {
        Target { rule: Rule::RatioAtMost, bound, text: text.to_owned() }
    }
    /// A target on the value itself.
    pub fn at_least(bound: f64, text: &str) -> Target {
        Target { rule: Rule::AtLeast, bound, text: text.to_owned() }
    }
    /// A target on the value itself.
    pub fn at_most(bound: f64, text: &str) -> Target {
        Target { rule: Rule::AtMost, bound, text: text.to_owned() }
    }

    fn judge(&self, value: f64, ratio: Option<f64>) -> Option<bool> {
        match self.rule {
            Rule::RatioAtLeast => ratio.map(|r| r >= self.bound),
            Rule::RatioAtMost => ratio.map(|r| r <= self.bound),
            Rule::AtLeast => Some(value >= self.bound),
            Rule::AtMost => Some(value <= self.bound),
        }
    }
}

/// One measured figure.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    /// Which command or part measured it.
    pub section: String,
    /// What it is.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// The value on Weir (or on the only target measured).
    pub value: f64,
    /// The baseline it is compared with, if any.
    pub baseline: Option<String>,
    /// The baseline's value (same unit as the figure).
    pub baseline_value: Option<f64>,
    /// value / baseline.
    pub ratio: Option<f64>,
    /// The acceptance target, if the issue sets one.
    pub target: Option<Target>,
    /// Whether the target is met.
    pub pass: Option<bool>,
    /// The same workload on `--peer`, if one was given.
    pub peer: Option<f64>,
    /// The peer's value / baseline.
    pub peer_ratio: Option<f64>,
    /// Whether the peer would meet the target.
    pub peer_pass: Option<bool>,
    /// Settings that matter for reading the figure.
    pub note: String,
}

impl Figure {
    /// A figure without baseline or target.
    pub fn plain(section: &str, name: &str, unit: &str, value: f64, note: &str) -> Figure {
        Figure {
            section: section.to_owned(),
            name: name.to_owned(),
            unit: unit.to_owned(),
            value,
            baseline: None,
            baseline_value: None,
            ratio: None,
            target: None,
            pass: None,
            peer: None,
            peer_ratio: None,
            peer_pass: None,
            note: note.to_owned(),
        }
    }

    /// Compares with a baseline.
    pub fn against(mut self, baseline: &str, baseline_value: f64) -> Figure {
        self.baseline = Some(baseline.to_owned());
        self.baseline_value = Some(baseline_value);
        self.rejudge();
        self
    }

    /// Sets the acceptance target.
    pub fn target(mut self, target: Target) -> Figure {
        self.target = Some(target);
        self.rejudge();
        self
    }

    /// Adds the peer's value.
    pub fn with_peer(mut self, peer: Option<f64>) -> Figure {
        self.peer = peer;
        self.rejudge();
        self
    }

    fn rejudge(&mut self) {
        let baseline = self.baseline_value.filter(|b| *b > 0.0);
        self.ratio = baseline.map(|b| self.value / b);
        self.peer_ratio = self.peer.and_then(|p| baseline.map(|b| p / b));
        self.pass = self.target.as_ref().and_then(|t| t.judge(self.value, self.ratio));
        self.peer_pass = match (&self.target, self.peer) {
            (Some(t), Some(p)) => t.judge(p, self.peer_ratio),
            _ => None,
        };
    }
}

/// A series of (seconds since start, value) points.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Series {
    /// What it shows.
    pub name: String,
    /// Unit of the values.
    pub unit: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

/// The machine a run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// Total memory, MiB.
    pub memory_mib: u64,
    /// The data folder's file system (`df -h` line).
    pub disk: String,
    /// The kernel (`uname -r`).
    pub kernel: String,
    /// The run's memory cap (see `memcap`), or why there was none.
    pub memory_cap: String,
}

/// Everything one run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The command line.
    pub command: String,
    /// The machine.
    pub machine: Machine,
    /// Figures, in the order measured.
    pub figures: Vec<Figure>,
    /// Latency distributions (Weir's).
    pub latencies: Vec<Latency>,
    /// The same distributions on the peer.
    pub peer_latencies: Vec<Latency>,
    /// Time series for the plot.
    pub series: Vec<Series>,
    /// Free-form remarks (settings, caveats).
    pub notes: Vec<String>,
}

impl Report {
    /// Adds a figure.
    pub fn push(&mut self, figure: Figure) {
        self.figures.push(figure);
    }

    /// The summary table.
    pub fn table(&self) -> String {
        let has_peer = self.figures.iter().any(|f| f.peer.is_some());
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut header = vec!["figure", "value", "baseline", "ratio", "target", "result"];
        if has_peer {
            header.extend(["peer", "peer ratio", "peer result"]);
        }
        rows.push(header.iter().map(|s| (*s).to_owned()).collect());
        for f in &self.figures {
            let mut row = vec![
                format!("{}: {}", f.section, f.name),
                format!("{} {}", num(f.value), f.unit),
                match (&f.baseline, f.baseline_value) {
                    (Some(name), Some(v)) => format!("{name} {}", num(v)),
                    _ => String::new(),
                },
                f.ratio.map(|r| format!("{r:.2}")).unwrap_or_default(),
                f.target.as_ref().map(|t| t.text.clone()).unwrap_or_default(),
                verdict(f.pass),
            ];
            if has_peer {
                row.push(f.peer.map(|p| format!("{} {}", num(p), f.unit)).unwrap_or_default());
                row.push(f.peer_ratio.map(|r| format!("{r:.2}")).unwrap_or_default());
                row.push(verdict(f.peer_pass));
            }
            rows.push(row);
        }
        let mut out = render(&rows);
        if !self.latencies.is_empty() {
            out.push('\n');
            let mut rows = vec![
                ["latency (µs)", "count", "p50", "p99", "p99.9", "max"]
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect::<Vec<_>>(),
            ];
            for (prefix, list) in [("", &self.latencies), ("peer: ", &self.peer_latencies)] {
                for l in list.iter() {
                    rows.push(vec![
                        format!("{prefix}{}", l.name),
                        l.count.to_string(),
                        num(l.p50_us),
                        num(l.p99_us),
                        num(l.p999_us),
                        num(l.max_us),
                    ]);
                }
            }
            out.push_str(&render(&rows));
        }
        for note in &self.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        out
    }
}

fn verdict(pass: Option<bool>) -> String {
    match pass {
        Some(true) => "PASS".to_owned(),
        Some(false) => "FAIL".to_owned(),
        None => String::new(),
    }
}

/// A number with a sensible number of digits.
pub fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn render(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<width$}", width = widths.get(c).copied().unwrap_or(0)))
            .collect();
        out.push_str(cells.join(" | ").trim_end());
        out.push('\n');
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("-+-"));
            out.push('\n');
        }
    }
    out
}
