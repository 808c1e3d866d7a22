//! The async shell around the group coordinator: it stamps requests with ids and the clock,
//! routes the coordinator's outputs (replies to waiting handlers; record batches to the
//! `__consumer_offsets` partitions, appended in order and reported back once durable), and runs
//! its timers. All group logic is in [`crate::coordinator`]; nothing here decides anything.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot};

use self::append::{append, persist_error};

use crate::catalog::Topic;
use crate::controller::image::MetadataImage;
use crate::coordinator::{
    CoordinatorConfig, GroupCoordinator, GroupId, GroupsSummary, Now, Output, PersistError,
    PersistId, Record, RequestId, Response,
};
use crate::io::Env;
use crate::log::{ReadError, records, split};
use crate::model::{LeaderEpoch, Offset, TopicId};
use crate::partition::Partition;
use crate::partition::replica::Role;

mod append;

/// Bytes read at a time when loading `__consumer_offsets`.
pub const LOAD_CHUNK_BYTES: usize = 1 << 20;
/// Reads of an offsets partition's log a load tries before it gives up on the partition.
const LOAD_READ_ATTEMPTS: u32 = 10;
/// The pause between those tries.
const LOAD_READ_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// The pause before a failed load of an offsets partition is tried again; it doubles with
/// every failure, up to [`LOAD_RETRY_PAUSE_MAX`].
const LOAD_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest pause between tries of a failing load.
const LOAD_RETRY_PAUSE_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a group request got no answer from the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// Some group of the request is not served here (its offsets partition is not led, or
    /// not loaded, here): the client should look for its coordinator again.
    #[error("a group of the request is not coordinated here")]
    NotServed,
    /// The request was taken but its reply was dropped unanswered.
    #[error("the group coordinator dropped the request")]
    Dropped,
}

impl Unavailable {
    /// The error code a client gets: NOT_COORDINATOR where the group is not served here,
    /// COORDINATOR_NOT_AVAILABLE otherwise.
    pub fn code(self) -> i16 {
        match self {
            Unavailable::NotServed => kafka_protocol::ResponseError::NotCoordinator.code(),
            Unavailable::Dropped => kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
        }
    }
}

type Pending = Mutex<BTreeMap<RequestId, oneshot::Sender<Response>>>;

/// Work for the task that appends group records, taken in order.
enum PersistJob {
    /// Append a batch of the coordinator's records and report its fate.
    Write(PersistId, Vec<Record>),
    /// Answer once every batch queued before it has been appended or has failed.
    Barrier(oneshot::Sender<()>),
}

/// An offsets-topic partition this broker took over: its groups loaded, or being loaded.
struct Takeover {
    /// The partition, as it was open when taken over.
    partition: Arc<Partition>,
    /// The leader epoch it was led in.
    epoch: LeaderEpoch,
    /// Tells its load from a later load of the same partition.
    token: u64,
    /// Where its log ended when its groups were loaded; `None` until then (or for good if
    /// the load failed).
    end: Option<Offset>,
}

impl Takeover {
    /// Whether its groups may be served (see [`Groups::is_loaded`]).
    fn serves(&self) -> bool {
        self.end.is_some_and(|end| {
            self.partition.log.offline().is_none()
                && self.partition.high_watermark() >= end
                && leader_epoch(&self.partition) == Some(self.epoch)
        })
    }
}

/// The topics of the newest metadata image seen: its offset, and each topic's id by name.
#[derive(Debug, Default)]
struct TopicsSeen(Option<(u64, BTreeMap<String, TopicId>)>);

impl TopicsSeen {
    /// Whether an image at `offset` is newer than the one seen (true before the first).
    fn is_older_than(&self, offset: u64) -> bool {
        self.0.as_ref().is_none_or(|(seen, _)| *seen < offset)
    }

    /// Takes in the topics `now` of the image at `offset`, and returns the names gone since
    /// the image seen before, or made again under another id. The first image only sets what
    /// the next is compared with, and one no newer than the image seen changes nothing: an
    /// older image would show topics made since as deleted.
    fn advance(&mut self, offset: u64, now: BTreeMap<String, TopicId>) -> BTreeSet<String> {
        if !self.is_older_than(offset) {
            return BTreeSet::new();
        }
        let before = self.0.take().map(|(_, topics)| topics).unwrap_or_default();
        let gone = before.into_iter().filter(|(name, id)| now.get(name) != Some(id));
        let deleted = gone.map(|(name, _)| name).collect();
        self.0 = Some((offset, now));
        deleted
    }
}

