//! Concurrency: named tasks on the node's executor. There are no threads in broker code; work
//! that must not block others is a task.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::BoxFuture;

/// Starts tasks on the node's executor.
pub trait Spawner: Send + Sync {
    /// Runs `task` concurrently with the caller. `name` labels it in logs and simulation traces.
    /// The task runs until it finishes, is aborted through its handle, or the node stops (in
    /// simulation a killed node's tasks are dropped mid-flight, exactly like a crashed process).
    fn spawn(&self, name: &str, task: BoxFuture<'static, ()>) -> TaskHandle;

    /// Runs `task` as [`Spawner::spawn`] does, but at low priority: it gets the CPU only as the
    /// node's other work leaves it some, for work nobody waits on urgently (reads for a consumer
    /// catching up from far behind, which must not slow producers down). By default, and in
    /// simulation, it is the same as `spawn`.
    fn spawn_background(&self, name: &str, task: BoxFuture<'static, ()>) -> TaskHandle {
        self.spawn(name, task)
    }
}

/// Aborts a spawned task. Dropping the handle detaches the task; it keeps running.
pub struct TaskHandle {
    abort: Box<dyn AbortTask>,
}

/// What an implementation provides behind a [`TaskHandle`].
pub trait AbortTask: Send + Sync {
    /// Stops the task: its future is dropped at the next opportunity and never polled again.
    fn abort(&self);
    /// Whether the task has completed or been aborted.
    fn is_finished(&self) -> bool;
}

impl TaskHandle {
    /// Wraps an implementation's abort hook.
    pub fn new(abort: Box<dyn AbortTask>) -> TaskHandle {
        TaskHandle { abort }
    }

    /// Stops the task. See [`AbortTask::abort`].
    pub fn abort(&self) {
        self.abort.abort();
    }

    /// Whether the task has completed or been aborted.
    pub fn is_finished(&self) -> bool {
        self.abort.is_finished()
    }
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle").field("finished", &self.is_finished()).finish()
    }
}

/// Lets other ready tasks run before continuing. Works on any executor.
pub fn yield_now() -> impl Future<Output = ()> {
    YieldNow { yielded: false }
}

struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
