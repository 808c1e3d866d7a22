//! (f) One owner per partition per generation.
//!
//! Rule: across every SyncGroup answer of one group and generation, no partition is assigned to
//! two different members, and no member is given two different assignments.

use std::collections::BTreeMap;

use super::history::{History, Tp};
use super::{Findings, Rule};

/// Checks rule (f).
pub fn check(history: &History, findings: &mut Findings) {
    let mut owners: BTreeMap<(&str, i32, &Tp), &str> = BTreeMap::new();
    let mut given: BTreeMap<(&str, i32, &str), &Vec<Tp>> = BTreeMap::new();
    for a in &history.assignments {
        let key = (a.group.as_str(), a.generation, a.member.as_str());
        if let Some(before) = given.insert(key, &a.partitions)
            && before != &a.partitions
        {
            findings.push(
                Rule::Ownership,
                format!(
                    "group {} generation {}: member {} was given {before:?} and then {:?}",
                    a.group, a.generation, a.member, a.partitions
                ),
            );
        }
        for tp in &a.partitions {
            let owner = owners.entry((a.group.as_str(), a.generation, tp)).or_insert(&a.member);
            if *owner != a.member {
                findings.push(
                    Rule::Ownership,
                    format!(
                        "group {} generation {}: {tp:?} assigned to both {owner} and {}",
                        a.group, a.generation, a.member
                    ),
                );
            }
        }
    }
}
