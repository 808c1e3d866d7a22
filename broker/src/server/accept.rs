//! Accepting connections. A failed accept costs that one attempt, never the listener: running
//! out of file descriptors (a flood of clients, or a descriptor limit set low), a connection
//! reset before it was accepted, a momentary shortage of kernel memory — each is logged, and
//! the listener is tried again after a pause that doubles while the failures go on (so a
//! broker out of descriptors neither spins nor floods its log), until a connection is
//! accepted again. Only a listener closed for good (`NotConnected`, see
//! [`crate::io::Listener::accept`]) ends it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::io::{Clock, Conn, Listener};

/// The pause after the first failed accept in a row.
pub const ACCEPT_RETRY_MIN: Duration = Duration::from_millis(10);
/// The longest pause between failed accepts: the most a client waits, once descriptors are
/// free again, for a listener that was out of them.
pub const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(1);

/// A listener whose accept failures are retried.
pub struct Acceptor {
    listener: Box<dyn Listener>,
    clock: Arc<dyn Clock>,
    /// The pause after the last failure; zero after a success.
    pause: Duration,
    /// Failed accepts since the last one that succeeded.
    failures: u64,
    /// What the listener is for, in log lines.
    what: &'static str,
}

impl Acceptor {
    /// Accepts on `listener`; `what` names it in log lines ("client", "controller").
    pub fn new(listener: Box<dyn Listener>, clock: Arc<dyn Clock>, what: &'static str) -> Self {
        Acceptor { listener, clock, pause: Duration::ZERO, failures: 0, what }
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Failed accepts since the last one that succeeded.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// The next connection, or `None` once the listener is closed for good.
    pub async fn next(&mut self) -> Option<(Box<dyn Conn>, SocketAddr)> {
        loop {
            match self.listener.accept().await {
                Ok(accepted) => {
                    if self.failures > 0 {
                        tracing::info!(
                            listener = self.what,
                            failures = self.failures,
                            "accepting again after failed accepts"
                        );
                    }
                    self.pause = Duration::ZERO;
                    self.failures = 0;
                    return Some(accepted);
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return None,
                Err(e) => {
                    self.failures += 1;
                    self.pause = (self.pause * 2).clamp(ACCEPT_RETRY_MIN, ACCEPT_RETRY_MAX);
                    // One line per doubling, then one per second at most.
                    if self.failures.is_power_of_two() || self.pause == ACCEPT_RETRY_MAX {
                        tracing::warn!(
                            listener = self.what,
                            addr = %self.listener.local_addr(),
                            failures = self.failures,
                            "accept failed: {e}; trying again in {:?}",
                            self.pause
                        );
                    }
                    self.clock.sleep(self.pause).await;
                }
            }
        }
    }
}
