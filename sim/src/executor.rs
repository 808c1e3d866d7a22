//! The task table and ready queue of the discrete-event executor.
//!
//! Every task belongs to a node. A step takes one task from the ready set — chosen by the
//! seeded RNG, never by wake order, because third-party primitives wake in orders we do not
//! control — and polls it once. Tasks of a paused node are set aside until it resumes; tasks of
//! a killed node are dropped mid-flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use weir::io::BoxFuture;

use crate::world::lock;

/// Index of a node in the simulation (dense, from 0).
pub type NodeIx = usize;

/// Identifies a live task: its slot and the slot's generation, so a stale waker can never wake
/// the slot's next occupant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskId {
    slot: u32,
    generation: u32,
}

/// The part of the executor that wakers touch; kept apart from the task table so that waking
/// never needs the table's lock.
#[derive(Default)]
pub(crate) struct ReadyQueue {
    ids: Mutex<Vec<TaskId>>,
}

struct TaskWaker {
    id: TaskId,
    queued: AtomicBool,
    ready: Arc<ReadyQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::Relaxed) {
            lock(&self.ready.ids).push(self.id);
        }
    }
}

struct Task {
    generation: u32,
    serial: u64,
    node: NodeIx,
    /// `None` while the task is being polled.
    future: Option<BoxFuture<'static, ()>>,
    waker: Arc<TaskWaker>,
    aborted: bool,
}

#[derive(Default)]
struct Table {
    slots: Vec<Option<Task>>,
    generations: Vec<u32>,
    free: Vec<u32>,
    next_serial: u64,
    paused: Vec<bool>,
    /// Tasks woken while their node was paused, re-queued on resume.
    deferred: Vec<(NodeIx, TaskId)>,
    live: usize,
}

/// A task picked for polling.
pub(crate) struct Picked {
    pub(crate) id: TaskId,
    pub(crate) serial: u64,
    pub(crate) future: BoxFuture<'static, ()>,
    pub(crate) waker: Waker,
}

/// Tasks of every node in one simulation.
#[derive(Default)]
pub(crate) struct Executor {
    table: Mutex<Table>,
    ready: Arc<ReadyQueue>,
}

impl Executor {
    /// Adds a task and queues it for its first poll. Returns its id and serial.
    pub(crate) fn spawn(&self, node: NodeIx, future: BoxFuture<'static, ()>) -> (TaskId, u64) {
        let mut table = lock(&self.table);
        let slot = match table.free.pop() {
            Some(slot) => slot,
            None => {
                table.slots.push(None);
                table.generations.push(0);
                u32::try_from(table.slots.len() - 1).expect("fewer than 2^32 tasks")
            }
        };
        let generation = table.generations[slot as usize];
        let id = TaskId { slot, generation };
        let serial = table.next_serial;
        table.next_serial += 1;
        let waker = Arc::new(TaskWaker {
            id,
            queued: AtomicBool::new(false),
            ready: Arc::clone(&self.ready),
        });
        table.slots[slot as usize] = Some(Task {
            generation,
            serial,
            node,
            future: Some(future),
            waker: Arc::clone(&waker),
            aborted: false,
        });
        table.live += 1;
        drop(table);
        waker.wake_by_ref();
        (id, serial)
    }

    /// Removes one ready task, chosen by `pick` among `n` candidates, and hands it out for
    /// polling. Returns `None` when nothing is ready.
    pub(crate) fn pick(&self, mut pick: impl FnMut(usize) -> usize) -> Option<Picked> {
        loop {
            let id = {
                let mut ids = lock(&self.ready.ids);
                if ids.is_empty() {
                    return None;
                }
                let n = ids.len();
                let at = if n == 1 { 0 } else { pick(n) };
                ids.swap_remove(at)
            };
            let mut table = lock(&self.table);
            let paused = &table.paused;
            let Some(Some(task)) = table.slots.get(id.slot as usize) else {
                continue;
            };
            if task.generation != id.generation || task.future.is_none() {
                continue;
            }
            if paused.get(task.node).copied().unwrap_or(false) {
                let node = task.node;
                table.deferred.push((node, id));
                continue;
            }
            let Some(Some(task)) = table.slots.get_mut(id.slot as usize) else {
                continue;
            };
            task.waker.queued.store(false, Ordering::Relaxed);
            let waker = Waker::from(Arc::clone(&task.waker));
            let future = task.future.take()?;
            return Some(Picked { id, serial: task.serial, future, waker });
        }
    }

