//! Consumer groups in a 3-node cluster: FindCoordinator through any broker names the broker
//! that leads the group's `__consumer_offsets` partition. Group requests sent anywhere else —
//! a client with a stale coordinator — are answered NOT_COORDINATOR (so the client looks again)
//! rather than served from an empty local state, and the coordinator keeps offsets for
//! partitions that other brokers lead.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::group::MemberConfig;
use weir_sim::client::{Client, ClientError, codes};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_topic(0, "data", 6).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let addrs: Vec<_> = (0..3).map(|ix| c.addr(ix)).collect();
    let image = c.committed_image().ok_or("no image")?;
    let data = image.topic("data").ok_or("no topic")?.clone();
    let found = c.client_call(Duration::from_secs(60), move |env| async move {
        // Every broker names the same coordinator (the first call creates the offsets topic).
        let mut named = Vec::new();
        for addr in &addrs {
            let mut client = Client::new(env.clone(), *addr, "finder");
            let coordinator = loop {
                match client.find_coordinator(&group).await {
                    Ok(found) => break found,
                    Err(_) => env.clock.sleep(Duration::from_millis(200)).await,
                }
            };
            named.push(coordinator.node_id);
        }
        let coordinator = named[0];
        if named.iter().any(|&n| n != coordinator) {
            return Err(format!("brokers name different coordinators: {named:?}"));
        }
        let at = |id: i32| addrs[(id - 1) as usize];
        let member = MemberConfig {
            group: group.clone(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(10),
        };
        // Every other broker refuses every group call with NOT_COORDINATOR.
        for other in (1..=3).filter(|&id| id != coordinator) {
            let mut wrong = Client::new(env.clone(), at(other), "stale");
            let joined = wrong.join_group(&member, "", Bytes::new()).await.map(|_| ());
            let beat = wrong.heartbeat(&group, 1, "m").await;
            let fetched = wrong.offset_fetch(&group, &[("data".to_owned(), 0)]).await.map(|_| ());
            for (call, outcome) in
                [("join", joined), ("heartbeat", beat), ("offset fetch", fetched)]
            {
                if outcome != Err(ClientError::Kafka(codes::NOT_COORDINATOR)) {
                    return Err(format!("{call} at broker {other}: {outcome:?}"));
                }
            }
        }
        // The coordinator commits offsets of every partition, wherever it is led, and
        // returns them.
        let mut right = Client::new(env.clone(), at(coordinator), "member");
        let offsets: BTreeMap<(String, i32), i64> =
            (0..6).map(|p| (("data".to_owned(), p), 10 + i64::from(p))).collect();
        let committed = loop {
            match right.offset_commit(&group, -1, "", &offsets).await {
                Err(ClientError::Kafka(codes::COORDINATOR_LOAD_IN_PROGRESS)) => {
                    env.clock.sleep(Duration::from_millis(100)).await;
                }
                other => break other.map_err(|e| e.to_string())?,
            }
        };
        if committed.values().any(|&code| code != codes::NONE) {
            return Err(format!("commit at the coordinator: {committed:?}"));
        }
        let wanted: Vec<_> = offsets.keys().cloned().collect();
        let read = right.offset_fetch(&group, &wanted).await.map_err(|e| e.to_string())?;
        if read != offsets {
            return Err(format!("committed {offsets:?}, fetched {read:?}"));
        }
        Ok(coordinator)
    });
    let coordinator = found.ok_or("the group calls did not finish")??;
    let leaders: Vec<i32> = data.partitions.values().map(|p| p.leader).collect();
    ensure(leaders.iter().any(|&l| l != coordinator), || {
        format!("every partition is led by the coordinator {coordinator}: {leaders:?}")
    })?;
    c.watch_verdict()
}

#[test]
fn group_requests_reach_only_their_coordinator() {
    for_each_seed("group_requests_reach_only_their_coordinator", 0..8, scenario);
}
