//! The async shell around the group coordinator: it stamps requests with ids and the clock,
//! routes the coordinator's outputs (replies to waiting handlers; record batches to the
//! `__consumer_offsets` partitions, appended in order and reported back once durable), and runs
//! its timers. All group logic is in [`crate::coordinator`]; nothing here decides anything.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::catalog::Topic;
use crate::coordinator::{
    CoordinatorConfig, GroupCoordinator, GroupId, Now, Output, PersistError, PersistId, Record,
    RequestId, Response,
};
use crate::io::Env;
use crate::log::encode::{BatchOptions, RecordSpec, encode_batch};
use crate::log::{ReadError, records, split};
use crate::model::{LeaderEpoch, Offset};
use crate::partition::replica::Role;
use crate::partition::{Acks, CompletionError, Partition, ProduceError};

/// Bytes read at a time when loading `__consumer_offsets`.
pub const LOAD_CHUNK_BYTES: usize = 1 << 20;
/// Reads of an offsets partition's log a load tries before it gives up on the partition.
const LOAD_READ_ATTEMPTS: u32 = 10;
/// The pause between those tries.
const LOAD_READ_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// Why a group request got no answer from the coordinator.
#[derive(Debug, thiserror::Error)]
#[error("the group coordinator is not available")]
pub struct Unavailable;

type Pending = Mutex<BTreeMap<RequestId, oneshot::Sender<Response>>>;

/// Work for the task that appends group records, taken in order.
enum PersistJob {
    /// Append a batch of the coordinator's records and report its fate.
    Write(PersistId, Vec<Record>),
    /// Answer once every batch queued before it has been appended or has failed.
    Barrier(oneshot::Sender<()>),
}

/// An offsets-topic partition whose groups are loaded here.
struct Loaded {
    /// The partition, as it was open when loaded.
    partition: Arc<Partition>,
    /// The leader epoch it was led in.
    epoch: LeaderEpoch,
    /// Where its log ended when it was read.
    end: Offset,
}

