//! Fault scenario: the node that is both the active controller and a partition's leader is
//! paused. The other two elect a controller and move the partition's leadership, and a
//! DeleteRecords on the new leader is answered. A fetch from offset 0, sent to the paused node
//! meanwhile, is taken up when it resumes. By then its own controller may still believe it
//! leads and answer its broker's heartbeat from an image that predates the move; the broker
//! must not serve as the partition's leader from that image. The fetch gets an error, or at
//! least nothing below the low watermark the DeleteRecords answered.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::fetch::{FetchWant, FetchedPartition};
use weir_sim::client::produce::Acks;
use weir_sim::client::{Client, ClientError};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, node_id};

/// Records written before the pause.
const RECORDS: usize = 10;
/// The DeleteRecords offset.
const DELETE_BELOW: i64 = 6;
/// Beyond the session timeout, how long the move may take.
const MOVE_LIMIT: Duration = Duration::from_secs(20);
/// How long the paused node stays paused after the DeleteRecords answer.
const PAUSED_AFTER: Duration = Duration::from_millis(300);

type Fetched = Result<Vec<FetchedPartition>, ClientError>;

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let paused = c.active_controller().ok_or("no active controller")?;
    let mut led = None;
    for n in 0..12 {
        let name = format!("stale{n}");
        c.create_replicated_topic(0, &name, 1, 3, &[]).map_err(|e| e.to_string())?;
        let p = c.committed_partition(&name, 0).ok_or("no partition")?;
        if p.leader == node_id(paused) {
            led = Some((name, p));
            break;
        }
    }
    let (topic, before) = led.ok_or("no topic led by the controller's node")?;
    let values: Vec<String> = (0..RECORDS).map(|i| format!("r{i}")).collect();
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    c.produce_batch(paused, (&topic, 0), &values, Acks::All)
        .map_err(|e| format!("the records were not acknowledged: {e:?}"))?;
    c.sim.pause(c.nodes[paused]);
    let moved = c.run_until(MOVE_LIMIT, |c| {
        c.committed_partition(&topic, 0)
            .is_some_and(|p| p.leader != node_id(paused) && p.leader_epoch > before.leader_epoch)
    });
    ensure(moved, || format!("leadership did not move within {MOVE_LIMIT:?}"))?;
    let leader = c.committed_partition(&topic, 0).map(|p| p.leader).ok_or("no partition")?;
    let leader = c.ix_of(leader).ok_or("leader not a node")?;
    let (addr, name) = (c.addr(leader), topic.clone());
    let low = c
        .client_call(MOVE_LIMIT, move |env| async move {
            Client::new(env, addr, "admin").delete_records(&name, 0, DELETE_BELOW, MOVE_LIMIT).await
        })
        .ok_or("DeleteRecords was not answered")?
        .map_err(|e| format!("DeleteRecords failed: {e}"))?;
    ensure(low >= DELETE_BELOW, || format!("DeleteRecords answered a low watermark of {low}"))?;
    // The fetch reaches the paused node's socket now and is taken up when it resumes.
    let slot: Arc<Mutex<Option<Fetched>>> = Arc::new(Mutex::new(None));
    let (out, addr, name) = (Arc::clone(&slot), c.addr(paused), topic.clone());
    let _fetch = c.sim.spawn(c.client, "stale-fetch", move |env| async move {
        let want = FetchWant { topic: name, partition: 0, offset: 0 };
        let fetched = Client::new(env, addr, "consumer").fetch(&[want], Duration::ZERO).await;
        *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(fetched);
    });
    c.run_for(PAUSED_AFTER);
    c.sim.resume(c.nodes[paused]);
    let answered =
        c.run_until(MOVE_LIMIT, |_| slot.lock().unwrap_or_else(|p| p.into_inner()).is_some());
    ensure(answered, || "the fetch was never answered".to_owned())?;
    let fetched = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(Ok(parts)) = fetched {
        for p in parts {
            let deleted: Vec<i64> =
                p.records.iter().map(|r| r.offset).filter(|&o| o < low).collect();
            ensure(deleted.is_empty(), || {
                format!(
                    "node{} served offsets {deleted:?} after it lost the lead and DeleteRecords \
                     answered a low watermark of {low} (error code {})",
                    paused + 1,
                    p.error_code
                )
            })?;
        }
    }
    c.watch_verdict()
}

#[test]
fn paused_controller_and_leader_serves_nothing_deleted() {
    for_each_seed("paused_controller_and_leader_serves_nothing_deleted", 0..16, scenario);
}
