//! `weir-bench broker` (issue 5): a whole broker driven by librdkafka. The baselines first,
//! then the workload on a Weir broker started in this process, then (with `--peer`) the same
//! workload on another broker; every figure beside its same-run baseline, with the issue's
//! acceptance targets judged.

pub mod client;
pub mod load;
pub mod sink;
pub mod target;
pub mod workload;

use std::path::Path;

use crate::baselines::{self, Baselines};
use crate::report::{Figure, Latency, Report, Target};
use crate::sampler::Sampler;
use client::Result;
use workload::{ACK_RATE, Ceiling, Outcome, Plan, Policy, Run};

/// Resident memory bound of the acceptance criteria, MiB.
const RSS_MAX_MIB: f64 = 256.0;

/// Options of the broker command.
pub struct Options<'a> {
    /// Scratch folder for baselines and the in-process broker's data.
    pub dir: &'a Path,
    /// Another broker to run the identical workload on.
    pub peer: Option<String>,
    /// The reduced matrix.
    pub quick: bool,
}

/// Runs the broker benchmark into `report`.
pub fn run(options: &Options<'_>, report: &mut Report) -> Result<()> {
    let base = baselines::measure(options.dir, baselines::Sizes::new(options.quick), report)?;
    let plan = Plan::new(options.quick);
    let admin = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let tag = format!("{}-{}", std::process::id(), client::now_ns() % 1_000_000);

    let sink = sink::Sink::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let ceiling = Run {
        rt: &admin,
        bootstrap: sink.addr.to_string(),
        weir: false,
        disk: None,
        tag: tag.clone(),
        plan: &plan,
    }
    .ceiling("null broker")?;
    drop(sink);

    let broker = target::InProcess::start(&options.dir.join("weir-broker"))?;
    let sampler = Sampler::start();
    let weir_run = Run {
        rt: &admin,
        bootstrap: broker.addr.to_string(),
        weir: true,
        disk: Some(std::sync::Arc::clone(&broker.disk)),
        tag: tag.clone(),
        plan: &plan,
    };
    let weir = weir_run.all("weir");
    let sampled = sampler.finish("weir");
    broker.stop()?;
    let weir = weir?;
    report.series.extend(sampled.series);

    let peer = match &options.peer {
        Some(addr) => {
            let sampler = Sampler::start();
            let peer_run = Run {
                rt: &admin,
                bootstrap: addr.clone(),
                weir: false,
                disk: None,
                tag: tag.clone(),
                plan: &plan,
            };
            let outcome = peer_run.all("peer")?;
            report.series.extend(sampler.finish("peer").series);
            Some(outcome)
        }
        None => None,
    };
    ceiling_figures(report, &base, &ceiling);
    figures(report, &base, &ceiling, &weir, peer.as_ref(), sampled.rss_max_mib);
    notes(report, &plan, options.peer.as_deref());
    Ok(())
}

/// The null broker's figures: the client's ceiling on this machine, beside the baselines.
fn ceiling_figures(report: &mut Report, base: &Baselines, ceiling: &Ceiling) {
    let s = "null broker";
    for cell in &ceiling.cells {
        report.push(
            Figure::plain(
                s,
                &format!("produce acks={} 1 KiB 1p", cell.acks),
                "MB/s",
                cell.mbs,
                &format!(
                    "librdkafka to a broker that discards: {} records in {:.1} s",
                    cell.records, cell.secs
                ),
            )
            .against(baselines::TCP_COPY, base.tcp_copy_mbs),
        );
    }
    let c = &ceiling.consumed;
    report.push(
        Figure::plain(
            s,
            "consume 1 KiB records",
            "MB/s",
            c.mbs,
            &format!(
                "librdkafka from a broker that serves one batch from memory per fetch: {} records",
                c.records
            ),
        )
        .against(baselines::TCP_COPY, base.tcp_copy_mbs),
    );
    report.push(
        Figure::plain(
            s,
            &format!("produce-ack p99 at {ACK_RATE}/s, linger.ms=0, acks=all"),
            "µs",
            ceiling.ack.p99_us,
            &format!(
                "p50 {} µs, p99.9 {} µs, max {} µs: client and loopback alone",
                ceiling.ack.p50_us, ceiling.ack.p999_us, ceiling.ack.max_us
            ),
        )
        .against(baselines::FDATASYNC_4K_P99, base.fdatasync_4k.p99_us),
    );
    report.latencies.push(ceiling.ack.clone());
}