    /// Puts a polled task back, or ends it if it finished or was aborted meanwhile. Returns the
    /// future to drop (outside every lock, since dropping may wake or close things) and whether
    /// the task ended.
    pub(crate) fn put_back(
        &self,
        id: TaskId,
        future: BoxFuture<'static, ()>,
        finished: bool,
    ) -> (Option<BoxFuture<'static, ()>>, bool) {
        let mut table = lock(&self.table);
        let keep = match table.slots.get(id.slot as usize) {
            Some(Some(task)) => task.generation == id.generation && !task.aborted && !finished,
            _ => false,
        };
        if keep {
            if let Some(Some(task)) = table.slots.get_mut(id.slot as usize) {
                task.future = Some(future);
            }
            return (None, false);
        }
        table.free_slot(id);
        (Some(future), true)
    }

    /// Aborts one task: dropped now if idle, or when its current poll returns.
    pub(crate) fn abort(&self, id: TaskId) -> Option<BoxFuture<'static, ()>> {
        let mut table = lock(&self.table);
        let Some(Some(task)) = table.slots.get_mut(id.slot as usize) else {
            return None;
        };
        if task.generation != id.generation {
            return None;
        }
        task.aborted = true;
        let future = task.future.take()?;
        table.free_slot(id);
        Some(future)
    }

    /// Whether the task has ended (finished, aborted or dropped with its node).
    pub(crate) fn is_finished(&self, id: TaskId) -> bool {
        let table = lock(&self.table);
        !matches!(table.slots.get(id.slot as usize), Some(Some(task)) if task.generation == id.generation && !task.aborted)
    }

    /// Removes every task of `node`; returns their futures for the caller to drop outside locks.
    /// A task of the node that is mid-poll is marked aborted and ends when the poll returns.
    pub(crate) fn kill_node(&self, node: NodeIx) -> Vec<BoxFuture<'static, ()>> {
        let mut table = lock(&self.table);
        let mut dropped = Vec::new();
        let mut ended = Vec::new();
        for task in table.slots.iter_mut().flatten() {
            if task.node == node && !task.aborted {
                task.aborted = true;
                if let Some(future) = task.future.take() {
                    dropped.push(future);
                    ended.push(task.waker.id);
                }
            }
        }
        for id in ended {
            table.free_slot(id);
        }
        table.deferred.retain(|(n, _)| *n != node);
        dropped
    }

    /// Stops (`true`) or restarts (`false`) polling the tasks of `node`.
    pub(crate) fn set_paused(&self, node: NodeIx, paused: bool) {
        let mut table = lock(&self.table);
        if table.paused.len() <= node {
            table.paused.resize(node + 1, false);
        }
        table.paused[node] = paused;
        if paused {
            return;
        }
        let (resumed, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut table.deferred).into_iter().partition(|(n, _)| *n == node);
        table.deferred = kept;
        drop(table);
        lock(&self.ready.ids).extend(resumed.into_iter().map(|(_, id)| id));
    }

    /// How many tasks are alive.
    pub(crate) fn live_tasks(&self) -> usize {
        lock(&self.table).live
    }
}

impl Table {
    fn free_slot(&mut self, id: TaskId) {
        let slot = id.slot as usize;
        if matches!(self.slots.get(slot), Some(Some(task)) if task.generation == id.generation) {
            self.slots[slot] = None;
            self.generations[slot] = self.generations[slot].wrapping_add(1);
            self.free.push(id.slot);
            self.live -= 1;
        }
    }
}
