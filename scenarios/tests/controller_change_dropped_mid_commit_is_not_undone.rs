//! A request to the active controller can be abandoned while its change is being committed:
//! the broker that sent it closes the connection (a reset, a timeout of its own), and the
//! request's future is dropped with the change still in the metadata log. The change may
//! commit later all the same. A change computed meanwhile from the controller's image, which
//! lacks the first, would be committed after it and undo it: a partition epoch given to two
//! different ISRs, a leader epoch going back (found by a sweep, seed 0x30e7: the leader kept
//! its newer epoch and fenced its followers' fetches for good).
//!
//! Here the active controller is cut off from the other voters, so nothing it proposes can
//! commit; a leader's ISR shrink is sent and dropped after 20 ms; a different shrink from the
//! same partition epoch is sent; then the cut heals. The first must stand, under the epoch it
//! took, and the second must be judged against it (and refused, its partition epoch stale).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::controller::rpc::{Request, Response};
use weir::io::timeout;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, SETTLE_BOUND};

/// How long the first request is waited for before its caller goes away.
const ABANDON_AFTER: Duration = Duration::from_millis(20);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_replicated_topic(0, "t", 1, 3, &[]).map_err(|e| e.to_string())?;
    c.settle("creating t")?;
    let active = c.active_controller().ok_or("no active controller")?;
    let controller = c.broker(active).and_then(|b| b.controller.clone()).ok_or("no controller")?;
    let image = controller.image();
    let topic_id = image.topic("t").ok_or("no topic t")?.id;
    let before = c.committed_partition("t", 0).ok_or("no partition t-0")?;
    ensure(before.isr.len() == 3, || format!("t-0 is not fully in sync: {before:?}"))?;
    let leader = before.leader;
    let incarnation = image
        .brokers
        .get(&leader)
        .map(|b| b.registration.incarnation)
        .ok_or("the leader is not registered")?;
    let followers: Vec<i32> = before.isr.iter().copied().filter(|&b| b != leader).collect();
    let shrink = |keep: i32| Request::AlterPartition {
        broker_id: leader,
        incarnation,
        topic_id,
        partition: 0,
        leader_epoch: before.leader_epoch,
        partition_epoch: before.partition_epoch,
        isr: vec![leader, keep],
        joining: Vec::new(),
    };
    let (first, second) = (shrink(followers[0]), shrink(followers[1]));

    let host = c.nodes[active];
    let others: Vec<_> = (0..3).filter(|&ix| ix != active).map(|ix| c.nodes[ix]).collect();
    c.sim.partition(&[host], &others);
    let ctl = Arc::clone(&controller);
    c.sim
        .block_on(host, Duration::from_secs(1), move |env| async move {
            // The caller goes away: the request's future is dropped mid-commit.
            let _ = timeout(&*env.clock, ABANDON_AFTER, ctl.handle(first)).await;
        })
        .ok_or("the first request did not end")?;
    let answer: Arc<Mutex<Option<Response>>> = Arc::new(Mutex::new(None));
    let (ctl, slot) = (Arc::clone(&controller), Arc::clone(&answer));
    let _second = c.sim.spawn(host, "second shrink", move |_| async move {
        let response = ctl.handle(second).await;
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(response);
    });
    c.run_for(ABANDON_AFTER);
    c.sim.heal_all();
    ensure(
        c.run_until(SETTLE_BOUND, |_| answer.lock().unwrap_or_else(|p| p.into_inner()).is_some()),
        || "the second request was never answered".to_owned(),
    )?;
    c.settle("the heal")?;
    let after = c.committed_partition("t", 0).ok_or("no partition t-0 after the heal")?;
    let response = answer.lock().unwrap_or_else(|p| p.into_inner()).take();
    ensure(
        after.isr == vec![leader, followers[0]]
            && after.partition_epoch == before.partition_epoch + 1,
        || {
            format!(
                "t-0 should hold the dropped shrink's ISR under the next partition epoch: went from \
             {before:?} to {after:?}; the second shrink was answered {response:?}"
            )
        },
    )?;
    c.watch_verdict()
}

#[test]
fn controller_change_dropped_mid_commit_is_not_undone() {
    for_each_seed("controller_change_dropped_mid_commit_is_not_undone", 0..16, scenario);
}
