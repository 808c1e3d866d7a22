//! Fault scenario: the nodes' wall clocks jump back and forth by up to an hour and drift,
//! while `acks=all` writes flow to a three-replica partition whose records are kept for two
//! hours, and retention runs every second. Broker sessions, replica lag and request timeouts
//! run on monotonic time, so no broker is fenced, no follower leaves the ISR and no leader
//! changes; retention measures record age on the wall clock, but a clock an hour off in either
//! direction is still inside the two hours, so nothing acknowledged is deleted on any replica;
//! and writes never pause for long.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Largest jump of a node's wall clock, either way.
const JUMP_MAX_MS: u64 = 3_600_000;
/// `retention.ms` of the topic: more than any skew.
const RETENTION_MS: &str = "7200000";
/// Longest pause of acknowledged writes allowed while the clocks misbehave.
const PAUSE_MAX: Duration = Duration::from_secs(1);

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { retention_check_ms: 1_000, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    // Small segments, so that retention has closed segments to judge.
    let configs = [
        ("flush.policy", "ack"),
        ("min.insync.replicas", "2"),
        ("retention.ms", RETENTION_MS),
        ("segment.bytes", "4096"),
    ];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let full = c.run_until(Duration::from_secs(10), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.isr.len() == 3)
    });
    ensure(full, || "the ISR never held three replicas".to_owned())?;
    let before = c.committed_image().ok_or("no image")?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    let mut draw = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        draw ^= draw << 13;
        draw ^= draw >> 7;
        draw ^= draw << 17;
        draw
    };
    for _ in 0..10 {
        let node = c.nodes[(next() % 3) as usize];
        let jump = (next() % JUMP_MAX_MS) as i64;
        c.sim.clock_jump(node, if next().is_multiple_of(2) { jump } else { -jump });
        c.sim.clock_drift(node, (next() % 1_001) as i64 - 500);
        c.run_for(Duration::from_millis(1_000 + next() % 2_000));
    }
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let after = c.committed_image().ok_or("no image")?;
    for (id, b) in &after.brokers {
        let was = before.brokers.get(id).ok_or("a broker appeared")?;
        ensure(!b.fenced && b.registration.incarnation == was.registration.incarnation, || {
            format!("broker {id} was fenced or re-registered under clock skew")
        })?;
    }
    let (p0, p1) = (
        before.partition("t", 0).ok_or("no partition")?,
        after.partition("t", 0).ok_or("no partition")?,
    );
    ensure(p0 == p1, || format!("the partition changed under clock skew: {p0:?} → {p1:?}"))?;
    let acked = producer.acked();
    ensure(acked.len() > 100, || format!("only {} writes acknowledged", acked.len()))?;
    let longest = acked.windows(2).map(|w| w[1].at - w[0].at).max().unwrap_or_default();
    ensure(longest <= PAUSE_MAX, || format!("writes paused {longest:?}"))?;
    for ix in 0..3 {
        let read = c.read_all(ix, "t", 0);
        let Ok(read) = read else { continue };
        for a in &acked {
            ensure(read.get(&a.offset).is_some_and(|v| v.as_ref() == a.value.as_bytes()), || {
                format!(
                    "node{}: t-0@{}: acked {:?}, read {:?}",
                    ix + 1,
                    a.offset,
                    a.value,
                    read.get(&a.offset)
                )
            })?;
        }
    }
    for ix in 0..3 {
        let start = c
            .broker(ix)
            .and_then(|b| b.catalog.partition("t", 0))
            .map(|p| p.log.log_start_offset().0);
        ensure(start == Some(0), || {
            format!("node{}: retention moved the log start to {start:?}", ix + 1)
        })?;
    }
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn clock_skew_does_not_break_retention_or_sessions() {
    for_each_seed("clock_skew_does_not_break_retention_or_sessions", 0..8, scenario);
}
