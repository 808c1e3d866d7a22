//! (f) One owner per partition per generation.
//!
//! Rule: across every SyncGroup answer of one group and generation, no partition is assigned to
//! two different members, and no member is given two different assignments.
//!
//! One exception, for a group whose metadata record the workload damaged on the broker's disk
//! (a latent sector error in a batch of `__consumer_offsets`): the next coordinator to load the
//! groups passes over the damaged batch, so the group goes back to an earlier generation, or to
//! none, and numbers its next generations again, as Kafka's coordinator would. Two answers for
//! a generation no later than the damaged record's may therefore differ if the later of them
//! was asked for (its SyncGroup sent) after the damage. The history cannot tell when the load
//! came, so within such a generation only answers both asked for before the damage are held to
//! the rule.

use std::collections::BTreeMap;

use super::history::{Assignment, GroupRecordLost, History, Tick, Tp};
use super::{Findings, Rule};

/// Checks rule (f).
pub fn check(history: &History, findings: &mut Findings) {
    // Per group: (generation of a damaged metadata record, when it was damaged).
    let mut lost: BTreeMap<&str, Vec<(i32, Tick)>> = BTreeMap::new();
    for d in &history.damaged_group_records {
        if let GroupRecordLost::Metadata { group, generation } = &d.lost {
            lost.entry(group.as_str()).or_default().push((*generation, d.at));
        }
    }
    // Whether `a` and `b` (of one group and generation) may come from different numberings.
    let renumbered = |a: &Assignment, b: &Assignment| {
        lost.get(a.group.as_str()).is_some_and(|l| {
            l.iter().any(|&(generation, at)| a.generation <= generation && at < a.sent.max(b.sent))
        })
    };
    let mut owners: BTreeMap<(&str, i32, &Tp), &Assignment> = BTreeMap::new();
    let mut given: BTreeMap<(&str, i32, &str), &Assignment> = BTreeMap::new();
    for a in &history.assignments {
        let key = (a.group.as_str(), a.generation, a.member.as_str());
        if let Some(before) = given.insert(key, a)
            && before.partitions != a.partitions
            && !renumbered(before, a)
        {
            findings.push(
                Rule::Ownership,
                format!(
                    "group {} generation {}: member {} was given {:?} and then {:?}",
                    a.group, a.generation, a.member, before.partitions, a.partitions
                ),
            );
        }
        for tp in &a.partitions {
            let owner = *owners.entry((a.group.as_str(), a.generation, tp)).or_insert(a);
            if owner.member != a.member && !renumbered(owner, a) {
                findings.push(
                    Rule::Ownership,
                    format!(
                        "group {} generation {}: {tp:?} assigned to both {} and {}",
                        a.group, a.generation, owner.member, a.member
                    ),
                );
            }
        }
    }
}
