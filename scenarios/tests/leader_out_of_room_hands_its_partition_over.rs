//! Fault scenario: a partition leader's disk fills up under `acks=all` writes, on a cluster of
//! four nodes where the partition has three replicas (`min.insync.replicas=2`) and the
//! controller gives partitions back to their preferred leaders every few seconds.
//!
//! The leader refuses the writes it has no room for (KAFKA_STORAGE_ERROR, never acknowledged)
//! and hands the partition to an in-sync replica, leaving the ISR, as Kafka's leader does when
//! its log directory fails. A producer that follows leadership gets every write acknowledged,
//! each within a bound. While its disk is full the old leader is not given the partition back.
//! Once there is room again it copies what it missed and rejoins the ISR, and rebalancing gives
//! it the partition back. Every acknowledged record reads back at its offset, and the replicas
//! converge. Before, the leader kept the partition and refused every write until its disk had
//! room again, while two replicas that could take them stood by.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_scenarios::admin::rebalancing_cluster;
use weir_scenarios::ensure;
use weir_scenarios::for_each_seed;
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::Cluster;
use weir_sim::{DiskFaults, Host};

/// `leader.imbalance.check.interval.seconds` here.
const REBALANCE_SECS: u64 = 5;
/// Writes acknowledged before the disk fills.
const BEFORE: usize = 10;
/// Writes once the disk is full: their bytes are well past the room left.
const WRITES: usize = 30;
/// Bytes of each record's value.
const VALUE_BYTES: usize = 200;
/// Room left on a disk filled to the brim: less than any metadata entry.
const TINY_ROOM: u64 = 8;
/// Most bytes the full disk still takes.
const ROOM_MAX: u64 = 2_048;
/// How long a write may take to be acknowledged, retried at whichever node leads.
const WRITE_BOUND: Duration = Duration::from_secs(15);
/// Spreads the seeds over the room left (a 64-bit golden-ratio multiplier).
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;
/// How long the old leader's broker may take to learn of the new leader.
const LEARN_BOUND: Duration = Duration::from_secs(5);
/// How long the old leader may take to rejoin the ISR once it has room again.
const REJOIN_BOUND: Duration = Duration::from_secs(60);
/// How long a partition may take to move away from a paused or full leader.
const HANDOVER_BOUND: Duration = Duration::from_secs(15);

/// Leaves `host`'s disk `room` bytes of room.
fn fill(c: &Cluster, host: Host, room: u64) {
    let capacity = c.sim.disk_usage(host) + room;
    c.sim.set_disk_faults(
        host,
        DiskFaults { capacity_bytes: Some(capacity), ..DiskFaults::default() },
    );
}

/// Room of up to [`ROOM_MAX`] bytes, by seed.
fn spread(seed: u64) -> u64 {
    (seed.wrapping_mul(SPREAD) >> 32) % ROOM_MAX
}

fn value(what: &str, i: usize) -> String {
    format!("{what}-{i}-{}", "x".repeat(VALUE_BYTES))
}

/// The writes acknowledged so far, offset → value, each written through the node that leads as
/// node `via` sees it.
struct Acked {
    via: usize,
    values: BTreeMap<i64, String>,
}

impl Acked {
    /// Writes through a node outside the partition: whichever node its metadata names.
    fn new(c: &Cluster, replicas: &[i32]) -> Result<Acked, String> {
        let via = (0..c.nodes.len())
            .find(|&ix| !replicas.iter().any(|&r| c.ix_of(r) == Some(ix)))
            .ok_or("every node holds a replica")?;
        Ok(Acked { via, values: BTreeMap::new() })
    }

    /// Notes `value` acknowledged at `offset`: no offset may be acknowledged twice.
    fn note(&mut self, offset: i64, value: String) -> Result<(), String> {
        match self.values.insert(offset, value.clone()) {
            Some(earlier) => {
                Err(format!("offset {offset} acknowledged for {earlier:.12} and {value:.12}"))
            }
            None => Ok(()),
        }
    }

