//! `__consumer_offsets` is compacted on every replica, and a group's coordinator that takes over
//! from a compacted copy serves the group's last commits.
//!
//! Kafka creates the offsets topic with `segment.bytes` = `offsets.topic.segment.bytes`; only
//! sealed segments are cleaned, so with the default of 100 MiB a small cluster's commits are
//! never compacted. Here the setting is 1 KiB and compaction passes run every second: a group
//! commits three partitions' offsets 300 times, each commit rising. Every replica of the group's
//! offsets partition must then hold less than half of the commits' batch headers alone (each
//! commit is one batch of three records), the coordinator is killed or loses power, and the
//! replica elected in its place must answer OffsetFetch with the last commit.

use std::collections::BTreeMap;
use std::time::Duration;

use weir::topics::OFFSETS_TOPIC;
use weir_scenarios::group::{find_moved, join_and_commit};
use weir_scenarios::{ensure, for_each_seed, retry};
use weir_sim::client::group::MemberConfig;
use weir_sim::client::{Client, codes};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Commits after the first.
const COMMITS: i64 = 300;
/// Bytes of a batch's header: every commit writes one batch.
const BATCH_HEADER_BYTES: u64 = 61;

/// Bytes the group's offsets partition holds on each live replica.
fn held(c: &Cluster, partition: i32) -> Vec<(usize, u64)> {
    (0..c.nodes.len())
        .filter_map(|ix| {
            let p = c.broker(ix)?.catalog.partition(OFFSETS_TOPIC, partition)?;
            Some((ix, p.log.describe_segments().iter().map(|s| s.1).sum()))
        })
        .collect()
}

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec {
        replication: 3,
        retention_check_ms: 1_000,
        offsets_segment_bytes: 1_024,
        ..ClusterSpec::combined(3)
    };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, "data", 3, 3, &[]).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let addrs: Vec<_> = (0..3).map(|ix| c.addr(ix)).collect();
    let member = MemberConfig {
        group: group.clone(),
        session_timeout: Duration::from_secs(60),
        rebalance_timeout: Duration::from_secs(10),
    };
    let offsets = |n: i64| -> BTreeMap<(String, i32), i64> {
        (0..3).map(|p| (("data".to_owned(), p), n * 10 + i64::from(p))).collect()
    };
    let (a, m, first) = (addrs.clone(), member.clone(), offsets(0));
    let committed = c.client_call(Duration::from_secs(600), move |env| async move {
        let (coordinator, joined) = join_and_commit(&env, &a, &m, &first).await?;
        let mut client = Client::new(env.clone(), a[(coordinator - 1) as usize], "member");
        for n in 1..=COMMITS {
            let answered = client
                .offset_commit(&m.group, joined.generation, &joined.member_id, &offsets(n))
                .await
                .map_err(|e| format!("commit {n}: {e}"))?;
            if answered.values().any(|&code| code != codes::NONE) {
                return Err(format!("commit {n}: {answered:?}"));
            }
            env.clock.sleep(Duration::from_millis(20)).await;
        }
        Ok(coordinator)
    });
    let coordinator = committed.ok_or("the commits did not finish")??;
    // Passes every second clean what the commits sealed.
    c.run_for(Duration::from_secs(10));
    let partition =
        weir::groups::partition_for(&group, weir_sim::workload::cluster::OFFSETS_TOPIC_PARTITIONS);
    let written = COMMITS as u64 * BATCH_HEADER_BYTES;
    let sizes = held(&c, partition);
    ensure(sizes.len() == 3, || format!("replicas holding the offsets partition: {sizes:?}"))?;
    ensure(sizes.iter().all(|&(_, bytes)| bytes * 2 < written), || {
        format!(
            "{OFFSETS_TOPIC}-{partition} holds {sizes:?} bytes per replica after {written} bytes of batch headers alone: not compacted"
        )
    })?;
    let victim = c.ix_of(coordinator).ok_or("no node")?;
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[victim]);
    } else {
        c.sim.power_fail(c.nodes[victim]);
    }
    let (a, g, last) = (addrs.clone(), group.clone(), offsets(COMMITS));
    let fetched = c.client_call(Duration::from_secs(60), move |env| async move {
        let new = find_moved(&env, &a, &g, coordinator).await?;
        let mut client = Client::new(env.clone(), a[(new - 1) as usize], "member");
        let wanted: Vec<_> = last.keys().cloned().collect();
        let fetched = retry!(env, client.offset_fetch(&g, &wanted))?;
        if fetched != last {
            return Err(format!(
                "the last commit was {last:?}, the new coordinator has {fetched:?}"
            ));
        }
        Ok(())
    });
    fetched.ok_or("the failover calls did not finish")??;
    c.watch_verdict()
}

#[test]
fn offsets_topic_compacts_commits_and_groups_resume() {
    for_each_seed("offsets_topic_compacts_commits_and_groups_resume", 0..4, scenario);
}
