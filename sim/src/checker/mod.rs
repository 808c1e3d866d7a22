//! Checkers over a recorded broker [`History`] (DESIGN.md §4), separate from any workload: the
//! history is their only input, and each rule is stated where it is checked.
//!
//! Common ground for every rule:
//! - A request whose outcome the client could not learn — a timeout, a reset, an undecodable
//!   answer, acks=0, or an error code — "may or may not have happened". No rule assumes either.
//!   Only a request that was never sent (the connection could not be opened) did not happen.
//! - `flush.policy=ack` topics promise that an acknowledged (acks=1 or all) write survives power
//!   failure, so nothing acknowledged or read can be taken back. `flush.policy=interval` topics
//!   promise that only across process crashes: an acknowledgement or a read is held to account
//!   only if the broker did not lose power between it and the later observation it is compared
//!   with.
//!
//! The rules, one file each:
//! - [`durability`] (a): acknowledged writes are in the final log at their offsets, exactly;
//! - [`order`] (b, c): offsets dense and increasing as read, the high watermark never goes back,
//!   each producer's records in send order, no duplicates or reordering from an idempotent
//!   producer, and nothing read that was never sent;
//! - [`observed`] (d): never two different records seen at one offset;
//! - [`commits`] (e): committed offsets change only by the group's own commits;
//! - [`ownership`] (f): one owner per partition per generation.

pub mod commits;
pub mod durability;
pub mod history;
pub mod observed;
pub mod order;
pub mod ownership;
pub mod values;

use std::fmt;

pub use history::History;

/// Violations kept per rule: the first few say what went wrong; the rest is noise.
pub const VIOLATIONS_PER_RULE_MAX: usize = 5;

/// Which rule a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// (a) acknowledged writes survive.
    Durability,
    /// (b) offsets dense and increasing; high watermark monotonic; producer order.
    Order,
    /// (c) no duplicates from an idempotent producer.
    Idempotence,
    /// Nothing read that was never written.
    Phantom,
    /// (d) one record per offset.
    OneValuePerOffset,
    /// (e) committed offsets never regress.
    Commits,
    /// (f) one owner per partition per generation.
    Ownership,
    /// A client saw something wrong in itself (corrupt batch, malformed answer, no liveness).
    Client,
}

/// One broken rule, with what shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// What happened, with offsets and ticks.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}] {}", self.rule, self.detail)
    }
}

/// Collects violations, keeping at most [`VIOLATIONS_PER_RULE_MAX`] per rule and counting the
/// rest.
#[derive(Debug, Default)]
pub struct Findings {
    kept: Vec<Violation>,
    dropped: usize,
}

impl Findings {
    /// Records a violation of `rule`.
    pub fn push(&mut self, rule: Rule, detail: String) {
        if self.kept.iter().filter(|v| v.rule == rule).count() < VIOLATIONS_PER_RULE_MAX {
            self.kept.push(Violation { rule, detail });
        } else {
            self.dropped += 1;
        }
    }

    /// The violations kept, in rule order, and a last line counting those dropped.
    pub fn into_lines(mut self) -> Vec<String> {
        self.kept.sort_by_key(|v| v.rule);
        let mut lines: Vec<String> = self.kept.iter().map(ToString::to_string).collect();
        if self.dropped > 0 {
            lines.push(format!("... and {} more violations", self.dropped));
        }
        lines
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// Runs every checker over `history`.
pub fn check(history: &History) -> Findings {
    let mut findings = Findings::default();
    for anomaly in &history.anomalies {
        findings.push(Rule::Client, anomaly.clone());
    }
    durability::check(history, &mut findings);
    order::check(history, &mut findings);
    observed::check(history, &mut findings);
    commits::check(history, &mut findings);
    ownership::check(history, &mut findings);
    findings
}
