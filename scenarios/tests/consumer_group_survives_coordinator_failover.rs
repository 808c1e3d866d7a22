//! Fault scenario: a consumer group's coordinator — the leader of the group's
//! `__consumer_offsets` partition, replicated three ways — is killed or loses power. Another
//! replica of that partition is elected and takes the group over from its copy of the log:
//! FindCoordinator names it, the member's session carries on (its heartbeat is accepted, or it
//! is asked to rejoin and gets back in), and every offset the group committed before the
//! failover is fetched back from the new coordinator — also when the new coordinator's disk
//! fails some of the reads that load the group from its log.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_scenarios::group::{find_moved, join_and_commit};
use weir_scenarios::{ensure, for_each_seed, retry};
use weir_sim::DiskFaults;
use weir_sim::client::group::MemberConfig;
use weir_sim::client::{Client, codes};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// `read_error`: the probability that a read of the surviving brokers' disks fails, from the
/// failover on.
fn scenario(seed: u64, read_error: f64) -> Result<(), String> {
    let spec = ClusterSpec { replication: 3, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, "data", 3, 3, &[("flush.policy", "ack")])
        .map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let addrs: Vec<_> = (0..3).map(|ix| c.addr(ix)).collect();
    let member = MemberConfig {
        group: group.clone(),
        session_timeout: Duration::from_secs(30),
        rebalance_timeout: Duration::from_secs(10),
    };
    let offsets: BTreeMap<(String, i32), i64> =
        (0..3).map(|p| (("data".to_owned(), p), 100 + i64::from(p) + seed as i64)).collect();
    let (a, m, o) = (addrs.clone(), member.clone(), offsets.clone());
    let joined = c.client_call(Duration::from_secs(60), move |env| async move {
        join_and_commit(&env, &a, &m, &o).await
    });
    let (coordinator, joined) = joined.ok_or("joining did not finish")??;
    let victim = c.ix_of(coordinator).ok_or("no node")?;
    for (ix, &node) in c.nodes.iter().enumerate() {
        if ix != victim {
            c.sim.set_disk_faults(node, DiskFaults { read_error, ..DiskFaults::default() });
        }
    }
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[victim]);
    } else {
        c.sim.power_fail(c.nodes[victim]);
    }
    let (a, g, o) = (addrs.clone(), group.clone(), offsets.clone());
    let after = c.client_call(Duration::from_secs(60), move |env| async move {
        let new = find_moved(&env, &a, &g, coordinator).await?;
        let mut client = Client::new(env.clone(), a[(new - 1) as usize], "member");
        let beat = retry!(env, client.heartbeat(&g, joined.generation, &joined.member_id));
        match beat {
            Ok(()) => {}
            Err(e) if e.contains(&codes::REBALANCE_IN_PROGRESS.to_string()) => {}
            Err(e) => return Err(format!("heartbeat at the new coordinator: {e}")),
        }
        let wanted: Vec<_> = o.keys().cloned().collect();
        let fetched = retry!(env, client.offset_fetch(&g, &wanted))?;
        if fetched != o {
            return Err(format!("committed {o:?}, the new coordinator has {fetched:?}"));
        }
        Ok(new)
    });
    let new = after.ok_or("the failover calls did not finish")??;
    ensure(new != coordinator, || "the coordinator did not move".to_owned())?;
    for &node in &c.nodes {
        c.sim.set_disk_faults(node, DiskFaults::default());
    }
    c.watch_verdict()
}

#[test]
fn consumer_group_survives_coordinator_failover() {
    for_each_seed("consumer_group_survives_coordinator_failover", 0..8, |seed| scenario(seed, 0.0));
}

#[test]
fn consumer_group_survives_coordinator_failover_despite_read_errors() {
    for_each_seed(
        "consumer_group_survives_coordinator_failover_despite_read_errors",
        0..8,
        |seed| scenario(seed, 0.3),
    );
}
