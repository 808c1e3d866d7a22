//! Fault scenario: a broker-only node of a 4-node cluster (3 controllers) is frozen until the
//! controller fences it, then resumes, is unfenced and is named leader of its partitions again.
//! Its metadata names it leader before each partition has taken the role: the catalog takes
//! them one at a time, and each records its new leader epoch durably first (on a slow disk
//! here). Until a partition has taken the role its high watermark is a follower's, which can
//! lag what was acknowledged (seed 0x32f3 of the broker workload: a consumer saw it go from 51
//! back to 48). So in that window Fetch and ListOffsets answer NOT_LEADER_OR_FOLLOWER, and
//! never serve from it.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::admin::LATEST;
use weir_sim::client::codes;
use weir_sim::client::fetch::FetchWant;
use weir_sim::disk::DiskFaults;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

use weir::controller::membership::Leadership;

/// The broker that is frozen (node4, broker-only).
const SILENT: usize = 3;
/// Partitions of the topic: enough that several land on node4.
const PARTITIONS: i32 = 12;
/// Beyond the session timeout, how long the controller may take to fence.
const FENCE_SLACK: Duration = Duration::from_secs(3);
/// Every sync on node4 after it resumes: each partition's new leader epoch waits this long.
const SLOW_SYNC: Duration = Duration::from_millis(400);
/// How long node4 may take to be named leader again after it resumes.
const BACK_BOUND: Duration = Duration::from_secs(30);

/// node4's partitions its metadata says it leads but that have not taken the role yet.
fn in_the_window(c: &Cluster, mine: &[i32]) -> Vec<i32> {
    let Some(broker) = c.broker(SILENT) else { return Vec::new() };
    let Some(membership) = broker.membership() else { return Vec::new() };
    mine.iter()
        .copied()
        .filter(|&p| membership.leadership("window", p) == Leadership::Leader)
        .filter(|&p| broker.catalog.partition("window", p).is_some_and(|part| !part.leads()))
        .collect()
}

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { voters: 3, ..ClusterSpec::combined(4) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_topic(0, "window", PARTITIONS).map_err(|e| e.to_string())?;
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("window").ok_or("no topic")?;
    let mine: Vec<i32> = topic
        .partitions
        .values()
        .filter(|p| p.leader == node_id(SILENT))
        .map(|p| p.partition)
        .collect();
    ensure(mine.len() >= 2, || format!("node4 leads {mine:?} only"))?;
    for &p in &mine {
        c.produce(0, "window", p, "before", Duration::from_secs(10))
            .ok_or_else(|| format!("no write to window-{p} before the fault"))?;
    }
    c.sim.pause(c.nodes[SILENT]);
    c.await_fenced(SILENT, FENCE_SLACK)?;
    c.sim.set_disk_faults(
        c.nodes[SILENT],
        DiskFaults { sync_latency: SLOW_SYNC, ..DiskFaults::default() },
    );
    c.sim.resume(c.nodes[SILENT]);
    let named = c.run_until(BACK_BOUND, |c| !in_the_window(c, &mine).is_empty());
    ensure(named, || format!("node4 was not named leader again within {BACK_BOUND:?}"))?;
    let waiting = in_the_window(&c, &mine);
    let addr = c.addr(SILENT);
    let wants: Vec<FetchWant> = waiting
        .iter()
        .map(|&p| FetchWant { topic: "window".into(), partition: p, offset: 0 })
        .collect();
    let list = waiting.clone();
    let (fetched, listed) = c
        .client_call(Duration::from_secs(10), move |env| async move {
            let mut client = weir_sim::client::Client::new(env, addr, "reader");
            let fetched = client.fetch(&wants, Duration::ZERO).await;
            let listed = client.list_offsets("window", &list, LATEST).await;
            (fetched, listed)
        })
        .ok_or("no answer from node4")?;
    let fetched = fetched.map_err(|e| format!("fetch: {e}"))?;
    let listed = listed.map_err(|e| format!("list offsets: {e}"))?;
    // A partition that has not taken the role now had not when it answered either.
    let still = in_the_window(&c, &mine);
    let checked: Vec<i32> = waiting.iter().copied().filter(|p| still.contains(p)).collect();
    ensure(!checked.is_empty(), || {
        format!("every partition of {waiting:?} took leadership before the answers arrived")
    })?;
    for &p in &checked {
        let answer = fetched.iter().find(|f| f.partition == p).ok_or("a partition unanswered")?;
        ensure(answer.error_code == codes::NOT_LEADER_OR_FOLLOWER, || {
            format!(
                "fetch of window-{p} before it took leadership answered error {} with high \
                 watermark {} and {} records",
                answer.error_code,
                answer.high_watermark,
                answer.records.len()
            )
        })?;
        let offset = listed.get(&p).ok_or("a partition unlisted")?;
        ensure(*offset == Err(codes::NOT_LEADER_OR_FOLLOWER), || {
            format!("ListOffsets of window-{p} before it took leadership answered {offset:?}")
        })?;
    }
    c.sim.set_disk_faults(c.nodes[SILENT], DiskFaults::default());
    c.settle("node4 came back")?;
    for &p in &mine {
        let read = c.read_all(SILENT, "window", p)?;
        ensure(read.values().any(|v| v.as_ref() == b"before"), || {
            format!("window-{p}: the record acknowledged before the fence is gone: {read:?}")
        })?;
    }
    c.watch_verdict()
}

#[test]
fn reads_wait_for_the_partition_to_take_leadership() {
    for_each_seed("reads_wait_for_the_partition_to_take_leadership", 0..16, scenario);
}
