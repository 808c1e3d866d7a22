//! Simulated task spawning: tasks belong to the node (and the life of the node) that spawned
//! them, so killing the node drops them all.

use std::sync::{Arc, Weak};

use weir::io::spawn::AbortTask;
use weir::io::{BoxFuture, Spawner, TaskHandle};

use crate::executor::{NodeIx, TaskId};
use crate::world::World;

/// Spawns onto one node of the simulation.
pub struct SimSpawner {
    world: Arc<World>,
    node: NodeIx,
    incarnation: u64,
}

impl SimSpawner {
    pub(crate) fn new(world: Arc<World>, node: NodeIx, incarnation: u64) -> SimSpawner {
        SimSpawner { world, node, incarnation }
    }
}

struct SimTask {
    world: Weak<World>,
    id: TaskId,
}

impl AbortTask for SimTask {
    fn abort(&self) {
        if let Some(world) = self.world.upgrade() {
            drop(world.executor.abort(self.id));
        }
    }

    fn is_finished(&self) -> bool {
        self.world.upgrade().is_none_or(|world| world.executor.is_finished(self.id))
    }
}

/// A handle to a task that was never started (its node had already died).
struct NeverStarted;

impl AbortTask for NeverStarted {
    fn abort(&self) {}
    fn is_finished(&self) -> bool {
        true
    }
}

impl Spawner for SimSpawner {
    fn spawn(&self, name: &str, task: BoxFuture<'static, ()>) -> TaskHandle {
        if !self.world.nodes.is_alive(self.node, self.incarnation) {
            tracing::trace!(task = name, node = self.node, "spawn on a dead node ignored");
            return TaskHandle::new(Box::new(NeverStarted));
        }
        let id = self.world.spawn_task(self.node, task);
        TaskHandle::new(Box::new(SimTask { world: Arc::downgrade(&self.world), id }))
    }
}
