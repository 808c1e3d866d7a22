//! The executor benchmark: ping-pong over `SimNet` among hosts, to measure the kernel's cost
//! per event and how much faster than real time an idle-heavy cluster simulates.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::Env;

use crate::node::boot;
use crate::sim::Sim;

const PING_PORT: u16 = 9;

/// What one benchmark run did.
#[derive(Debug, Clone, Copy)]
pub struct BenchReport {
    /// Round trips completed.
    pub round_trips: u64,
    /// Executor events (task polls plus time jumps).
    pub events: u64,
    /// Simulated time covered.
    pub simulated: Duration,
    /// The trace hash at the end.
    pub trace_hash: u64,
}

/// Runs `hosts` hosts for `simulated` time; each pings the next one in a ring, pausing
/// `think` between round trips (zero makes the workload busy rather than idle-heavy).
pub fn ping_pong(seed: u64, hosts: usize, simulated: Duration, think: Duration) -> BenchReport {
    let sim = Sim::new(seed);
    let ids: Vec<_> =
        (0..hosts).map(|i| sim.add_host(&format!("n{i}"), boot(echo_server))).collect();
    let round_trips = Arc::new(AtomicU64::new(0));
    for (i, &host) in ids.iter().enumerate() {
        let peer = SocketAddr::new(sim.ip(ids[(i + 1) % hosts]), PING_PORT);
        let counter = Arc::clone(&round_trips);
        sim.spawn(host, "pinger", move |env| pinger(env, peer, think, counter));
    }
    sim.run_for(simulated);
    let stats = sim.stats();
    BenchReport {
        round_trips: round_trips.load(Ordering::Relaxed),
        events: stats.polls + stats.advances,
        simulated: sim.now(),
        trace_hash: sim.trace_hash(),
    }
}

async fn echo_server(env: Env) {
    let Ok(listener) = env.net.bind(SocketAddr::from(([0, 0, 0, 0], PING_PORT))).await else {
        return;
    };
    while let Ok((mut conn, _)) = listener.accept().await {
        env.spawn("pong", async move {
            let mut buf = [0u8; 8];
            while conn.read_exact(&mut buf).await.is_ok() {
                if conn.write_all(&buf).await.is_err() {
                    break;
                }
            }
        });
    }
}

async fn pinger(env: Env, peer: SocketAddr, think: Duration, counter: Arc<AtomicU64>) {
    let Ok(mut conn) = env.net.connect(peer).await else {
        return;
    };
    let mut buf = [0u8; 8];
    loop {
        let n = counter.fetch_add(1, Ordering::Relaxed);
        if conn.write_all(&n.to_le_bytes()).await.is_err()
            || conn.read_exact(&mut buf).await.is_err()
        {
            return;
        }
        if !think.is_zero() {
            env.clock.sleep(think).await;
        }
    }
}