fn figures(
    report: &mut Report,
    base: &Baselines,
    ceiling: &Ceiling,
    weir: &Outcome,
    peer: Option<&Outcome>,
    rss_max_mib: f64,
) {
    let s = "broker";
    for cell in &weir.cells {
        let peer_cell = peer.and_then(|p| {
            p.cells.iter().find(|c| {
                c.acks == cell.acks
                    && c.size == cell.size
                    && c.partitions == cell.partitions
                    && c.policy == cell.policy
            })
        });
        let mut note = format!(
            "{} records in {:.1} s, {:.0} records/s (peer {})",
            cell.records,
            cell.secs,
            cell.rps,
            peer_cell.map_or("-".to_owned(), |c| format!("{:.0} records/s", c.rps))
        );
        if let (Some(syncs), Some(sync_secs)) = (cell.syncs, cell.sync_secs)
            && syncs > 0
        {
            note.push_str(&format!(
                "; broker: {syncs} fdatasyncs, {:.0} records/sync, {:.0}% of the run in sync",
                cell.records as f64 / syncs as f64,
                100.0 * sync_secs / cell.secs
            ));
        }
        let key_cell = cell.size == 1024 && cell.partitions == 1;
        if key_cell && let Some(null) = ceiling.cells.iter().find(|c| c.acks == cell.acks) {
            note.push_str(&format!(
                "; {:.2}× the null broker's {:.0} MB/s",
                cell.mbs / null.mbs.max(f64::MIN_POSITIVE),
                null.mbs
            ));
        }
        let mut figure = Figure::plain(s, &cell.name(), "MB/s", cell.mbs, &note);
        figure = if cell.acks == "all" && cell.policy == Policy::Ack && key_cell {
            figure
                .against(baselines::FSYNC_PER_MIB, base.fsync_per_mib_mbs)
                .target(Target::ratio_at_least(1.5, "≥ 1.5× write+fsync/MiB"))
        } else if cell.acks == "1" && key_cell {
            figure
                .against(baselines::TCP_COPY, base.tcp_copy_mbs)
                .target(Target::ratio_at_least(0.30, "≥ 0.30× TCP copy"))
        } else {
            figure.against(baselines::TCP_COPY, base.tcp_copy_mbs)
        };
        report.push(figure.with_peer(peer_cell.map(|c| c.mbs)));
    }
    let c = &weir.consumed;
    report.push(
        Figure::plain(
            s,
            &format!("consume a fresh {} MiB log (1 KiB records)", c.log_bytes >> 20),
            "MB/s",
            c.mbs,
            &format!(
                "{} records, {:.0} records/s; {:.2}× the null broker's {:.0} MB/s",
                c.records,
                c.rps,
                c.mbs / ceiling.consumed.mbs.max(f64::MIN_POSITIVE),
                ceiling.consumed.mbs
            ),
        )
        .against(baselines::TCP_COPY, base.tcp_copy_mbs)
        .target(Target::ratio_at_least(0.50, "≥ 0.50× TCP copy"))
        .with_peer(peer.map(|p| p.consumed.mbs)),
    );
    for r in &weir.rates {
        let peer_rate = peer.and_then(|p| {
            p.rates.iter().find(|x| x.policy == r.policy && x.fraction == r.fraction)
        });
        let mut figure = Figure::plain(
            s,
            &format!(
                "produce-to-consume p99 at {:.0}% of max ({:.0}/s), flush.policy={}",
                r.fraction * 100.0,
                r.rate,
                r.policy.name()
            ),
            "µs",
            r.latency.p99_us,
            &format!(
                "p50 {} µs, p99.9 {} µs, max {} µs",
                r.latency.p50_us, r.latency.p999_us, r.latency.max_us
            ),
        );
        // Under `ack` a record is visible only once synced, so its latency includes an
        // fdatasync: it is shown beside the disk's own fdatasync p99. The 10 ms target is
        // judged where the disk is not in the path (`interval`, Kafka's behaviour), and under
        // `ack` only when the disk itself syncs in well under 10 ms.
        figure = figure.against(baselines::FDATASYNC_4K_P99, base.fdatasync_4k.p99_us);
        if r.fraction == 0.5 && (r.policy == Policy::Interval || base.fdatasync_4k.p99_us < 5_000.0)
        {
            figure = figure.target(Target::at_most(10_000.0, "≤ 10 ms"));
        }
        report.push(figure.with_peer(peer_rate.map(|x| x.latency.p99_us)));
        push_latency(report, &r.latency, peer_rate.map(|x| &x.latency));
    }
    if let Some(lag) = &weir.lagging {
        let peer_lag = peer.and_then(|p| p.lagging.as_ref());
        report.push(
            Figure::plain(
                s,
                &format!("producers' p99 at {:.0}/s, no consumer", lag.rate),
                "µs",
                lag.without.p99_us,
                "acks=1, linger.ms=1",
            )
            .with_peer(peer_lag.map(|l| l.without.p99_us)),
        );
        let mut figure = Figure::plain(
            s,
            &format!("producers' p99 at {:.0}/s, lagging consumer", lag.rate),
            "µs",
            lag.with.p99_us,
            &format!(
                "one consumer group reading the log from offset 0 at {:.0} MB/s meanwhile",
                lag.consumer_mbs
            ),
        )
        .against("p99 without consumer", lag.without.p99_us)
        .target(Target::ratio_at_most(1.5, "≤ 1.5× without"));
        if let Some(p) = peer_lag {
            // The peer is judged against its own run without a consumer.
            figure.peer = Some(p.with.p99_us);
            figure.peer_ratio = Some(p.with.p99_us / p.without.p99_us.max(1.0));
            figure.peer_pass = figure.peer_ratio.map(|r| r <= 1.5);
        }
        report.push(figure);
        push_latency(report, &lag.without, peer_lag.map(|l| &l.without));
        push_latency(report, &lag.with, peer_lag.map(|l| &l.with));
    }
    for (policy, latency) in &weir.acks {
        let peer_latency =
            peer.and_then(|p| p.acks.iter().find(|(q, _)| q == policy)).map(|(_, l)| l);
        let figure = Figure::plain(
            s,
            &format!(
                "produce-ack p99 at {ACK_RATE}/s, linger.ms=0, acks=all, flush.policy={}",
                policy.name()
            ),
            "µs",
            latency.p99_us,
            &format!(
                "p50 {} µs, p99.9 {} µs, max {} µs; the null broker's p99 {} µs",
                latency.p50_us, latency.p999_us, latency.max_us, ceiling.ack.p99_us
            ),
        );
        let figure = match policy {
            Policy::Ack => figure
                .against(baselines::FDATASYNC_4K_P99, base.fdatasync_4k.p99_us)
                .target(Target::ratio_at_most(1.5, "≤ 1.5× 4KiB fdatasync p99")),
            Policy::Interval => figure.target(Target::at_most(2000.0, "≤ 2 ms")),
        };
        report.push(figure.with_peer(peer_latency.map(|l| l.p99_us)));
        push_latency(report, latency, peer_latency);
    }
    report.push(
        Figure::plain(
            s,
            "resident memory, max over the run",
            "MiB",
            rss_max_mib,
            "VmRSS of this process: broker and librdkafka clients share it",
        )
        .target(Target::at_most(RSS_MAX_MIB, "≤ 256 MiB")),
    );
}