/// An offsets-topic partition to load, with its takeover's token.
type ToLoad = (Arc<Partition>, u64);

/// The group coordinator of this broker, ready for handlers.
pub struct Groups {
    env: Env,
    state: Mutex<GroupCoordinator>,
    pending: Pending,
    next_request: AtomicU64,
    persist: mpsc::UnboundedSender<PersistJob>,
    /// Woken when a deadline may have moved.
    changed: Notify,
    /// The offsets topic, once a partition of it is hosted here.
    offsets: Mutex<Option<Arc<Topic>>>,
    /// The offsets-topic partitions this broker leads, as the latest call of
    /// [`Groups::lead_partitions`] gave them, by index.
    taken: Mutex<BTreeMap<i32, Takeover>>,
    /// The next takeover's token.
    next_token: AtomicU64,
    /// The offsets topic's partition count at the latest call (0 before the first).
    partition_count: AtomicI32,
    /// The topics of the newest metadata image [`Groups::observe_topics`] was given.
    topics_seen: Mutex<TopicsSeen>,
}

impl Groups {
    /// Starts the coordinator's timer and persistence tasks; group state arrives as this
    /// broker's `__consumer_offsets` partitions open ([`Groups::lead_partitions`]).
    pub async fn start(env: Env, config: CoordinatorConfig) -> Arc<Groups> {
        let seed = env.entropy.next_u64();
        let (persist, queue) = mpsc::unbounded_channel();
        let groups = Arc::new(Groups {
            env: env.clone(),
            state: Mutex::new(GroupCoordinator::new(config, seed)),
            pending: Mutex::new(BTreeMap::new()),
            next_request: AtomicU64::new(1),
            persist,
            changed: Notify::new(),
            offsets: Mutex::new(None),
            taken: Mutex::new(BTreeMap::new()),
            next_token: AtomicU64::new(1),
            partition_count: AtomicI32::new(0),
            topics_seen: Mutex::new(TopicsSeen::default()),
        });
        env.spawn("group-persist", persist_loop(Arc::downgrade(&groups), queue));
        env.spawn("group-timers", timer_loop(Arc::downgrade(&groups)));
        groups
    }

    /// Takes over exactly the groups kept in `led`, the partitions of the offsets topic
    /// `offsets` this broker now leads. A partition taken over before, and still led in the
    /// same epoch, keeps its groups as they are (in the middle of a rebalance or not), or its
    /// load under way. The groups of every other partition are given up at once (their parked
    /// requests are answered NOT_COORDINATOR), and each newly led partition is loaded from its
    /// log in a task of its own, so that a long load (a large partition, or reads tried again
    /// at damage) holds up neither the broker's other work nor the groups already served;
    /// until a partition is loaded its groups are answered COORDINATOR_LOAD_IN_PROGRESS (see
    /// [`Groups::is_loaded`]). A partition led in a new epoch is loaded again: another leader
    /// may have taken its groups' requests in between. So is every partition when the topic's
    /// partition count changed, which moves groups between partitions. Meant to be called
    /// after every change of the metadata; a call that changes nothing does nothing.
    pub fn lead_partitions(self: &Arc<Self>, offsets: Arc<Topic>, led: Vec<Arc<Partition>>) {
        let count = offsets.partition_count();
        *self.offsets.lock().unwrap_or_else(|p| p.into_inner()) = Some(offsets);
        let led: Vec<(Arc<Partition>, LeaderEpoch)> =
            led.into_iter().filter_map(|p| leader_epoch(&p).map(|epoch| (p, epoch))).collect();
        let (unloaded, to_load) = {
            let mut state = self.lock();
            let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
            let recounted = self.partition_count.swap(count, Ordering::AcqRel) != count;
            let before = taken.len();
            taken.retain(|&index, t| {
                !recounted
                    && led.iter().any(|(p, epoch)| {
                        p.tp.partition.0 == index
                            && Arc::ptr_eq(p, &t.partition)
                            && *epoch == t.epoch
                    })
            });
            let dropped = taken.len() != before;
            let mut to_load = Vec::new();
            for (partition, epoch) in led {
                let index = partition.tp.partition.0;
                if taken.contains_key(&index) {
                    continue;
                }
                let token = self.next_token.fetch_add(1, Ordering::Relaxed);
                let takeover =
                    Takeover { partition: Arc::clone(&partition), epoch, token, end: None };
                taken.insert(index, takeover);
                to_load.push((partition, token));
            }
            if !dropped && to_load.is_empty() {
                return;
            }
            let kept = |g: &GroupId| {
                taken.get(&partition_for(g.as_str(), count)).is_some_and(|t| t.end.is_some())
            };
            let unloaded = state.unload_groups(|g| !kept(g));
            (self.queue_persists(unloaded), to_load)
        };
        self.dispatch(unloaded);
        // One task each: a partition whose load keeps failing holds up no other.
        for partition in to_load {
            self.env.spawn("group-load", load_loop(Arc::downgrade(self), partition));
        }
    }

