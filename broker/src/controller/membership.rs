//! A broker's membership in the cluster: it registers with a fresh incarnation, heartbeats,
//! follows the committed metadata log into its own copy of the image, and knows when it must
//! consider itself fenced (no heartbeat answered within the session timeout — it then stops
//! leading, even before the controller says so).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::client::{ControllerClient, Lane};
use super::image::MetadataImage;
use super::logic::ControllerError;
use super::records::decode_entry;
use super::records::{BrokerId, BrokerRegistration, Incarnation};
use super::rpc::{LogReports, Request, Response};
use crate::io::{Env, Instant, timeout};

/// How long a metadata fetch waits at the controller for something new.
pub const METADATA_WAIT: Duration = Duration::from_millis(1_000);

/// Heartbeat settings.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Between heartbeats.
    pub heartbeat_interval: Duration,
    /// Without an answered heartbeat for this long, the broker is fenced.
    pub session_timeout: Duration,
}

/// A broker's part in one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// The metadata does not know the partition.
    Unknown,
    /// This broker leads it and is not fenced.
    Leader,
    /// Another broker leads it, it has no leader, or this broker is fenced.
    NotLeader,
}

/// This broker's view of the cluster.
pub struct Membership {
    env: Env,
    client: Arc<ControllerClient>,
    registration: BrokerRegistration,
    timing: Timing,
    image: Mutex<Arc<MetadataImage>>,
    /// The broker has applied at least one complete answer from the controller.
    caught_up: AtomicBool,
    registered: AtomicBool,
    last_heartbeat: Mutex<Option<Instant>>,
    /// The metadata log index the image must reach before this broker leads again: the index
    /// of the answer to a heartbeat sent after its session may have lapsed, or that unfenced
    /// it. Meanwhile the controller may have fenced it and moved its partitions' leadership,
    /// and an image from before that would let it serve as a leader it no longer is (the
    /// controller proves such an answer by a commit, so a deposed controller cannot give it).
    /// Zero: none.
    rejoin_at: AtomicU64,
    shutting_down: AtomicBool,
    /// What every heartbeat reports of this broker's logs.
    reports: Mutex<LogReports>,
    /// Woken whenever the image changes.
    pub changed: Notify,
}

impl Membership {
    /// Starts registering, heartbeating and following the metadata log, as `registration`
    /// with a fresh incarnation.
    pub fn start(
        env: Env,
        client: Arc<ControllerClient>,
        mut registration: BrokerRegistration,
        timing: Timing,
    ) -> Arc<Membership> {
        let mut incarnation = [0u8; 16];
        env.entropy.fill(&mut incarnation);
        registration.incarnation = Incarnation(u128::from_be_bytes(incarnation));
        let membership = Arc::new(Membership {
            env: env.clone(),
            client,
            registration,
            timing,
            image: Mutex::new(Arc::new(MetadataImage::default())),
            caught_up: AtomicBool::new(false),
            registered: AtomicBool::new(false),
            last_heartbeat: Mutex::new(None),
            rejoin_at: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            reports: Mutex::new(LogReports::default()),
            changed: Notify::new(),
        });
        env.spawn("broker-heartbeat", heartbeat_loop(Arc::downgrade(&membership)));
        env.spawn("broker-metadata", metadata_loop(Arc::downgrade(&membership)));
        membership
    }

    /// Sets what every heartbeat reports of this broker's logs (see [`LogReports`]).
    pub fn set_log_reports(&self, reports: LogReports) {
        *self.reports.lock().unwrap_or_else(|p| p.into_inner()) = reports;
    }

    /// This broker's id.
    pub fn node(&self) -> BrokerId {
        self.registration.broker_id
    }

    /// This run's incarnation.
    pub fn incarnation(&self) -> crate::controller::records::Incarnation {
        self.registration.incarnation
    }

