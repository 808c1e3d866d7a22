//! Fault scenario: a follower of a three-replica partition is cut off from its leader while
//! `acks=all` writes flow; meanwhile the leader's log start moves past everything the follower
//! holds (DeleteRecords up to the high watermark). When the link heals the follower's fetch
//! offset lies below the leader's log start, so there is no tail it could copy: it must empty
//! its log, start it again at the leader's start, catch up and rejoin the ISR — not ask for
//! the deleted offsets forever. In half the seeds the new start lies inside the leader's last
//! batch (DeleteRecords may put it there), which the leader sends whole: the empty log starts
//! again at that batch's base, as Kafka's follower does, rather than refusing it forever.

use std::time::Duration;

use weir::model::Offset;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// `replica.lag.time.max.ms` in this scenario: shorter than the broker session, so the lag
/// rule, not fencing, drops the follower.
const LAG_MS: u64 = 3_000;

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { replica_lag_ms: LAG_MS, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(500 + seed % 1_000));
    let image = c.committed_image().ok_or("no committed image")?;
    let p = image.topic("t").ok_or("no topic")?.partitions[&0].clone();
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let controller = c.active_controller().map(node_id);
    let follower_id = p
        .replicas
        .iter()
        .copied()
        .find(|&r| r != p.leader && Some(r) != controller)
        .ok_or("no follower")?;
    let follower = c.ix_of(follower_id).ok_or("no follower node")?;
    c.sim.partition(&[c.nodes[leader]], &[c.nodes[follower]]);
    let dropped = c.run_until(Duration::from_millis(LAG_MS + 2_000), |c| {
        c.committed_image().is_some_and(|i| {
            i.topic("t").is_some_and(|t| !t.partitions[&0].isr.contains(&follower_id))
        })
    });
    ensure(dropped, || format!("node{follower_id} still in the ISR after the cut"))?;
    c.run_for(Duration::from_secs(1));
    let behind = c.log_end(follower, "t", 0).ok_or("the follower lacks the partition")?;

    // In odd seeds the log ends with a batch of three records, and the new start lies inside
    // it: the follower that starts again there is sent the whole batch.
    let inside = seed % 2 == 1;
    if inside {
        producer.stop();
        c.run_for(Duration::from_secs(1));
        c.produce_batch(leader, ("t", 0), &["a", "b", "c"], Acks::All)
            .map_err(|e| format!("the batch of three was not acknowledged: {e:?}"))?;
    }

    // DeleteRecords on the leader, up to its high watermark (or the last record below it):
    // past the follower's end.
    let lp = c
        .broker(leader)
        .and_then(|b| b.catalog.partition("t", 0))
        .ok_or("the leader lacks the partition")?;
    let hw = lp.high_watermark();
    ensure(hw.0 > behind + 3, || {
        format!("the leader's high watermark {hw} is not past {behind} by a batch")
    })?;
    let target = if inside { Offset(hw.0 - 1) } else { hw };
    let host = c.nodes[leader];
    let start = c
        .sim
        .block_on(host, Duration::from_secs(10), move |_| async move {
            lp.log.delete_records_before(target, hw).await.map_err(|e| e.to_string())
        })
        .ok_or("DeleteRecords did not finish")??;
    ensure(start == target, || format!("the leader's log start moved to {start}, not {target}"))?;

    c.sim.heal_all();
    let rejoined = c.run_until(Duration::from_secs(30), |c| {
        c.committed_image()
            .is_some_and(|i| i.topic("t").is_some_and(|t| t.partitions[&0].isr.len() == 3))
    });
    ensure(rejoined, || format!("node{follower_id} did not rejoin within 30 s of the heal"))?;
    let fp = c
        .broker(follower)
        .and_then(|b| b.catalog.partition("t", 0))
        .ok_or("the follower lacks the partition")?;
    ensure(fp.log.log_start_offset() >= start, || {
        format!(
            "the follower's log starts at {}, below the leader's {start}",
            fp.log.log_start_offset()
        )
    })?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    // Every write acknowledged at or past the new start reads back from the leader.
    let read = c.read_all(leader, "t", 0)?;
    let acked = producer.acked();
    let kept = acked.iter().filter(|a| Offset(a.offset) >= start);
    weir_scenarios::acked_read_back("t-0", &read, kept)?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn follower_behind_leader_log_start_starts_again_there() {
    for_each_seed("follower_behind_leader_log_start_starts_again_there", 0..6, scenario);
}