    /// Writes `value`, retried at whichever node leads, within [`WRITE_BOUND`].
    fn write(&mut self, c: &mut Cluster, value: String) -> Result<(), String> {
        let offset = c
            .produce(self.via, "t", 0, &value, WRITE_BOUND)
            .ok_or_else(|| format!("{value:.12} was not acknowledged within {WRITE_BOUND:?}"))?;
        self.note(offset, value)
    }

    /// Every acknowledged record reads back at its offset from node `ix`.
    fn read_back(&self, c: &mut Cluster, ix: usize) -> Result<(), String> {
        let read = c.read_all(ix, "t", 0)?;
        for (offset, value) in &self.values {
            ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
                let len = read.get(offset).map(|v| v.len());
                format!("t-0@{offset}: acked {value:.12}, read {len:?} bytes")
            })?;
        }
        Ok(())
    }
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = rebalancing_cluster(seed, REBALANCE_SECS, 3, "2")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    ensure(before.replicas.first() == Some(&before.leader), || {
        format!("the partition does not start on its preferred leader: {before:?}")
    })?;
    let old = c.ix_of(before.leader).ok_or("no leader")?;
    let mut acked = Acked::new(&c, &before.replicas)?;
    for i in 0..BEFORE {
        acked.write(&mut c, value("before", i))?;
    }
    let host = c.nodes[old];
    // Too little room for a metadata entry: the controller beside it, if any, waits too.
    fill(&c, host, seed % TINY_ROOM);
    for i in 0..WRITES {
        acked.write(&mut c, value("full", i))?;
    }
    let now = c.committed_partition("t", 0).ok_or("no partition")?;
    ensure(now.leader != before.leader && !now.isr.contains(&before.leader), || {
        format!("node{} kept its place with its disk full: {now:?}", before.leader)
    })?;
    // The controller beside it, where its node runs one, cannot persist the metadata log.
    let stalled = c.broker(old).and_then(|b| b.controller.clone());
    ensure(stalled.is_none_or(|s| !s.serves_local_metadata()), || {
        format!("the controller of node{} serves its broker with its disk full", before.leader)
    })?;
    // Its own broker learns of the handover all the same: it takes the metadata from the
    // active controller.
    let seen = |c: &Cluster| {
        let image = c.broker(old).and_then(|b| b.membership().map(|m| m.image()));
        image.and_then(|i| i.partition("t", 0).map(|p| p.leader))
    };
    let learned = c.run_until(LEARN_BOUND, |c| seen(c) == Some(now.leader));
    ensure(learned, || {
        format!("node{} sees {:?} lead, not node{}", before.leader, seen(&c), now.leader)
    })?;
    // Still full, it is not given the partition back, however often rebalancing runs.
    let regained = c.run_until(Duration::from_secs(3 * REBALANCE_SECS), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.leader == before.leader)
    });
    ensure(!regained, || format!("node{} leads again with its disk full", before.leader))?;
    c.sim.set_disk_faults(host, DiskFaults::default());
    // The controller beside it, if it runs one, waited for room, and serves its broker again.
    let serving = |c: &Cluster| {
        let controller = c.broker(old).map(|b| b.controller.clone());
        controller.is_some_and(|c| c.is_none_or(|c| c.serves_local_metadata()))
    };
    ensure(c.run_until(LEARN_BOUND, serving), || {
        format!("the controller of node{} did not take up again once it had room", before.leader)
    })?;
    takes_it_back(&mut c, &mut acked, old, before.leader)?;
    c.watch_verdict()
}