    /// The image as this broker has applied it.
    pub fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether the image has caught up with the controller at least once and holds this
    /// broker's own registration. The second half is what makes an image safe to act on after
    /// a restart: the registration was committed by a real quorum, so an image holding it holds
    /// every record committed before it, even when it came from a controller that has not yet
    /// learned it was deposed (such a controller could otherwise hand out an older image, and
    /// the broker would remove the folders of topics created since).
    pub fn caught_up(&self) -> bool {
        self.caught_up_in(&self.image())
    }

    /// [`Membership::caught_up`], with `image` as the image: for a caller about to act on
    /// `image`, which the membership may have replaced meanwhile.
    pub fn caught_up_in(&self, image: &MetadataImage) -> bool {
        self.caught_up.load(Ordering::Acquire) && self.knows_itself(image)
    }

    /// Whether `image` holds this broker's current registration.
    fn knows_itself(&self, image: &MetadataImage) -> bool {
        image
            .brokers
            .get(&self.node())
            .is_some_and(|b| b.registration.incarnation == self.registration.incarnation)
    }

    /// Whether this broker must not serve as a leader: unregistered, no answered heartbeat
    /// within the session timeout, an image older than the controller's when its session was
    /// renewed after a lapse, or fenced in the image.
    pub fn is_fenced(&self) -> bool {
        self.is_fenced_in(&self.image())
    }

    /// [`Membership::is_fenced`], with `image` as the image.
    pub(crate) fn is_fenced_in(&self, image: &MetadataImage) -> bool {
        if !self.registered.load(Ordering::Acquire) {
            return true;
        }
        let last = *self.last_heartbeat.lock().unwrap_or_else(|p| p.into_inner());
        let silent = last.is_none_or(|t| {
            self.env.clock.now().saturating_duration_since(t) > self.timing.session_timeout
        });
        let behind = image.offset < self.rejoin_at.load(Ordering::Acquire);
        silent || behind || !self.knows_itself(image) || !image.is_live(self.node())
    }

    /// This broker's part in `topic`/`partition` now.
    pub fn leadership(&self, topic: &str, partition: i32) -> Leadership {
        self.leadership_in(&self.image(), topic, partition)
    }

    /// This broker's part in `topic`/`partition` as `image` has it, for a caller that checks
    /// more against the same image.
    pub fn leadership_in(&self, image: &MetadataImage, topic: &str, partition: i32) -> Leadership {
        match image.partition(topic, partition) {
            None => Leadership::Unknown,
            Some(p) if p.leader == self.node() && !self.is_fenced_in(image) => Leadership::Leader,
            Some(_) => Leadership::NotLeader,
        }
    }

    /// Waits until the image has applied log index `offset`, or `limit` passes.
    pub async fn wait_for(&self, offset: u64, limit: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.changed.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                if self.image().offset >= offset {
                    return;
                }
                notified.await;
            }
        };
        timeout(&*self.env.clock, limit, wait).await.is_ok()
    }

    /// Asks the active controller a question for an operator (its own connection: never in
    /// line with this broker's heartbeats).
    pub async fn query(
        &self,
        request: &Request,
        limit: Duration,
    ) -> Result<Response, ControllerError> {
        self.client.call(request, Lane::Query, limit).await
    }

    /// Sends a request to the active controller.
    pub async fn call(
        &self,
        request: &Request,
        limit: Duration,
    ) -> Result<Response, ControllerError> {
        self.client.call(request, Lane::Control, limit).await
    }

    /// Asks the controller to move leadership away before this broker stops.
    pub async fn controlled_shutdown(&self, limit: Duration) {
        self.shutting_down.store(true, Ordering::Release);
        let request = Request::Heartbeat {
            broker_id: self.node(),
            incarnation: self.registration.incarnation,
            shutdown: true,
            reports: LogReports::default(),
            lapsed: false,
        };
        match self.call(&request, limit).await {
            Ok(Response::Done { offset, .. }) => {
                self.wait_for(offset, limit).await;
            }
            other => tracing::warn!("controlled shutdown was not acknowledged: {other:?}"),
        }
    }

    fn apply(&self, response: Response) -> bool {
        let Response::Metadata(delta) = response else { return false };
        let mut image = (*self.image()).clone();
        if let Some(snapshot) = &delta.snapshot {
            match MetadataImage::decode_snapshot(snapshot) {
                // The image only moves forward (the group coordinator counts on it): a
                // snapshot older than it, which a controller should not send, is passed over.
                Ok(restored) if restored.offset >= image.offset => image = restored,
                Ok(restored) => {
                    tracing::warn!(
                        snapshot = restored.offset,
                        image = image.offset,
                        "passing over a metadata snapshot older than the image"
                    );
                }
                Err(e) => {
                    tracing::error!("a metadata snapshot from the controller is corrupt: {e}");
                    return false;
                }
            }
        }
        for (index, data) in &delta.entries {
            if *index <= image.offset {
                continue;
            }
            match decode_entry(data) {
                Ok((_, records)) => {
                    for record in &records {
                        image.apply(*index, record);
                    }
                    image.offset = *index;
                }
                Err(e) => {
                    tracing::error!(index, "a metadata entry from the controller is corrupt: {e}");
                    return false;
                }
            }
        }
        *self.image.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(image);
        self.caught_up.store(true, Ordering::Release);
        self.changed.notify_waiters();
        true
    }
}

