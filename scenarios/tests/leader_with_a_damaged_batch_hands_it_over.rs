//! Fault scenario: a latent sector error under a partition's leader. `acks=all` writes flow to
//! a topic of replication factor 3 (`min.insync.replicas=2`); once the leader's checkpoint
//! covers some of them, a bit of one stored batch flips on its disk (which one, by seed). Every
//! in-sync follower holds an intact copy of that batch. A read that meets the damage on the
//! leader — by seed, a consumer's fetch of it, or a follower that was down and catches up past
//! it — makes the leader hand leadership to an in-sync replica: its copy then serves the batch,
//! and the follower catches up. Before, the damaged batch stayed unreadable for consumers while
//! the leader lived, and a follower behind it stalled there for good.
//!
//! Within a few seconds of the read leadership must have moved; writes go on; the follower that
//! was down rejoins the ISR; and a read of the whole partition from the new leader returns every
//! acknowledged record. The damaged replica is the partition's preferred one. Following now, it
//! asks the new leader for the damaged batch and writes the intact copy over its own (until
//! this repair, its copy stayed damaged for good); until then it reports the damage, and leader
//! rebalancing, every few seconds here, must not give it the partition back (it did, at every
//! pass, until its heartbeats reported the damage). Once repaired, rebalancing must give it the
//! partition back, and every acknowledged record must read back from it.

use std::time::Duration;

use weir_scenarios::admin::rebalancing_cluster;
use weir_scenarios::log::{durable_recovery_point, segment_batches};
use weir_scenarios::{acked_read_back, ensure, for_each_seed};
use weir_sim::client::codes;
use weir_sim::client::fetch::FetchWant;
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::Cluster;
use weir_sim::workload::cluster::producer::SteadyProducer;

/// Records the leader's checkpoint must cover before a batch is damaged.
const COVERED: i64 = 40;
/// How long the checkpoint may take to cover them.
const CHECKPOINT_BOUND: Duration = Duration::from_secs(180);
/// Within how long of the read that met the damage leadership must have moved.
const MOVE_BOUND: Duration = Duration::from_secs(10);
/// Spreads the seeds over the batches that may be damaged (a 64-bit golden-ratio multiplier).
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;
/// How long the follower that was down may take to rejoin the ISR.
const REJOIN_BOUND: Duration = Duration::from_secs(60);
/// How long the damaged replica may take to repair its copy once the ISR is whole.
const REPAIR_BOUND: Duration = Duration::from_secs(10);
/// `leader.imbalance.check.interval.seconds` here.
const REBALANCE_SECS: u64 = 5;

