//! Fault scenario: DeleteRecords on a partition with three replicas, then its leader is killed
//! or loses power at once. An answer without error promised that the records below its low
//! watermark are gone; an in-sync follower elected next must not serve them again. So the
//! followers adopt the leader's log start from their fetches (durably), the leader answers
//! DeleteRecords only once every in-sync replica reports a start at or past the offset asked
//! for, and a follower joins the ISR only with a start no earlier than the leader's.
//!
//! In half the seeds the leader's answers to its followers are held back (a clogged link) while
//! DeleteRecords runs: the followers cannot learn the new start, so the request must fail (time
//! out) rather than answer. After the old leader is back, every replica of a deletion that was
//! answered starts at or past the deleted offset, and all hold the leader's bytes above it.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::admin::EARLIEST;
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::producer::SteadyProducer;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec::combined(3);
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(seed as usize % 3, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    c.run_for(Duration::from_millis(1_000 + seed % 2_000));
    let acked = producer.acked();
    ensure(acked.len() >= 4, || format!("only {} writes acknowledged", acked.len()))?;
    let cut = acked[acked.len() / 2].offset;
    let image = c.committed_image().ok_or("no committed image")?;
    let before = image.topic("t").ok_or("no topic")?.partitions[&0].clone();
    let victim = c.ix_of(before.leader).ok_or("no leader")?;

    let slow = seed % 4 >= 2;
    if slow {
        // The stalled followers keep their ISR places: replica.lag.time.max.ms is 10 s.
        producer.stop();
        for &r in before.replicas.iter().filter(|&&r| r != before.leader) {
            let follower = c.ix_of(r).ok_or("no follower node")?;
            c.sim.clog(c.nodes[victim], c.nodes[follower]);
        }
    }
    let addr = c.addr(victim);
    let answer = c
        .client_call(Duration::from_secs(15), move |env| async move {
            let mut client = Client::new(env, addr, "admin");
            client.delete_records("t", 0, cut, Duration::from_secs(2)).await
        })
        .ok_or("DeleteRecords got no answer")?;
    let deleted = match answer {
        Ok(low) => {
            ensure(low >= cut, || format!("DeleteRecords up to {cut} answered {low}"))?;
            true
        }
        // Timed out, or the leader lost its place meanwhile: the deletion may or may not
        // have happened, and nothing below is asked of it.
        Err(_) if slow => false,
        Err(e) => return Err(format!("DeleteRecords failed: {e}")),
    };
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[victim]);
    } else {
        c.sim.power_fail(c.nodes[victim]);
    }
    let elected = c.run_until(Duration::from_secs(20), |c| {
        c.committed_image().is_some_and(|i| {
            i.topic("t").is_some_and(|t| {
                let p = &t.partitions[&0];
                p.leader != before.leader && p.leader_epoch > before.leader_epoch
            })
        })
    });
    c.sim.heal_all();
    ensure(elected, || format!("no new leader within 20 s of node{}'s death", node_id(victim)))?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let image = c.committed_image().ok_or("no committed image")?;
    let leader =
        c.ix_of(image.topic("t").ok_or("topic lost")?.partitions[&0].leader).ok_or("no leader")?;
    let addr = c.addr(leader);
    let earliest = c
        .client_call(Duration::from_secs(15), move |env| async move {
            let mut client = Client::new(env, addr, "admin");
            client.list_offsets("t", &[0], EARLIEST).await
        })
        .ok_or("ListOffsets got no answer")?
        .map_err(|e| format!("ListOffsets failed: {e}"))?;
    let earliest = earliest.get(&0).copied().ok_or("no partition in ListOffsets")?;
    ensure(!deleted || earliest.is_ok_and(|e| e >= cut), || {
        format!(
            "the new leader node{} gives the earliest offset {earliest:?}, below the deleted {cut}",
            node_id(leader)
        )
    })?;
    let read = c.read_all(leader, "t", 0)?;
    let first = read.keys().next().copied();
    ensure(!deleted || first.is_none_or(|f| f >= cut), || {
        format!("the new leader node{} serves offset {first:?} below {cut}", node_id(leader))
    })?;

    // The old leader comes back, catches up and rejoins; every replica starts past the cut.
    c.restart_and_rejoin(victim, ("t", 0), 3, Duration::from_secs(30))?;
    c.run_for(Duration::from_secs(2));
    for ix in 0..c.nodes.len() {
        let start = c
            .broker(ix)
            .and_then(|b| b.catalog.partition("t", 0))
            .map(|p| p.log.log_start_offset().0)
            .ok_or_else(|| format!("node{} lacks the partition", node_id(ix)))?;
        ensure(!deleted || start >= cut, || {
            format!("node{}'s log starts at {start}, below the deleted {cut}", node_id(ix))
        })?;
    }
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn delete_records_survive_leader_failover() {
    for_each_seed("delete_records_survive_leader_failover", 0..8, scenario);
}