async fn heartbeat_loop(membership: Weak<Membership>) {
    loop {
        let Some(m) = membership.upgrade() else { return };
        if m.shutting_down.load(Ordering::Acquire) {
            return;
        }
        let interval = m.timing.heartbeat_interval;
        let sent = m.env.clock.now();
        // More than half the session timeout since the last answered heartbeat was sent: the
        // controller, which counts from when heartbeats arrive, may have fenced this broker
        // and moved its partitions' leadership meanwhile.
        let lapsed = m
            .last_heartbeat
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none_or(|t| sent.saturating_duration_since(t) > m.timing.session_timeout / 2);
        let request = if m.registered.load(Ordering::Acquire) {
            Request::Heartbeat {
                broker_id: m.node(),
                incarnation: m.registration.incarnation,
                shutdown: false,
                reports: m.reports.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                lapsed,
            }
        } else {
            Request::Register(m.registration.clone())
        };
        if matches!(request, Request::Heartbeat { .. }) {
            m.client.copy_to_others(&request, interval);
        }
        match m.client.call(&request, Lane::Control, interval * 2).await {
            Ok(Response::Done { offset, fenced }) => {
                if !m.registered.swap(true, Ordering::AcqRel) {
                    tracing::info!(node = m.node(), "registered with the controller");
                }
                // Back from a lapse, or unfenced by this answer: lead again only with an image
                // that holds every change the controller made up to it.
                if matches!(request, Request::Heartbeat { lapsed: true, .. }) || fenced {
                    m.rejoin_at.fetch_max(offset, Ordering::AcqRel);
                }
                *m.last_heartbeat.lock().unwrap_or_else(|p| p.into_inner()) = Some(sent);
            }
            Ok(Response::Error { error: ControllerError::StaleBroker(_), .. }) => {
                m.registered.store(false, Ordering::Release);
                continue;
            }
            other => tracing::debug!("heartbeat unanswered: {other:?}"),
        }
        let clock = std::sync::Arc::clone(&m.env.clock);
        drop(m);
        clock.sleep(interval).await;
    }
}

async fn metadata_loop(membership: Weak<Membership>) {
    loop {
        let Some(m) = membership.upgrade() else { return };
        let request = Request::FetchMetadata {
            after: m.image().offset,
            max_wait_ms: METADATA_WAIT.as_millis() as u32,
        };
        let limit = METADATA_WAIT * 4;
        match m.client.call(&request, Lane::Metadata, limit).await {
            Ok(response) => {
                if !m.apply(response) {
                    m.env.clock.sleep(METADATA_WAIT).await;
                }
            }
            Err(e) => {
                tracing::debug!("metadata fetch failed: {e}");
                m.env.clock.sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
