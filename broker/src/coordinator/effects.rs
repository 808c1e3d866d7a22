//! What one call to the coordinator produces, and the queue of record batches waiting to be
//! made durable.
//!
//! A call collects replies, records and "do this once the records are durable" completions in
//! an [`Effects`]; at its end the records become one `Output::Persist` batch and the
//! completions wait in [`PendingWrites`] until the caller reports the batch's fate. Batches are
//! settled strictly in the order they were issued — the order of the log — even if the caller
//! reports them out of order, so the in-memory offsets are always exactly a replay of the
//! durable prefix of `__consumer_offsets`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::error::PersistError;
use super::record::Record;
use super::responses::{Output, Response};
use super::types::{
    Generation, GroupId, InstanceId, MemberId, Now, PersistId, Protocol, RequestId,
};
use crate::model::{TimestampMs, TopicPartition};

/// Work deferred until a batch of records is durable (or has failed).
#[derive(Clone, Debug)]
pub enum Completion {
    /// Send this reply (turned into an error reply if the batch failed).
    Reply(RequestId, Response),
    /// The leader's assignment for `generation` was persisted: hand it to every member.
    LeaderSync {
        /// The group.
        group: GroupId,
        /// The generation the assignment is for.
        generation: Generation,
        /// Every member's assignment.
        assignment: BTreeMap<MemberId, Bytes>,
    },
    /// A static member was replaced without a rebalance: answer its JoinGroup.
    StaticReplace(StaticReplace),
    /// A group's deletion was persisted: forget it (or, on failure, bring it back as Empty).
    Delete {
        /// The group.
        group: GroupId,
        /// Its state timestamp before deletion began, restored if the deletion fails.
        state_since: Option<TimestampMs>,
    },
}

/// What is needed to answer (or undo) a static member's replacement (KIP-345).
#[derive(Clone, Debug)]
pub struct StaticReplace {
    /// The group.
    pub group: GroupId,
    /// The member's `group.instance.id`.
    pub instance_id: InstanceId,
    /// The fenced member id.
    pub old_id: MemberId,
    /// The new member id.
    pub new_id: MemberId,
    /// The JoinGroup to answer.
    pub request: RequestId,
    /// Its API version.
    pub version: i16,
    /// The member's protocols before the join, restored on failure.
    pub old_protocols: Vec<Protocol>,
    /// Its rebalance timeout before the join.
    pub old_rebalance_timeout_ms: i32,
    /// Its session timeout before the join.
    pub old_session_timeout_ms: i32,
    /// The leader before the replacement (what pre-v9 responses name).
    pub leader_before: Option<MemberId>,
}

/// The effects of one call.
pub struct Effects {
    /// The time of the call.
    pub now: Now,
    /// Outputs to hand back as they are.
    pub outputs: Vec<Output>,
    /// Records to persist as one batch.
    pub records: Vec<Record>,
    /// Work to do once `records` are durable.
    pub completions: Vec<Completion>,
}

impl Effects {
    /// Empty effects for a call at `now`.
    pub fn new(now: Now) -> Effects {
        Effects { now, outputs: Vec::new(), records: Vec::new(), completions: Vec::new() }
    }

    /// Replies now.
    pub fn reply(&mut self, request: RequestId, response: Response) {
        self.outputs.push(Output::Reply(request, response));
    }

    /// Replies once this call's records are durable (at once if it has none).
    pub fn reply_when_durable(&mut self, request: RequestId, response: Response) {
        self.completions.push(Completion::Reply(request, response));
    }

    /// Adds a record to this call's batch.
    pub fn persist(&mut self, record: Record) {
        self.records.push(record);
    }

    /// Defers work until this call's records are durable.
    pub fn on_durable(&mut self, completion: Completion) {
        self.completions.push(completion);
    }
}

/// One issued batch.
#[derive(Debug)]
pub struct PendingWrite {
    /// Its handle.
    pub id: PersistId,
    /// Its records (replayed into memory once durable).
    pub records: Vec<Record>,
    /// Work waiting for it.
    pub completions: Vec<Completion>,
    /// Its outcome, once reported.
    pub result: Option<Result<(), PersistError>>,
}

/// Batches issued but not yet settled, in issue order.
#[derive(Debug, Default)]
pub struct PendingWrites {
    queue: VecDeque<PendingWrite>,
    next_id: u64,
}

impl PendingWrites {
    /// Queues a batch and returns its handle.
    pub fn issue(&mut self, records: Vec<Record>, completions: Vec<Completion>) -> PersistId {
        let id = PersistId(self.next_id);
        self.next_id += 1;
        self.queue.push_back(PendingWrite { id, records, completions, result: None });
        id
    }

    /// Records the outcome of batch `id`; false if no such batch is waiting.
    pub fn report(&mut self, id: PersistId, result: Result<(), PersistError>) -> bool {
        match self.queue.iter_mut().find(|w| w.id == id && w.result.is_none()) {
            Some(write) => {
                write.result = Some(result);
                true
            }
            None => false,
        }
    }

    /// The oldest batch, if its outcome is known: batches settle in issue order.
    pub fn pop_settled(&mut self) -> Option<(PendingWrite, Result<(), PersistError>)> {
        let result = self.queue.front()?.result?;
        let write = self.queue.pop_front()?;
        Some((write, result))
    }

    /// Partitions of `group` with an offset commit waiting to become durable.
    /// The partitions of every group with offsets being written (see
    /// [`Pending::pending_offsets`]), in one pass over the unsettled batches.
    pub fn pending_offsets_by_group(&self) -> BTreeMap<GroupId, BTreeSet<TopicPartition>> {
        let mut by_group: BTreeMap<GroupId, BTreeSet<TopicPartition>> = BTreeMap::new();
        for record in self.queue.iter().flat_map(|w| &w.records) {
            if let Record::Offset { group, partition, value: Some(_) } = record {
                by_group.entry(group.clone()).or_default().insert(partition.clone());
            }
        }
        by_group
    }

    pub fn pending_offsets(&self, group: &GroupId) -> Vec<TopicPartition> {
        self.queue
            .iter()
            .flat_map(|w| &w.records)
            .filter_map(|r| match r {
                Record::Offset { group: g, partition, value: Some(_) } if g == group => {
                    Some(partition.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Drops the records of the groups `gone` picks from every unsettled batch: they are
    /// not replayed into memory when it settles (the batches themselves, and the work waiting
    /// for them, stay).
    pub fn forget_records(&mut self, gone: impl Fn(&GroupId) -> bool) {
        for write in &mut self.queue {
            write.records.retain(|r| !gone(r.group()));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn batches_settle_in_issue_order() {
        let mut p = PendingWrites::default();
        let a = p.issue(Vec::new(), Vec::new());
        let b = p.issue(Vec::new(), Vec::new());
        assert!(p.report(b, Ok(())));
        assert!(p.pop_settled().is_none(), "b must wait for a");
        assert!(p.report(a, Err(PersistError::TimedOut)));
        assert!(!p.report(a, Ok(())), "a is already settled");
        let (first, result) = p.pop_settled().unwrap();
        assert_eq!((first.id, result), (a, Err(PersistError::TimedOut)));
        assert_eq!(p.pop_settled().unwrap().0.id, b);
        assert!(p.pop_settled().is_none());
    }
}
