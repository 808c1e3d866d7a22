//! A partition as the broker serves it: its log, its idempotent-producer state, its part in
//! replication (leader or follower, see [`replica`]), its high watermark, and the ordering of
//! appends — one at a time per partition, so that offsets and producer sequences agree — with
//! the durability and replication waits kept outside that ordering, so that group commit can
//! gather many producers' batches into one sync.

pub mod damage;
pub mod producers;
pub mod read_ahead;
pub mod replica;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::io::{Env, Instant, timeout};
use crate::log::producers::{Decision, ProducerError, ProducerStateManager};
use crate::log::{
    AppendError, FlushPolicy, Log, LogConfig, MaintenanceError, OpenError, ReadError, ReadResult,
    batch,
};
use crate::model::{
    LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence, TimestampMs, TopicId, TopicPartition,
};
use crate::replication::ReplicationError;
use read_ahead::{Pending, READ_AHEAD_HOLD, ReadAhead, ReadAheadBudget};
use replica::{Leading, ReplicaState};

/// How long after a partition opens its producer state, if rebuilt past a damaged batch, keeps
/// a retry of that batch from being written (see [`Partition::producer_damage`]). Such a retry
/// comes from a producer that sent the batch before the restart and never got its answer, so it
/// arrives within the producer's delivery timeout: librdkafka's `message.timeout.ms` is 300 s by
/// default, the Java client's `delivery.timeout.ms` 120 s. Past this bound the mark no longer
/// refuses anyone or moves leadership, so a replica whose copy is damaged does not keep
/// producers waiting, nor hand the partition round the ISR, for good.
pub const PRODUCER_RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

