//! A node whose accepts fail for a while — as a process out of file descriptors fails them,
//! with the connections left waiting — keeps both its listeners (clients and controller) and
//! serves every connection once accepts succeed again.
//!
//! Three combined nodes; a topic with three replicas. The node (the active controller on even
//! seeds, another on odd ones) is set to fail its next 10 to 40 accepts, and every connection
//! it has (to the other nodes and to the client host) is reset, so that every peer connects
//! again and its connections meet the failing accepts. Judged:
//! - every failure was met, some on each listener (the test tested both);
//! - the cluster settles again (every node registered, unfenced and caught up, which takes the
//!   controller listener of whichever node leads the quorum);
//! - a record produced with the node's metadata, to the partition's leader, reads back from the
//!   leader, and the replicas converge.
//!
//! Before failed accepts were retried, the first one ended that listener for good: 8 of 8 seeds
//! failed.
//!
//! A second test (see `aborted`) checks that an accept failing for the one connection being
//! accepted holds up no other.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use tokio::io::AsyncWriteExt;

use weir_scenarios::wire::{answer, frame};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::AcceptFault;
use weir_sim::workload::cluster::{CONTROLLER_PORT, Cluster, ClusterSpec};

/// Fewest and most accepts made to fail.
const FAILS_MIN: u64 = 10;
const FAILS_SPREAD: u64 = 31;

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_replicated_topic(0, "t", 1, 3, &[]).map_err(|e| e.to_string())?;
    c.settle("the create")?;
    let controller = c.active_controller().ok_or("no active controller")?;
    let node = if seed.is_multiple_of(2) {
        controller
    } else {
        (controller + 1 + (seed as usize / 2) % 2) % 3
    };
    let fails = FAILS_MIN + seed % FAILS_SPREAD;
    c.sim.fail_accepts(c.nodes[node], AcceptFault::OutOfDescriptors, fails as u32);
    for other in (0..3).filter(|&ix| ix != node) {
        c.sim.reset_connections(c.nodes[node], c.nodes[other]);
    }
    c.sim.reset_connections(c.nodes[node], c.client);
    // Clients on the client host connect to the node while its accepts fail.
    let view = c.view_from(node);
    c.settle("the failing accepts")?;
    let left = c.sim.accept_failures_left(c.nodes[node]);
    ensure(left == 0, || format!("{left} of {fails} accept failures never met a connection"))?;
    let controller_addr = SocketAddr::new(c.addr(node).ip(), CONTROLLER_PORT);
    for (what, addr) in [("client", c.addr(node)), ("controller", controller_addr)] {
        let met = c.sim.accept_failures_met(addr);
        ensure(met > 0, || format!("no accept failed on the {what} listener"))?;
    }
    ensure(view.is_ok(), || {
        format!("no metadata from node{} while accepts failed: {view:?}", node + 1)
    })?;
    let offset = c
        .produce(node, "t", 0, "after", Duration::from_secs(30))
        .ok_or("no write acknowledged after the failing accepts")?;
    c.run_for(Duration::from_secs(2));
    let leader =
        c.ix_of(c.committed_partition("t", 0).ok_or("no partition")?.leader).ok_or("no leader")?;
    let read = c.read_all(leader, "t", 0)?;
    ensure(read.get(&offset).is_some_and(|v| &v[..] == b"after"), || {
        format!("offset {offset} did not read back from node{}: {read:?}", leader + 1)
    })?;
    c.replicas_converged("t", 0)?;
    c.watch_verdict()
}

/// A client of [`aborted`] by its number, and how long its answer took (none: no answer).
type Finished = (u32, Option<Duration>);

/// Connections whose accept is aborted (`ECONNABORTED`).
const ABORTED: u32 = 5;
/// How soon a connection behind them must be answered: far less than the pause after a
/// failure of the listener itself (10 ms, doubling), taken once per aborted connection.
const BEHIND_ABORTED_WITHIN: Duration = Duration::from_millis(50);

/// One node; its next five accepts are aborted, each resetting the connection it was
/// accepting (as `ECONNABORTED` reports a connection reset before it was accepted). Five
/// clients connect and send ApiVersions; a sixth connects 10 ms later. Judged: the five see
/// their connections reset unanswered, the failures were met on the client listener, and the
/// sixth is answered within 50 ms of connecting: a failure of one connection costs the others
/// nothing. (Paused on like a failure of the listener, the five would have held the sixth for
/// 10 + 20 + 40 + 80 + 160 ms.)
fn aborted(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.sim.fail_accepts(c.nodes[0], AcceptFault::Aborted, ABORTED);
    let addr = c.addr(0);
    let request = frame(ApiKey::ApiVersions, 0, 1, &ApiVersionsRequest::default());
    let answered: Arc<Mutex<Vec<Finished>>> = Arc::default();
    let mut tasks = Vec::new();
    for i in 0..=ABORTED {
        let (request, out) = (request.clone(), Arc::clone(&answered));
        tasks.push(c.sim.spawn(c.client, &format!("client{i}"), move |env| async move {
            if i == ABORTED {
                env.clock.sleep(Duration::from_millis(10)).await;
            }
            let start = env.clock.now();
            let mut took = None;
            if let Ok(mut conn) = env.net.connect(addr).await
                && conn.write_all(&request).await.is_ok()
                && answer(&mut conn).await.is_some()
            {
                took = Some(env.clock.now() - start);
            }
            out.lock().unwrap_or_else(|p| p.into_inner()).push((i, took));
        }));
    }
    c.run_for(Duration::from_secs(2));
    let met = c.sim.accept_failures_met(addr);
    ensure(met == ABORTED, || {
        format!("{met} of {ABORTED} aborted accepts met the client listener")
    })?;
    let mut seen = answered.lock().unwrap_or_else(|p| p.into_inner()).clone();
    seen.sort_unstable_by_key(|(i, _)| *i);
    let seen: Vec<Option<Duration>> = seen.into_iter().map(|(_, took)| took).collect();
    ensure(seen.len() == ABORTED as usize + 1, || format!("not every client finished: {seen:?}"))?;
    let (doomed, last) = seen.split_at(ABORTED as usize);
    ensure(doomed.iter().all(Option::is_none), || {
        format!("an aborted connection was answered: {seen:?}")
    })?;
    match last {
        [Some(took)] if *took <= BEHIND_ABORTED_WITHIN => Ok(()),
        _ => Err(format!("the connection behind the aborted ones: {last:?}")),
    }
}

#[test]
fn aborted_accepts_hold_up_no_other_connection() {
    for_each_seed("aborted_accepts_hold_up_no_other_connection", 0..8, aborted);
}

#[test]
fn listener_out_of_descriptors_keeps_accepting() {
    for_each_seed("listener_out_of_descriptors_keeps_accepting", 0..8, scenario);
}
