//! Partition reassignment (Kafka's AlterPartitionReassignments, KIP-455): moving a partition's
//! replicas to other brokers while it serves.
//!
//! A reassignment is one partition record with the replicas it moves to first, then those it
//! removes, and the two lists of replicas being added and removed beside them. The replicas
//! added copy the log as followers of the leader and join the ISR as any follower does; only
//! once every replica it moves to is in sync does the controller drop the others, from the
//! replica list and the ISR, and move leadership to a replica it keeps if the leader is one it
//! drops. So no replica that may hold the only copy of an acknowledged record is dropped, and
//! the ISR never shrinks below what it held while the move went on. A cancel drops the
//! replicas being added and keeps the others: the replicas from before the move, and, where a
//! new target replaced one in progress, the replicas the replaced one had added (they count as
//! the partition's from then on; none is dropped before a move completes).
//!
//! Kafka completes a move once the replicas it adds are in sync, even if a replica it keeps is
//! not (that one stays out of the ISR); here every replica it moves to must be in sync, so a
//! move that keeps a replica which is down waits for it to return. That never drops a replica
//! in sync for one that is not, and a healed cluster completes every move.
//!
//! Older nodes cannot decode the records of a move in progress: every node must run this code
//! before a move is asked for.

use super::{
    ControllerError, ControllerLogic, MetadataImage, MetadataRecord, NO_LEADER,
    PREFERRED_ELECTIONS_MAX,
};
use crate::controller::records::{BrokerId, PartitionRecord};
use crate::io::Instant;

/// One partition's reassignment as an operator asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reassignment {
    /// The topic's name.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The replicas to move to, preferred leader first; `None` cancels the reassignment in
    /// progress.
    pub target: Option<Vec<BrokerId>>,
}

/// The most partitions one AlterPartitionReassignments may name.
pub const REASSIGNMENTS_MAX: usize = 10_000;

impl ControllerLogic {
    /// Records starting (or replacing, or cancelling) the reassignments asked for, and the
    /// refusals of those that may not be made, by topic and partition. With
    /// `allow_replication_factor_change` false (KIP-860), a target of another size than the
    /// partition's current replicas (those a reassignment in progress moves to) is refused.
    ///
    /// A new target replaces one in progress: the replicas being added that it keeps are still
    /// being added, every other replica not in it is being removed.
    pub fn alter_reassignments(
        &self,
        image: &MetadataImage,
        changes: &[Reassignment],
        allow_replication_factor_change: bool,
        now: Instant,
    ) -> (Vec<MetadataRecord>, Vec<(String, i32, ControllerError)>) {
        let mut records = Vec::new();
        let mut refused = Vec::new();
        for change in changes {
            let outcome = self.reassign_one(image, change, allow_replication_factor_change, now);
            match outcome {
                Ok(Some(next)) => records.push(MetadataRecord::Partition(next)),
                Ok(None) => {}
                Err(e) => refused.push((change.topic.clone(), change.partition, e)),
            }
        }
        (records, refused)
    }

    fn reassign_one(
        &self,
        image: &MetadataImage,
        change: &Reassignment,
        allow_replication_factor_change: bool,
        now: Instant,
    ) -> Result<Option<PartitionRecord>, ControllerError> {
        let unknown = || ControllerError::UnknownTopic(change.topic.clone());
        let topic = image.topic(&change.topic).ok_or_else(unknown)?;
        let p = topic.partitions.get(&change.partition).ok_or_else(unknown)?;
        let mut next = p.clone();
        match &change.target {
            None => {
                if !p.reassigning() {
                    return Err(ControllerError::NoReassignment(format!(
                        "{}-{} is not being reassigned",
                        change.topic, change.partition
                    )));
                }
                next.replicas.retain(|r| !p.adding.contains(r));
                next.isr.retain(|r| !p.adding.contains(r));
                if next.isr.is_empty() {
                    return Err(ControllerError::BadAssignment(format!(
                        "cancelling would leave no replica in sync: only {:?}, being added, are",
                        p.isr
                    )));
                }
                next.adding.clear();
                next.removing.clear();
                if p.adding.contains(&p.leader) {
                    // As a failover picks: a replica heard from lately and whole, else one
                    // heard from lately, else any live one (a controller that just took over
                    // has heard from none yet); none only where no in-sync replica is live,
                    // and then the first to register or come back leads.
                    let electable = |b: &BrokerId| self.electable(image, *b, p, now);
                    let whole = |b: &BrokerId| electable(b) && self.answering(*b, p, now);
                    let isr = &next.isr;
                    next.leader = isr
                        .iter()
                        .copied()
                        .find(whole)
                        .or_else(|| isr.iter().copied().find(electable))
                        .or_else(|| isr.iter().copied().find(|&b| image.is_live(b)))
                        .unwrap_or(NO_LEADER);
                    next.leader_epoch += 1;
                }
            }
            Some(target) => {
                validate_target(image, target)?;
                let current = p.target().len();
                if !allow_replication_factor_change && target.len() != current {
                    return Err(ControllerError::ReplicationFactorChange {
                        from: current as i32,
                        to: target.len() as i32,
                    });
                }
                next.removing =
                    p.replicas.iter().copied().filter(|r| !target.contains(r)).collect();
                next.adding = target
                    .iter()
                    .copied()
                    .filter(|r| !p.replicas.contains(r) || p.adding.contains(r))
                    .collect();
                next.replicas = target.iter().chain(&next.removing).copied().collect();
            }
        }
        if let Some(done) = self.completed(image, &next, now) {
            next = done;
        }
        if next.replicas == p.replicas
            && next.adding == p.adding
            && next.removing == p.removing
            && next.leader == p.leader
        {
            return Ok(None);
        }
        next.partition_epoch = p.partition_epoch + 1;
        Ok(Some(next))
    }