/// Why [`Partition::save_damage`] did not record the known damage.
#[derive(Debug, thiserror::Error)]
pub enum SaveDamageError {
    /// Writing the checkpoint failed.
    #[error("writing the known-damage checkpoint: {0}")]
    Io(#[from] std::io::Error),
    /// The checkpoint on disk could not be read, and may not be written over yet.
    #[error("the known-damage checkpoint could not be read, so it is not written over yet")]
    Unread,
}

/// Why a produce to this partition failed.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    /// The log refused or failed the append.
    #[error(transparent)]
    Append(#[from] AppendError),
    /// The idempotent producer's epoch or sequence is wrong.
    #[error(transparent)]
    Producer(#[from] ProducerError),
    /// This broker does not lead the partition now.
    #[error("not the leader")]
    NotLeader,
    /// The producer state was rebuilt past a damaged batch that may have held this batch's
    /// first write, and another replica may hold that batch intact: taken for new, a retry of
    /// it would be written twice. Another in-sync replica, whose state knows it, can lead; or,
    /// with none (`alone`), the batch waits for one to rejoin the ISR (or for
    /// [`PRODUCER_RETRY_WINDOW`] to pass).
    #[error(
        "this replica's producer state passed over the damaged batch ending at {damaged}; {}",
        if *alone {
            "no other in-sync replica holds it: such batches wait for one to rejoin the ISR"
        } else {
            "leadership is moving to an in-sync replica that holds it"
        }
    )]
    ProducerStateDamaged {
        /// The last offset of the damaged batch.
        damaged: Offset,
        /// No other replica is in sync.
        alone: bool,
    },
    /// `acks=all` with fewer in-sync replicas than `min.insync.replicas`: nothing was written.
    #[error(transparent)]
    NotEnoughReplicas(#[from] ReplicationError),
}

/// Why a follower could not cut its log.
#[derive(Debug, thiserror::Error)]
pub enum TruncateError {
    /// The log could not be cut.
    #[error(transparent)]
    Log(#[from] MaintenanceError),
    /// The producer state could not be rebuilt from what remains.
    #[error("rebuilding producer state: {0}")]
    Producers(#[from] ReadError),
    /// The producer snapshots past the cut (or of the emptied log) could not be removed.
    #[error("removing producer snapshots: {0}")]
    Snapshots(#[from] std::io::Error),
    /// This broker leads the partition now: a cut decided while it followed would remove what
    /// it has accepted since.
    #[error("the partition is led here now: a follower's cut no longer applies")]
    Leading,
}

/// Why an appended batch could not be acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompletionError {
    /// The log went offline before the batch was durable.
    #[error(transparent)]
    Offline(#[from] crate::log::Offline),
    /// The ISR fell below `min.insync.replicas` before every member had the batch.
    #[error("the ISR shrank below min.insync.replicas after the append")]
    NotEnoughReplicasAfterAppend,
    /// This broker stopped leading the partition before the batch was replicated.
    #[error("leadership moved before the batch was replicated")]
    NotLeader,
}

/// An idempotent producer as a partition knows it (DescribeProducers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    /// Its id.
    pub id: ProducerId,
    /// Its epoch.
    pub epoch: ProducerEpoch,
    /// The sequence of its newest stored record.
    pub last_sequence: Sequence,
    /// The largest timestamp of its newest stored batch.
    pub last_timestamp: TimestampMs,
}

/// How many replicas must hold a batch before its produce is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0` or `1`: the leader alone (durably, under `flush.policy=ack`).
    Leader,
    /// `acks=all`: every in-sync replica, at least `min.insync.replicas` of them.
    All,
}

/// Why a partition could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PartitionOpenError {
    /// The log could not be opened.
    #[error(transparent)]
    Log(#[from] OpenError),
    /// The producer state could not be rebuilt from the log.
    #[error("rebuilding producer state: {0}")]
    Producers(#[from] ReadError),
}

/// One partition of one topic on this broker.
pub struct Partition {
    /// The topic and index.
    pub tp: TopicPartition,
    /// The topic's id.
    pub topic_id: TopicId,
    /// The log.
    pub log: Log,
    env: Env,
    /// The epoch stamped on appended batches.
    leader_epoch: std::sync::atomic::AtomicI32,
    /// The producer state; its lock also orders appends.
    producers: tokio::sync::Mutex<ProducerStateManager>,
    /// The last offset of the damaged batch the producer state's rebuild passed over, or -1
    /// (its [`ProducerStateManager::damage_passed`], readable without the lock).
    producer_damage: std::sync::atomic::AtomicI64,
    /// When the partition opened: the start of [`PRODUCER_RETRY_WINDOW`].
    opened_at: Instant,
    /// Woken when the partition's log or high watermark moves (fetch long polls, broker-wide).
    appended: Arc<tokio::sync::Notify>,
    /// Its part in replication and its high watermark.
    replica: std::sync::Mutex<ReplicaState>,
    /// Woken when the high watermark, the ISR or the role changes (`acks=all` waits).
    replicated: tokio::sync::Notify,
    /// Held by the follower's fetcher while it cuts or appends, so that a fetcher of an older
    /// epoch can never write after a newer one has truncated.
    pub(crate) follow: tokio::sync::Mutex<()>,
    /// Held while a producer snapshot is written and while the log is cut: a snapshot taken
    /// before a cut and written after it would describe offsets the log no longer holds (and
    /// be trusted once the log grew past it again). It holds the last snapshot written (its
    /// end offset and bytes), so that a checkpoint with nothing new to say writes none.
    snapshotting: tokio::sync::Mutex<Option<(Offset, Bytes)>>,
    /// Reads started ahead of consumers reading in order (see [`read_ahead`]).
    pub read_ahead: ReadAhead,
    /// What clients moved through it since it opened here.
    pub traffic: Traffic,
}

/// What clients moved through one partition since it opened here, for the metrics.
#[derive(Debug, Default)]
pub struct Traffic {
    /// Bytes of the batches producers appended (a retry found to be a duplicate is not).
    pub bytes_in: AtomicU64,
    /// Records in them.
    pub records_in: AtomicU64,
    /// Bytes of batches served to consumers.
    pub bytes_out: AtomicU64,
    /// Bytes of batches served to followers.
    pub replication_bytes_out: AtomicU64,
}

impl Traffic {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The rest of a produce after its append: resolves when the batch may be acknowledged.
pub type Completion = crate::io::BoxFuture<'static, Result<(), CompletionError>>;

/// Sees a produce's batch made durable and visible even when its completion is dropped
/// before it got there: the client gave up on its answer (a produce timeout of 0, a closed
/// connection), but the batch is in the log, and under `flush.policy=ack` only a completion
/// syncs it and moves the high watermark past it. Without this, it stayed unreadable until
/// another produce came.
struct Settle {
    partition: Option<Arc<Partition>>,
    end: Offset,
}

impl Settle {
    /// The completion got through its durability step itself.
    fn disarm(mut self) {
        self.partition = None;
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if let Some(partition) = self.partition.take() {
            let (env, end) = (partition.env.clone(), self.end);
            env.spawn("produce-settle", async move {
                if let Err(e) = partition.durable(end).await {
                    tracing::debug!("a dropped produce's batch could not be made durable: {e}");
                }
            });
        }
    }
}

/// What a successful produce returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Produced {
    /// Offset of the batch's first record (the original one, for a retried duplicate).
    pub base_offset: Offset,
    /// The broker's timestamp when the topic uses LogAppendTime.
    pub log_append_time: Option<i64>,
    /// The log start offset.
    pub log_start: Offset,
}

impl Partition {
    /// Opens (recovering) the partition's log in `dir` and rebuilds its producer state.
    pub async fn open(
        env: Env,
        tp: TopicPartition,
        topic_id: TopicId,
        dir: PathBuf,
        config: LogConfig,
        appended: Arc<tokio::sync::Notify>,
    ) -> Result<Partition, PartitionOpenError> {
        let log = Log::open(env.clone(), dir, config).await?;
        let leader_epoch = log.epochs().latest().map_or(LeaderEpoch(0), |(e, _)| e);
        let state = producers::recover(&log, &*env.disk).await?;
        let producer_damage = state.damage_passed().map_or(-1, |o| o.0);
        let opened_at = env.clock.now();
        let known = damage::load(&log, &*env.disk).await;
        let replica =
            ReplicaState::new(log.recorded_high_watermark().min(log.log_end_offset()), known);
        Ok(Partition {
            tp,
            topic_id,
            log,
            env,
            leader_epoch: std::sync::atomic::AtomicI32::new(leader_epoch.0),
            producers: tokio::sync::Mutex::new(state),
            producer_damage: std::sync::atomic::AtomicI64::new(producer_damage),
            opened_at,
            appended,
            replica: std::sync::Mutex::new(replica),
            replicated: tokio::sync::Notify::new(),
            follow: tokio::sync::Mutex::new(()),
            snapshotting: tokio::sync::Mutex::new(None),
            read_ahead: ReadAhead::default(),
            traffic: Traffic::default(),
        })
    }

    /// Mirrors `state`'s damage passed for readers without the producer lock.
    fn set_producer_damage(&self, state: &ProducerStateManager) {
        let at = state.damage_passed().map_or(-1, |o| o.0);
        self.producer_damage.store(at, std::sync::atomic::Ordering::Release);
    }

    /// The last offset of the damaged batch the producer state's rebuild passed over, if any,
    /// while a retry of it may still come: within [`PRODUCER_RETRY_WINDOW`] of the open. Never
    /// for `__consumer_offsets`: only the group coordinator writes it, without producer ids, so
    /// no retry can come, and handing its lead over for one would only move its groups (to a
    /// replica that, with damage of its own, handed them back, again and again, so that they
    /// were never served).
    pub fn producer_damage(&self) -> Option<Offset> {
        // The load first: every idempotent produce asks, and almost none has damage to find.
        self.producer_damage_passed().filter(|_| {
            self.env.clock.now() < self.opened_at + PRODUCER_RETRY_WINDOW
                && self.tp.topic != crate::topics::OFFSETS_TOPIC
        })
    }

    /// The last offset of the damaged batch the producer state's rebuild passed over, if any.
    fn producer_damage_passed(&self) -> Option<Offset> {
        let at = self.producer_damage.load(std::sync::atomic::Ordering::Acquire);
        (at >= 0).then_some(Offset(at))
    }

    /// The leader epoch this broker writes with.
    pub fn leader_epoch(&self) -> LeaderEpoch {
        LeaderEpoch(self.leader_epoch.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Adopts the leader epoch the controller assigned (never going back).
    pub fn set_leader_epoch(&self, epoch: LeaderEpoch) {
        self.leader_epoch.fetch_max(epoch.0, std::sync::atomic::Ordering::AcqRel);
    }

    /// The high watermark: what consumers may read. On the leader it is the end every in-sync
    /// replica holds (with `flush.policy=ack`, holds durably, so no consumer ever sees a record
    /// a power failure could take back); on a follower, the leader's as last fetched.
    pub fn high_watermark(&self) -> Offset {
        self.replica_state().high_watermark()
    }

    /// While this broker leads: its leader epoch, high watermark and the epoch's first offset,
    /// all at one instant. A new leader's high watermark may stay below that start until its
    /// followers have fetched: offsets it gives meanwhile may be below ones the previous
    /// leader gave.
    pub fn leading(&self) -> Option<Leading> {
        self.replica_state().leading()
    }

    /// Appends a client's batch in this partition's order — or, for a retry of one of an
    /// idempotent producer's last five batches, finds the original — and returns the offsets
    /// with the wait that completes the produce: under `flush.policy=ack` until the batch is
    /// synced, under `interval` until a due flush is done. The caller awaits that outside the
    /// append order, so many producers' batches share one sync.
    pub async fn produce(
        self: &Arc<Self>,
        batch: Bytes,
        acks: Acks,
    ) -> Result<(Produced, Completion), ProduceError> {
        // A replica that does not lead says so first, as Kafka's does, before it spends a CRC
        // and a decompression on a batch meant for the leader (checked again below, where the
        // epoch is taken).
        self.check_leader(acks)?;
        // Checked whole before the producer state is asked whether its header is a retry's:
        // a retry is known by its header alone, and a bit flipped in it, or a second batch
        // after it, would otherwise be acknowledged as the batch it resembles, never written.
        let batch = self.log.validate_produced(batch)?;
        let header = *batch.header();
        let (produced, last_offset, epoch) = {
            let mut state = self.producers.lock().await;
            // The batch carries the epoch of the role checked here. The epoch alone moves
            // before the role does (see `apply_committed`), so on another thread it could
            // already name a new leader's epoch, and a batch written under it would not be
            // seen to diverge from that leader's log once this broker follows it.
            let epoch = self.check_leader(acks)?;
            // A retry of a batch the state lost to damage would be written twice: an intact
            // replica's state knows it, so it leads (see `damage_while_leading`). With no other
            // replica in sync, none may: the batch is refused until one rejoins, as the last
            // replica standing cannot tell a retry from a new batch, and another replica may
            // hold the first write intact. A partition with no other replica holds the damaged
            // batch nowhere else, readable: the retry writes its records again, once.
            if let Some(damaged) = self.producer_damage()
                && state.uncertain(&header)
                && self.has_followers()
            {
                let alone = !self.isr_has_others();
                return Err(ProduceError::ProducerStateDamaged { damaged, alone });
            }
            match state.check(&header)? {
                Decision::Duplicate { base_offset, last_offset, max_timestamp } => {
                    let log_append_time = (header.timestamp_type()
                        == batch::TimestampType::LogAppend
                        || self.log.config().timestamp_policy
                            == crate::log::TimestampPolicy::LogAppendTime)
                        .then_some(max_timestamp.0);
                    let log_start = self.log.log_start_offset();
                    (Produced { base_offset, log_append_time, log_start }, last_offset, epoch)
                }
                Decision::Append => {
                    let (size, records) = (batch.size_bytes(), header.record_count());
                    let info = self.log.append_valid(batch, epoch).await?;
                    Traffic::add(&self.traffic.bytes_in, size);
                    Traffic::add(&self.traffic.records_in, usize::try_from(records).unwrap_or(0));
                    state.record(&info.header, info.base_offset, info.last_offset);
                    self.local_progress();
                    let produced = Produced {
                        base_offset: info.base_offset,
                        log_append_time: info.log_append_time,
                        log_start: info.log_start,
                    };
                    (produced, info.last_offset, epoch)
                }
            }
        };
        let partition = Arc::clone(self);
        let settle = Settle { partition: Some(Arc::clone(self)), end: last_offset.next() };
        // A duplicate is acknowledged only once its original is durable too.
        let completion: Completion = Box::pin(async move {
            let durable = partition.durable(last_offset.next()).await;
            settle.disarm();
            durable?;
            match acks {
                Acks::Leader => Ok(()),
                Acks::All => partition.wait_replicated(last_offset.next(), epoch).await,
            }
        });
        Ok((produced, completion))
    }

    /// Makes the log durable to `end` as the flush policy requires (synced under `ack`, a
    /// due flush under `interval`), then lets the high watermark move.
    async fn durable(&self, end: Offset) -> Result<(), crate::log::Offline> {
        match self.log.config().flush_policy {
            FlushPolicy::Ack => self.log.wait_durable(end).await?,
            FlushPolicy::Interval => self.log.flush_if_due().await?,
        }
        self.local_progress();
        Ok(())
    }

    /// Every idempotent producer this partition holds state for: its id, epoch, last sequence
    /// and last timestamp (Kafka's DescribeProducers).
    pub async fn active_producers(&self) -> Vec<ActiveProducer> {
        let state = self.producers.lock().await;
        state
            .iter()
            .map(|(id, entry)| ActiveProducer {
                id,
                epoch: entry.epoch(),
                last_sequence: entry.last_sequence(),
                last_timestamp: entry.last_timestamp(),
            })
            .collect()
    }

    /// Appends batches a leader sent to this follower, keeping the leader's offsets and epochs
    /// and feeding the producer state; under `flush.policy=ack` they are synced before this
    /// returns, so the next fetch offset tells the leader they are durable here.
    pub async fn append_replicated(&self, batches: &[Bytes]) -> Result<(), AppendError> {
        if batches.is_empty() {
            return Ok(());
        }
        {
            let mut state = self.producers.lock().await;
            let copied = self.log.append_replicated_all(batches).await;
            for info in &copied.appended {
                state.record(&info.header, info.base_offset, info.last_offset);
            }
            if let Some(e) = copied.stopped {
                return Err(e);
            }
        }
        if self.log.config().flush_policy == FlushPolicy::Ack {
            self.log.flush().await?;
        }
        Ok(())
    }

    /// Waits until no produce accepted while this broker led is still appending. A produce
    /// checks leadership under the producer-state lock and holds it through its append, so
    /// once the role has changed to follower, taking that lock once is enough: whatever such
    /// a produce wrote is then in the log, in the epoch it was accepted in, where the
    /// follower's divergence check finds it. Without this the check could read the log end
    /// before that write landed and take the log for matching the leader's.
    pub async fn settle_leader_appends(&self) {
        drop(self.producers.lock().await);
    }

    /// [`TruncateError::Leading`] if this broker leads the partition: what a follower decided
    /// to cut, restart or forget no longer applies. The caller holds the producer-state lock.
    fn refuse_if_leading(&self) -> Result<(), TruncateError> {
        if self.leads() { Err(TruncateError::Leading) } else { Ok(()) }
    }

    /// Cuts the log at `offset` (a follower's divergent tail) and rebuilds the producer state
    /// from what remains. Refused once this broker leads the partition: the cut was decided
    /// while it followed, and the producer-state lock, which every produce holds through its
    /// leadership check and append, makes the refusal cover whatever it has accepted since.
    pub async fn truncate_to(&self, offset: Offset) -> Result<Offset, TruncateError> {
        let mut saved = self.snapshotting.lock().await;
        *saved = None;
        let mut state = self.producers.lock().await;
        self.refuse_if_leading()?;
        // The snapshots past the cut first (see `producers::remove_past`). In a dense log none
        // lies between the log's new end and `offset`, which falls in the batch the cut
        // removes; in a compacted one a snapshot may lie in a gap there, which the rebuild
        // below removes, and failing that `forget_epochs_at_end`.
        producers::remove_past(&*self.env.disk, self.log.dir(), Some(offset)).await?;
        let end = self.log.truncate_to(offset).await?;
        self.forget_damage_from(end);
        // The cut state first, so that a rebuild that fails (a read error) leaves no batch
        // past the log end behind; then Kafka's exact state, rebuilt from what remains.
        state.truncate_from(end);
        *state = producers::recover(&self.log, &*self.env.disk).await?;
        self.set_producer_damage(&state);
        let hw = self.replica_state().high_watermark().min(end);
        self.follower_high_watermark(hw);
        Ok(end)
    }

    /// Forgets the epochs begun at the log end ([`crate::log::Log::forget_epochs_at_end`]): a
    /// follower whose log matches its leader's up to its end. Refused once this broker leads
    /// the partition, whose new epoch begins there.
    ///
    /// A producer snapshot past the end goes too: a cut of a compacted log can end below a
    /// snapshot taken in a gap below its target, which the cut's rebuild removes, and if that
    /// removal failed, this, which every later divergence check that finds the logs matching
    /// runs, tries again.
    pub async fn forget_epochs_at_end(&self) -> Result<(), TruncateError> {
        let _saved = self.snapshotting.lock().await;
        let _state = self.producers.lock().await;
        self.refuse_if_leading()?;
        self.remove_snapshots_past_end_locked().await?;
        Ok(self.log.forget_epochs_at_end().await?)
    }

    /// Removes any producer snapshot past the log end, as [`Partition::forget_epochs_at_end`]
    /// does, for a follower's divergence check that has no epoch to ask about (a log a cut
    /// emptied of its epochs).
    pub async fn remove_snapshots_past_end(&self) -> Result<(), TruncateError> {
        let _saved = self.snapshotting.lock().await;
        let _state = self.producers.lock().await;
        self.remove_snapshots_past_end_locked().await
    }

    /// [`Partition::remove_snapshots_past_end`], with the snapshot and producer-state locks
    /// held.
    async fn remove_snapshots_past_end_locked(&self) -> Result<(), TruncateError> {
        let end = self.log.log_end_offset();
        Ok(producers::remove_past(&*self.env.disk, self.log.dir(), Some(end)).await?)
    }

    /// Empties the log and starts it again at `start`, past its end: a follower whose leader
    /// has deleted everything it lacks (see [`crate::log::Log::restart_at`]). The producer
    /// state starts over too; what it knew was about offsets no longer held. Refused once this
    /// broker leads the partition, as [`Partition::truncate_to`] is.
    pub async fn restart_at(&self, start: Offset) -> Result<(), TruncateError> {
        let mut saved = self.snapshotting.lock().await;
        *saved = None;
        let mut state = self.producers.lock().await;
        self.refuse_if_leading()?;
        // Every snapshot first, as for a cut: a start below the old end (a leader's start
        // inside a batch) could otherwise leave one the log grows past again.
        producers::remove_all(&*self.env.disk, self.log.dir()).await?;
        self.log.restart_at(start).await?;
        self.forget_damage_from(Offset(0));
        *state = ProducerStateManager::new();
        self.set_producer_damage(&state);
        self.follower_high_watermark(start);
        Ok(())
    }

    /// One compaction pass of the log below `upper_bound` (see [`crate::log::Log::clean`]),
    /// keeping each known idempotent producer's newest batch, emptied if all its records go, as
    /// Kafka's cleaner does: producer state rebuilt from the log (a replica that starts again
    /// past its snapshots, a follower's cut) then still knows the producer's last sequence, and
    /// its next batch is not refused as out of order.
    pub async fn clean(
        &self,
        now_wall_ms: i64,
        upper_bound: Offset,
    ) -> Result<crate::log::CleanOutcome, MaintenanceError> {
        let newest = self.producers.lock().await.newest_batch_ends();
        let map_bytes_max = crate::log::cleaner::CLEANER_MAP_BYTES_MAX;
        self.log.clean_keeping(now_wall_ms, upper_bound, map_bytes_max, &newest).await
    }

    /// Checkpoints the log and snapshots the producer state, so that recovery after a crash
    /// rescans and replays only what came after.
    pub async fn checkpoint(&self, producer_expiration_ms: i64) -> Result<(), MaintenanceError> {
        self.log.checkpoint().await?;
        let mut saved = self.snapshotting.lock().await;
        let (bytes, end) = {
            let mut state = self.producers.lock().await;
            state.expire(self.env.clock.wall_ms(), producer_expiration_ms);
            let end = self.log.log_end_offset();
            (state.encode_snapshot(end), end)
        };
        // The newest snapshot on disk may already say exactly this.
        if saved.as_ref() != Some(&(end, bytes.clone())) {
            *saved = None;
            producers::save(bytes.clone(), end, &*self.env.disk, self.log.dir()).await?;
            *saved = Some((end, bytes));
        }
        // Under the snapshot lock, so that an older set is never written after a newer one.
        // A checkpoint the disk could not read at open is read again here, once per periodic
        // checkpoint, and not by `save_damage`, so that the scrub's records do not use up
        // its attempts.
        if self.replica_state().damage_known.unread() {
            let reread = damage::read_again(&self.log, &*self.env.disk).await;
            let start = self.log.log_start_offset();
            self.replica_state().damage_known.reread(reread, start);
        }
        match self.store_damage_locked().await {
            Ok(()) => Ok(()),
            Err(SaveDamageError::Io(e)) => Err(e.into()),
            Err(e @ SaveDamageError::Unread) => {
                tracing::warn!(partition = %self.tp, "new damage is not recorded yet: {e}");
                Ok(())
            }
        }
    }

    /// Writes the known-damage checkpoint now if the set changed since it was last written
    /// (the scrub does, before it records that its pass went past the damage); fails with
    /// [`SaveDamageError::Unread`] if it may not be written over yet (see
    /// [`damage::KnownDamage::reread`]; the next periodic [`Partition::checkpoint`] reads it
    /// again).
    pub async fn save_damage(&self) -> Result<(), SaveDamageError> {
        let _saved = self.snapshotting.lock().await;
        self.store_damage_locked().await
    }

    /// [`Partition::save_damage`]; the caller holds the snapshot lock.
    async fn store_damage_locked(&self) -> Result<(), SaveDamageError> {
        let (unsaved, held_back) = {
            let state = self.replica_state();
            (state.damage_known.unsaved(), state.damage_known.held_back())
        };
        if held_back {
            return Err(SaveDamageError::Unread);
        }
        if let Some((changes, offsets)) = unsaved {
            damage::store(&*self.env.disk, self.log.dir(), &offsets).await?;
            self.replica_state().damage_known.saved(changes);
        }
        Ok(())
    }

    /// A consumer's read: batches from the one holding `start`, at most `max_bytes` of them
    /// (but the first whole), below `upper` (the high watermark), as [`Log::read`] returns
    /// them — served from a read ahead when one for `start` is still the log's; and if more
    /// is readable past them, the next read is started ahead (within `budget`).
    pub async fn read_in_order(
        self: &Arc<Self>,
        start: Offset,
        max_bytes: usize,
        upper: Offset,
        budget: &Arc<ReadAheadBudget>,
    ) -> Result<ReadResult, ReadError> {
        let ahead = match self.read_ahead.take(start) {
            // A read ahead still under way is waited for only so long: one stuck on the
            // device must not hold up a fetch that would fail at once on an offline log.
            Some(pending) => match timeout(&*self.env.clock, READ_AHEAD_HOLD, pending.wait()).await
            {
                Ok(Some(result)) => self.still_readable(&pending, result, max_bytes, upper),
                Ok(None) | Err(_) => None,
            },
            None => None,
        };
        let result = match ahead {
            Some(result) => {
                self.read_ahead.count_served();
                result
            }
            None => self.log.read(start, max_bytes, upper).await?,
        };
        let next = result.next_offset;
        if !result.records.is_empty() && next < upper.min(result.log_end) {
            self.start_read_ahead(next, max_bytes, upper, budget);
        }
        Ok(result)
    }

    /// `result`, read ahead for `pending`, if a fresh read with `max_bytes` below `upper`
    /// could return it now: no rewrite since it was read (see [`Log::rewrites`]), the log
    /// online, its range within the log and below `upper`, and within the budget. Its log
    /// start and end are brought up to date.
    fn still_readable(
        &self,
        pending: &Pending,
        mut result: ReadResult,
        max_bytes: usize,
        upper: Offset,
    ) -> Option<ReadResult> {
        let (rewrites, online) = (self.log.rewrites(), self.log.offline().is_none());
        let (log_start, log_end) = (self.log.log_start_offset(), self.log.log_end_offset());
        let fits = pending.max_bytes() <= max_bytes || result.records.len() <= max_bytes;
        let within = pending.start() >= log_start && result.next_offset <= upper.min(log_end);
        if rewrites != pending.rewrites() || !online || !fits || !within {
            return None;
        }
        result.log_start = log_start;
        result.log_end = log_end;
        Some(result)
    }

    /// Starts reading `start..` ahead, if the budget has room, on a task of its own.
    fn start_read_ahead(
        self: &Arc<Self>,
        start: Offset,
        max_bytes: usize,
        upper: Offset,
        budget: &Arc<ReadAheadBudget>,
    ) {
        let Some(reservation) = budget.try_reserve(max_bytes) else {
            return;
        };
        let pending = Pending::new(start, max_bytes, self.log.rewrites());
        self.read_ahead.offer(Arc::clone(&pending));
        let partition = Arc::clone(self);
        let clock = Arc::clone(&self.env.clock);
        let task = async move {
            let read = partition.log.read(start, max_bytes, upper).await;
            drop(partition);
            pending.fill(read.ok(), reservation);
            pending.hold(&*clock).await;
        };
        // A consumer far behind the end is catching up: while the broker is being written to,
        // its reads wait for CPU the writers and the consumers at the tail leave idle, so that
        // it slows them down as little as the broker can make it (its client's own CPU is
        // beyond our reach).
        if budget.yields(self.log.bytes_from(start), self.env.clock.now()) {
            self.env.spawn_background("read-ahead (catching up)", task);
        } else {
            self.env.spawn("read-ahead", task);
        }
    }
}
