//! Fault scenario: a consumer group's coordinator loses its disk's syncs, so its
//! `__consumer_offsets` partition log goes offline. The controller moves the partition's
//! leadership to another replica, which takes the group over and takes commits the old
//! coordinator never sees. The old coordinator learns of the move only with its next heartbeat
//! answer; from the moment its log went offline it must stop answering for the group (a
//! retriable "load in progress" or "not coordinator"), or a consumer asking it in that window
//! could be handed offsets the group has since moved past, and reprocess or skip records.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use weir::topics::OFFSETS_TOPIC;
use weir_scenarios::group::{find_moved, join_and_commit, transient};
use weir_scenarios::{ensure, for_each_seed, retry};
use weir_sim::DiskFaults;
use weir_sim::client::group::MemberConfig;
use weir_sim::client::{Client, codes};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// More `__consumer_offsets` partitions than any broker has.
const OFFSETS_PARTITIONS_MAX: i32 = 1_000;

fn offsets(seed: u64, base: i64) -> BTreeMap<(String, i32), i64> {
    (0..3).map(|p| (("data".to_owned(), p), base + i64::from(p) + seed as i64)).collect()
}

fn scenario(seed: u64) -> Result<(), String> {
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
    let first = offsets(seed, 100);
    let (a, m, o) = (addrs.clone(), member.clone(), first.clone());
    let joined = c.client_call(Duration::from_secs(60), move |env| async move {
        join_and_commit(&env, &a, &m, &o).await
    });
    let (coordinator, joined) = joined.ok_or("joining did not finish")??;
    let victim = c.ix_of(coordinator).ok_or("no node")?;
    c.sim.set_disk_faults(c.nodes[victim], DiskFaults { sync_error: 1.0, ..DiskFaults::default() });
    // A commit makes the coordinator sync its offsets log, which fails and takes it offline.
    let (a, g, j) = (addrs.clone(), group.clone(), joined.clone());
    let second = offsets(seed, 200);
    let o = second.clone();
    c.client_call(Duration::from_secs(60), move |env| async move {
        let mut client = Client::new(env, a[victim], "member");
        // Whatever it answers: the write cannot be made durable there.
        let _ = client.offset_commit(&g, j.generation, &j.member_id, &o).await;
    });
    let broker = c.broker(victim).ok_or("the coordinator stopped")?;
    let offline = c.run_until(Duration::from_secs(10), |_| {
        (0..OFFSETS_PARTITIONS_MAX)
            .map_while(|i| broker.catalog.partition(OFFSETS_TOPIC, i))
            .any(|p| p.log.offline().is_some())
    });
    ensure(offline, || "the coordinator's offsets log never went offline".to_owned())?;
    c.sim.set_disk_faults(c.nodes[victim], DiskFaults::default());
    // Asked at once, before it can have heard of any move.
    let (a, g, o) = (addrs.clone(), group.clone(), first.clone());
    let answered = c.client_call(Duration::from_secs(30), move |env| async move {
        let mut client = Client::new(env, a[victim], "early");
        let wanted: Vec<_> = o.keys().cloned().collect();
        client.offset_fetch(&g, &wanted).await
    });
    match answered.ok_or("the early offset fetch did not finish")? {
        Err(e) if transient(&e) => {}
        other => {
            return Err(format!(
                "the coordinator whose offsets log is offline answered an offset fetch with \
                 {other:?}"
            ));
        }
    }
    // Another broker takes the group over and takes a commit the cut-off one never sees.
    let third = offsets(seed, 300);
    let reachable: Vec<_> = (0..3).filter(|&ix| ix != victim).map(|ix| addrs[ix]).collect();
    let (g, m, o, j) = (group.clone(), member.clone(), third.clone(), joined.clone());
    let moved = c.client_call(Duration::from_secs(120), move |env| async move {
        let new = find_moved(&env, &reachable, &g, coordinator).await?;
        let mut client = Client::new(env.clone(), addrs[(new - 1) as usize], "member");
        let joined = retry!(env, client.join_group(&m, &j.member_id, Bytes::new()))?;
        let assignment = vec![(joined.member_id.clone(), Bytes::new())];
        retry!(env, client.sync_group(&m, &joined, assignment.clone()))?;
        let answered =
            retry!(env, client.offset_commit(&g, joined.generation, &joined.member_id, &o))?;
        if answered.values().any(|&code| code != codes::NONE) {
            return Err(format!("commit at the new coordinator: {answered:?}"));
        }
        // The new coordinator has the newest commit; the old one does not serve its own.
        let wanted: Vec<_> = o.keys().cloned().collect();
        let fetched = retry!(env, client.offset_fetch(&g, &wanted))?;
        if fetched != o {
            return Err(format!("committed {o:?}, the new coordinator has {fetched:?}"));
        }
        let mut old = Client::new(env.clone(), addrs[(coordinator - 1) as usize], "stale");
        match old.offset_fetch(&g, &wanted).await {
            Ok(fetched) if fetched == o => {}
            Err(e) if transient(&e) => {}
            other => return Err(format!("the old coordinator answered {other:?}")),
        }
        Ok(new)
    });
    let new = moved.ok_or("the move did not finish")??;
    ensure(new != coordinator, || "the coordinator did not move".to_owned())?;
    c.watch_verdict()
}

#[test]
fn coordinator_with_offline_offsets_log_stops_serving() {
    for_each_seed("coordinator_with_offline_offsets_log_stops_serving", 0..8, scenario);
}
