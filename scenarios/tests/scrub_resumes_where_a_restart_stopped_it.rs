//! Scenario: a scrub pass long enough that its broker restarts in the middle of it. One node
//! holds a topic of about a megabyte, scrubbed at 8 KiB/s, so that one pass over it takes a few
//! minutes. Once the pass over the whole log has recorded where it got to (its checkpoint
//! names a partition and an offset), the node is killed and started again; by seed, after a
//! clean shutdown.
//!
//! The pass must go on from the recorded offset, not from the start: after the restart it must
//! end sooner than a whole pass takes, by at least half the time the recorded part took. And it
//! must keep to its rate: it cannot end before the bytes past the recorded offset take to read
//! at 8 KiB/s.

use std::time::Duration;

use bytes::Bytes;
use weir::scrub::{SCRUB_CHECKPOINT, SCRUB_READ_BYTES, ScrubState};
use weir_scenarios::admin::cluster_with_topic;
use weir_scenarios::log::segment_batches;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// `log_scrub_bytes_per_sec` here.
const RATE: u64 = 8 << 10;
/// `log_scrub_interval_ms` here.
const INTERVAL_MS: u64 = 5_000;
/// How long the producer writes.
const WRITING: Duration = Duration::from_secs(20);
/// Longer than any pass here takes.
const PASS_BOUND: Duration = Duration::from_secs(600);

/// The scrub state node 1's data folder holds durably.
fn scrub_state(c: &Cluster) -> Option<ScrubState> {
    let bytes = c.sim.durable_contents(c.nodes[0], SCRUB_CHECKPOINT).ok()?;
    ScrubState::from_checkpoint(&Bytes::from(bytes))
}

/// The bytes of `t-0`'s batches from `offset` on, as node 1 holds them.
fn bytes_from(c: &Cluster, offset: i64) -> Result<u64, String> {
    let segment = std::path::Path::new("t-0").join(format!("{:020}.log", 0));
    let bytes = c.sim.durable_contents(c.nodes[0], &segment).map_err(|e| e.to_string())?;
    let batches = segment_batches(&bytes);
    Ok(batches.iter().filter(|b| b.2 >= offset).map(|b| b.1 as u64).sum())
}

fn seconds(bytes: u64) -> Duration {
    Duration::from_secs_f64(bytes as f64 / RATE as f64)
}

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec {
        scrub_interval_ms: INTERVAL_MS,
        scrub_bytes_per_sec: RATE,
        ..ClusterSpec::combined(1)
    };
    let mut c = cluster_with_topic(seed, spec, 1, "1")?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(WRITING);
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let whole = bytes_from(&c, 0)?;
    // Two passes end: the one under way when writes stopped, then one over the whole log.
    for _ in 0..2 {
        let last = scrub_state(&c).ok_or("no scrub checkpoint")?.finished_ms;
        let ended =
            c.run_until(PASS_BOUND, |c| scrub_state(c).is_some_and(|s| s.finished_ms > last));
        ensure(ended, || format!("no scrub pass ended within {PASS_BOUND:?}"))?;
    }
    // The next pass records where it got to.
    let on_t = |s: &ScrubState| s.cursor.as_ref().is_some_and(|(tp, _)| tp.topic == "t");
    let recorded = c.run_until(PASS_BOUND, |c| scrub_state(c).is_some_and(|s| on_t(&s)));
    ensure(recorded, || "the pass over t-0 recorded no offset".to_owned())?;
    let mut state = scrub_state(&c).ok_or("no scrub checkpoint")?;
    if seed.is_multiple_of(2) {
        // A clean shutdown first: it closes every log under the pass, which must not take
        // the pass for ended.
        let broker = c.broker(0).ok_or("node1 is down")?;
        let stopped = c.sim.block_on(c.nodes[0], PASS_BOUND, move |_env| async move {
            broker.shutdown().await;
        });
        ensure(stopped.is_some(), || "the shutdown did not finish".to_owned())?;
        // Long enough for the scrub to wake from its pacing and find the logs closed.
        c.run_for(seconds(SCRUB_READ_BYTES as u64) + Duration::from_secs(5));
        let after = scrub_state(&c).ok_or("no scrub checkpoint")?;
        ensure(after.finished_ms == state.finished_ms && after.cursor.is_some(), || {
            format!("the shutdown recorded the pass as ended: {after:?}, before {state:?}")
        })?;
        state = after;
    }
    let (_, at) = state.cursor.clone().ok_or("no cursor")?;
    let left = bytes_from(&c, at.0)?;
    ensure(left < whole, || format!("the pass recorded offset {at}, before any batch"))?;
    c.sim.kill(c.nodes[0]);
    c.sim.start(c.nodes[0]);
    let restarted = c.sim.now();
    let ended = c.run_until(PASS_BOUND, |c| {
        scrub_state(c).is_some_and(|s| s.finished_ms > state.finished_ms)
    });
    ensure(ended, || format!("the pass did not end within {PASS_BOUND:?} of the restart"))?;
    let took = c.sim.now() - restarted;
    let (full, rest) = (seconds(whole), seconds(left));
    ensure(took + (full - rest) / 2 <= full, || {
        format!(
            "after the restart the pass took {took:?}: not resumed at offset {at} (a whole pass takes {full:?}, the rest {rest:?})"
        )
    })?;
    ensure(took >= rest, || {
        format!(
            "after the restart the pass took {took:?}, less than its {left} bytes take at {RATE} B/s"
        )
    })
}

#[test]
fn scrub_resumes_where_a_restart_stopped_it() {
    for_each_seed("scrub_resumes_where_a_restart_stopped_it", 0..2, scenario);
}
