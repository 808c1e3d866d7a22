//! The recorded history of a broker workload: what clients sent and what they were told, in one
//! total order of [`Tick`]s, plus the broker's power failures and a final read of every
//! partition. Workloads write it; the checkers beside this file read it and nothing else.
//!
//! Real-time order is what the ticks give: an operation whose answer was recorded at tick `a`
//! finished before an operation sent at tick `b > a` started. The simulator runs one task at a
//! time, so recording in the order things happen is exact.

use std::collections::BTreeMap;

use bytes::Bytes;

/// A position in the history's total order.
pub type Tick = u64;
/// A topic and partition.
pub type Tp = (String, i32);

/// How a topic makes appends durable (its `flush.policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Acknowledged only once synced: acks survive power failures.
    Ack,
    /// Synced on a timer: acks survive process crashes, not power failures.
    Interval,
}

/// What became of a request, as far as its client knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not answered yet (or never: the task is gone). Indeterminate.
    Pending,
    /// Never sent (the connection could not be opened). Did not happen.
    NotSent,
    /// Sent, and no answer could be had (timeout, reset, bad answer, acks=0). Indeterminate.
    Lost(Tick),
    /// Answered with an error code. Treated as indeterminate: some errors (a storage failure
    /// after the append) leave the outcome open, and the checkers do not guess which.
    Failed(Tick, i16),
    /// Answered with success; for a produce, at this base offset.
    Ok(Tick, i64),
}

impl Outcome {
    /// When the client learned the outcome, if it did.
    pub fn completed(&self) -> Option<Tick> {
        match *self {
            Outcome::Lost(t) | Outcome::Failed(t, _) | Outcome::Ok(t, _) => Some(t),
            Outcome::Pending | Outcome::NotSent => None,
        }
    }

    /// Whether the operation may have taken effect.
    pub fn may_have_happened(&self) -> bool {
        !matches!(self, Outcome::NotSent)
    }
}

/// One produce request for one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Produce {
    /// The producer (see [`History::producers`]).
    pub producer: u32,
    /// Where to.
    pub tp: Tp,
    /// acks (0, 1 or -1).
    pub acks: i16,
    /// The producer's record numbers, in batch order (values are [`super::values::encode`]).
    pub numbers: Vec<u64>,
    /// When it was sent.
    pub sent: Tick,
    /// What came of it.
    pub outcome: Outcome,
}

/// One partition's part of a fetch answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetch {
    /// Who fetched.
    pub consumer: String,
    /// From where.
    pub tp: Tp,
    /// The offset asked for.
    pub fetch_offset: i64,
    /// The error code.
    pub error_code: i16,
    /// The high watermark reported.
    pub high_watermark: i64,
    /// Records at or after `fetch_offset`, as returned.
    pub records: Vec<(i64, Option<Bytes>)>,
    /// When it was sent.
    pub sent: Tick,
    /// When the answer arrived.
    pub received: Tick,
}

/// One partition's part of an OffsetCommit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// The group.
    pub group: String,
    /// The committing member.
    pub member: String,
    /// Its generation.
    pub generation: i32,
    /// The partition.
    pub tp: Tp,
    /// The offset committed.
    pub offset: i64,
    /// When it was sent.
    pub sent: Tick,
    /// What came of it (`Ok`'s offset repeats `offset`).
    pub outcome: Outcome,
}

/// One partition's committed offset as OffsetFetch returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetRead {
    /// The group.
    pub group: String,
    /// The partition.
    pub tp: Tp,
    /// The committed offset (-1: none).
    pub offset: i64,
    /// When it was sent.
    pub sent: Tick,
    /// When the answer arrived.
    pub received: Tick,
}

/// The partitions a member was given by SyncGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The group.
    pub group: String,
    /// The generation.
    pub generation: i32,
    /// The member id.
    pub member: String,
    /// Its partitions.
    pub partitions: Vec<Tp>,
    /// When its SyncGroup was sent.
    pub sent: Tick,
    /// When it arrived.
    pub at: Tick,
}

/// What a group record the workload damaged on the broker's disk (in a batch of
/// `__consumer_offsets`) held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupRecordLost {
    /// A group's committed offset for a partition, or its deletion.
    Offset {
        /// The group.
        group: String,
        /// The partition.
        tp: Tp,
        /// The offset committed (`None`: the deletion).
        offset: Option<i64>,
    },
    /// A group's metadata of one generation ([`i32::MAX`] for the group's deletion: any).
    Metadata {
        /// The group.
        group: String,
        /// The generation it recorded.
        generation: i32,
    },
}

/// A group record in a batch the workload damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedGroupRecord {
    /// When the batch was damaged.
    pub at: Tick,
    /// What the record held.
    pub lost: GroupRecordLost,
}

