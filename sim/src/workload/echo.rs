//! The foundation workload: echo servers with a durable append log, and clients that check
//! every reply.
//!
//! It exercises every simulated service before any broker exists — framed byte streams across
//! faulty links, durable appends with `sync_data` across kills and power failures, timers,
//! spawning — and checks two properties a broker will also need:
//! - stream integrity: every echo reply equals its request (no lost, reordered or corrupt
//!   bytes within a connection);
//! - acknowledged durability: every WRITE the server acknowledged (after `sync_data`) is on its
//!   disk after any sequence of crashes and power failures.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::{Conn, Env, File, timeout};

use crate::node::boot;
use crate::sim::{Host, Sim};

/// The echo servers' port.
pub const ECHO_PORT: u16 = 7;
/// How long a client waits for a connection or a reply.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// Largest frame either side accepts.
pub const FRAME_BYTES_MAX: usize = 64 << 10;

const OP_ECHO: u8 = 1;
const OP_WRITE: u8 = 2;
const REPLY_OK: u8 = 0;
const REPLY_ERR: u8 = 1;
const LOG_DIR: &str = "echo";
const LOG_FILE: &str = "echo/log";
const ENTRY_BYTES: u64 = 8;

/// What the clients observed.
#[derive(Debug, Default)]
pub struct History {
    /// Per server: values whose WRITE was acknowledged.
    pub acked: Vec<BTreeSet<u64>>,
    /// Echo replies that matched their request.
    pub echoes_ok: u64,
    /// Requests that failed or timed out (indeterminate for writes).
    pub failures: u64,
    /// Property violations seen by clients.
    pub violations: Vec<String>,
}

/// The boot function of an echo server.
pub fn server() -> crate::node::Boot {
    boot(|env: Env| async move {
        if let Err(e) = serve(env).await {
            tracing::debug!("echo server stopped: {e}");
        }
    })
}

async fn open_log(env: &Env) -> std::io::Result<Arc<dyn File>> {
    env.disk.create_dir(Path::new(LOG_DIR)).await?;
    env.disk.sync_dir(Path::new("")).await?;
    let file = match env.disk.open(Path::new(LOG_FILE)).await {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let file = env.disk.create(Path::new(LOG_FILE)).await?;
            env.disk.sync_dir(Path::new(LOG_DIR)).await?;
            file
        }
        Err(e) => return Err(e),
    };
    // A torn append may leave a partial entry at the end: cut it off before serving.
    let whole = file.len() / ENTRY_BYTES * ENTRY_BYTES;
    if whole != file.len() {
        file.truncate(whole).await?;
        file.sync_data().await?;
    }
    Ok(file)
}

async fn serve(env: Env) -> std::io::Result<()> {
    let file = open_log(&env).await?;
    let failed = Arc::new(AtomicBool::new(false));
    let listener = env.net.bind(SocketAddr::from(([0, 0, 0, 0], ECHO_PORT))).await?;
    loop {
        let (conn, _peer) = listener.accept().await?;
        let (file, failed) = (Arc::clone(&file), Arc::clone(&failed));
        env.spawn("echo-conn", async move {
            let _ = serve_conn(conn, file, failed).await;
        });
    }
}

async fn serve_conn(
    mut conn: Box<dyn Conn>,
    file: Arc<dyn File>,
    failed: Arc<AtomicBool>,
) -> std::io::Result<()> {
    loop {
        let frame = read_frame(&mut conn).await?;
        let Some((&op, payload)) = frame.split_first() else {
            return Ok(());
        };
        match op {
            OP_ECHO => write_frame(&mut conn, REPLY_OK, payload).await?,
            OP_WRITE if payload.len() == ENTRY_BYTES as usize => {
                let ok = !failed.load(Ordering::Relaxed) && append_durably(&file, payload).await;
                if !ok {
                    // A failed write or sync leaves the file's tail unknown: refuse every later
                    // write until a restart recovers from what is durable (fsyncgate).
                    failed.store(true, Ordering::Relaxed);
                }
                write_frame(&mut conn, if ok { REPLY_OK } else { REPLY_ERR }, payload).await?;
            }
            _ => return Ok(()),
        }
    }
}

