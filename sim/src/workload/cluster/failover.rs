//! Availability under leader death: a three-node cluster with the broker's default timeouts,
//! a partition with three replicas and `min.insync.replicas=2`, and a steady `acks=all`
//! producer; the partition's leader is killed or powered off (by seed) mid-stream. The
//! measure is how long acknowledged writes paused around the death — from the last ack before
//! it (or the death itself) to the first ack after it, which needs the controller to fence the
//! dead broker, elect an in-sync follower and the producer to find it. The checks are those of
//! the scenario `leader_killed_while_acks_all_in_flight`: a new leader in a higher epoch, and
//! every acknowledged write read back from it.

use std::time::Duration;

use super::producer::{SteadyProducer, client_time, pause_around};
use super::{Cluster, ClusterSpec};
use crate::client::produce::Acks;
pub use crate::workload::Report;

/// How long after the death writes must have resumed.
pub const RESUME_BOUND: Duration = Duration::from_secs(30);

/// Runs one seed: the report, and how long writes paused (none if they never resumed).
pub fn run(seed: u64) -> (Report, Option<Duration>) {
    let spec = ClusterSpec::combined(3);
    let mut c = Cluster::new(seed, spec);
    let mut violations = Vec::new();
    let mut pause = None;
    let mut acked = 0;
    if let Err(e) = measure(&mut c, seed, &mut pause, &mut acked) {
        violations.push(e);
    }
    violations.extend(c.violations());
    let report = Report {
        seed,
        trace_hash: c.sim.trace_hash(),
        simulated: c.sim.now(),
        shape: format!(
            "3 nodes, heartbeat {} ms, session {} ms",
            spec.heartbeat_ms, spec.session_timeout_ms
        ),
        counts: format!(
            "{acked} writes acked by all; writes paused {}",
            pause.map_or("forever".to_owned(), |p| format!("{:.2}s", p.as_secs_f64()))
        ),
        acked,
        faults: Vec::new(),
        violations,
    };
    (report, pause)
}

fn measure(
    c: &mut Cluster,
    seed: u64,
    pause: &mut Option<Duration>,
    acked_count: &mut usize,
) -> Result<(), String> {
    c.settle("starting")?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let full = c.run_until(Duration::from_secs(10), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.isr.len() == 3)
    });
    if !full {
        return Err("the ISR never held three replicas".to_owned());
    }
    let producer = SteadyProducer::start(c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(1_000 + seed % 2_000));
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let victim = c.ix_of(before.leader).ok_or("no leader")?;
    let died_at = client_time(c);
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[victim]);
    } else {
        c.sim.power_fail(c.nodes[victim]);
    }
    let resumed = c.run_until(RESUME_BOUND, |_| pause_around(&producer.acked(), died_at).is_some());
    *pause = pause_around(&producer.acked(), died_at);
    if !resumed {
        return Err(format!("writes did not resume within {RESUME_BOUND:?} of the leader's death"));
    }
    producer.stop();
    c.run_for(Duration::from_secs(1));
    let after = c.committed_partition("t", 0).ok_or("no partition")?;
    if after.leader == before.leader || after.leader_epoch <= before.leader_epoch {
        return Err(format!("no new leader: {before:?} → {after:?}"));
    }
    let leader = c.ix_of(after.leader).ok_or("no leader")?;
    let read = c.read_all(leader, "t", 0)?;
    let acked = producer.acked();
    *acked_count = acked.len();
    for a in &acked {
        if read.get(&a.offset).is_none_or(|v| v.as_ref() != a.value.as_bytes()) {
            return Err(format!(
                "t-0@{}: acked {:?}, read {:?}",
                a.offset,
                a.value,
                read.get(&a.offset)
            ));
        }
    }
    Ok(())
}
