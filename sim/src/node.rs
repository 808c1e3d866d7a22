//! Nodes: named machines with an address, a disk, a clock and a boot function, that can be
//! started, killed, power-failed, paused, resumed and restarted over the disk they had.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};

use weir::io::{BoxFuture, Env};

use crate::clock::{ClockState, SimClock};
use crate::disk::{DiskState, SimDisk};
use crate::entropy::SimEntropy;
use crate::executor::NodeIx;
use crate::net::SimNet;
use crate::spawn::SimSpawner;
use crate::trace::Event;
use crate::world::{World, lock};

/// What a node runs when it starts: given the node's fresh `Env`, the node's main task.
pub type Boot = Arc<dyn Fn(Env) -> BoxFuture<'static, ()> + Send + Sync>;

/// Wraps an async closure as a [`Boot`].
pub fn boot<F, Fut>(f: F) -> Boot
where
    F: Fn(Env) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Arc::new(move |env| Box::pin(f(env)))
}

/// Whether a node's tasks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeStatus {
    /// Running normally.
    Up,
    /// Frozen: its tasks are not polled, its clock runs on, its sockets stay open.
    Paused,
    /// Not running (killed or power-failed); restart brings it back.
    Down,
}

pub(crate) struct NodeState {
    pub(crate) name: String,
    pub(crate) ip: IpAddr,
    pub(crate) status: NodeStatus,
    pub(crate) incarnation: u64,
    /// `Env`s handed out in this incarnation after the boot one (each gets its own random
    /// stream, so tasks spawned from the outside do not draw the same numbers).
    pub(crate) envs: u64,
    pub(crate) boot: Boot,
    pub(crate) clock: Arc<Mutex<ClockState>>,
    pub(crate) disk: Arc<DiskState>,
}

/// The node table.
#[derive(Default)]
pub(crate) struct Nodes {
    table: Mutex<Vec<NodeState>>,
}

/// The address of the `ix`-th node: 10.0.0.1, 10.0.0.2, …
pub fn node_ip(ix: NodeIx) -> IpAddr {
    let n = u32::try_from(ix + 1).unwrap_or(u32::MAX);
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | n))
}

impl Nodes {
    pub(crate) fn add(&self, name: &str, boot: Boot) -> NodeIx {
        let mut table = lock(&self.table);
        let ix = table.len();
        table.push(NodeState {
            name: name.to_owned(),
            ip: node_ip(ix),
            status: NodeStatus::Down,
            incarnation: 0,
            envs: 0,
            boot,
            clock: Arc::new(Mutex::new(ClockState::default())),
            disk: Arc::new(DiskState::default()),
        });
        ix
    }

    pub(crate) fn with<T>(&self, node: NodeIx, f: impl FnOnce(&mut NodeState) -> T) -> T {
        let mut table = lock(&self.table);
        let state = table.get_mut(node).unwrap_or_else(|| panic!("no node {node}"));
        f(state)
    }

    pub(crate) fn is_alive(&self, node: NodeIx, incarnation: u64) -> bool {
        let table = lock(&self.table);
        table
            .get(node)
            .is_some_and(|n| n.incarnation == incarnation && n.status != NodeStatus::Down)
    }

    pub(crate) fn count(&self) -> usize {
        lock(&self.table).len()
    }

    /// The node listening on `ip`, if any.
    pub(crate) fn by_ip(&self, ip: IpAddr) -> Option<NodeIx> {
        lock(&self.table).iter().position(|n| n.ip == ip)
    }
}

/// Node lifecycle, on the world so that both the test driver and nemesis tasks can call it.
impl World {
    /// Starts a node that is down: a new incarnation with a fresh `Env` over the disk it had.
    pub(crate) fn start_node(self: &Arc<Self>, node: NodeIx) {
        let (incarnation, boot, clock, disk, ip) = self.nodes.with(node, |n| {
            assert_eq!(n.status, NodeStatus::Down, "node {} is already running", n.name);
            n.incarnation += 1;
            n.envs = 0;
            n.status = NodeStatus::Up;
            (n.incarnation, Arc::clone(&n.boot), Arc::clone(&n.clock), Arc::clone(&n.disk), n.ip)
        });
        self.trace.fold(Event::Node, (node as u64) << 8 | 1);
        self.executor.set_paused(node, false);
        self.net.on_start(self, node);
        let env = self.node_env(node, (incarnation, 0), ip, clock, disk);
        let main = boot(env);
        self.spawn_task(node, main);
    }