    /// Tombstones, in every group served here, the offsets of the topics gone from `image`
    /// since the last image this was given, or made again under a new id (see
    /// [`GroupCoordinator::remove_topic_offsets`]), and tells the coordinator the topics the
    /// cluster has now. Meant to be given every image the broker applies, and the image a
    /// commit is checked against before it is checked. A topic deleted while the broker was
    /// down, or while its groups' partition was loading, or whose tombstones failed, has its
    /// offsets tombstoned by the next retention check instead (see
    /// [`GroupCoordinator::set_live_topics`]); one made again under the same name meanwhile
    /// keeps them, as in Kafka.
    pub fn observe_topics(&self, image: &MetadataImage) {
        let outputs = {
            // Held while the coordinator is told, so that it never hears of an older image
            // after a newer one, and a caller that finds this image seen already may count on
            // the coordinator knowing its topics.
            let mut seen = self.topics_seen.lock().unwrap_or_else(|p| p.into_inner());
            if !seen.is_older_than(image.offset) {
                return;
            }
            let now: BTreeMap<String, TopicId> =
                image.topics.values().map(|t| (t.name.clone(), t.id)).collect();
            let live = now.clone();
            let deleted = seen.advance(image.offset, now);
            let mut state = self.lock();
            state.set_live_topics(live);
            if deleted.is_empty() {
                return;
            }
            let outputs = state.remove_topic_offsets(&deleted, self.now());
            self.queue_persists(outputs)
        };
        self.dispatch(outputs);
    }

    /// Loads the groups of `partition`'s log if its takeover `token` is still current.
    async fn load_partition(&self, (partition, token): &ToLoad) {
        let index = partition.tp.partition.0;
        let current = || {
            let taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
            taken.get(&index).is_some_and(|t| t.token == *token)
        };
        let mut pause = LOAD_RETRY_PAUSE;
        let (records, end) = loop {
            match load_records(&self.env, partition, &current).await {
                Ok(Some(read)) => break read,
                Ok(None) => return,
                Err(_) if !current() => return,
                Err(e) => {
                    // Serving a group from part of its records would hand out generations and
                    // offsets its log contradicts: its requests are refused instead, and the
                    // load is tried again, until the partition's leadership changes (a log
                    // that cannot be read goes offline and moves).
                    tracing::error!(
                        partition = %partition.tp,
                        "cannot load the groups of this offsets partition; not serving them \
                         until a later try succeeds: {e}"
                    );
                    self.env.clock.sleep(pause).await;
                    pause = (pause * 2).min(LOAD_RETRY_PAUSE_MAX);
                    if !current() {
                        return;
                    }
                }
            }
        };
        let loaded = {
            let mut state = self.lock();
            // Checked under the state lock that `lead_partitions` unloads under.
            let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
            let Some(takeover) = taken.get_mut(&index).filter(|t| t.token == *token) else {
                return;
            };
            takeover.end = Some(end);
            drop(taken);
            let loaded = state.load(records, self.now());
            self.queue_persists(loaded)
        };
        self.dispatch(loaded);
        self.changed.notify_one();
    }

    /// Whether the groups kept in partition `index` of the offsets topic are loaded here and
    /// may be served: read to the log end, and that end committed. A new leader's log may end
    /// in records no quorum holds yet; served before they commit, a group could hand out a
    /// generation's assignment that a later leader, without those records, gives out again
    /// differently. Nor are they served once the partition's log has gone offline (its
    /// leadership is moving away, and the next leader may take commits this broker never sees
    /// before this broker learns of the move), or once the partition is led in another epoch
    /// than the one its groups were taken over in (until they are loaded again).
    pub fn is_loaded(&self, index: i32) -> bool {
        let taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        taken.get(&index).is_some_and(Takeover::serves)
    }

