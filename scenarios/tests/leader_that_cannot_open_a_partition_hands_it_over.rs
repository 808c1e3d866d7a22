//! A partition leader that restarts and cannot open the partition (here its segment file has
//! become a folder, as a damaged file system can leave it) must hand it over: it reports the
//! partition offline, and the controller moves leadership to another in-sync replica, which
//! takes `acks=all` writes and holds every record acknowledged before. Before, the broker stayed
//! leader in a new epoch, its followers had nothing to fetch from, and the partition took no
//! write for good, though two intact copies were in sync.
//!
//! Three nodes, replication factor 3, `min.insync.replicas=2`. Once the folder is gone again, the
//! old leader opens the partition on a later pass, without another restart, and rejoins the ISR.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_scenarios::log::{break_segment, repair_segment};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// How long the partition may take to take a write after the restart.
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", "2")];
    c.create_replicated_topic(0, "t", 1, 3, &configs).map_err(|e| e.to_string())?;
    c.await_isr_size(("t", 0), 3, Duration::from_secs(30))?;
    let first = c.committed_partition("t", 0).ok_or("no partition")?;
    let old = c.ix_of(first.leader).ok_or("no leader")?;
    let mut acked = BTreeMap::new();
    for i in 0..5 {
        let value = format!("before-{i}");
        let offset =
            c.produce_with(old, "t", 0, &value, Acks::All).map_err(|e| format!("{e:?}"))?;
        acked.insert(offset, value);
    }
    let host = c.nodes[old];
    break_segment(&c.sim, host, "t-0")?;
    c.sim.kill(host);
    c.sim.start(host);

    let via = (old + 1) % 3;
    let offset = c
        .produce(via, "t", 0, "after", FAILOVER_LIMIT)
        .ok_or("t-0 took no write after its leader restarted unable to open it")?;
    acked.insert(offset, "after".to_owned());
    let now = c.committed_partition("t", 0).ok_or("no partition")?;
    ensure(c.ix_of(now.leader) != Some(old), || {
        format!("node{} still leads t-0, which it cannot open", old + 1)
    })?;
    let leader = c.ix_of(now.leader).ok_or("no leader")?;
    let read = c.read_all(leader, "t", 0)?;
    for (offset, value) in &acked {
        ensure(read.get(offset).is_some_and(|v| v.as_ref() == value.as_bytes()), || {
            format!("t-0@{offset}: acked {value:?}, read {:?}", read.get(offset))
        })?;
    }

    repair_segment(&c.sim, host, "t-0")?;
    c.await_isr_size(("t", 0), 3, Duration::from_secs(60))
        .map_err(|e| format!("the old leader did not rejoin once repaired: {e}"))?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

#[test]
fn leader_that_cannot_open_a_partition_hands_it_over() {
    for_each_seed("leader_that_cannot_open_a_partition_hands_it_over", 0..6, scenario);
}