/// Everything the checkers look at.
#[derive(Debug, Default)]
pub struct History {
    next_tick: Tick,
    /// Topics with their partition counts and flush policy.
    pub topics: BTreeMap<String, (i32, Flush)>,
    /// Producers by number: whether each is idempotent.
    pub producers: BTreeMap<u32, bool>,
    /// Produce requests, per partition, in send order.
    pub produces: Vec<Produce>,
    /// Fetch answers, per partition.
    pub fetches: Vec<Fetch>,
    /// Offset commits, per partition.
    pub commits: Vec<Commit>,
    /// Committed offsets read back.
    pub offset_reads: Vec<OffsetRead>,
    /// Assignments received.
    pub assignments: Vec<Assignment>,
    /// When the broker lost power.
    pub power_failures: Vec<Tick>,
    /// The final read of every partition (offset, value), after the last crash.
    pub final_log: BTreeMap<Tp, Vec<(i64, Option<Bytes>)>>,
    /// When the final read started.
    pub final_read_at: Option<Tick>,
    /// Things a client saw that are wrong in themselves (a corrupt batch, a malformed answer).
    pub anomalies: Vec<String>,
    /// Batches a client rejected for a bad CRC while the disk was allowed to corrupt reads.
    pub corruption_caught: u64,
    /// Batches the workload damaged in place on the broker's disk (latent sector errors), per
    /// partition: first offset to last. Their records may be gone for good; nothing else may
    /// suffer.
    pub damaged: BTreeMap<Tp, BTreeMap<i64, i64>>,
    /// Group records in batches of `__consumer_offsets` the workload damaged on the broker's
    /// disk. Once a coordinator loads the groups again (after a restart, or on taking the
    /// partition's leadership again), each is as if never written: the group is served what it
    /// had before the record.
    pub damaged_group_records: Vec<DamagedGroupRecord>,
    /// Topics a DeleteTopics request was sent for, with when the first was sent: from then on
    /// a coordinator may remove every group's committed offsets of the topic.
    pub topic_deletions: BTreeMap<String, Tick>,
}

impl History {
    /// The next tick: every recorded event takes one.
    pub fn tick(&mut self) -> Tick {
        self.next_tick += 1;
        self.next_tick
    }

    /// Records a power failure of the broker now.
    pub fn power_failure(&mut self) {
        let at = self.tick();
        self.power_failures.push(at);
    }

    /// Whether the broker lost power strictly between `from` and `to`.
    pub fn power_failed_between(&self, from: Tick, to: Tick) -> bool {
        self.power_failures.iter().any(|&t| from < t && t < to)
    }

    /// Whether `offset` of `tp` lies in a batch the workload damaged.
    pub fn damaged_at(&self, tp: &Tp, offset: i64) -> bool {
        self.damaged
            .get(tp)
            .and_then(|batches| batches.range(..=offset).next_back())
            .is_some_and(|(_, &last)| offset <= last)
    }

    /// The flush policy of `topic` (unknown topics count as `Ack`: the stricter rules).
    pub fn flush(&self, topic: &str) -> Flush {
        self.topics.get(topic).map_or(Flush::Ack, |(_, f)| *f)
    }

    /// Records a produce about to be sent; returns its index for [`History::finish_produce`].
    pub fn start_produce(&mut self, producer: u32, tp: Tp, acks: i16, numbers: Vec<u64>) -> usize {
        let sent = self.tick();
        self.produces.push(Produce {
            producer,
            tp,
            acks,
            numbers,
            sent,
            outcome: Outcome::Pending,
        });
        self.produces.len() - 1
    }

    /// Records what became of produce `index`; `outcome` is built from the tick given.
    pub fn finish_produce(&mut self, index: usize, outcome: impl FnOnce(Tick) -> Outcome) {
        let at = self.tick();
        if let Some(p) = self.produces.get_mut(index) {
            p.outcome = outcome(at);
        }
    }

    /// Records a commit about to be sent; returns its index for [`History::finish_commit`].
    pub fn start_commit(
        &mut self,
        group: &str,
        member: &str,
        generation: i32,
        tp: Tp,
        offset: i64,
    ) -> usize {
        let sent = self.tick();
        self.commits.push(Commit {
            group: group.to_owned(),
            member: member.to_owned(),
            generation,
            tp,
            offset,
            sent,
            outcome: Outcome::Pending,
        });
        self.commits.len() - 1
    }

    /// Records what became of commit `index`.
    pub fn finish_commit(&mut self, index: usize, outcome: impl FnOnce(Tick) -> Outcome) {
        let at = self.tick();
        if let Some(c) = self.commits.get_mut(index) {
            c.outcome = outcome(at);
        }
    }
}