    /// Whether some offsets-topic partition this broker leads is not loaded yet (or cannot
    /// be): a list of its groups would leave out that partition's.
    pub fn loading(&self) -> bool {
        let taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        taken.values().any(|t| !t.serves())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupCoordinator> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Now {
        Now::new(self.env.clock.now(), self.env.clock.wall_ms())
    }

    /// Runs one request for `groups` through the coordinator and waits for its reply (which
    /// may come after a rebalance or a durable write). [`Unavailable::NotServed`] at once if
    /// some group of `groups` is not served here (see [`Groups::is_loaded`]): checked under the
    /// lock that [`Groups::lead_partitions`] gives groups up under, so that a request which
    /// found its group served before it was given up cannot bring it back into memory, where a
    /// load would replay its partition's records over it or no load would ever come.
    pub async fn call(
        &self,
        groups: &[GroupId],
        run: impl FnOnce(&mut GroupCoordinator, RequestId, Now) -> Vec<Output>,
    ) -> Result<Response, Unavailable> {
        let id = RequestId(self.next_request.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        let outputs = {
            let mut state = self.lock();
            if !groups.iter().all(|g| self.serves(g)) {
                return Err(Unavailable::NotServed);
            }
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id, tx);
            let outputs = run(&mut state, id, self.now());
            self.queue_persists(outputs)
        };
        self.dispatch(outputs);
        // The request may have set or moved a deadline.
        self.changed.notify_one();
        rx.await.map_err(|_| Unavailable::Dropped)
    }

    /// Whether `group`'s partition of the offsets topic is loaded here.
    fn serves(&self, group: &GroupId) -> bool {
        let offsets = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
        let count = offsets.as_ref().map(|t| t.partition_count());
        drop(offsets);
        count.is_some_and(|n| self.is_loaded(partition_for(group.as_str(), n)))
    }

    /// The groups served here (see [`Groups::is_loaded`]), for the metrics: see
    /// [`GroupCoordinator::figures`].
    pub fn figures(&self, series_max: usize) -> GroupsSummary {
        let state = self.lock();
        let offsets = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
        let count = offsets.as_ref().map(|t| t.partition_count());
        drop(offsets);
        let taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        let loaded: BTreeSet<i32> =
            taken.iter().filter(|(_, t)| t.serves()).map(|(&index, _)| index).collect();
        drop(taken);
        let served =
            |g: &GroupId| count.is_some_and(|n| loaded.contains(&partition_for(g.as_str(), n)));
        state.figures(served, series_max)
    }

    /// Reads from the coordinator without a request (list).
    pub fn read<T>(&self, read: impl FnOnce(&GroupCoordinator) -> T) -> T {
        read(&self.lock())
    }

    /// Reads `group` from the coordinator without a request (describe, fetch offsets), if it
    /// is served here: checked under the state lock, as [`Groups::call`] checks.
    pub fn read_group<T>(
        &self,
        group: &GroupId,
        read: impl FnOnce(&GroupCoordinator) -> T,
    ) -> Option<T> {
        let state = self.lock();
        self.serves(group).then(|| read(&state))
    }

    /// Sends the batches to persist among `outputs` to the writer, and returns the rest (the
    /// replies). Called under the state lock, so that batches reach the writer in the order
    /// the coordinator issued them, and before any load that starts after they were issued
    /// waits for the writer (see [`load_loop`]).
    fn queue_persists(&self, outputs: Vec<Output>) -> Vec<Output> {
        let mut replies = Vec::with_capacity(outputs.len());
        for output in outputs {
            match output {
                Output::Persist { id, records } => {
                    tracing::trace!(
                        persist = id.0,
                        records = records.len(),
                        "persisting group records"
                    );
                    if self.persist.send(PersistJob::Write(id, records)).is_err() {
                        tracing::error!("group records cannot be persisted: the writer stopped");
                    }
                }
                reply => replies.push(reply),
            }
        }
        replies
    }

    /// Delivers the replies among `outputs` to their waiting handlers.
    fn dispatch(&self, outputs: Vec<Output>) {
        tracing::trace!(outputs = outputs.len(), "group coordinator outputs");
        for output in outputs {
            match output {
                Output::Reply(id, response) => {
                    let waiter = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                    match waiter {
                        Some(waiter) => {
                            if waiter.send(response).is_err() {
                                tracing::debug!(
                                    request = id.0,
                                    "group reply for a request no one awaits"
                                );
                            }
                        }
                        None => {
                            tracing::warn!(request = id.0, "group reply for an unknown request")
                        }
                    }
                }
                // Sent under the state lock where it was issued (see `queue_persists`): one sent
                // here could reach the writer after a later load's barrier.
                persist @ Output::Persist { .. } => {
                    debug_assert!(false, "a batch to persist was not queued under the lock");
                    tracing::error!("a batch of group records was not queued under the lock");
                    self.queue_persists(vec![persist]);
                }
            }
        }
    }
}

/// Fires the coordinator's timers (session and rebalance timeouts, offset expiry).
async fn timer_loop(groups: Weak<Groups>) {
    loop {
        let Some(strong) = groups.upgrade() else { return };
        let clock = Arc::clone(&strong.env.clock);
        let notified = strong.changed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let deadline = strong.lock().next_deadline();
        match deadline {
            Some(at) => {
                let sleep = clock.sleep_until(at);
                tokio::select! {
                    biased;
                    () = sleep => {}
                    () = notified => {}
                }
            }
            None => notified.await,
        }
        let outputs = {
            let mut state = strong.lock();
            let outputs = state.tick(strong.now());
            strong.queue_persists(outputs)
        };
        strong.dispatch(outputs);
    }
}

/// Loads the groups of `partition` while its takeover is current. First it waits until every
/// batch of group records issued before it has been appended (or failed to be): one appended to
/// a partition after the load read its log would be missing from the groups loaded, and its
/// records are no longer replayed into memory (see [`GroupCoordinator::unload_groups`]). Batches are sent to the writer under the state lock
/// where they are issued (see [`Groups::queue_persists`]), so every batch issued before the
/// call that spawned this load is ahead of its barrier.
async fn load_loop(groups: Weak<Groups>, partition: ToLoad) {
    let (done, settled) = oneshot::channel();
    {
        let Some(strong) = groups.upgrade() else { return };
        if strong.persist.send(PersistJob::Barrier(done)).is_err() {
            return;
        }
    }
    if settled.await.is_err() {
        return;
    }
    let Some(strong) = groups.upgrade() else { return };
    strong.load_partition(&partition).await;
}

/// The epoch `partition` is led in here, if it is.
fn leader_epoch(partition: &Partition) -> Option<LeaderEpoch> {
    match partition.role() {
        Role::Leader { epoch, .. } => Some(epoch),
        _ => None,
    }
}

/// Appends each batch of group records, in order, to the offsets topic, and reports each
/// one's outcome once its replicas hold it; a barrier is answered once the batches before it are
/// appended. Batches are appended one after another but replicated side by side: a batch
/// waiting for its replicas (a follower that died, until the ISR shrinks) holds up neither the
/// appends after it nor a load waiting for them.
async fn persist_loop(groups: Weak<Groups>, mut queue: mpsc::UnboundedReceiver<PersistJob>) {
    while let Some(job) = queue.recv().await {
        let (id, records) = match job {
            PersistJob::Write(id, records) => (id, records),
            PersistJob::Barrier(done) => {
                // The load that waits may have been given up meanwhile.
                let _ = done.send(());
                continue;
            }
        };
        let Some(strong) = groups.upgrade() else { return };
        let offsets = strong.offsets.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let appended = match offsets {
            Some(offsets) => append(&strong.env, &offsets, &records).await,
            None => Err(PersistError::NotLeader),
        };
        match appended {
            Err(e) => report(&strong, id, Err(e)),
            Ok(completions) => {
                let weak = Arc::downgrade(&strong);
                strong.env.spawn("group-persist-ack", async move {
                    let mut result = Ok(());
                    for completion in completions {
                        if let Err(e) = completion.await {
                            result = Err(persist_error(e));
                            break;
                        }
                    }
                    if let Some(strong) = weak.upgrade() {
                        report(&strong, id, result);
                    }
                });
            }
        }
    }
}

/// Reports batch `id`'s outcome to the coordinator and delivers what follows from it.
fn report(groups: &Groups, id: PersistId, result: Result<(), PersistError>) {
    let outputs = {
        let mut state = groups.lock();
        let outputs = state.persisted(id, result, groups.now());
        groups.queue_persists(outputs)
    };
    groups.dispatch(outputs);
    groups.changed.notify_one();
}

/// Kafka's partition for a group: Java's `String.hashCode` of the group id, modulo the
/// partition count (so tools that compute it agree).
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let hash =
        group.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)));
    // Kafka's `Utils.abs`: `Math.abs`, except that `Integer.MIN_VALUE` maps to 0.
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % partitions.max(1)
}

