//! Fault scenario: a follower of a three-replica partition is cut off from its leader long
//! enough to leave the ISR, and a backlog is written past it with `acks=all` (the leader and
//! the other follower acknowledge it). When the link heals the follower copies the backlog
//! within its broker's catch-up budget (`replica_catch_up_bytes_per_sec`), so it cannot rejoin
//! the ISR before the backlog's size at that rate has passed — and meanwhile the leader goes
//! on acknowledging `acks=all` writes. Without a budget the same follower rejoins well within
//! that time, so the budget, not something else, is what paced it. Either way it ends
//! byte-identical to the leader, every acknowledged write in place.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// `replica.lag.time.max.ms` here: shorter than the broker session, so the lag rule, not
/// fencing, drops the cut-off follower.
const LAG_MS: u64 = 3_000;
/// The catch-up budget of the paced runs, bytes per second.
const BUDGET: u64 = 64 << 10;
/// Records written past the follower, and their size.
const BACKLOG_RECORDS: usize = 48;
const RECORD_BYTES: usize = 8 << 10;

/// Runs the scenario with `budget` (0: no limit); returns the seconds from the heal until the
/// follower was back in the ISR, and the bytes it was behind.
fn run(seed: u64, budget: u64) -> Result<(f64, u64), String> {
    let spec = ClusterSpec {
        replica_lag_ms: LAG_MS,
        catch_up_bytes_per_sec: budget,
        ..ClusterSpec::combined(3)
    };
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let p = c.committed_partition("t", 0).ok_or("no partition")?;
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    // Not the active controller: the leader must still reach it to shrink the ISR.
    let controller = c.active_controller().map(node_id);
    let follower_id = p
        .replicas
        .iter()
        .copied()
        .find(|&r| r != p.leader && Some(r) != controller)
        .ok_or("no follower")?;
    let follower = c.ix_of(follower_id).ok_or("no follower node")?;
    let mut acked = Vec::new();
    let mut write = |c: &mut Cluster, n: usize| -> Result<(), String> {
        let value = format!("{n:06}{}", "x".repeat(RECORD_BYTES - 6));
        let offset = c.produce(leader, "t", 0, &value, Duration::from_secs(20));
        let offset = offset.ok_or_else(|| format!("write {n} was not acknowledged"))?;
        acked.push((offset, value));
        Ok(())
    };
    write(&mut c, 0)?;

    c.sim.partition(&[c.nodes[leader]], &[c.nodes[follower]]);
    let dropped = c.run_until(Duration::from_millis(LAG_MS + 2_000), |c| {
        c.committed_partition("t", 0).is_some_and(|p| !p.isr.contains(&follower_id))
    });
    ensure(dropped, || format!("node{follower_id} still in the ISR after the cut"))?;
    let behind_from = c.log_end(follower, "t", 0).ok_or("no follower log")?;
    for n in 1..=BACKLOG_RECORDS {
        write(&mut c, n)?;
    }
    let end = c.log_end(leader, "t", 0).ok_or("no leader log")?;
    let behind = c
        .replica_bytes(leader, "t", 0, behind_from, end)
        .ok_or("the leader's backlog could not be read")?
        .len() as u64;

    c.sim.heal_all();
    let healed = c.sim.now();
    // The leader acknowledges acks=all writes while the follower catches up.
    for n in BACKLOG_RECORDS + 1..=BACKLOG_RECORDS + 3 {
        write(&mut c, n)?;
    }
    let rejoined = c.run_until(Duration::from_secs(60), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.isr.contains(&follower_id))
    });
    ensure(rejoined, || format!("node{follower_id} did not rejoin within 60 s of the heal"))?;
    let took = (c.sim.now() - healed).as_secs_f64();
    c.run_for(Duration::from_secs(2));
    let read = c.read_all(leader, "t", 0)?;
    for (offset, value) in &acked {
        ensure(read.get(offset).is_some_and(|v| v == value.as_bytes()), || {
            format!("acknowledged write at {offset} does not read back")
        })?;
    }
    c.replicas_converged("t", 0)?;
    c.watch_verdict()?;
    Ok((took, behind))
}

fn scenario(seed: u64) -> Result<(), String> {
    let (paced, behind) = run(seed, BUDGET)?;
    // The copy's first fetch may pass a burst of 100 ms at the rate; the rest waits.
    let least = behind as f64 / BUDGET as f64 - 0.1;
    ensure(paced >= least, || {
        format!(
            "{behind} bytes behind at {BUDGET} B/s: rejoined after {paced:.2} s, < {least:.2} s"
        )
    })?;
    let (free, _) = run(seed, 0)?;
    ensure(free < least / 2.0, || {
        format!("without a budget the follower took {free:.2} s (paced: {paced:.2} s)")
    })
}

#[test]
fn follower_catching_up_copies_within_its_budget() {
    for_each_seed("follower_catching_up_copies_within_its_budget", 0..4, scenario);
}
