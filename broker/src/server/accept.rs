//! Accepting connections. A failed accept costs that one attempt, never the listener:
//! - running out of file descriptors (a flood of clients, or a descriptor limit set low) or a
//!   momentary shortage of kernel memory is tried again after a pause that doubles while the
//!   failures go on, so that a broker out of descriptors neither spins nor floods its log;
//! - a failure of the one connection being accepted (reset or aborted before it was accepted,
//!   refused by a firewall rule) is passed over at once.
//!
//! Failures are logged at most once per [`ACCEPT_LOG_INTERVAL`], with the count since the last
//! line (so a broker that fails one accept in two while it sits at its descriptor limit logs a
//! line every ten seconds, not one per connection), and the first accept after a logged
//! failure says so. Only a listener closed for good (`NotConnected`, see [`crate::io::Listener::accept`])
//! ends it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::io::{Clock, Conn, Instant, Listener};

/// The pause after the first failed accept in a row.
pub const ACCEPT_RETRY_MIN: Duration = Duration::from_millis(10);
/// The longest pause between failed accepts: the most a client waits, once descriptors are
/// free again, for a listener that was out of them.
pub const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(1);
/// The least time between two log lines about failed accepts.
pub const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A listener whose accept failures are retried.
pub struct Acceptor {
    listener: Box<dyn Listener>,
    clock: Arc<dyn Clock>,
    /// The pause after the last failure; zero after a success.
    pause: Duration,
    /// Failed accepts since the last log line.
    unlogged: u64,
    /// When a failure was last logged.
    logged_at: Option<Instant>,
    /// A failure was logged since the last accept that succeeded.
    warned: bool,
    /// What the listener is for, in log lines.
    what: &'static str,
}

/// Whether `error` concerns only the connection being accepted.
fn of_one_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::PermissionDenied
    )
}

impl Acceptor {
    /// Accepts on `listener`; `what` names it in log lines ("client", "controller").
    pub fn new(listener: Box<dyn Listener>, clock: Arc<dyn Clock>, what: &'static str) -> Self {
        Acceptor {
            listener,
            clock,
            pause: Duration::ZERO,
            unlogged: 0,
            logged_at: None,
            warned: false,
            what,
        }
    }

    /// The next connection, or `None` once the listener is closed for good.
    pub async fn next(&mut self) -> Option<(Box<dyn Conn>, SocketAddr)> {
        loop {
            match self.listener.accept().await {
                Ok(accepted) => {
                    if std::mem::take(&mut self.warned) {
                        tracing::info!(
                            listener = self.what,
                            "accepting again after failed accepts"
                        );
                    }
                    self.pause = Duration::ZERO;
                    return Some(accepted);
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return None,
                Err(e) => {
                    self.unlogged += 1;
                    let now = self.clock.now();
                    if self.logged_at.is_none_or(|at| now - at >= ACCEPT_LOG_INTERVAL) {
                        tracing::warn!(
                            listener = self.what,
                            addr = %self.listener.local_addr(),
                            failures = self.unlogged,
                            "accept failed: {e}; trying again"
                        );
                        self.logged_at = Some(now);
                        self.unlogged = 0;
                        self.warned = true;
                    }
                    if of_one_connection(&e) {
                        continue;
                    }
                    self.pause = (self.pause * 2).clamp(ACCEPT_RETRY_MIN, ACCEPT_RETRY_MAX);
                    self.clock.sleep(self.pause).await;
                }
            }
        }
    }
}