    /// An `Env` for the node's current life, with a random stream of its own.
    pub(crate) fn current_env(self: &Arc<Self>, node: NodeIx) -> Env {
        let (life, clock, disk, ip) = self.nodes.with(node, |n| {
            n.envs += 1;
            ((n.incarnation, n.envs), Arc::clone(&n.clock), Arc::clone(&n.disk), n.ip)
        });
        self.node_env(node, life, ip, clock, disk)
    }

    /// The `Env` of one life of a node; `life` is the incarnation and which of its `Env`s this
    /// is (0: the boot one), which picks the random stream.
    fn node_env(
        self: &Arc<Self>,
        node: NodeIx,
        (incarnation, stream): (u64, u64),
        ip: IpAddr,
        clock: Arc<Mutex<ClockState>>,
        disk: Arc<DiskState>,
    ) -> Env {
        let world = Arc::clone(self);
        Env {
            clock: Arc::new(SimClock::new(Arc::clone(&world), clock)),
            disk: Arc::new(SimDisk::new(Arc::clone(&world), node, disk, incarnation)),
            net: Arc::new(SimNet::new(Arc::clone(&world), node, ip, incarnation)),
            spawner: Arc::new(SimSpawner::new(Arc::clone(&world), node, incarnation)),
            entropy: Arc::new(SimEntropy::new(world, node, incarnation, stream)),
        }
    }

    /// Kills the node's process: tasks, sockets and memory are gone; the page cache survives.
    /// Peers see their connections reset.
    pub(crate) fn kill_node(self: &Arc<Self>, node: NodeIx) {
        if !self.mark_down(node, 2) {
            return;
        }
        self.net.on_kill(self, node);
        self.drop_tasks(node);
        let disk = self.nodes.with(node, |n| Arc::clone(&n.disk));
        disk.on_kill();
    }

    /// Cuts the node's power: like a kill, but every write not yet durable is lost or torn, and
    /// peers see nothing (no reset) until they time out.
    pub(crate) fn power_fail_node(self: &Arc<Self>, node: NodeIx) {
        if !self.mark_down(node, 3) {
            return;
        }
        self.net.on_power_fail(self, node);
        self.drop_tasks(node);
        let disk = self.nodes.with(node, |n| Arc::clone(&n.disk));
        disk.power_fail(self);
    }

    /// Cuts the node's power if it runs, and replaces its disk with an empty one.
    pub(crate) fn wipe_node(self: &Arc<Self>, node: NodeIx) {
        self.power_fail_node(node);
        self.trace.fold(Event::Node, (node as u64) << 8 | 6);
        let disk = self.nodes.with(node, |n| Arc::clone(&n.disk));
        disk.wipe();
    }

    /// Marks the node down. False if it was already down.
    fn mark_down(&self, node: NodeIx, how: u64) -> bool {
        let was = self.nodes.with(node, |n| std::mem::replace(&mut n.status, NodeStatus::Down));
        if was == NodeStatus::Down {
            return false;
        }
        self.trace.fold(Event::Node, (node as u64) << 8 | how);
        true
    }

    /// Drops every task of a node that went down (outside every lock: drops may wake others).
    fn drop_tasks(&self, node: NodeIx) {
        let dropped = self.executor.kill_node(node);
        for _ in &dropped {
            self.trace.fold(Event::TaskEnd, node as u64);
        }
        drop(dropped);
        self.executor.set_paused(node, false);
    }

    /// Freezes or unfreezes the node's tasks.
    pub(crate) fn set_node_paused(&self, node: NodeIx, paused: bool) {
        let changed = self.nodes.with(node, |n| match (n.status, paused) {
            (NodeStatus::Up, true) => {
                n.status = NodeStatus::Paused;
                true
            }
            (NodeStatus::Paused, false) => {
                n.status = NodeStatus::Up;
                true
            }
            _ => false,
        });
        if changed {
            self.trace.fold(Event::Node, (node as u64) << 8 | if paused { 4 } else { 5 });
            self.executor.set_paused(node, paused);
        }
    }
}