/// An offsets-topic partition to load: the partition and the epoch this broker leads it in.
type ToLoad = (Arc<Partition>, LeaderEpoch);

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
    /// The offsets-topic partitions whose groups are loaded, by index.
    loaded: Mutex<BTreeMap<i32, Loaded>>,
    /// Calls of [`Groups::lead_partitions`] so far: a load belongs to the latest only.
    load_round: AtomicU64,
    /// The offsets-topic partitions this broker leads, as the latest call gave them.
    led: Mutex<Vec<i32>>,
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
            loaded: Mutex::new(BTreeMap::new()),
            load_round: AtomicU64::new(0),
            led: Mutex::new(Vec::new()),
        });
        env.spawn("group-persist", persist_loop(Arc::downgrade(&groups), queue));
        env.spawn("group-timers", timer_loop(Arc::downgrade(&groups)));
        groups
    }

    /// Takes over exactly the groups kept in `led`, the partitions of the offsets topic
    /// `offsets` this broker now leads. A partition whose groups are loaded, and which this
    /// broker still leads in the same epoch, keeps them as they are, in the middle of a
    /// rebalance or not. The groups of every other partition are given up at once (their
    /// parked requests are answered NOT_COORDINATOR), and each led partition not kept is
    /// loaded from its log in a task of its own, so that a long load (a large partition, or
    /// reads tried again at damage) holds up neither the broker's other work nor the groups
    /// already served; until a partition is loaded its groups are answered
    /// COORDINATOR_LOAD_IN_PROGRESS (see [`Groups::is_loaded`]). A partition led in a new epoch
    /// is loaded again: another leader may have taken its groups' requests in between. Called
    /// whenever leadership of an offsets partition moves to or from this broker; a load still
    /// under way for an earlier call stops at its next read.
    pub fn lead_partitions(self: &Arc<Self>, offsets: Arc<Topic>, led: Vec<Arc<Partition>>) {
        let count = offsets.partition_count();
        *self.offsets.lock().unwrap_or_else(|p| p.into_inner()) = Some(offsets);
        *self.led.lock().unwrap_or_else(|p| p.into_inner()) =
            led.iter().map(|p| p.tp.partition.0).collect();
        let led: Vec<ToLoad> =
            led.into_iter().filter_map(|p| leader_epoch(&p).map(|epoch| (p, epoch))).collect();
        let (unloaded, round, to_load) = {
            let mut state = self.lock();
            let round = self.load_round.fetch_add(1, Ordering::AcqRel) + 1;
            let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
            loaded.retain(|&index, l| {
                led.iter().any(|(p, epoch)| {
                    p.tp.partition.0 == index && Arc::ptr_eq(p, &l.partition) && *epoch == l.epoch
                })
            });
            let kept: BTreeSet<i32> = loaded.keys().copied().collect();
            let to_load: Vec<ToLoad> =
                led.into_iter().filter(|(p, _)| !kept.contains(&p.tp.partition.0)).collect();
            let unloaded =
                state.unload_groups(|g| !kept.contains(&partition_for(g.as_str(), count)));
            (unloaded, round, to_load)
        };
        self.dispatch(unloaded);
        if !to_load.is_empty() {
            self.env.spawn("group-load", load_loop(Arc::downgrade(self), round, to_load));
        }
    }

    /// Loads the groups of `partition`'s log if `round` is still the latest call of
    /// [`Groups::lead_partitions`]; false once it is not.
    async fn load_partition(&self, round: u64, (partition, epoch): &ToLoad) -> bool {
        let current = || self.load_round.load(Ordering::Acquire) == round;
        let (records, end) = match load_records(&self.env, partition, &current).await {
            Ok(Some(read)) => read,
            Ok(None) => return false,
            Err(_) if !current() => return false,
            Err(e) => {
                // Serving a group from part of its records would hand out generations and
                // offsets its log contradicts: its requests are refused instead, until the
                // partition's leadership changes (a log that cannot be read goes offline and
                // moves).
                tracing::error!(
                    partition = %partition.tp,
                    "cannot load the groups of this offsets partition; not serving them: {e}"
                );
                return true;
            }
        };
        let loaded = {
            let mut state = self.lock();
            // Checked under the state lock that `lead_partitions` unloads under.
            if !current() {
                return false;
            }
            let loaded = state.load(records, self.now());
            self.loaded.lock().unwrap_or_else(|p| p.into_inner()).insert(
                partition.tp.partition.0,
                Loaded { partition: Arc::clone(partition), epoch: *epoch, end },
            );
            loaded
        };
        self.dispatch(loaded);
        self.changed.notify_one();
        true
    }

    /// Whether the groups kept in partition `index` of the offsets topic are loaded here and
    /// may be served: read to the log end, and that end committed. A new leader's log may end
    /// in records no quorum holds yet; served before they commit, a group could hand out a
    /// generation's assignment that a later leader, without those records, gives out again
    /// differently. Nor are they served once the partition's log has gone offline: its
    /// leadership is moving away, and the next leader may take commits this broker never sees
    /// before this broker learns of the move.
    pub fn is_loaded(&self, index: i32) -> bool {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner()).get(&index).is_some_and(|l| {
            l.partition.log.offline().is_none() && l.partition.high_watermark() >= l.end
        })
    }

    /// Whether some offsets-topic partition this broker leads is not loaded yet (or cannot
    /// be): a list of its groups would leave out that partition's.
    pub fn loading(&self) -> bool {
        let led = self.led.lock().unwrap_or_else(|p| p.into_inner()).clone();
        led.into_iter().any(|index| !self.is_loaded(index))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupCoordinator> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Now {
        Now::new(self.env.clock.now(), self.env.clock.wall_ms())
    }

    /// Runs one request for `groups` through the coordinator and waits for its reply (which
    /// may come after a rebalance or a durable write). `Unavailable` at once if some group of
    /// `groups` is not served here (see [`Groups::is_loaded`]): checked under the lock that
    /// [`Groups::lead_partitions`] gives groups up under, so that a request which found its
    /// group served before it was given up cannot bring it back into memory, where a load
    /// would replay its partition's records over it or no load would ever come.
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
                return Err(Unavailable);
            }
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id, tx);
            run(&mut state, id, self.now())
        };
        self.dispatch(outputs);
        // The request may have set or moved a deadline.
        self.changed.notify_one();
        rx.await.map_err(|_| Unavailable)
    }

    /// Whether `group`'s partition of the offsets topic is loaded here.
    fn serves(&self, group: &GroupId) -> bool {
        let offsets = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
        let count = offsets.as_ref().map(|t| t.partition_count());
        drop(offsets);
        count.is_some_and(|n| self.is_loaded(partition_for(group.as_str(), n)))
    }

    /// Reads from the coordinator without a request (describe, list, fetch offsets).
    pub fn read<T>(&self, read: impl FnOnce(&GroupCoordinator) -> T) -> T {
        read(&self.lock())
    }

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
        let outputs = strong.lock().tick(strong.now());
        strong.dispatch(outputs);
    }
}

