//! How a broker reaches the active controller: directly when it runs on this node, otherwise
//! over the controller listener of one of the voters. A NOT_CONTROLLER answer names the leader
//! when known; failures rotate through the voters; everything is bounded by a deadline.
//! Metadata, which every voter serves, comes from this node's own controller when it runs one;
//! heartbeats are also copied to the voters that are not active, so that whichever takes over
//! knows when it last heard from each broker.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::logic::ControllerError;
use super::records::BrokerId;
use super::rpc::{Channel, Hello, Request, Response, read_frame, write_frame};
use super::service::Controller;
use crate::io::{Conn, Env, Instant, timeout};

/// Pause between attempts while no controller answers.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Bound on one attempt's answer (plus a metadata fetch's own wait).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// Bound on a metadata fetch's answer beyond its own wait: a silent controller is given up on
/// (and the next voter asked) this soon, not after [`ATTEMPT_TIMEOUT`].
pub const METADATA_MARGIN: Duration = Duration::from_millis(500);
/// Bound on connecting to a controller.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Which connection a call uses, so a long metadata poll never delays a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// Registration, heartbeats and changes.
    Control,
    /// Metadata fetches.
    Metadata,
    /// Copies of heartbeats to the controllers that are not active.
    Copy,
    /// Questions for operators (the quorum's state), which must not wait behind heartbeats
    /// nor hold them up.
    Query,
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

    /// Where to send the next attempt: the leader this node's own controller (a Raft voter)
    /// knows of, else the controller that last answered, else the next voter in turn.
    fn target(&self) -> Option<BrokerId> {
        if let Some(leader) = self.local.as_ref().and_then(|l| l.leader()) {
            return Some(leader);
        }
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

    /// Sends `request` to the active controller, retrying until `deadline` passes. A metadata
    /// fetch goes to this node's own controller when it runs one: every voter serves the
    /// committed metadata log, and the local one answers even while the active controller has
    /// just died and no other is elected yet; but not while its store cannot persist (its
    /// image may fall behind), when it goes to the active controller as a broker's without a
    /// controller does.
    pub async fn call(
        &self,
        request: &Request,
        lane: Lane,
        deadline: Duration,
    ) -> Result<Response, ControllerError> {
        if let Request::FetchMetadata { after, max_wait_ms } = *request
            && let Some(local) = self.local.as_ref().filter(|l| l.serves_local_metadata())
        {
            let wait = Duration::from_millis(u64::from(max_wait_ms));
            return timeout(&*self.env.clock, deadline, local.local_metadata(after, wait))
                .await
                .map_err(|_| ControllerError::Timeout);
        }
        let trying = Mutex::new(None);
        let until = self.env.clock.now() + deadline;
        let attempt = async {
            loop {
                let Some(target) = self.target() else {
                    self.env.clock.sleep(RETRY_BACKOFF).await;
                    continue;
                };
                *trying.lock().unwrap_or_else(|p| p.into_inner()) = Some(target);
                let answer = self.call_one(target, &self.bounded(request, until), lane).await;
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
        let outcome = timeout(&*self.env.clock, deadline, attempt).await;
        if outcome.is_err() {
            // The deadline ran out on a controller that never answered: the next call starts
            // elsewhere, not with another wait on it (a deadline shorter than one attempt's
            // bound would otherwise never move on).
            let silent = *trying.lock().unwrap_or_else(|p| p.into_inner());
            let mut leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
            if silent.is_some() && *leader == silent {
                *leader = None;
            }
        }
        outcome.map_err(|_| ControllerError::Timeout)
    }

    /// `request` as one attempt sends it: a change a client waits for (topic creation,
    /// deletion, growth, configuration) goes inside [`Request::Within`] with what is left of
    /// the wait, so that the controller does not start it after the caller gave up.
    fn bounded<'a>(&self, request: &'a Request, until: Instant) -> Cow<'a, Request> {
        match request {
            Request::CreateTopic { .. }
            | Request::DeleteTopic { .. }
            | Request::CreatePartitions { .. }
            | Request::AlterConfigs { .. }
            | Request::AlterConfigsIncremental { .. }
            | Request::ElectLeaders { .. } => {
                let left = until.saturating_duration_since(self.env.clock.now());
                let ms = u32::try_from(left.as_millis()).unwrap_or(u32::MAX);
                Cow::Owned(Request::Within { ms, request: Box::new(request.clone()) })
            }
            _ => Cow::Borrowed(request),
        }
    }

    /// Sends `request` to every voter but the one believed active, each attempt bounded by
    /// `deadline`, without waiting for the answers: copies of heartbeats, so that a controller
    /// taking over knows when it last heard from each broker.
    pub fn copy_to_others(self: &Arc<Self>, request: &Request, deadline: Duration) {
        let leader = *self.leader.lock().unwrap_or_else(|p| p.into_inner());
        for &voter in self.voters.keys().filter(|&&v| Some(v) != leader) {
            let (client, request) = (Arc::clone(self), request.clone());
            self.env.spawn("heartbeat-copy", async move {
                let clock = Arc::clone(&client.env.clock);
                let _ =
                    timeout(&*clock, deadline, client.call_one(voter, &request, Lane::Copy)).await;
            });
        }
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
        // Taken out while in use: a call that fails, times out or is cancelled mid-exchange
        // aborts the connection rather than leaving a half-read answer for the next call —
        // and rather than closing it, which would still deliver a request held up by a
        // partition when it heals, long after the caller gave up on it.
        let conn = match guard.take() {
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
        let limit = match request {
            Request::FetchMetadata { max_wait_ms, .. } => {
                Duration::from_millis(u64::from(*max_wait_ms)) + METADATA_MARGIN
            }
            _ => ATTEMPT_TIMEOUT,
        };
        let mut conn = AbortOnDrop(Some(conn));
        let exchange = async {
            let closed = || std::io::Error::from(std::io::ErrorKind::NotConnected);
            let c = conn.0.as_deref_mut().ok_or_else(closed)?;
            write_frame(c, &request.encode()).await?;
            let frame = read_frame(c).await?;
            Ok::<_, super::rpc::RpcError>(Response::decode(&frame)?)
        };
        match timeout(&*self.env.clock, limit, exchange).await {
            Ok(Ok(response)) => {
                *guard = conn.0.take();
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

/// A connection in the middle of an exchange: aborted ([`Conn::abort`]) unless taken back.
struct AbortOnDrop(Option<Box<dyn Conn>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            conn.abort();
        }
    }
}
