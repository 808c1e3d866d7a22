//! The count of open client connections, and Kafka's limits on it:
//! - `max.connections`: once that many are open, the listener accepts no more until one
//!   closes; new connections wait in the kernel's backlog meanwhile (as in Kafka, where the
//!   acceptor blocks).
//! - `max.connections.per.ip`: a connection from an address that already has that many open is
//!   closed as soon as it is accepted, before anything is read from it, and logged.
//!
//! Replicas fetch from their leaders over the client listener, so their connections count
//! too: a limit must leave room for them.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Open client connections, in total and by peer address.
#[derive(Debug)]
pub struct Connections {
    open: AtomicUsize,
    per_ip: Mutex<BTreeMap<IpAddr, usize>>,
    /// Woken whenever a connection closes.
    closed: Notify,
    max: usize,
    max_per_ip: usize,
}

/// One connection counted as open until dropped.
#[derive(Debug)]
pub struct OpenConnection {
    connections: Arc<Connections>,
    ip: IpAddr,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        {
            let mut per_ip = self.connections.lock();
            if let Some(count) = per_ip.get_mut(&self.ip) {
                *count -= 1;
                if *count == 0 {
                    per_ip.remove(&self.ip);
                }
            }
        }
        self.connections.open.fetch_sub(1, Ordering::SeqCst);
        self.connections.closed.notify_waiters();
    }
}

impl Connections {
    /// No connection open yet; `max` in total and `max_per_ip` from one address.
    pub fn new(max: usize, max_per_ip: usize) -> Arc<Connections> {
        Arc::new(Connections {
            open: AtomicUsize::new(0),
            per_ip: Mutex::default(),
            closed: Notify::new(),
            max,
            max_per_ip,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<IpAddr, usize>> {
        self.per_ip.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Client connections open now from `ip`.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.lock().get(&ip.to_canonical()).copied().unwrap_or(0)
    }

    /// Whether fewer than `max.connections` are open.
    pub fn has_room(&self) -> bool {
        self.open() < self.max
    }

    /// Completes once fewer than `max.connections` are open.
    pub async fn room(&self) {
        loop {
            let closed = self.closed.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if self.has_room() {
                return;
            }
            closed.await;
        }
    }

    /// Counts a connection from `ip` as open, or `None` if that address already has
    /// `max.connections.per.ip` open.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<OpenConnection> {
        let ip = ip.to_canonical();
        let mut per_ip = self.lock();
        let count = per_ip.entry(ip).or_default();
        if *count >= self.max_per_ip {
            return None;
        }
        *count += 1;
        self.open.fetch_add(1, Ordering::SeqCst);
        Some(OpenConnection { connections: Arc::clone(self), ip })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_at_its_limit_is_refused_until_one_of_its_connections_closes() {
        let connections = Connections::new(10, 2);
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let first = connections.admit(a);
        let second = connections.admit(a);
        assert!(first.is_some() && second.is_some());
        assert!(connections.admit(a).is_none());
        let other = connections.admit(b);
        assert!(other.is_some());
        assert_eq!(connections.open(), 3);
        drop(first);
        assert_eq!(connections.open(), 2);
        assert!(connections.admit(a).is_some());
    }
}
