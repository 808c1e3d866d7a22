//! Idempotent-producer state of one partition: for each producer id, its epoch and the last
//! [`PRODUCER_BATCHES_KEPT`] batches it wrote (Kafka's `ProducerStateManager`). The produce path
//! asks [`ProducerStateManager::check`] before it assigns offsets, so that a retried batch is
//! answered with the offsets it was first written at instead of being written twice (DESIGN §1),
//! and a fenced (older epoch) or out-of-order batch is refused.
//!
//! Why sans-IO: the same state is built by three callers — the leader's append path, a
//! follower's replication and recovery's replay of the log — and must come out identical on
//! every replica and after every restart. Here it is a pure value: batch headers and offsets in,
//! decisions and snapshot bytes out; the log decides when to write or read snapshot files
//! (`<offset>.snapshot`, [`snapshot_file_name`]).
//!
//! Protocol for the caller:
//! - Produce (leader): under the log's append lock, [`ProducerStateManager::check`] the header;
//!   on `Append`, stamp and write the batch, then [`ProducerStateManager::record`] it. On
//!   `Duplicate`, write nothing and answer with the original offsets.
//! - Replication and recovery: [`ProducerStateManager::record`] every batch, unchecked, as Kafka
//!   does for `AppendOrigin.REPLICATION` and log loading.
//! - Snapshots: [`ProducerStateManager::encode_snapshot`] at the log end offset (Kafka takes
//!   one at every segment roll and at shutdown); recovery decodes the newest valid one in
//!   `[log start, recovery point]` ([`snapshots_to_try`]) and replays the batches from its
//!   offset on. A snapshot holds all kept batches, not only the last one as Kafka's does, so
//!   replay reproduces the state exactly.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::batch::BatchHeader;
use super::checkpoint;
use super::segment;
use super::wire::Reader;
use crate::model::{Offset, ProducerEpoch, ProducerId, Sequence, TimestampMs};

/// Batches remembered per producer per partition; a producer may have at most this many in
/// flight (Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, and the client's limit on
/// `max.in.flight.requests.per.connection` with idempotence).
pub const PRODUCER_BATCHES_KEPT: usize = 5;
/// How long a producer id is remembered after its last batch (Kafka's `producer.id.expiration.ms`
/// default, KIP-854: 1 day; `transactional.id.expiration.ms` is 7 days).
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;
/// Checkpoint kind of a producer snapshot (see [`checkpoint`]).
pub const PRODUCER_SNAPSHOT_KIND: u8 = 3;
const PRODUCER_SNAPSHOT_VERSION: u8 = 1;
/// The snapshot version of a state rebuilt past damage: version 1's body, then the last offset of
/// the damaged batch passed ([`ProducerStateManager::damage_passed`]), so that a restart from the
/// snapshot stays as wary of a retry of that batch as the state it was taken of.
const PRODUCER_SNAPSHOT_VERSION_DAMAGE_PASSED: u8 = 2;
/// Extension of a producer snapshot file.
pub const PRODUCER_SNAPSHOT_EXT: &str = "snapshot";

