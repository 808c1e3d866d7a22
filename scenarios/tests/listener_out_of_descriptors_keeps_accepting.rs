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

use std::net::SocketAddr;
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
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
    c.sim.fail_accepts(c.nodes[node], fails as u32);
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

#[test]
fn listener_out_of_descriptors_keeps_accepting() {
    for_each_seed("listener_out_of_descriptors_keeps_accepting", 0..8, scenario);
}
