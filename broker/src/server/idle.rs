//! Idle client connections are closed (Kafka's `connections.max.idle.ms`): one on which nothing
//! was read or written for that long, and that is owed no response, so that a client which
//! vanished without closing (its host powered off, a link cut for good) does not hold a
//! connection, its buffers and its task for ever. A connection waiting for an answer (a fetch's
//! long poll, a join waiting for its rebalance) is never idle.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

use crate::io::{BoxFuture, Clock, Instant};

/// What a connection's writer shares with its reader: the responses owed and when one was last
/// written.
#[derive(Debug, Default)]
pub struct Activity {
    owed: AtomicUsize,
    last_write_nanos: AtomicU64,
    /// The writer stopped: whatever is owed will never be delivered.
    writer_gone: AtomicBool,
    /// The peer closed or reset the connection: nothing more is written to it.
    peer_left: AtomicBool,
    /// Woken when the peer leaves or the writer stops.
    changed: Notify,
}

impl Activity {
    /// A request was read whose response (or silence) the writer has yet to deliver.
    pub fn owe(&self) {
        self.owed.fetch_add(1, Ordering::Relaxed);
    }

    /// The writer delivered one owed response (or learned it has none to send) at `now`.
    pub fn paid(&self, now: Instant) {
        // The write's time first: a reader that sees nothing owed sees it too.
        self.last_write_nanos.fetch_max(now.as_nanos(), Ordering::Relaxed);
        self.owed.fetch_sub(1, Ordering::Release);
    }

    /// The writer stopped at `now` (the connection failed, a response could not be encoded,
    /// or the reader stopped and everything owed was delivered): nothing more will be
    /// delivered, so nothing is owed any longer.
    pub fn writer_gone(&self, now: Instant) {
        self.last_write_nanos.fetch_max(now.as_nanos(), Ordering::Relaxed);
        self.writer_gone.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Completes once the writer has stopped (see [`Activity::writer_gone`]).
    pub async fn writer_stopped(&self) {
        self.until(&self.writer_gone).await;
    }

    /// The reader found the peer gone (end of stream, or the connection failed): the writer
    /// stops at once and the connection closes, so that it stops counting as open; the
    /// request being answered finishes without it (see `server::drain`). Kafka notices a
    /// closed peer only when it next writes to it.
    pub fn peer_left(&self) {
        self.peer_left.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Completes once the peer has left (see [`Activity::peer_left`]).
    pub async fn left(&self) {
        self.until(&self.peer_left).await;
    }

    /// Completes once `flag` is set.
    async fn until(&self, flag: &AtomicBool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if flag.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    fn owes(&self) -> bool {
        !self.writer_gone.load(Ordering::Acquire) && self.owed.load(Ordering::Acquire) > 0
    }

    fn last_write(&self) -> Instant {
        Instant::from_nanos(self.last_write_nanos.load(Ordering::Relaxed))
    }
}

/// A connection's read half that fails with [`io::ErrorKind::TimedOut`] once the connection
/// has been idle for the limit: no byte read or written for that long and no response owed.
pub struct IdleReader<R> {
    inner: R,
    clock: Arc<dyn Clock>,
    idle: Duration,
    activity: Arc<Activity>,
    last_read: Instant,
    /// The timer armed for this deadline, while a read is pending.
    timer: Option<(Instant, BoxFuture<'static, ()>)>,
}

impl<R> IdleReader<R> {
    /// Wraps `inner`; the connection counts as active from now.
    pub fn new(inner: R, clock: Arc<dyn Clock>, idle: Duration, activity: Arc<Activity>) -> Self {
        let last_read = clock.now();
        IdleReader { inner, clock, idle, activity, last_read, timer: None }
    }

    /// When the connection becomes idle if nothing happens meanwhile; `None` while a response
    /// is owed.
    fn idle_at(&self) -> Option<Instant> {
        if self.activity.owes() {
            return None;
        }
        Some(self.last_read.max(self.activity.last_write()) + self.idle)
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for IdleReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Poll::Ready(outcome) = Pin::new(&mut this.inner).poll_read(cx, buf) {
            this.last_read = this.clock.now();
            this.timer = None;
            return Poll::Ready(outcome);
        }
        loop {
            // While a response is owed, look again one limit from now: the writer does not
            // wake this reader when it pays.
            let now = this.clock.now();
            let deadline = this.idle_at().unwrap_or(now + this.idle);
            if this.idle_at().is_some_and(|at| at <= now) {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("idle for {} ms", this.idle.as_millis()),
                )));
            }
            if this.timer.as_ref().is_none_or(|(at, _)| *at != deadline) {
                this.timer = Some((deadline, this.clock.sleep_until(deadline)));
            }
            let Some((_, timer)) = this.timer.as_mut() else {
                return Poll::Pending;
            };
            match timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) => this.timer = None,
            }
        }
    }
}
