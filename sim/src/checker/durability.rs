//! (a) Acknowledged-write durability.
//!
//! Rule: every produce answered with success (acks=1 or acks=all) before the final read is
//! *protected* if its topic has `flush.policy=ack`, or if the broker did not lose power between
//! sending it and the final read. Every record of a protected produce must be in the final log at `base_offset + i` with
//! exactly the value sent. (On one broker acks=1 and acks=all wait for the same thing, so both
//! are held to it.)
//!
//! A batch the workload damaged in place on the broker's disk (a latent sector error) is
//! exempt: its records may be gone. Nothing else may suffer from it: a fetch may answer
//! `CORRUPT_MESSAGE` only for an offset in a damaged batch.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::history::{Flush, History, Outcome, Produce, Tp};
use super::{Findings, Rule, values};

/// Kafka's CORRUPT_MESSAGE.
const CORRUPT_MESSAGE: i16 = 2;

/// Final-log lookups by offset.
pub(crate) fn final_index(history: &History) -> BTreeMap<&Tp, BTreeMap<i64, &Option<Bytes>>> {
    history
        .final_log
        .iter()
        .map(|(tp, records)| (tp, records.iter().map(|(o, v)| (*o, v)).collect()))
        .collect()
}

/// Whether an acknowledged produce must survive to the final read: acknowledged before it, and
/// on an `ack` topic or with no power failure since it was sent.
pub(crate) fn protected(history: &History, produce: &Produce) -> bool {
    let end = history.final_read_at.unwrap_or(u64::MAX);
    let Outcome::Ok(acked, _) = produce.outcome else { return false };
    if produce.acks == 0 || acked > end {
        return false;
    }
    history.flush(&produce.tp.0) == Flush::Ack || !history.power_failed_between(produce.sent, end)
}

/// Checks rule (a).
pub fn check(history: &History, findings: &mut Findings) {
    let index = final_index(history);
    for p in history.produces.iter().filter(|p| protected(history, p)) {
        let Outcome::Ok(acked_at, base) = p.outcome else { continue };
        let Some(log) = index.get(&p.tp) else {
            findings.push(Rule::Durability, format!("{:?} was never read back", p.tp));
            continue;
        };
        for (i, &number) in p.numbers.iter().enumerate() {
            let offset = base + i as i64;
            if history.damaged_at(&p.tp, offset) {
                continue;
            }
            let expected = values::encode(p.producer, number);
            let found = log.get(&offset).map(|v| v.as_ref());
            if found != Some(Some(&expected)) {
                let what = match found {
                    None => "missing".to_owned(),
                    Some(None) => "a null value".to_owned(),
                    Some(Some(v)) => format!("{:?}", values::decode(v)),
                };
                findings.push(
                    Rule::Durability,
                    format!(
                        "{:?} offset {offset}: producer {} record {number} acked (acks={}) at \
                         tick {acked_at}, final log has {what}",
                        p.tp, p.producer, p.acks
                    ),
                );
            }
        }
    }
    for f in history.fetches.iter().filter(|f| f.error_code == CORRUPT_MESSAGE) {
        if !history.damaged_at(&f.tp, f.fetch_offset) {
            findings.push(
                Rule::Durability,
                format!(
                    "fetch by {} of {:?} from {} at tick {} answered CORRUPT_MESSAGE, and no \
                     batch there was damaged",
                    f.consumer, f.tp, f.fetch_offset, f.sent
                ),
            );
        }
    }
}
