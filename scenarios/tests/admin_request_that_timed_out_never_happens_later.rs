//! Fault scenario: a client asks a broker cut off from the controller to create one topic and
//! to delete another. Both requests time out — the client waits `timeout_ms`, as the request
//! says — and then the cut heals. Neither change may happen afterwards: a client that saw its
//! request fail acts on that (it retries, or deletes what it created meanwhile), and a change
//! the broker kept sending to the controller long after would undo what it did next. The cluster
//! swarm found that: a create the broker kept retrying for 30 s brought back a topic the client
//! had created on a second attempt and deleted since, and producers' writes for the deleted
//! topic then landed in the new one.
//!
//! A second case: the request reaches the controller in time but waits there behind a slow
//! commit (every sync takes most of a second) until its client's timeout has passed. The
//! controller must not make the change then either.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::DiskFaults;
use weir_sim::client::{Client, REQUEST_TIMEOUT};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Longest the client's two requests may take together: its timeout each, and a little more.
const BOTH_REQUESTS: Duration = Duration::from_secs(12);
/// How long the cluster runs after the heal: past the broker's own bound on admin changes
/// (`ADMIN_TIMEOUT`, 30 s), so that a request it still held would have gone through.
const AFTER: Duration = Duration::from_secs(40);

/// A settled three-node cluster, its active controller and another node (chosen by `seed`).
fn settled(seed: u64) -> Result<(Cluster, usize, usize), String> {
    let c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let controller = c.active_controller().ok_or("no active controller")?;
    let other = (controller + 1 + (seed as usize % 2)) % 3;
    Ok((c, controller, other))
}

/// Gives every node's disk `faults`.
fn set_disks(c: &Cluster, faults: &DiskFaults) {
    for &node in &c.nodes {
        c.sim.set_disk_faults(node, faults.clone());
    }
}

fn scenario(seed: u64) -> Result<(), String> {
    let (mut c, controller, via) = settled(seed)?;
    c.create_topic(controller, "kept", 1).map_err(|e| format!("creating kept: {e}"))?;
    let others: Vec<_> = (0..3).filter(|&ix| ix != via).map(|ix| c.nodes[ix]).collect();
    c.sim.partition(&[c.nodes[via]], &others);
    let addr = c.addr(via);
    let outcomes = c
        .client_call(BOTH_REQUESTS, move |env| async move {
            let mut client = Client::new(env, addr, "admin");
            let created = client.create_topic("late", 2, &[]).await;
            let deleted = client.delete_topic("kept").await;
            (created.is_err(), deleted.is_err())
        })
        .ok_or("the client's requests did not end within their timeouts")?;
    ensure(outcomes == (true, true), || {
        format!("cut off from the controller, the requests succeeded: {outcomes:?}")
    })?;
    c.sim.heal_all();
    c.run_for(AFTER);
    c.settle("the heal")?;
    let image = c.committed_image().ok_or("no committed image")?;
    ensure(image.topic("late").is_none(), || {
        format!("the create that timed out {REQUEST_TIMEOUT:?} in happened after the heal")
    })?;
    ensure(image.topic("kept").is_some(), || {
        "the delete that timed out happened after the heal".to_owned()
    })?;
    c.watch_verdict()
}

/// How long each sync takes in the second case.
const SLOW_SYNC: Duration = Duration::from_millis(800);
/// The queued request's timeout: shorter than the commit it waits behind.
const SHORT: Duration = Duration::from_millis(500);

fn queued_behind_a_slow_commit(seed: u64) -> Result<(), String> {
    let (mut c, controller, other) = settled(seed)?;
    set_disks(&c, &DiskFaults { sync_latency: SLOW_SYNC, ..DiskFaults::default() });
    let (first, second) = (c.addr(controller), c.addr(other));
    // The first create takes the controller's lock and holds it through a slow commit; the
    // second arrives a moment later, through another broker, and queues.
    let slow_one: Arc<Mutex<Option<bool>>> = Arc::default();
    let out = Arc::clone(&slow_one);
    let _first = c.sim.spawn(c.client, "admin-a", move |env| async move {
        let created = Client::new(env, first, "admin-a").create_topic("slow", 1, &[]).await;
        *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(created.is_ok());
    });
    let queued = c
        .client_call(Duration::from_secs(30), move |env| async move {
            env.clock.sleep(Duration::from_millis(20)).await;
            let mut client = Client::new(env, second, "admin-b");
            client.create_topic_within("queued", (1, 1), &[], SHORT).await.is_err()
        })
        .ok_or("the queued create did not end")?;
    let done = |_: &Cluster| slow_one.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    ensure(c.run_until(Duration::from_secs(60), done), || "the slow create never ended".into())?;
    let outcomes = (*slow_one.lock().unwrap_or_else(|p| p.into_inner()), queued);
    set_disks(&c, &DiskFaults::default());
    ensure(outcomes.1, || {
        format!("the create queued behind a slow commit succeeded: {outcomes:?}")
    })?;
    c.run_for(AFTER);
    c.settle("the slow commits")?;
    let image = c.committed_image().ok_or("no committed image")?;
    ensure(image.topic("queued").is_none(), || {
        format!("the create that timed out after {SHORT:?} was made later ({outcomes:?})")
    })?;
    c.watch_verdict()
}

#[test]
fn admin_request_that_timed_out_never_happens_later() {
    for_each_seed("admin_request_that_timed_out_never_happens_later", 0..8, scenario);
}

#[test]
fn admin_request_queued_at_the_controller_past_its_timeout_is_not_made() {
    for_each_seed(
        "admin_request_that_timed_out_never_happens_later",
        0..8,
        queued_behind_a_slow_commit,
    );
}
