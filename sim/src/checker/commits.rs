//! (e) Committed offsets change only by the group's own commits.
//!
//! Each group's committed offset for a partition is a register, initially "none" (-1), written
//! by OffsetCommit. An *observation* of it is an acknowledged commit (value: the offset
//! committed, over the ticks from request to answer) or an OffsetFetch answer (value: the offset
//! returned, over its ticks). A *writer* of a value is any commit of that value that may have
//! happened (any outcome but never-sent), over the ticks from its request to its answer if the
//! answer settles it (success, or a refusal that comes before anything is written: a generation
//! or membership error), or else to the end of time: an unanswered commit, or one answered with an
//! error that can follow the append of its record (NOT_COORDINATOR when the offsets partition's
//! leadership moved while the record was replicating, a timeout, a storage error), may take
//! effect later, when a new coordinator loads the record from the log.
//!
//! Rule: if observation `o1` ended before observation `o2` started and they show different
//! values, some writer of `o2`'s value started before `o2` ended and ended after `o1` started —
//! i.e. could have taken effect after what `o1` saw. So a committed offset may move backwards
//! only when a client itself committed the lower offset concurrently or later, an acknowledged
//! commit is never lost, and no value appears that nobody committed.
//!
//! A deletion of the topic is a writer of "none" (-1) from when it was sent on: coordinators
//! remove a deleted topic's committed offsets from every group, as Kafka's do.
//!
//! One exception, for a commit whose record the workload damaged on the broker's disk (a latent
//! sector error in a batch of `__consumer_offsets`): the next coordinator to load the groups
//! (after a restart, or on taking the partition's leadership again; the history cannot tell
//! when) passes over the damaged batch, so the group is served what it had before that record,
//! which compaction may have removed as well. An observation `o2` that ended after the damage
//! may therefore show any value a commit sent before the damage could have written, or none —
//! unless a commit of another value, sent after the lost one was answered, was acknowledged
//! before `o2` started: its record lies after the lost one, and the load serves it (or later).

use std::collections::BTreeMap;

use super::history::{GroupRecordLost, History, Outcome, Tick, Tp};
use super::{Findings, Rule};
use crate::client::codes;

/// Error codes a coordinator answers before writing anything (ILLEGAL_GENERATION,
/// UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS): the commit can take effect no later than its answer.
const REFUSED_BEFORE_WRITE: [i16; 3] =
    [codes::ILLEGAL_GENERATION, codes::UNKNOWN_MEMBER_ID, codes::REBALANCE_IN_PROGRESS];

/// A value over an interval of ticks.
#[derive(Clone, Copy, Debug)]
struct Span {
    value: i64,
    start: Tick,
    end: Tick,
}

#[derive(Default)]
struct Register {
    observations: Vec<Span>,
    writers: BTreeMap<i64, Vec<Span>>,
    /// Acknowledged commits.
    acked: Vec<Span>,
    /// Commit records of this register that were damaged: when, and the offset each held
    /// (`None`: a deletion).
    lost: Vec<(Tick, Option<i64>)>,
}

impl Register {
    /// Whether `o2`'s value may be what the groups were loaded with after a commit record of
    /// this register was lost.
    fn reverted(&self, o2: &Span) -> bool {
        self.lost.iter().any(|&(damaged, value)| {
            damaged < o2.end
                && self
                    .writers
                    .get(&o2.value)
                    .is_some_and(|ws| ws.iter().any(|w| w.start < damaged))
                && !self.superseded(damaged, value, o2)
        })
    }

    /// Whether a commit whose record must lie after the lost one (of `value`, damaged at
    /// `damaged`) was acknowledged before `o2` started: sent after every commit that could
    /// have written the lost record was answered, of a value no lost record held.
    fn superseded(&self, damaged: Tick, value: Option<i64>, o2: &Span) -> bool {
        let Some(value) = value else { return false };
        let answered = self
            .writers
            .get(&value)
            .into_iter()
            .flatten()
            .filter(|w| w.start < damaged)
            .map(|w| w.end)
            .max()
            .unwrap_or(Tick::MAX);
        let lost_value = |v: i64| self.lost.iter().any(|&(_, l)| l == Some(v));
        self.acked.iter().any(|a| {
            a.start > answered && a.end < o2.start && a.value != o2.value && !lost_value(a.value)
        })
    }
}

/// Checks rule (e).
pub fn check(history: &History, findings: &mut Findings) {
    let mut registers: BTreeMap<(&str, &Tp), Register> = BTreeMap::new();
    let initial = Span { value: -1, start: 0, end: 0 };
    for c in &history.commits {
        let r = registers.entry((c.group.as_str(), &c.tp)).or_default();
        if !c.outcome.may_have_happened() {
            continue;
        }
        let end = match c.outcome {
            Outcome::Ok(at, _) => at,
            Outcome::Failed(at, code) if REFUSED_BEFORE_WRITE.contains(&code) => at,
            _ => Tick::MAX,
        };
        r.writers.entry(c.offset).or_default().push(Span { value: c.offset, start: c.sent, end });
        if let Outcome::Ok(at, _) = c.outcome {
            r.observations.push(Span { value: c.offset, start: c.sent, end: at });
            r.acked.push(Span { value: c.offset, start: c.sent, end: at });
        }
    }
    for read in &history.offset_reads {
        let r = registers.entry((read.group.as_str(), &read.tp)).or_default();
        r.observations.push(Span { value: read.offset, start: read.sent, end: read.received });
    }
    for d in &history.damaged_group_records {
        let GroupRecordLost::Offset { group, tp, offset } = &d.lost else { continue };
        registers.entry((group.as_str(), tp)).or_default().lost.push((d.at, *offset));
    }
    for ((group, tp), mut r) in registers {
        r.observations.push(initial);
        r.writers.entry(-1).or_default().push(initial);
        if let Some(&sent) = history.topic_deletions.get(&tp.0) {
            let deletion = Span { value: -1, start: sent, end: Tick::MAX };
            r.writers.entry(-1).or_default().push(deletion);
        }
        r.observations.sort_by_key(|s| (s.start, s.end));
        check_register(group, tp, &r, findings);
    }
}

fn check_register(group: &str, tp: &Tp, r: &Register, findings: &mut Findings) {
    for o2 in &r.observations {
        for o1 in r.observations.iter().filter(|o1| o1.end < o2.start && o1.value != o2.value) {
            let explained = r
                .writers
                .get(&o2.value)
                .is_some_and(|ws| ws.iter().any(|w| w.start < o2.end && w.end > o1.start));
            if !explained && !r.reverted(o2) {
                let how = if o2.value < o1.value { "went back" } else { "changed" };
                findings.push(
                    Rule::Commits,
                    format!(
                        "group {group} {tp:?}: committed offset {how} from {} (ticks {}..{}) to \
                         {} (ticks {}..{}) with no commit of {} that could have come after",
                        o1.value, o1.start, o1.end, o2.value, o2.start, o2.end, o2.value
                    ),
                );
                return;
            }
        }
    }
}
