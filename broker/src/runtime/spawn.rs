//! Production tasks: `tokio::spawn` on the current runtime; background tasks on a runtime of
//! their own whose one thread runs at the lowest CPU priority.

#![allow(unsafe_code)]

use std::sync::OnceLock;

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

    fn spawn_background(&self, name: &str, task: BoxFuture<'static, ()>) -> TaskHandle {
        match background() {
            Some(runtime) => {
                tracing::trace!(task = name, "spawn in the background");
                let handle = runtime.spawn(task);
                TaskHandle::new(Box::new(TokioTask(handle.abort_handle())))
            }
            None => self.spawn(name, task),
        }
    }
}

/// The nice value of the background runtime's threads: the lowest priority, so that the
/// scheduler gives them a core only as far as the node's other threads leave it idle (a thread
/// at 19 weighs 15 against 1024 at 0).
const BACKGROUND_NICE: libc::c_int = 19;

/// The process's background runtime, started on first use; `None` if it could not be.
fn background() -> Option<&'static tokio::runtime::Runtime> {
    static BACKGROUND: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    BACKGROUND
        .get_or_init(|| {
            let built = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .thread_name("weir-background")
                .on_thread_start(lower_priority)
                .build();
            match built {
                Ok(runtime) => Some(runtime),
                Err(e) => {
                    tracing::warn!(error = %e, "no background runtime: background tasks run at normal priority");
                    None
                }
            }
        })
        .as_ref()
}

/// Gives the calling thread the lowest CPU priority (on Linux a nice value is a thread's own,
/// and threads it starts inherit it). A refusal leaves it at its priority.
fn lower_priority() {
    // SAFETY: setpriority only reads its integer arguments; `who` 0 is the calling thread.
    let refused = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, BACKGROUND_NICE) } != 0;
    if refused {
        tracing::debug!("background thread keeps its CPU priority: setpriority refused");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's nice value.
    fn nice() -> libc::c_int {
        // SAFETY: getpriority only reads its integer arguments.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[tokio::test]
    async fn background_tasks_run_at_the_lowest_priority_and_others_do_not() {
        let (background, normal) =
            (tokio::sync::oneshot::channel(), tokio::sync::oneshot::channel());
        let (send_background, send_normal) = (background.0, normal.0);
        TokioSpawner.spawn_background(
            "test",
            Box::pin(async move {
                let _ = send_background
                    .send((nice(), std::thread::current().name().map(str::to_owned)));
            }),
        );
        TokioSpawner.spawn(
            "test",
            Box::pin(async move {
                let _ = send_normal.send(nice());
            }),
        );
        let (background_nice, thread) = background.1.await.expect("the background task ran");
        assert_eq!(thread.as_deref(), Some("weir-background"));
        assert_eq!(background_nice, BACKGROUND_NICE);
        // Compared with the test's own thread, not with 0: the tests may run under `nice`.
        let normal_nice = normal.1.await.expect("the task ran");
        assert_eq!(normal_nice, nice(), "a task spawned normally keeps the node's priority");
    }
}
