//! How a broker reaches the active controller: directly when it runs on this node, otherwise
//! over the controller listener of one of the voters. A NOT_CONTROLLER answer names the leader
//! when known; failures rotate through the voters; everything is bounded by a deadline.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::logic::ControllerError;
use super::records::BrokerId;
use super::rpc::{Channel, Hello, Request, Response, read_frame, write_frame};
use super::service::Controller;
use crate::io::{Conn, Env, timeout};

/// Pause between attempts while no controller answers.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Bound on one attempt's answer (plus a metadata fetch's own wait).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// Bound on connecting to a controller.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Which connection a call uses, so a long metadata poll never delays a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// Registration, heartbeats and changes.
    Control,
    /// Metadata fetches.
    Metadata,
}

type Slot = Arc<tokio::sync::Mutex<Option<Box<dyn Conn>>>>;

/// A broker's way to the active controller.
pub struct ControllerClient {
    env: Env,
    node: BrokerId,
    voters: BTreeMap<BrokerId, Option<SocketAddr>>,
    local: Option<Arc<Controller>>,
    leader: Mutex<Option<BrokerId>>,
    rotation: Mutex<usize>,
    conns: Mutex<BTreeMap<(BrokerId, Lane), Slot>>,
}

impl ControllerClient {
    /// A client for `node`, with this node's controller if it runs one.
    pub fn new(
        env: Env,
        node: BrokerId,
        voters: BTreeMap<BrokerId, Option<SocketAddr>>,
        local: Option<Arc<Controller>>,
    ) -> ControllerClient {
        ControllerClient {
            env,
            node,
            voters,
            local,
            leader: Mutex::new(None),
            rotation: Mutex::new(0),
            conns: Mutex::new(BTreeMap::new()),
        }
    }

    fn target(&self) -> Option<BrokerId> {
        if let Some(leader) = *self.leader.lock().unwrap_or_else(|p| p.into_inner()) {
            return Some(leader);
        }
        let ids: Vec<BrokerId> = self.voters.keys().copied().collect();
        let mut rotation = self.rotation.lock().unwrap_or_else(|p| p.into_inner());
        *rotation = rotation.wrapping_add(1);
        ids.get(*rotation % ids.len().max(1)).copied()
    }

    fn set_leader(&self, leader: Option<BrokerId>) {
        *self.leader.lock().unwrap_or_else(|p| p.into_inner()) = leader;
    }

    /// Sends `request` to the active controller, retrying until `deadline` passes.
    pub async fn call(
        &self,
        request: &Request,
        lane: Lane,
        deadline: Duration,
    ) -> Result<Response, ControllerError> {
        let attempt = async {
            loop {
                let Some(target) = self.target() else {
                    self.env.clock.sleep(RETRY_BACKOFF).await;
                    continue;
                };
                let answer = self.call_one(target, request, lane).await;
                match answer {
                    Some(Response::Error { error: ControllerError::NotController, leader }) => {
                        self.set_leader(leader.filter(|&l| l != target));
                        if leader.is_none() || leader == Some(target) {
                            self.env.clock.sleep(RETRY_BACKOFF).await;
                        }
                    }
                    Some(Response::Error { error: ControllerError::Timeout, .. }) | None => {
                        self.set_leader(None);
                        self.env.clock.sleep(RETRY_BACKOFF).await;
                    }
                    Some(response) => {
                        self.set_leader(Some(target));
                        return response;
                    }
                }
            }
        };
        timeout(&*self.env.clock, deadline, attempt).await.map_err(|_| ControllerError::Timeout)
    }

    /// One attempt at `target`; `None` when it could not be reached.
    async fn call_one(&self, target: BrokerId, request: &Request, lane: Lane) -> Option<Response> {
        if target == self.node
            && let Some(local) = &self.local
        {
            return Some(local.handle(request.clone()).await);
        }
        let addr = (*self.voters.get(&target)?)?;
        let slot = {
            let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(conns.entry((target, lane)).or_default())
        };
        let mut guard = slot.lock().await;
        // Taken out while in use: a call cancelled mid-exchange drops the connection rather
        // than leaving a half-read answer for the next call.
        let mut conn = match guard.take() {
            Some(c) => c,
            None => {
                let mut c = timeout(&*self.env.clock, CONNECT_TIMEOUT, self.env.net.connect(addr))
                    .await
                    .ok()?
                    .ok()?;
                let hello = Hello { from: self.node, channel: Channel::Requests }.encode();
                write_frame(&mut *c, &hello).await.ok()?;
                c
            }
        };
        let wait = match request {
            Request::FetchMetadata { max_wait_ms, .. } => u64::from(*max_wait_ms),
            _ => 0,
        };
        let exchange = async {
            write_frame(&mut *conn, &request.encode()).await?;
            let frame = read_frame(&mut *conn).await?;
            Ok::<_, super::rpc::RpcError>(Response::decode(&frame)?)
        };
        let limit = ATTEMPT_TIMEOUT + Duration::from_millis(wait);
        match timeout(&*self.env.clock, limit, exchange).await {
            Ok(Ok(response)) => {
                *guard = Some(conn);
                Some(response)
            }
            Ok(Err(e)) => {
                tracing::debug!(controller = target, "controller call failed: {e}");
                None
            }
            Err(_) => {
                tracing::debug!(controller = target, "controller call timed out");
                None
            }
        }
    }
}