/// Every record in one partition of the offsets topic, oldest first, to the log end, and that
/// end: a new leader's log is what its followers will copy, so its tail past the high watermark
/// becomes committed too — unless leadership moves on first, which is why the groups are served
/// only once it has (see [`Groups::is_loaded`]).
///
/// A read that fails is tried again (a read error or a corrupt copy in the page cache may pass);
/// if it keeps failing the load fails: stopping at the failure would serve the groups from part
/// of their records, as if the rest had never been written. A damaged batch (a latent sector
/// error: it fails its checks however often it is read) is passed over instead, with an error
/// in the log, where reads go on past it: failing would keep every group of the partition from
/// being served, for good. Its records are lost: a group whose newest commit it held is served
/// the one before (its consumers read some records again), never a later one.
///
/// `None` as soon as `current` says the load is no longer wanted (leadership moved again).
async fn load_records(
    env: &Env,
    partition: &Partition,
    current: &(dyn Fn() -> bool + Sync),
) -> Result<Option<(Vec<Record>, Offset)>, ReadError> {
    let mut out = Vec::new();
    let end = partition.log.log_end_offset();
    let mut from = partition.log.log_start_offset();
    while from < end {
        if !current() {
            return Ok(None);
        }
        let mut attempt = 1;
        let result = loop {
            match partition.log.read(from, LOAD_CHUNK_BYTES, end).await {
                Ok(result) => break Some(result),
                Err(ReadError::Corrupt { offset, cause, resume })
                    if attempt >= LOAD_READ_ATTEMPTS =>
                {
                    let Some(next) = partition.log.past_damage(from, resume) else {
                        return Err(ReadError::Corrupt { offset, cause, resume });
                    };
                    tracing::error!(
                        partition = %partition.tp,
                        "reading groups: passing over the damaged batch at {offset} ({cause}); \
                         its group records are lost; going on at {next}"
                    );
                    from = next;
                    break None;
                }
                Err(e) if attempt >= LOAD_READ_ATTEMPTS => return Err(e),
                Err(e) => {
                    tracing::warn!(partition = %partition.tp, attempt, "reading groups: {e}");
                    attempt += 1;
                    env.clock.sleep(LOAD_READ_BACKOFF).await;
                    if !current() {
                        return Ok(None);
                    }
                }
            }
        };
        let Some(result) = result else { continue };
        if result.records.is_empty() {
            break;
        }
        for batch in split::split_batches(&result.records).flatten() {
            decode_batch(&batch, &mut out);
        }
        from = result.next_offset.max(Offset(from.0 + 1));
    }
    Ok(Some((out, end)))
}

