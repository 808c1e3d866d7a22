//! Client connections held open from a client host while a scenario watches what the broker
//! does with them: each sends its bytes as it opens, then waits for one answer and records
//! what it saw, and stays open until closed (or dropped).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use weir::io::TaskHandle;
use weir_sim::Host;
use weir_sim::workload::cluster::Cluster;

use crate::wire::{answer, frame};

/// What a connection saw of its request, and when (simulated time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Sent, and neither answered nor closed yet.
    Waiting,
    /// Answered at this time.
    Answered(Duration),
    /// Closed by the broker, unanswered, at this time.
    Closed(Duration),
    /// The connection could not be made.
    NotConnected,
}

/// A connection held open by a task on a client host until it is closed (or dropped).
pub struct Held {
    seen: Arc<Mutex<Seen>>,
    close: Option<oneshot::Sender<()>>,
    _task: TaskHandle,
}

impl Held {
    /// What the connection has seen so far.
    pub fn seen(&self) -> Seen {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether its request was answered.
    pub fn answered(&self) -> bool {
        matches!(self.seen(), Seen::Answered(_))
    }

    /// Closes the connection.
    pub fn close(&mut self) {
        if let Some(close) = self.close.take() {
            let _ = close.send(());
        }
    }
}

/// Opens a connection from `host` to node 0, sends ApiVersions and holds the connection.
pub fn open(c: &Cluster, host: Host, name: &str) -> Held {
    open_sending(c, host, name, frame(ApiKey::ApiVersions, 0, 1, &ApiVersionsRequest::default()))
}

/// Opens a connection from `host` to node 0, writes `bytes` and holds the connection.
pub fn open_sending(c: &Cluster, host: Host, name: &str, bytes: Vec<u8>) -> Held {
    open_sending_to(c, 0, host, name, bytes)
}

/// Opens a connection from `host` to node `ix`, writes `bytes` and holds the connection.
pub fn open_sending_to(c: &Cluster, ix: usize, host: Host, name: &str, bytes: Vec<u8>) -> Held {
    let seen = Arc::new(Mutex::new(Seen::Waiting));
    let (close, mut closed) = oneshot::channel::<()>();
    let (addr, out) = (c.addr(ix), Arc::clone(&seen));
    let task = c.sim.spawn(host, name, move |env| async move {
        let set = |s: Seen| *out.lock().unwrap_or_else(|p| p.into_inner()) = s;
        let Ok(mut conn) = env.net.connect(addr).await else { return set(Seen::NotConnected) };
        if conn.write_all(&bytes).await.is_err() {
            return set(Seen::Closed(Duration::from_nanos(env.clock.now().as_nanos())));
        }
        let got = tokio::select! {
            got = answer(&mut conn) => got,
            _ = &mut closed => return,
        };
        let at = Duration::from_nanos(env.clock.now().as_nanos());
        set(if got.is_some() { Seen::Answered(at) } else { Seen::Closed(at) });
        let _ = closed.await;
    });
    Held { seen, close: Some(close), _task: task }
}
