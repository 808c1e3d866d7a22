//! Simulated networking: connections are pairs of byte pipes with per-link latency, and faults
//! act on links between hosts.
//!
//! Bytes written into a pipe are stamped with a delivery time (now + a latency drawn for the
//! link, never earlier than the previous chunk, so streams stay FIFO). A blocked link — a
//! partition in that direction, or a clog — holds bytes until it heals; nothing is dropped from
//! the middle of a stream, because production runs TCP. A fault that breaks a stream breaks the
//! whole connection (reset). A killed host's connections reset; a power-failed host's connections
//! go silent (writes vanish, reads hang) until the host starts again, when they reset.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use weir::io::{BoxFuture, Conn, Listener, Net};

use crate::executor::NodeIx;
use crate::timer::SimSleep;
use crate::trace::Event;
use crate::world::{World, lock};

/// Bytes a pipe holds (in flight plus unread) before writers wait, like a socket buffer.
pub const PIPE_BYTES_MAX: usize = 4 << 20;

/// First port handed out for outgoing connections and `bind` on port 0.
pub const EPHEMERAL_PORT_MIN: u16 = 40_000;

/// A latency distribution for one direction of a link: uniform between `min` and `max`, with a
/// `tail` probability of an extra `tail_extra` (a slow packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latency {
    /// Least one-way delay.
    pub min: Duration,
    /// Greatest one-way delay without the tail.
    pub max: Duration,
    /// Probability, in parts per million, of adding `tail_extra`.
    pub tail_ppm: u32,
    /// Extra delay of a tail event.
    pub tail_extra: Duration,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            min: Duration::from_micros(50),
            max: Duration::from_micros(500),
            tail_ppm: 0,
            tail_extra: Duration::ZERO,
        }
    }
}

/// The faults and latency of one direction of one link.
#[derive(Clone, Copy, Debug, Default)]
struct LinkState {
    /// Nothing crosses: data is held, new connections time out.
    partitioned: bool,
    /// Data is held until unclogged; new connections still open.
    clogged: bool,
    latency: Option<Latency>,
}

impl LinkState {
    fn blocked(&self) -> bool {
        self.partitioned || self.clogged
    }
}

struct ConnRecord {
    a: NodeIx,
    b: NodeIx,
    pipes: [Weak<Pipe>; 2],
}

struct ListenerShared {
    addr: SocketAddr,
    node: NodeIx,
    state: Mutex<ListenerState>,
}

#[derive(Default)]
struct ListenerState {
    backlog: VecDeque<(SimConn, SocketAddr)>,
    waker: Option<Waker>,
    closed: bool,
}

#[derive(Default)]
struct NetInner {
    links: BTreeMap<(NodeIx, NodeIx), LinkState>,
    default_latency: Latency,
    listeners: BTreeMap<SocketAddr, Arc<ListenerShared>>,
    conns: Vec<ConnRecord>,
    next_port: BTreeMap<NodeIx, u16>,
    /// Readers waiting for a blocked link to heal.
    held: BTreeMap<(NodeIx, NodeIx), Vec<Waker>>,
    connect_timeout: Option<Duration>,
    /// Accepts still to fail on each node's listeners, in order (see
    /// [`NetState::fail_accepts`]).
    failing_accepts: BTreeMap<NodeIx, VecDeque<AcceptFault>>,
    /// Accepts failed so far, by listening address.
    failed_accepts: BTreeMap<SocketAddr, u32>,
}

/// The network of one simulation.
#[derive(Default)]
pub(crate) struct NetState {
    inner: Mutex<NetInner>,
}

/// How long a connection attempt across a partition waits before `TimedOut`.
pub const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(3);

impl NetState {
    fn link(&self, from: NodeIx, to: NodeIx) -> LinkState {
        lock(&self.inner).links.get(&(from, to)).copied().unwrap_or_default()
    }

    fn sample_latency(&self, world: &World, from: NodeIx, to: NodeIx) -> u64 {
        let latency = {
            let inner = lock(&self.inner);
            inner.links.get(&(from, to)).and_then(|l| l.latency).unwrap_or(inner.default_latency)
        };
        let (min, max) = (nanos(latency.min), nanos(latency.max).max(nanos(latency.min)));
        let mut delay = min + world.random_below(max - min + 1);
        if latency.tail_ppm > 0 && world.chance(f64::from(latency.tail_ppm) / 1e6) {
            delay += nanos(latency.tail_extra);
        }
        if from == to { delay / 10 } else { delay }
    }