    /// `p` with its reassignment completed, if one is in progress and may complete: every
    /// replica it moves to is in sync, and one of them may lead (the leader already, or an
    /// electable one, preferably one known to hold no damage, which then leads in a new
    /// epoch). The replicas it removes leave the replica list and the ISR. The partition epoch
    /// is the caller's to bump.
    pub(super) fn completed(
        &self,
        image: &MetadataImage,
        p: &PartitionRecord,
        now: Instant,
    ) -> Option<PartitionRecord> {
        if !p.reassigning() {
            return None;
        }
        let target = p.target();
        if !target.iter().all(|r| p.isr.contains(r)) {
            return None;
        }
        let mut next = p.clone();
        if !target.contains(&p.leader) {
            let electable = |b: &&BrokerId| self.electable(image, **b, p, now);
            let whole = |b: &&BrokerId| electable(b) && self.answering(**b, p, now);
            next.leader = *target.iter().find(whole).or_else(|| target.iter().find(electable))?;
            next.leader_epoch += 1;
        }
        next.isr.retain(|r| target.contains(r));
        next.replicas = target;
        next.adding.clear();
        next.removing.clear();
        Some(next)
    }

    /// `records` with each partition record's reassignment completed where it now may be (an
    /// ISR change that brought the last replica it moves to in sync).
    pub fn completing_reassignments(
        &self,
        image: &MetadataImage,
        records: Vec<MetadataRecord>,
        now: Instant,
    ) -> Vec<MetadataRecord> {
        records
            .into_iter()
            .map(|record| match record {
                MetadataRecord::Partition(p) => {
                    MetadataRecord::Partition(self.completed(image, &p, now).unwrap_or(p))
                }
                other => other,
            })
            .collect()
    }

    /// Records completing every reassignment in progress that may complete (see
    /// [`ControllerLogic::completed`]) but was not completed by the ISR change that allowed
    /// it: one whose new leader was not yet electable then (a controller that just took
    /// over, say).
    /// At most [`PREFERRED_ELECTIONS_MAX`] at a time (the rest follow at the next check).
    pub fn due_reassignments(&self, image: &MetadataImage, now: Instant) -> Vec<MetadataRecord> {
        image
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .filter_map(|p| self.completed(image, p, now))
            .take(PREFERRED_ELECTIONS_MAX)
            .map(|mut next| {
                next.partition_epoch += 1;
                MetadataRecord::Partition(next)
            })
            .collect()
    }
}

/// Refuses a target that names no replica, one twice, or a broker never registered.
pub(super) fn validate_target(
    image: &MetadataImage,
    target: &[BrokerId],
) -> Result<(), ControllerError> {
    if target.is_empty() {
        return Err(ControllerError::BadAssignment(
            "a partition needs at least one replica".into(),
        ));
    }
    for (i, r) in target.iter().enumerate() {
        if target[..i].contains(r) {
            return Err(ControllerError::BadAssignment(format!("broker {r} is named twice")));
        }
        if !image.brokers.contains_key(r) {
            return Err(ControllerError::BadAssignment(format!("broker {r} is not registered")));
        }
    }
    Ok(())
}