/// Loads the groups of each partition of `led` in turn, for round `round` of
/// [`Groups::lead_partitions`], until a later round begins. First it waits until every batch of
/// group records queued before it has been appended or has failed: one appended to a partition
/// after the load read its log would be missing from the groups loaded, and its records are
/// no longer replayed into memory (see [`GroupCoordinator::unload_groups`]).
async fn load_loop(groups: Weak<Groups>, round: u64, led: Vec<ToLoad>) {
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
    for partition in &led {
        let Some(strong) = groups.upgrade() else { return };
        if !strong.load_partition(round, partition).await {
            return;
        }
    }
}

/// The epoch `partition` is led in here, if it is.
fn leader_epoch(partition: &Partition) -> Option<LeaderEpoch> {
    match partition.role() {
        Role::Leader { epoch, .. } => Some(epoch),
        _ => None,
    }
}

/// Appends each batch of group records, in order, to the offsets topic and reports the outcome.
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
        let result = match offsets {
            Some(offsets) => append(&strong.env, &offsets, &records).await,
            None => Err(PersistError::NotLeader),
        };
        let outputs = strong.lock().persisted(id, result, strong.now());
        strong.dispatch(outputs);
        strong.changed.notify_one();
    }
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

async fn append(env: &Env, offsets: &Topic, records: &[Record]) -> Result<(), PersistError> {
    let mut by_partition: BTreeMap<i32, Vec<RecordSpec>> = BTreeMap::new();
    let now = env.clock.wall_ms();
    for record in records {
        let key = record.encode_key().map_err(|_| PersistError::Storage)?;
        let value = record.encode_value().map_err(|_| PersistError::Storage)?;
        let specs = by_partition
            .entry(partition_for(record.group().as_str(), offsets.partition_count()))
            .or_default();
        let delta = specs.len() as i32;
        specs.push(RecordSpec {
            offset_delta: delta,
            timestamp: now,
            key: Some(key),
            value,
            headers: Vec::new(),
        });
    }
    for (index, specs) in by_partition {
        let partition = offsets.partition(index).ok_or(PersistError::NotLeader)?;
        let batch =
            encode_batch(&specs, &BatchOptions::default()).map_err(|_| PersistError::Storage)?;
        let (_, completion) = partition.produce(batch, Acks::All).await.map_err(|e| match e {
            ProduceError::NotLeader => PersistError::NotLeader,
            ProduceError::NotEnoughReplicas(_) => PersistError::NotEnoughReplicas,
            other => {
                tracing::warn!("appending group records failed: {other}");
                PersistError::Storage
            }
        })?;
        completion.await.map_err(|e| match e {
            CompletionError::NotLeader => PersistError::NotLeader,
            CompletionError::NotEnoughReplicasAfterAppend => PersistError::NotEnoughReplicas,
            CompletionError::Offline(_) => PersistError::Storage,
        })?;
    }
    Ok(())
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
}