fn push_latency(report: &mut Report, weir: &Latency, peer: Option<&Latency>) {
    report.latencies.push(weir.clone());
    if let Some(p) = peer {
        report.peer_latencies.push(p.clone());
    }
}

fn notes(report: &mut Report, plan: &Plan, peer: Option<&str>) {
    report.notes.push(format!(
        "throughput runs: librdkafka producer linger.ms={}, batch.size={}, compression none, \
         queue.buffering.max.kbytes=65536; each cell sends for up to {} s or {} MiB; MB/s counts \
         record payload bytes (10^6 B/s)",
        workload::THROUGHPUT_LINGER_MS,
        workload::THROUGHPUT_BATCH_BYTES,
        plan.cell_secs,
        plan.cell_bytes >> 20
    ));
    report.notes.push(format!(
        "latency runs: 1 KiB records, acks=1, linger.ms={}, {} s per rate; latencies are from each \
         record's intended send time; the lagging-consumer producers run at {:.0}% of the \
         acks=1 maximum; each latency phase starts on a settled disk (sync(1) first), as the \
         baselines did",
        workload::LATENCY_LINGER_MS,
        plan.rate_secs,
        plan.lag_fraction * 100.0
    ));
    report.notes.push(
        "Weir runs in this process with default settings (ephemeral port, scratch folder); \
         client and broker share the machine's 2 cores and the process's memory"
            .to_owned(),
    );
    if let Some(addr) = peer {
        report.notes.push(format!(
            "peer {addr}: topics created with the peer's defaults (no flush.policy); its memory \
             is not sampled"
        ));
    }
}