/// Node index `old` (node id `node`), which has room again, rejoins the ISR and is given the
/// partition back by rebalancing. Writes are acknowledged through it, every acknowledged record
/// reads back from it at its offset, and the replicas converge.
fn takes_it_back(c: &mut Cluster, acked: &mut Acked, old: usize, node: i32) -> Result<(), String> {
    let rejoined = c.run_until(REJOIN_BOUND, |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.isr.contains(&node))
    });
    ensure(rejoined, || {
        let p = c.committed_partition("t", 0);
        format!("node{node} did not rejoin the ISR once it had room: {p:?}")
    })?;
    let back = c.run_until(Duration::from_secs(4 * REBALANCE_SECS), |c| {
        c.committed_partition("t", 0).is_some_and(|p| p.leader == node)
    });
    ensure(back, || format!("node{node} was not given its partition back"))?;
    for i in 0..BEFORE {
        acked.write(c, value("after", i))?;
    }
    acked.read_back(c, old)?;
    c.await_isr_size(("t", 0), 3, REJOIN_BOUND)?;
    c.replicas_converged("t", 0)
}

/// Two replicas' disks fill up: the leader's, which hands the partition over, then the new
/// leader's. The partition always has a leader: lack of room moves leadership only to another
/// in-sync replica that answers, never to none (with two of the three controller voters out of
/// room, as in some seeds, the metadata cannot change at all until one has room). With one
/// replica left that has room, `acks=all` writes are refused (two in sync are needed), and no
/// write is acknowledged twice. Once both disks have room again, the ISR is
/// whole within a bound, though nothing may be left for them to append, and writes are
/// acknowledged again. (Had a replica counted as out of room until an append of its own
/// succeeded, the two would have stayed out of the ISR for good: the leader takes no write
/// with one replica in sync.)
fn two_disks_full(seed: u64) -> Result<(), String> {
    let mut c = rebalancing_cluster(seed, REBALANCE_SECS, 3, "2")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let old = c.ix_of(before.leader).ok_or("no leader")?;
    let mut acked = Acked::new(&c, &before.replicas)?;
    for i in 0..BEFORE {
        acked.write(&mut c, value("before", i))?;
    }
    fill(&c, c.nodes[old], spread(seed));
    // The leader hands the partition over; then the new leader's disk fills too.
    for i in 0..WRITES {
        acked.write(&mut c, value("full", i))?;
    }
    let moved = c.committed_partition("t", 0).ok_or("no partition")?;
    ensure(moved.leader != before.leader, || format!("no handover from a full disk: {moved:?}"))?;
    let second = c.ix_of(moved.leader).ok_or("no leader")?;
    fill(&c, c.nodes[second], spread(seed / 2));
    let leaderless = std::cell::Cell::new(false);
    let watch = |c: &mut Cluster, secs: u64| {
        c.run_until(Duration::from_secs(secs), |c| {
            // Between controllers there is no committed image to look at.
            let none = c.committed_partition("t", 0).is_some_and(|p| p.leader < 0);
            leaderless.set(leaderless.get() || none);
            false
        });
    };
    for i in 0..WRITES {
        let leader = c.committed_partition("t", 0).and_then(|p| c.ix_of(p.leader));
        if let Some(ix) = leader {
            let value = value("fuller", i);
            if let Ok(offset) = c.produce_with(ix, "t", 0, &value, Acks::All) {
                acked.note(offset, value)?;
            }
        }
        watch(&mut c, 1);
    }
    ensure(!leaderless.get(), || "the partition was left without a leader".to_owned())?;
    c.sim.set_disk_faults(c.nodes[old], DiskFaults::default());
    c.sim.set_disk_faults(c.nodes[second], DiskFaults::default());
    c.await_isr_size(("t", 0), 3, REJOIN_BOUND)?;
    watch(&mut c, 1);
    ensure(!leaderless.get(), || "the partition was left without a leader".to_owned())?;
    for i in 0..BEFORE {
        acked.write(&mut c, value("after", i))?;
    }
    let leader =
        c.committed_partition("t", 0).and_then(|p| c.ix_of(p.leader)).ok_or("no leader")?;
    acked.read_back(&mut c, leader)?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

/// A replica whose disk is full is elected while it has nothing to copy, so nothing has told it
/// (or the controller) yet that it has no room: rebalancing gives it back the partition it led
/// before a pause. It cannot record its new leader epoch. It keeps the epoch in memory, its log
/// stays online, and it hands the partition over as a leader refused a write would. Once it
/// has room it rejoins the ISR and is given the partition back, without a restart. Before, its
/// log went offline until its broker restarted, and the partition kept one replica fewer.
fn elected_while_full(seed: u64) -> Result<(), String> {
    let mut c = rebalancing_cluster(seed, REBALANCE_SECS, 3, "2")?;
    let before = c.committed_partition("t", 0).ok_or("no partition")?;
    let old = c.ix_of(before.leader).ok_or("no leader")?;
    let host = c.nodes[old];
    let mut acked = Acked::new(&c, &before.replicas)?;
    for i in 0..BEFORE {
        acked.write(&mut c, value("before", i))?;
    }
    let leads = |c: &Cluster| c.committed_partition("t", 0).map(|p| p.leader);
    // Paused, it loses the partition; its disk fills meanwhile. Nothing is written, so it has
    // nothing to copy when it resumes, and rejoins the ISR.
    c.sim.pause(host);
    let moved =
        c.run_until(HANDOVER_BOUND, |c| leads(c).is_some_and(|l| l >= 0 && l != before.leader));
    ensure(moved, || format!("node{} kept the partition while paused", before.leader))?;
    fill(&c, host, seed % TINY_ROOM);
    c.sim.resume(host);
    let given = c.run_until(REJOIN_BOUND, |c| leads(c) == Some(before.leader));
    ensure(given, || format!("node{} was not given its partition back", before.leader))?;
    let partition = c.broker(old).and_then(|b| b.catalog.partition("t", 0));
    let partition = partition.ok_or("no partition")?;
    let log = &partition.log;
    // Its new epoch is kept in memory, and counts as a refusal for room.
    let epoch = c.committed_partition("t", 0).map(|p| p.leader_epoch).ok_or("no partition")?;
    let begun = c.run_until(LEARN_BOUND, |_| {
        log.epochs().latest().is_some_and(|(e, _)| e.0 == epoch) && log.refused_for_room()
    });
    ensure(begun, || {
        let latest = log.epochs().latest();
        format!("node{} leads in epoch {epoch}: its log has {latest:?}", before.leader)
    })?;
    // It hands the partition over, its log online.
    let handed = c.run_until(HANDOVER_BOUND, |c| {
        c.committed_partition("t", 0).is_some_and(|p| {
            p.leader >= 0 && p.leader != before.leader && !p.isr.contains(&before.leader)
        })
    });
    ensure(handed, || {
        let p = c.committed_partition("t", 0);
        format!("node{} kept the partition it could not record an epoch for: {p:?}", before.leader)
    })?;
    ensure(log.offline().is_none(), || {
        format!("the log of node{} went offline: {:?}", before.leader, log.offline())
    })?;
    for i in 0..BEFORE {
        acked.write(&mut c, value("full", i))?;
    }
    let now = c.committed_partition("t", 0).ok_or("no partition")?;
    ensure(now.leader != before.leader && !now.isr.contains(&before.leader), || {
        format!("node{} is back with its disk full: {now:?}", before.leader)
    })?;
    c.sim.set_disk_faults(host, DiskFaults::default());
    takes_it_back(&mut c, &mut acked, old, before.leader)?;
    ensure(log.offline().is_none(), || {
        format!("the log of node{} went offline: {:?}", before.leader, log.offline())
    })?;
    c.watch_verdict()
}

#[test]
fn replica_elected_with_its_disk_full_hands_the_partition_over() {
    for_each_seed("leader_out_of_room_hands_its_partition_over", 0..8, elected_while_full);
}

#[test]
fn leader_and_follower_out_of_room_leave_the_partition_a_leader() {
    for_each_seed("leader_out_of_room_hands_its_partition_over", 0..8, two_disks_full);
}

#[test]
fn leader_out_of_room_hands_its_partition_over() {
    for_each_seed("leader_out_of_room_hands_its_partition_over", 0..8, scenario);
}