/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`.
const NO_EPOCH: ProducerEpoch = ProducerEpoch(-1);
/// Encoded sizes in a snapshot body: offset and count; id, epoch and batch count; one batch.
const SNAPSHOT_HEADER_BYTES: usize = 8 + 4;
const ENTRY_HEADER_BYTES: usize = 8 + 2 + 1;
const BATCH_BYTES: usize = 4 + 4 + 8 + 8 + 8;
const TRUNCATED: SnapshotError = SnapshotError::Invalid("truncated");

/// What one stored batch of a producer was: enough to recognise a retry of it and to answer one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of its first record.
    pub first_seq: Sequence,
    /// Sequence of its last record.
    pub last_seq: Sequence,
    /// Offset of its first record.
    pub first_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// Its max timestamp (CreateTime from the client, or the LogAppendTime).
    pub max_timestamp: TimestampMs,
}

/// One producer's state: its epoch and its newest batches in that epoch, oldest first. Never
/// empty: a producer without batches is not kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    epoch: ProducerEpoch,
    batches: VecDeque<BatchMetadata>,
}

impl ProducerEntry {
    fn new(epoch: ProducerEpoch) -> ProducerEntry {
        ProducerEntry { epoch, batches: VecDeque::with_capacity(PRODUCER_BATCHES_KEPT) }
    }

    /// The producer's current epoch.
    pub fn epoch(&self) -> ProducerEpoch {
        self.epoch
    }

    /// The kept batches of the current epoch, oldest first.
    pub fn batches(&self) -> impl ExactSizeIterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    /// Sequence of the newest batch's last record.
    pub fn last_sequence(&self) -> Sequence {
        self.batches.back().map_or(Sequence::NONE, |batch| batch.last_seq)
    }

    /// Max timestamp of the newest batch: what expiry measures idleness from (Kafka's
    /// `lastTimestamp`).
    pub fn last_timestamp(&self) -> TimestampMs {
        self.batches.back().map_or(TimestampMs(i64::MIN), |batch| batch.max_timestamp)
    }

    /// Offset of the newest batch's last record.
    fn last_offset(&self) -> Offset {
        self.batches.back().map_or(Offset(-1), |batch| batch.last_offset)
    }

    /// The kept batch with exactly this epoch and sequence range (Kafka's `findDuplicateBatch`).
    fn duplicate_of(
        &self,
        epoch: ProducerEpoch,
        first: Sequence,
        last: Sequence,
    ) -> Option<&BatchMetadata> {
        if epoch != self.epoch {
            return None;
        }
        self.batches.iter().find(|batch| batch.first_seq == first && batch.last_seq == last)
    }

    /// Kafka's `ProducerAppendInfo.checkSequence` for an epoch that is not older: a new epoch
    /// starts at 0, the same epoch continues at last + 1 (wrapping), and without a known epoch
    /// anything goes.
    fn check_sequence(
        &self,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        first: Sequence,
    ) -> Result<(), ProducerError> {
        if self.epoch == NO_EPOCH {
            return Ok(());
        }
        let expected = if epoch == self.epoch { self.last_sequence().next() } else { Sequence(0) };
        if first == expected {
            return Ok(());
        }
        Err(ProducerError::OutOfOrderSequence { producer_id, epoch, expected, got: first })
    }

    /// Adds a batch; a different epoch first forgets the old epoch's batches (Kafka's
    /// `ProducerStateEntry.addBatch`).
    fn push(&mut self, epoch: ProducerEpoch, batch: BatchMetadata) {
        if let Some(newest) = self.batches.back() {
            assert!(
                batch.first_offset > newest.last_offset,
                "producer batch at {} recorded after one ending at {}",
                batch.first_offset,
                newest.last_offset
            );
        }
        if epoch != self.epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
        if self.batches.len() == PRODUCER_BATCHES_KEPT {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
    }
}

/// What to do with a produced batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A new batch (or one without a producer id): assign offsets and append it.
    Append,
    /// A retry of a batch already written: append nothing, answer with its original offsets.
    /// Kafka also answers with its timestamp as the log append time.
    Duplicate {
        /// Offset of its first record.
        base_offset: Offset,
        /// Offset of its last record.
        last_offset: Offset,
        /// Its max timestamp when written.
        max_timestamp: TimestampMs,
    },
}

/// Why a produced batch is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// The batch's epoch is older than the producer's current one: a fenced zombie.
    #[error("producer {producer_id} epoch {got} is older than its current epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: ProducerId,
        /// Its current epoch.
        current: ProducerEpoch,
        /// The batch's epoch.
        got: ProducerEpoch,
    },
    /// The batch does not continue the producer's sequence: a gap, a reorder, a retry of a batch
    /// no longer remembered, or a new epoch not starting at 0.
    #[error("producer {producer_id} epoch {epoch}: expected sequence {expected}, got {got}")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: ProducerId,
        /// The batch's epoch.
        epoch: ProducerEpoch,
        /// The sequence that would have been accepted.
        expected: Sequence,
        /// The batch's first sequence.
        got: Sequence,
    },
    /// An idempotent batch without a sequence number. [`BatchHeader::check_produce`] refuses
    /// these first, so the produce path never sees this.
    #[error("producer {producer_id} sent base sequence {got}")]
    InvalidSequence {
        /// The producer.
        producer_id: ProducerId,
        /// The batch's base sequence.
        got: Sequence,
    },
}

impl ProducerError {
    /// The Kafka error a produce response carries: INVALID_PRODUCER_EPOCH (47, since Kafka 2.7
    /// instead of the fatal PRODUCER_FENCED), OUT_OF_ORDER_SEQUENCE_NUMBER (45), or
    /// INVALID_RECORD (87) as `LogValidator` answers a missing sequence.
    pub fn response_error(&self) -> ResponseError {
        match self {
            ProducerError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
            ProducerError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
            ProducerError::InvalidSequence { .. } => ResponseError::InvalidRecord,
        }
    }
}

/// Why a producer snapshot could not be decoded. The caller falls back to an older snapshot or
/// to an empty state and a longer replay, as Kafka does on a `CorruptSnapshotException`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The checkpoint framing (magic, kind, length, CRC) is wrong: torn or not a snapshot.
    #[error("producer snapshot framing: {0}")]
    Frame(&'static str),
    /// Written by a newer Weir.
    #[error("producer snapshot version {0} is not supported")]
    UnsupportedVersion(u8),
    /// The body does not describe a valid state.
    #[error("producer snapshot is invalid: {0}")]
    Invalid(&'static str),
}

/// Every producer's state in one partition, by producer id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: BTreeMap<ProducerId, ProducerEntry>,
    /// The last offset of the newest damaged batch the rebuild of this state passed over (a
    /// latent sector error: see [`crate::partition::producers::recover`]); kept in snapshots
    /// (version 2), so that a state loaded from one past the damage knows it too.
    damage_passed: Option<Offset>,
}

impl ProducerStateManager {
    /// An empty state: no producer known.
    pub fn new() -> ProducerStateManager {
        ProducerStateManager::default()
    }

    /// The rebuild of this state passed over a damaged batch ending at `last`: whatever
    /// producer wrote it, the state does not know.
    pub fn passed_damage(&mut self, last: Offset) {
        self.damage_passed = self.damage_passed.max(Some(last));
    }

    /// The last offset of the newest damaged batch this state was rebuilt past, if any.
    pub fn damage_passed(&self) -> Option<Offset> {
        self.damage_passed
    }

    /// Whether a batch with `header` may repeat one this state lost to damage: a producer's
    /// batch whose first write the state never saw (the damaged batch may have held it) and
    /// whose retry [`ProducerStateManager::check`] would take for a new batch. That is a batch
    /// with a producer id, from a producer the state does not know (the damaged batch may have
    /// been its first) or whose newest batch the state knows lies before the damaged one (the
    /// damaged batch may have been its next). A producer with a batch past the damage is known
    /// exactly: its sequence numbers run on from what the damaged batch held.
    pub fn uncertain(&self, header: &BatchHeader) -> bool {
        let Some(damaged) = self.damage_passed else { return false };
        if !header.has_producer_id() || header.is_control() {
            return false;
        }
        self.producers
            .get(&ProducerId(header.producer_id()))
            .and_then(|entry| entry.batches.back())
            .is_none_or(|newest| newest.last_offset < damaged)
    }

    /// Decides what to do with a batch a client produced, before offsets are assigned, in
    /// Kafka's order (`UnifiedLog.analyzeAndValidateProducerState`, then
    /// `ProducerAppendInfo.checkProducerEpoch` and `checkSequence`):
    /// 1. no producer id (id < 0, whatever kafkajs puts in epoch and sequence), or a control
    ///    batch: append;
    /// 2. an unknown producer (new, expired or removed): append, whatever its epoch and sequence
    ///    (KIP-360: the broker no longer answers UNKNOWN_PRODUCER_ID);
    /// 3. same epoch and exactly the sequence range of a kept batch: duplicate;
    /// 4. an older epoch: [`ProducerError::InvalidProducerEpoch`];
    /// 5. a newer epoch must start at sequence 0, the same epoch at the last sequence + 1
    ///    (wrapping from `i32::MAX` to 0); else [`ProducerError::OutOfOrderSequence`].
    pub fn check(&self, header: &BatchHeader) -> Result<Decision, ProducerError> {
        if !header.has_producer_id() || header.is_control() {
            return Ok(Decision::Append);
        }
        let producer_id = ProducerId(header.producer_id());
        let epoch = ProducerEpoch(header.producer_epoch());
        let (first, last) = (Sequence(header.base_sequence()), Sequence(header.last_sequence()));
        if first.0 < 0 {
            return Err(ProducerError::InvalidSequence { producer_id, got: first });
        }
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(Decision::Append);
        };
        if let Some(batch) = entry.duplicate_of(epoch, first, last) {
            return Ok(Decision::Duplicate {
                base_offset: batch.first_offset,
                last_offset: batch.last_offset,
                max_timestamp: batch.max_timestamp,
            });
        }
        if epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                current: entry.epoch,
                got: epoch,
            });
        }
        entry.check_sequence(producer_id, epoch, first)?;
        Ok(Decision::Append)
    }

    /// Records a batch written at `base_offset..=last_offset`: after a checked append, and for
    /// every batch a follower replicates or recovery replays (unchecked, as Kafka does there).
    /// Batches without a producer id or a sequence, and control batches, change nothing
    /// (transaction markers will, once transactions exist). A producer's batches must be
    /// recorded in offset order.
    pub fn record(&mut self, header: &BatchHeader, base_offset: Offset, last_offset: Offset) {
        if !header.has_producer_id() || header.is_control() || header.base_sequence() < 0 {
            return;
        }
        assert!(base_offset <= last_offset, "batch offsets {base_offset}..={last_offset}");
        let epoch = ProducerEpoch(header.producer_epoch());
        let batch = BatchMetadata {
            first_seq: Sequence(header.base_sequence()),
            last_seq: Sequence(header.last_sequence()),
            first_offset: base_offset,
            last_offset,
            max_timestamp: TimestampMs(header.max_timestamp()),
        };
        let entry = self.producers.entry(ProducerId(header.producer_id()));
        entry.or_insert_with(|| ProducerEntry::new(epoch)).push(epoch, batch);
    }

    /// Forgets producers whose newest batch is `expiration_ms` or more older than `now_wall_ms`
    /// (Kafka's `removeExpiredProducers`, run every `producer.id.expiration.check.interval.ms`,
    /// 10 minutes; note the batch timestamp is the client's under CreateTime). Returns how many.
    pub fn expire(&mut self, now_wall_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            now_wall_ms.saturating_sub(entry.last_timestamp().0) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Forgets batches at or after `offset` (the log was truncated there; a batch straddling it
    /// goes too, as the log drops it whole). A producer left with no batch is forgotten, and is
    /// then unknown — any sequence accepted — although older batches of it may remain below
    /// `offset`. Returns how many producers were forgotten: when not zero, a caller wanting
    /// Kafka's exact state rebuilds instead (newest snapshot at or below `offset`, then replay),
    /// as Kafka's `truncateAndReload` does. Either way, snapshot files above `offset` must be
    /// deleted: they reflect batches that are gone.
    pub fn truncate_from(&mut self, offset: Offset) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            entry.batches.retain(|batch| batch.last_offset < offset);
            !entry.batches.is_empty()
        });
        before - self.producers.len()
    }

    /// Forgets producers whose every kept batch lies below `log_start` (Kafka 2.4's eviction when
    /// retention or DeleteRecords advanced the log start). Returns how many.
    ///
    /// Kafka since 2.5 (KIP-360) keeps such producers until they expire, so that a retry of a
    /// batch deleted meanwhile is still answered as a duplicate; calling this trades that for a
    /// state that is a function of the retained log alone. Kafka instead deletes snapshots at
    /// or below the new log start, which a caller that does not call this must do too: a
    /// snapshot older than the log start cannot be replayed forward. A caller that does call this
    /// calls it again after loading a snapshot, which may predate the log start's advance.
    pub fn remove_below(&mut self, log_start: Offset) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| entry.last_offset() >= log_start);
        before - self.producers.len()
    }

    /// The last offset of each known producer's newest batch: what compaction keeps, emptied
    /// if need be (see [`crate::log::Log::clean_keeping`]).
    pub fn newest_batch_ends(&self) -> std::collections::BTreeSet<Offset> {
        self.producers.values().map(ProducerEntry::last_offset).filter(|o| o.0 >= 0).collect()
    }

    /// The producer's current epoch, if it is known.
    pub fn producer_epoch(&self, producer_id: ProducerId) -> Option<ProducerEpoch> {
        self.producers.get(&producer_id).map(ProducerEntry::epoch)
    }

    /// The last sequence the producer wrote, if it is known.
    pub fn last_sequence(&self, producer_id: ProducerId) -> Option<Sequence> {
        self.producers.get(&producer_id).map(ProducerEntry::last_sequence)
    }

    /// The producer's state, if it is known.
    pub fn entry(&self, producer_id: ProducerId) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every known producer, by increasing id.
    pub fn iter(&self) -> impl Iterator<Item = (ProducerId, &ProducerEntry)> {
        self.producers.iter().map(|(id, entry)| (*id, entry))
    }

    /// How many producers are known.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Encodes the state as a snapshot taken at `end_offset`: it reflects every batch below
    /// that offset and none at or after it, so recovery replays from `end_offset` on. Kafka
    /// names the file by the same offset ([`snapshot_file_name`]).
    ///
    /// Body (big-endian), framed by [`checkpoint::encode`]: end offset `i64`, producer count
    /// `u32`, then by increasing id: id `i64`, epoch `i16`, batch count `u8` (1 to
    /// [`PRODUCER_BATCHES_KEPT`]), and per batch, oldest first: first and last sequence `i32`,
    /// first and last offset `i64`, max timestamp `i64`.
    pub fn encode_snapshot(&self, end_offset: Offset) -> Bytes {
        let batches: usize = self.producers.values().map(|entry| entry.batches.len()).sum();
        let len = SNAPSHOT_HEADER_BYTES
            + self.producers.len() * ENTRY_HEADER_BYTES
            + batches * BATCH_BYTES;
        let mut body = Vec::with_capacity(len);
        body.extend_from_slice(&end_offset.0.to_be_bytes());
        let count = u32::try_from(self.producers.len()).unwrap_or(u32::MAX);
        body.extend_from_slice(&count.to_be_bytes());
        for (id, entry) in &self.producers {
            assert!(
                entry.last_offset() < end_offset,
                "producer {id} wrote at or after {end_offset}"
            );
            encode_entry(&mut body, *id, entry);
        }
        match self.damage_passed {
            None => checkpoint::encode(PRODUCER_SNAPSHOT_KIND, PRODUCER_SNAPSHOT_VERSION, &body),
            Some(damaged) => {
                body.extend_from_slice(&damaged.0.to_be_bytes());
                checkpoint::encode(
                    PRODUCER_SNAPSHOT_KIND,
                    PRODUCER_SNAPSHOT_VERSION_DAMAGE_PASSED,
                    &body,
                )
            }
        }
    }

    /// Decodes a whole snapshot file: framing, then [`decode_snapshot_body`]. Returns the
    /// offset it was taken at and the state.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<(Offset, ProducerStateManager), SnapshotError> {
        let framed = Bytes::copy_from_slice(bytes);
        let (version, body) =
            checkpoint::decode(PRODUCER_SNAPSHOT_KIND, &framed).map_err(SnapshotError::Frame)?;
        decode_snapshot_body(version, &body)
    }
}

fn encode_entry(body: &mut Vec<u8>, id: ProducerId, entry: &ProducerEntry) {
    body.extend_from_slice(&id.0.to_be_bytes());
    body.extend_from_slice(&entry.epoch.0.to_be_bytes());
    // At most PRODUCER_BATCHES_KEPT.
    body.push(entry.batches.len() as u8);
    for batch in &entry.batches {
        body.extend_from_slice(&batch.first_seq.0.to_be_bytes());
        body.extend_from_slice(&batch.last_seq.0.to_be_bytes());
        body.extend_from_slice(&batch.first_offset.0.to_be_bytes());
        body.extend_from_slice(&batch.last_offset.0.to_be_bytes());
        body.extend_from_slice(&batch.max_timestamp.0.to_be_bytes());
    }
}

/// Decodes a snapshot body as [`checkpoint::read`] returns it (framing already checked). The
/// bytes come off a disk, so every count is checked against the bytes present before use, and
/// the state must be one [`ProducerStateManager::record`] could have built: ids increasing and
/// not negative, 1 to [`PRODUCER_BATCHES_KEPT`] batches per producer in increasing offsets,
/// sequences not negative, every batch below the snapshot offset, no bytes left over; in version
/// 2, a damaged batch's last offset between 0 and the snapshot offset after the producers.
pub fn decode_snapshot_body(
    version: u8,
    body: &[u8],
) -> Result<(Offset, ProducerStateManager), SnapshotError> {
    if version != PRODUCER_SNAPSHOT_VERSION && version != PRODUCER_SNAPSHOT_VERSION_DAMAGE_PASSED {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let mut reader = Reader::new(body);
    let end_offset = Offset(reader.i64().ok_or(TRUNCATED)?);
    let count = reader.u32().ok_or(TRUNCATED)? as usize;
    if end_offset.0 < 0 {
        return Err(SnapshotError::Invalid("negative snapshot offset"));
    }
    if count > reader.remaining() / (ENTRY_HEADER_BYTES + BATCH_BYTES) {
        return Err(SnapshotError::Invalid("more producers than bytes"));
    }
    let mut state = ProducerStateManager::default();
    for _ in 0..count {
        let (id, entry) = decode_entry(&mut reader, end_offset)?;
        if state.producers.last_key_value().is_some_and(|(last, _)| *last >= id) {
            return Err(SnapshotError::Invalid("producer ids not increasing"));
        }
        state.producers.insert(id, entry);
    }
    if version == PRODUCER_SNAPSHOT_VERSION_DAMAGE_PASSED {
        let damaged = Offset(reader.i64().ok_or(TRUNCATED)?);
        if damaged.0 < 0 || damaged >= end_offset {
            return Err(SnapshotError::Invalid("damaged batch outside the snapshot"));
        }
        state.damage_passed = Some(damaged);
    }
    if !reader.is_empty() {
        return Err(SnapshotError::Invalid("bytes after the last producer"));
    }
    Ok((end_offset, state))
}

fn decode_entry(
    reader: &mut Reader<'_>,
    end_offset: Offset,
) -> Result<(ProducerId, ProducerEntry), SnapshotError> {
    let id = ProducerId(reader.i64().ok_or(TRUNCATED)?);
    let mut entry = ProducerEntry::new(ProducerEpoch(reader.i16().ok_or(TRUNCATED)?));
    let batches = usize::from(reader.u8().ok_or(TRUNCATED)?);
    if id.0 < 0 {
        return Err(SnapshotError::Invalid("negative producer id"));
    }
    if batches == 0 || batches > PRODUCER_BATCHES_KEPT {
        return Err(SnapshotError::Invalid("batch count out of range"));
    }
    for _ in 0..batches {
        let batch = decode_batch(reader)?;
        if entry.batches.back().is_some_and(|newest| batch.first_offset <= newest.last_offset) {
            return Err(SnapshotError::Invalid("batch offsets not increasing"));
        }
        entry.batches.push_back(batch);
    }
    if entry.last_offset() >= end_offset {
        return Err(SnapshotError::Invalid("batch at or after the snapshot offset"));
    }
    Ok((id, entry))
}

fn decode_batch(reader: &mut Reader<'_>) -> Result<BatchMetadata, SnapshotError> {
    let batch = BatchMetadata {
        first_seq: Sequence(reader.i32().ok_or(TRUNCATED)?),
        last_seq: Sequence(reader.i32().ok_or(TRUNCATED)?),
        first_offset: Offset(reader.i64().ok_or(TRUNCATED)?),
        last_offset: Offset(reader.i64().ok_or(TRUNCATED)?),
        max_timestamp: TimestampMs(reader.i64().ok_or(TRUNCATED)?),
    };
    if batch.first_seq.0 < 0 || batch.last_seq.0 < 0 {
        return Err(SnapshotError::Invalid("negative sequence"));
    }
    if batch.first_offset.0 < 0 || batch.first_offset > batch.last_offset {
        return Err(SnapshotError::Invalid("batch offsets out of order"));
    }
    Ok(batch)
}

/// `00000000000000000042.snapshot`: the snapshot taken at offset 42, as Kafka names it.
pub fn snapshot_file_name(offset: Offset) -> String {
    segment::file_name(offset, PRODUCER_SNAPSHOT_EXT)
}

/// The offset of a snapshot file name, if it is one (20 digits, then `.snapshot`).
pub fn parse_snapshot_file_name(name: &str) -> Option<Offset> {
    match segment::parse_file_name(name)? {
        (offset, PRODUCER_SNAPSHOT_EXT) => Some(offset),
        _ => None,
    }
}

/// Which snapshots recovery may load, best first: those taken in `[log_start, upto]`, newest
/// first, where `upto` is the log end once recovery has cut any torn tail. A snapshot below the
/// log start cannot be replayed forward; one past the log end reflects batches that were lost.
/// Recovery tries each until one decodes, then replays from it; with none, it starts empty and
/// replays from the log start.
pub fn snapshots_to_try(
    available: impl IntoIterator<Item = Offset>,
    log_start: Offset,
    upto: Offset,
) -> Vec<Offset> {
    let mut usable: Vec<Offset> =
        available.into_iter().filter(|offset| (log_start..=upto).contains(offset)).collect();
    usable.sort_unstable_by(|a, b| b.cmp(a));
    usable.dedup();
    usable
}

#[cfg(test)]
#[path = "producers_tests.rs"]
mod tests;