    fn hold(&self, from: NodeIx, to: NodeIx, waker: &Waker) {
        lock(&self.inner).held.entry((from, to)).or_default().push(waker.clone());
    }

    fn update_link(&self, world: &World, from: NodeIx, to: NodeIx, f: impl FnOnce(&mut LinkState)) {
        let wakers = {
            let mut inner = lock(&self.inner);
            let link = inner.links.entry((from, to)).or_default();
            f(link);
            let (blocked, detail) =
                (link.blocked(), u64::from(link.partitioned) | u64::from(link.clogged) << 1);
            world.trace.fold(Event::NetFault, (from as u64) << 32 | (to as u64) << 8 | detail);
            if blocked { Vec::new() } else { inner.held.remove(&(from, to)).unwrap_or_default() }
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Resets every connection of `node` and closes its listeners.
    pub(crate) fn on_kill(&self, world: &World, node: NodeIx) {
        self.break_conns(world, node, PipeFault::Reset);
        self.close_listeners(node);
    }

    /// Silences every connection of `node` and closes its listeners.
    pub(crate) fn on_power_fail(&self, world: &World, node: NodeIx) {
        self.break_conns(world, node, PipeFault::Blackhole);
        self.close_listeners(node);
    }

    /// A host came (back) up: connections silenced by its power failure now reset, as the
    /// peer's next packet meets a host that no longer knows them.
    pub(crate) fn on_start(&self, world: &World, node: NodeIx) {
        self.break_conns(world, node, PipeFault::Reset);
    }

    /// Makes the next `count` accepts on `node`'s listeners fail with `fault`; each fails only
    /// once a connection waits.
    pub(crate) fn fail_accepts(&self, node: NodeIx, fault: AcceptFault, count: u32) {
        let mut inner = lock(&self.inner);
        let queue = inner.failing_accepts.entry(node).or_default();
        queue.extend(std::iter::repeat_n(fault, count as usize));
    }

    /// Accepts still to fail on `node`'s listeners.
    pub(crate) fn accept_failures_left(&self, node: NodeIx) -> u32 {
        let inner = lock(&self.inner);
        inner.failing_accepts.get(&node).map_or(0, |q| u32::try_from(q.len()).unwrap_or(u32::MAX))
    }

    /// Accepts failed so far on the listener at `addr`.
    pub(crate) fn accept_failures_met(&self, addr: SocketAddr) -> u32 {
        lock(&self.inner).failed_accepts.get(&addr).copied().unwrap_or(0)
    }

    /// Takes `node`'s next accept failure, for its listener at `addr`, if it has one left.
    fn take_accept_failure(&self, node: NodeIx, addr: SocketAddr) -> Option<AcceptFault> {
        let mut inner = lock(&self.inner);
        let fault = inner.failing_accepts.get_mut(&node)?.pop_front()?;
        *inner.failed_accepts.entry(addr).or_default() += 1;
        Some(fault)
    }

    fn close_listeners(&self, node: NodeIx) {
        let closed: Vec<Arc<ListenerShared>> = {
            let mut inner = lock(&self.inner);
            let addrs: Vec<SocketAddr> =
                inner.listeners.values().filter(|l| l.node == node).map(|l| l.addr).collect();
            addrs.iter().filter_map(|a| inner.listeners.remove(a)).collect()
        };
        for listener in closed {
            let (backlog, waker) = {
                let mut state = lock(&listener.state);
                state.closed = true;
                (std::mem::take(&mut state.backlog), state.waker.take())
            };
            drop(backlog);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    fn break_conns(&self, world: &World, node: NodeIx, fault: PipeFault) {
        let pipes: Vec<Arc<Pipe>> = {
            let mut inner = lock(&self.inner);
            inner.conns.retain(|c| c.pipes.iter().any(|p| p.strong_count() > 0));
            inner
                .conns
                .iter()
                .filter(|c| c.a == node || c.b == node)
                .flat_map(|c| c.pipes.iter().filter_map(Weak::upgrade))
                .collect()
        };
        for pipe in pipes {
            pipe.fault(world, fault);
        }
    }

    /// Resets every connection between `a` and `b`.
    pub(crate) fn reset_between(&self, world: &World, a: NodeIx, b: NodeIx) {
        let pipes: Vec<Arc<Pipe>> = {
            let inner = lock(&self.inner);
            inner
                .conns
                .iter()
                .filter(|c| (c.a == a && c.b == b) || (c.a == b && c.b == a))
                .flat_map(|c| c.pipes.iter().filter_map(Weak::upgrade))
                .collect()
        };
        for pipe in pipes {
            pipe.fault(world, PipeFault::Reset);
        }
    }
}

/// Fault controls, called through [`crate::Sim`].
impl World {
    /// Blocks (or unblocks) `from → to` as a partition.
    pub(crate) fn set_partitioned(&self, from: NodeIx, to: NodeIx, on: bool) {
        self.net.update_link(self, from, to, |l| l.partitioned = on);
    }

    /// Clogs (or unclogs) `from → to`.
    pub(crate) fn set_clogged(&self, from: NodeIx, to: NodeIx, on: bool) {
        self.net.update_link(self, from, to, |l| l.clogged = on);
    }

    /// Sets the latency of `from → to` (`None`: back to the default).
    pub(crate) fn set_link_latency(&self, from: NodeIx, to: NodeIx, latency: Option<Latency>) {
        self.net.update_link(self, from, to, |l| l.latency = latency);
    }

    /// Sets the latency of every link without its own.
    pub(crate) fn set_default_latency(&self, latency: Latency) {
        lock(&self.net.inner).default_latency = latency;
    }

    /// Heals every partition and clog, and ends failing accepts.
    pub(crate) fn heal_all(&self) {
        lock(&self.net.inner).failing_accepts.clear();
        let links: Vec<(NodeIx, NodeIx)> = lock(&self.net.inner).links.keys().copied().collect();
        for (from, to) in links {
            self.net.update_link(self, from, to, |l| {
                l.partitioned = false;
                l.clogged = false;
            });
        }
    }

    /// How long connecting across a partition takes to fail.
    pub(crate) fn set_connect_timeout(&self, timeout: Duration) {
        lock(&self.net.inner).connect_timeout = Some(timeout);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PipeFault {
    Reset,
    Blackhole,
}

/// One direction of a connection.
struct Pipe {
    from: NodeIx,
    to: NodeIx,
    state: Mutex<PipeState>,
}

#[derive(Default)]
struct PipeState {
    chunks: VecDeque<(u64, Bytes)>,
    buffered: usize,
    last_delivery: u64,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    /// The writer shut down or dropped its end: end of stream after the queued chunks.
    write_closed: bool,
    /// The reader dropped its end: further writes fail.
    read_closed: bool,
    reset: bool,
    blackholed: bool,
}

impl Pipe {
    fn new(from: NodeIx, to: NodeIx) -> Arc<Pipe> {
        Arc::new(Pipe { from, to, state: Mutex::new(PipeState::default()) })
    }

    fn fault(&self, world: &World, fault: PipeFault) {
        let wakers = {
            let mut state = lock(&self.state);
            match fault {
                PipeFault::Reset => {
                    if state.reset || (state.write_closed && state.read_closed) {
                        return;
                    }
                    state.reset = true;
                    state.blackholed = false;
                    state.chunks.clear();
                    state.buffered = 0;
                }
                PipeFault::Blackhole => state.blackholed = true,
            }
            [state.read_waker.take(), state.write_waker.take()]
        };
        world
            .trace
            .fold(Event::NetConn, (self.from as u64) << 32 | (self.to as u64) << 8 | fault as u64);
        wakers.into_iter().flatten().for_each(Waker::wake);
    }

    fn poll_read(
        &self,
        world: &World,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut state = lock(&self.state);
        if state.reset {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        if state.blackholed {
            state.read_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let now = world.now_nanos();
        let due = state.chunks.front().map(|(at, _)| *at);
        if let Some(at) = due {
            if at > now {
                drop(state);
                world.timers.wake_at(at, cx.waker().clone());
                return Poll::Pending;
            }
            if world.net.link(self.from, self.to).blocked() {
                drop(state);
                world.net.hold(self.from, self.to, cx.waker());
                return Poll::Pending;
            }
        } else {
            if state.write_closed {
                return Poll::Ready(Ok(()));
            }
            state.read_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut copied = 0;
        while buf.remaining() > 0 {
            let Some((at, chunk)) = state.chunks.front_mut() else {
                break;
            };
            if *at > now {
                break;
            }
            let n = chunk.len().min(buf.remaining());
            buf.put_slice(&chunk.split_to(n));
            copied += n;
            if chunk.is_empty() {
                state.chunks.pop_front();
            }
        }
        state.buffered -= copied;
        let writer = state.write_waker.take();
        drop(state);
        world.trace.fold(Event::NetRecv, copied as u64);
        if let Some(waker) = writer {
            waker.wake();
        }
        Poll::Ready(Ok(()))
    }

    fn poll_write(
        &self,
        world: &World,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut state = lock(&self.state);
        if state.reset {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        if state.read_closed || state.write_closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if state.blackholed {
            return Poll::Ready(Ok(buf.len()));
        }
        if state.buffered >= PIPE_BYTES_MAX {
            state.write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(PIPE_BYTES_MAX - state.buffered);
        if n == 0 {
            return Poll::Ready(Ok(0));
        }
        drop(state);
        let delay = world.net.sample_latency(world, self.from, self.to);
        let mut state = lock(&self.state);
        let at = state.last_delivery.max(world.now_nanos() + delay);
        state.last_delivery = at;
        state.chunks.push_back((at, Bytes::copy_from_slice(&buf[..n])));
        state.buffered += n;
        let reader = state.read_waker.take();
        drop(state);
        world.trace.fold(Event::NetSend, n as u64);
        if let Some(waker) = reader {
            world.timers.wake_at(at, waker);
        }
        Poll::Ready(Ok(n))
    }

    fn close_write(&self, world: &World) {
        let (reader, at) = {
            let mut state = lock(&self.state);
            state.write_closed = true;
            (state.read_waker.take(), state.last_delivery)
        };
        if let Some(waker) = reader {
            world.timers.wake_at(at.max(world.now_nanos()), waker);
        }
    }

    fn close_read(&self) {
        let writer = {
            let mut state = lock(&self.state);
            state.read_closed = true;
            state.chunks.clear();
            state.buffered = 0;
            state.write_waker.take()
        };
        if let Some(waker) = writer {
            waker.wake();
        }
    }
}

/// One end of a simulated connection.
pub struct SimConn {
    world: Arc<World>,
    incoming: Arc<Pipe>,
    outgoing: Arc<Pipe>,
}

impl AsyncRead for SimConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.incoming.poll_read(&self.world, cx, buf)
    }
}

impl AsyncWrite for SimConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.outgoing.poll_write(&self.world, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.outgoing.close_write(&self.world);
        Poll::Ready(Ok(()))
    }
}

impl Conn for SimConn {
    fn abort(self: Box<Self>) {
        self.outgoing.fault(&self.world, PipeFault::Reset);
        self.incoming.fault(&self.world, PipeFault::Reset);
    }
}

impl Drop for SimConn {
    fn drop(&mut self) {
        self.outgoing.close_write(&self.world);
        self.incoming.close_read();
    }
}

/// A host's [`Net`].
pub struct SimNet {
    world: Arc<World>,
    node: NodeIx,
    ip: IpAddr,
}

impl SimNet {
    pub(crate) fn new(world: Arc<World>, node: NodeIx, ip: IpAddr, _incarnation: u64) -> SimNet {
        SimNet { world, node, ip }
    }

    /// Loopback and wildcard addresses mean this host.
    fn local(&self, addr: SocketAddr) -> SocketAddr {
        if addr.ip().is_loopback() || addr.ip().is_unspecified() {
            SocketAddr::new(self.ip, addr.port())
        } else {
            addr
        }
    }

    fn ephemeral_port(&self) -> u16 {
        let mut inner = lock(&self.world.net.inner);
        let port = inner.next_port.entry(self.node).or_insert(EPHEMERAL_PORT_MIN);
        let chosen = *port;
        *port = port.checked_add(1).unwrap_or(EPHEMERAL_PORT_MIN);
        chosen
    }

    async fn delay(&self, to: NodeIx) {
        let at = self.world.now_nanos() + self.world.net.sample_latency(&self.world, self.node, to);
        SimSleep::new(Arc::clone(&self.world), at).await;
    }

    async fn connect_to(&self, addr: SocketAddr) -> io::Result<Box<dyn Conn>> {
        let addr = self.local(addr);
        let world = &self.world;
        let Some(peer) = world.nodes.by_ip(addr.ip()) else {
            world.trace.fold(Event::NetConn, 0xdead);
            return Err(io::ErrorKind::HostUnreachable.into());
        };
        let cut = world.net.link(self.node, peer).partitioned
            || world.net.link(peer, self.node).partitioned;
        if cut {
            let timeout = lock(&world.net.inner).connect_timeout.unwrap_or(CONNECT_TIMEOUT_DEFAULT);
            SimSleep::new(Arc::clone(world), world.now_nanos() + nanos(timeout)).await;
            world.trace.fold(Event::NetConn, 0x7173);
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.delay(peer).await;
        let listener = lock(&world.net.inner).listeners.get(&addr).cloned();
        let Some(listener) = listener else {
            self.delay(peer).await;
            world.trace.fold(Event::NetConn, 0x2ef);
            return Err(io::ErrorKind::ConnectionRefused.into());
        };
        let (out, back) = (Pipe::new(self.node, peer), Pipe::new(peer, self.node));
        lock(&world.net.inner).conns.push(ConnRecord {
            a: self.node,
            b: peer,
            pipes: [Arc::downgrade(&out), Arc::downgrade(&back)],
        });
        let local = SocketAddr::new(self.ip, self.ephemeral_port());
        let server_end = SimConn {
            world: Arc::clone(world),
            incoming: Arc::clone(&out),
            outgoing: Arc::clone(&back),
        };
        let waker = {
            let mut state = lock(&listener.state);
            if state.closed {
                return Err(io::ErrorKind::ConnectionRefused.into());
            }
            state.backlog.push_back((server_end, local));
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        world.trace.fold(Event::NetConn, (peer as u64) << 16 | u64::from(addr.port()));
        self.delay(peer).await;
        Ok(Box::new(SimConn { world: Arc::clone(world), incoming: back, outgoing: out }))
    }
}

impl Net for SimNet {
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let mut addr = self.local(addr);
            if addr.ip() != self.ip {
                return Err(io::ErrorKind::AddrNotAvailable.into());
            }
            if addr.port() == 0 {
                addr.set_port(self.ephemeral_port());
            }
            let mut inner = lock(&self.world.net.inner);
            if inner.listeners.contains_key(&addr) {
                return Err(io::ErrorKind::AddrInUse.into());
            }
            let shared =
                Arc::new(ListenerShared { addr, node: self.node, state: Mutex::default() });
            inner.listeners.insert(addr, Arc::clone(&shared));
            Ok(Box::new(SimListener { world: Arc::clone(&self.world), shared })
                as Box<dyn Listener>)
        })
    }

    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<Box<dyn Conn>>> {
        Box::pin(self.connect_to(addr))
    }
}

/// How an accept fails (see [`crate::Sim::fail_accepts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptFault {
    /// As in a process out of file descriptors: the accept fails, and the connection stays
    /// waiting for the next one.
    OutOfDescriptors,
    /// The waiting connection was reset before it could be accepted (`ECONNABORTED`): its
    /// client sees the reset, and the accept fails for that connection alone.
    Aborted,
}

/// A host's listening socket.
pub struct SimListener {
    world: Arc<World>,
    shared: Arc<ListenerShared>,
}

impl Listener for SimListener {
    fn accept(&self) -> BoxFuture<'_, io::Result<(Box<dyn Conn>, SocketAddr)>> {
        Box::pin(std::future::poll_fn(move |cx| {
            let mut state = lock(&self.shared.state);
            let fault = if state.backlog.is_empty() {
                None
            } else {
                self.world.net.take_accept_failure(self.shared.node, self.shared.addr)
            };
            match fault {
                Some(AcceptFault::OutOfDescriptors) => {
                    self.world.trace.fold(Event::NetConn, 0xacce);
                    return Poll::Ready(Err(io::Error::other("too many open files (simulated)")));
                }
                Some(AcceptFault::Aborted) => {
                    self.world.trace.fold(Event::NetConn, 0xab0);
                    if let Some((conn, _)) = state.backlog.pop_front() {
                        Box::new(conn).abort();
                    }
                    return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
                }
                None => {}
            }
            if let Some((conn, peer)) = state.backlog.pop_front() {
                return Poll::Ready(Ok((Box::new(conn) as Box<dyn Conn>, peer)));
            }
            if state.closed {
                return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
            }
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        }))
    }

    fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }
}

impl Drop for SimListener {
    fn drop(&mut self) {
        let mut inner = lock(&self.world.net.inner);
        if inner.listeners.get(&self.shared.addr).is_some_and(|l| Arc::ptr_eq(l, &self.shared)) {
            inner.listeners.remove(&self.shared.addr);
        }
        drop(inner);
        let backlog = {
            let mut state = lock(&self.shared.state);
            state.closed = true;
            std::mem::take(&mut state.backlog)
        };
        drop(backlog);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