fn decode_batch(batch: &Bytes, out: &mut Vec<Record>) {
    let Ok(iter) = records::record_iter(batch) else { return };
    for record in iter.flatten() {
        let Some(key) = record.key else { continue };
        match Record::decode(&key, record.value.as_deref()) {
            Ok(decoded) => out.push(decoded),
            Err(e) => tracing::warn!("skipping an undecodable group record: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_javas_string_hash() {
        // "my-group".hashCode() == -1906497762 in Java; |h| % 50 == 12.
        assert_eq!(partition_for("my-group", 50), 12);
        // "zzzzzzzz".hashCode() == -1910022912; |h| % 50 == 12 as well.
        assert_eq!(partition_for("zzzzzzzz", 50), 12);
        assert_eq!(partition_for("", 50), 0);
    }

    fn topics(entries: &[(&str, u8)]) -> BTreeMap<String, TopicId> {
        entries.iter().map(|&(name, id)| (name.to_owned(), TopicId([id; 16]))).collect()
    }

    fn names(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    #[test]
    fn topics_seen_tells_deleted_and_remade_topics_from_newer_images_only() {
        let mut seen = TopicsSeen::default();
        // The first image is only what the next is compared with.
        assert_eq!(seen.advance(5, topics(&[("a", 1), ("b", 2), ("c", 3)])), names(&[]));
        // `a` deleted, `b` made again under another id, `c` kept, `d` new.
        let next = topics(&[("b", 9), ("c", 3), ("d", 4)]);
        assert_eq!(seen.advance(7, next.clone()), names(&["a", "b"]));
        // An image no newer than the one seen changes nothing, though it lacks `d`.
        assert!(!seen.is_older_than(7));
        assert_eq!(seen.advance(6, topics(&[("b", 9), ("c", 3)])), names(&[]));
        assert_eq!(seen.advance(7, topics(&[])), names(&[]));
        assert_eq!(seen.advance(8, next), names(&[]));
    }
}
