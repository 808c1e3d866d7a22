//! Production tasks: `tokio::spawn` on the current runtime.

use crate::io::spawn::AbortTask;
use crate::io::{BoxFuture, Spawner, TaskHandle};

/// Spawns onto the tokio runtime that is current when `spawn` is called.
pub struct TokioSpawner;

struct TokioTask(tokio::task::AbortHandle);

impl AbortTask for TokioTask {
    fn abort(&self) {
        self.0.abort();
    }
    fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl Spawner for TokioSpawner {
    fn spawn(&self, name: &str, task: BoxFuture<'static, ()>) -> TaskHandle {
        tracing::trace!(task = name, "spawn");
        let handle = tokio::spawn(task);
        TaskHandle::new(Box::new(TokioTask(handle.abort_handle())))
    }
}