async fn append_durably(file: &Arc<dyn File>, payload: &[u8]) -> bool {
    file.append(Bytes::copy_from_slice(payload)).await.is_ok() && file.sync_data().await.is_ok()
}

async fn read_frame(conn: &mut Box<dyn Conn>) -> std::io::Result<Vec<u8>> {
    let len = conn.read_u32().await? as usize;
    if len > FRAME_BYTES_MAX {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let mut buf = vec![0; len];
    conn.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn write_frame(conn: &mut Box<dyn Conn>, tag: u8, payload: &[u8]) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(5 + payload.len());
    frame.extend_from_slice(&(payload.len() as u32 + 1).to_be_bytes());
    frame.push(tag);
    frame.extend_from_slice(payload);
    conn.write_all(&frame).await
}

/// Spawns one client task per server on `client`, each sending a mix of echoes and writes
/// until `stop` is set. Write values are unique across the run.
pub fn spawn_clients(
    sim: &Sim,
    client: Host,
    servers: &[Host],
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
) {
    crate::world::lock(&history).acked = vec![BTreeSet::new(); servers.len()];
    for (ix, &server) in servers.iter().enumerate() {
        let addr = SocketAddr::new(sim.ip(server), ECHO_PORT);
        let (history, stop) = (Arc::clone(&history), Arc::clone(&stop));
        sim.spawn(client, "echo-client", move |env| client_loop(env, ix, addr, history, stop));
    }
}

async fn client_loop(
    env: Env,
    ix: usize,
    addr: SocketAddr,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
) {
    let mut next_value = (ix as u64) << 48;
    while !stop.load(Ordering::Relaxed) {
        let conn = match timeout(&*env.clock, REQUEST_TIMEOUT, env.net.connect(addr)).await {
            Ok(Ok(conn)) => conn,
            _ => {
                env.clock.sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Err(e) = session(&env, conn, ix, &mut next_value, &history, &stop).await {
            tracing::trace!("echo client {ix}: {e}");
            crate::world::lock(&history).failures += 1;
            env.clock.sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One connection's worth of requests; returns on the first failure.
async fn session(
    env: &Env,
    mut conn: Box<dyn Conn>,
    ix: usize,
    next_value: &mut u64,
    history: &Mutex<History>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    while !stop.load(Ordering::Relaxed) {
        let write = env.entropy.below(2) == 0;
        let (op, payload) = if write {
            *next_value += 1;
            (OP_WRITE, next_value.to_be_bytes().to_vec())
        } else {
            let mut payload = vec![0u8; 1 + env.entropy.below(2_000) as usize];
            env.entropy.fill(&mut payload);
            (OP_ECHO, payload)
        };
        write_frame(&mut conn, op, &payload).await?;
        let reply = timeout(&*env.clock, REQUEST_TIMEOUT, read_frame(&mut conn))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        {
            let mut h = crate::world::lock(history);
            match reply.split_first() {
                Some((&REPLY_OK, body)) if body == payload.as_slice() => {
                    if write {
                        h.acked[ix].insert(*next_value);
                    } else {
                        h.echoes_ok += 1;
                    }
                }
                Some((&REPLY_ERR, body)) if write && body == payload.as_slice() => h.failures += 1,
                _ => h.violations.push(format!("server {ix}: reply does not match request {op}")),
            }
        }
        env.clock.sleep(Duration::from_millis(env.entropy.below(20))).await;
    }
    Ok(())
}

/// Reads a server's durable log back (run on the server's host after a restart).
pub async fn read_log(env: Env) -> std::io::Result<BTreeSet<u64>> {
    let file = open_log(&env).await?;
    let bytes = file.read_at(0, file.len() as usize).await?;
    Ok(bytes
        .chunks_exact(ENTRY_BYTES as usize)
        .map(|c| u64::from_be_bytes(c.try_into().unwrap_or_default()))
        .collect())
}

/// How long faults are injected before the final heal.
pub const FAULT_PHASE: Duration = Duration::from_secs(30);
/// How long after healing every server must answer again.
pub const RECOVERY_BOUND: Duration = Duration::from_secs(10);

/// The outcome of one seed of the echo workload.
#[derive(Debug)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The final trace hash.
    pub trace_hash: u64,
    /// Work done.
    pub stats: crate::SimStats,
    /// Simulated time at the end.
    pub simulated: Duration,
    /// Violated properties (empty means the seed passed).
    pub violations: Vec<String>,
    /// Acknowledged writes checked.
    pub acked_writes: usize,
    /// Echoes that matched.
    pub echoes_ok: u64,
    /// The faults injected, in order.
    pub faults: Vec<String>,
}

/// Runs the echo workload for one seed: 3–5 servers, one client host, faults for
/// [`FAULT_PHASE`], then heal, restart every server, and check durability and liveness.
pub fn run(seed: u64, fault_phase: Duration) -> Report {
    let sim = Sim::new(seed);
    let server_count = 3 + (crate::trace::mix(seed) % 3) as usize;
    let servers: Vec<Host> =
        (0..server_count).map(|i| sim.add_host(&format!("s{i}"), server())).collect();
    let client = sim.add_client("client");
    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    spawn_clients(&sim, client, &servers, Arc::clone(&history), Arc::clone(&stop));

    let mut nemesis = crate::nemesis::Nemesis::new(
        seed,
        crate::nemesis::FaultMix::from_seed(seed),
        servers.clone(),
    );
    let end = sim.now() + fault_phase;
    while sim.now() < end {
        let step = nemesis.next_interval();
        sim.run_for(step.min(end - sim.now()));
        nemesis.step(&sim);
    }
    nemesis.heal(&sim);
    for &server in &servers {
        sim.restart(server);
    }
    let mut violations = Vec::new();
    let before = crate::world::lock(&history).acked.iter().map(BTreeSet::len).sum::<usize>();
    sim.run_for(RECOVERY_BOUND);
    let after = crate::world::lock(&history).acked.iter().map(BTreeSet::len).sum::<usize>();
    if after <= before {
        violations
            .push(format!("liveness: no write acknowledged within {RECOVERY_BOUND:?} of healing"));
    }
    stop.store(true, Ordering::Relaxed);
    sim.run_for(REQUEST_TIMEOUT * 2);
    // A final crash of every server with power loss: acknowledged writes must survive it too.
    for &server in &servers {
        sim.power_fail(server);
        sim.start(server);
    }
    let h = crate::world::lock(&history);
    violations.extend(h.violations.iter().cloned());
    let acked: Vec<BTreeSet<u64>> = h.acked.clone();
    let (echoes_ok, acked_writes) = (h.echoes_ok, h.acked.iter().map(BTreeSet::len).sum());
    drop(h);
    for (ix, &server) in servers.iter().enumerate() {
        match sim.block_on(server, Duration::from_secs(10), read_log) {
            Some(Ok(present)) => {
                let lost: Vec<&u64> = acked[ix].difference(&present).take(5).collect();
                if !lost.is_empty() {
                    violations.push(format!(
                        "durability: server {ix} lost acknowledged writes {lost:x?}"
                    ));
                }
            }
            other => {
                violations.push(format!("server {ix}: could not read its log back: {other:?}"))
            }
        }
    }
    Report {
        seed,
        trace_hash: sim.trace_hash(),
        stats: sim.stats(),
        simulated: sim.now(),
        violations,
        acked_writes,
        echoes_ok,
        faults: nemesis.log().to_vec(),
    }
}