fn scenario(seed: u64) -> Result<(), String> {
    // Four nodes, three of them voters; the partition's replicas are any three.
    let mut c = rebalancing_cluster(seed, REBALANCE_SECS, 3, "2")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let leader = c.ix_of(before.leader).ok_or("no leader")?;
    // By seed, a follower is down from the start, and catches up past the damage later.
    let catching_up = seed % 2 == 1;
    let down = before
        .replicas
        .iter()
        .copied()
        .find(|&r| r != before.leader)
        .and_then(|r| c.ix_of(r))
        .ok_or("no follower")?;
    if catching_up {
        c.sim.kill(c.nodes[down]);
    }
    let producer = SteadyProducer::start(&c, "t", 0, Acks::All);
    let dir = "t-0";
    let covered = c.run_until(CHECKPOINT_BOUND, |c| {
        durable_recovery_point(&c.sim, c.nodes[leader], dir).is_some_and(|p| p >= COVERED)
    });
    ensure(covered, || format!("the leader's checkpoint did not reach {COVERED}"))?;
    let recovery = durable_recovery_point(&c.sim, c.nodes[leader], dir).ok_or("no checkpoint")?;
    let segment = std::path::Path::new(dir).join(format!("{:020}.log", 0));
    let bytes = c.sim.durable_contents(c.nodes[leader], &segment).map_err(|e| e.to_string())?;
    let below: Vec<_> =
        segment_batches(&bytes).into_iter().filter(|&(_, _, _, last)| last < recovery).collect();
    ensure(below.len() >= 2, || format!("{} batches below {recovery}", below.len()))?;
    // Not the first batch: a follower starts from some offset past 0 only after it.
    let pick = (seed.wrapping_mul(SPREAD) >> 33) as usize;
    let (at, len, base, _) = below[1 + pick % (below.len() - 1)];
    c.sim
        .corrupt_durable_file(c.nodes[leader], &segment, (at + len - 1) as u64)
        .map_err(|e| format!("damaging the leader's batch at {base}: {e}"))?;
    if catching_up {
        c.sim.start(c.nodes[down]);
    } else {
        let addr = c.addr(leader);
        let fetched = c
            .client_call(Duration::from_secs(10), move |env| async move {
                let mut client = weir_sim::client::Client::new(env, addr, "reader");
                let want = FetchWant { topic: "t".into(), partition: 0, offset: base };
                client.fetch(&[want], Duration::ZERO).await
            })
            .ok_or("no answer to the fetch")?
            .map_err(|e| format!("fetch: {e}"))?;
        let code = fetched.first().map(|f| f.error_code);
        ensure(code == Some(codes::CORRUPT_MESSAGE), || {
            format!("a fetch of the damaged batch at {base} from the leader answered {code:?}")
        })?;
    }
    let moved =
        c.run_until(MOVE_BOUND + if catching_up { REJOIN_BOUND } else { Duration::ZERO }, |c| {
            c.committed_partition("t", 0)
                .is_some_and(|p| p.leader != before.leader && p.leader >= 0)
        });
    ensure(moved, || {
        format!(
            "leadership still on node{} after a read met its damaged batch at {base}",
            before.leader
        )
    })?;
    let rejoined = c.run_until(REJOIN_BOUND, |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.isr.len() == 3)
    });
    ensure(rejoined, || {
        let p = c.committed_partition("t", 0);
        format!("the ISR is not whole again after the move: {p:?}")
    })?;
    // The damaged replica, following now, writes the new leader's intact copy over its own;
    // until then it reports the damage, so rebalancing must not give it the partition back.
    let original = bytes.get(at..at + len).ok_or("the batch is outside the segment")?.to_vec();
    let whole = |c: &Cluster| {
        let now = c.sim.durable_contents(c.nodes[leader], &segment);
        now.is_ok_and(|now| now.get(at..at + len) == Some(&original[..]))
    };
    let early = std::cell::Cell::new(false);
    let repaired = c.run_until(REPAIR_BOUND, |c| {
        let leads = c.committed_partition("t", 0).is_some_and(|p| p.leader == before.leader);
        let whole = whole(c);
        early.set(early.get() || (leads && !whole));
        whole
    });
    ensure(!early.get(), || {
        format!("node{} leads again, its damaged batch at {base} unrepaired", before.leader)
    })?;
    ensure(repaired, || {
        format!(
            "node{} did not repair its damaged batch at {base} from the new leader",
            before.leader
        )
    })?;
    // Whole again, it is given the partition back by rebalancing, and serves every record.
    let back = c.run_until(Duration::from_secs(REBALANCE_SECS * 4), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.leader == before.leader)
    });
    ensure(back, || {
        format!("node{} does not lead again once its damaged batch is repaired", before.leader)
    })?;
    let acked_then = producer.acked().len();
    c.run_for(Duration::from_secs(3));
    ensure(producer.acked().len() > acked_then, || "writes stopped after the move".to_owned())?;
    producer.stop();
    c.run_for(Duration::from_secs(2));
    let now = c.committed_partition("t", 0).ok_or("no partition")?.leader;
    ensure(now == before.leader, || {
        format!("node{now} leads, not the repaired node{}", before.leader)
    })?;
    let read = c.read_all(leader, "t", 0)?;
    acked_read_back("t-0", &read, &producer.acked())?;
    if catching_up {
        // The follower copied the batch from a replica that holds it intact.
        let leader_now = c.ix_of(now).ok_or("no leader")?;
        let upto = *read.keys().next_back().ok_or("nothing read")? + 1;
        let want = c.replica_bytes(leader_now, "t", 0, 0, upto).ok_or("cannot read the leader")?;
        let got = c.replica_bytes(down, "t", 0, 0, upto);
        ensure(got.as_ref() == Some(&want), || {
            format!("node{}, back from being down, does not hold the leader's bytes", down + 1)
        })?;
    }
    c.watch_verdict()
}

#[test]
fn leader_with_a_damaged_batch_hands_it_over() {
    for_each_seed("leader_with_a_damaged_batch_hands_it_over", 0..12, scenario);
}
