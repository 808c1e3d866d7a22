//! Fault scenario: a partition leader's disk fills up under `acks=all` writes. Every write that
//! cannot be stored is refused with KAFKA_STORAGE_ERROR (never acknowledged; the partial write
//! is cut off again, so the log stays usable), nothing acknowledged before is lost or changed,
//! and as soon as there is room again the same leader takes writes, without a restart. A
//! restart afterwards finds every acknowledged record at its offset.
//!
//! Even seeds run one node; odd seeds three, the partition having one replica all the same:
//! with no other replica to hand it to, the leader keeps it. (Where another in-sync replica
//! can take the writes, the leader hands the partition over instead: see
//! `leader_out_of_room_hands_its_partition_over`.)

use std::collections::BTreeMap;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::DiskFaults;
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, ProduceFailure};

/// KAFKA_STORAGE_ERROR.
const KAFKA_STORAGE_ERROR: i16 = 56;
/// Writes tried once the disk is full.
const WRITES: usize = 60;
/// Most bytes the full disk still takes.
const ROOM_MAX: u64 = 4_096;

fn scenario(seed: u64) -> Result<(), String> {
    let nodes = if seed.is_multiple_of(2) { 1 } else { 3 };
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(nodes))?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "1")];
    c.create_replicated_topic(0, "t", 1, 1, &configs).map_err(|e| e.to_string())?;
    let first = c.committed_partition("t", 0).ok_or("no partition")?;
    let leader = c.ix_of(first.leader).ok_or("no leader")?;
    let mut acked = BTreeMap::new();
    for i in 0..10 {
        let value = format!("before-{i}");
        let offset =
            c.produce_with(leader, "t", 0, &value, Acks::All).map_err(|e| format!("{e:?}"))?;
        acked.insert(offset, value);
    }
    let host = c.nodes[leader];
    let room = seed % ROOM_MAX;
    let full =
        DiskFaults { capacity_bytes: Some(c.sim.disk_usage(host) + room), ..DiskFaults::default() };
    c.sim.set_disk_faults(host, full);
    let mut refused = 0;
    for i in 0..WRITES {
        let value = format!("full-{i}");
        match c.produce_with(leader, "t", 0, &value, Acks::All) {
            Ok(offset) => {
                if let Some(before) = acked.insert(offset, value.clone()) {
                    return Err(format!(
                        "offset {offset} acknowledged for {before:?} and {value:?}"
                    ));
                }
            }
            Err(ProduceFailure::Code(KAFKA_STORAGE_ERROR)) => refused += 1,
            Err(e) => return Err(format!("a write to the full disk failed with {e:?}")),
        }
    }
    ensure(refused > 0, || "a full disk refused no write".to_owned())?;
    c.sim.set_disk_faults(host, DiskFaults::default());
    let value = "room again".to_owned();
    let offset = c.produce_with(leader, "t", 0, &value, Acks::All).map_err(|e| format!("{e:?}"))?;
    ensure(acked.insert(offset, value).is_none(), || {
        format!("offset {offset} acknowledged twice")
    })?;
    c.sim.kill(host);
    c.sim.start(host);
    c.settle("the restart")?;
    let now = c.committed_partition("t", 0).ok_or("no partition")?;
    let ix = c.ix_of(now.leader).ok_or("no leader")?;
    let read = c.read_all(ix, "t", 0)?;
    for (offset, value) in &acked {
        ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
            format!("t-0@{offset}: acked {value:?}, read {:?}", read.get(offset))
        })?;
    }
    c.watch_verdict()
}

#[test]
fn broker_disk_full_refuses_writes_and_keeps_acked_ones() {
    for_each_seed("broker_disk_full_refuses_writes_and_keeps_acked_ones", 0..8, scenario);
}
