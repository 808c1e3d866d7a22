//! (b) Per-partition order and (c) idempotence, plus phantom records.
//!
//! Rules:
//! - *Dense as read*: a successful fetch's records start exactly at the offset asked for, go up
//!   by one, and stay below the high watermark it reports. The final log goes up by one from 0
//!   (the workload never deletes records), except over batches the workload damaged on the
//!   broker's disk.
//! - *High watermark never goes back* (`flush.policy=ack` topics): a fetch sent after an answer
//!   that showed high watermark `h` (a fetch reporting `h`, or an acknowledged produce ending
//!   at `h`) reports at least `h`, and is not told that an offset below `h` is out of range.
//! - *Producer order*: if a record `x` of a producer was acknowledged (and is protected, see
//!   [`super::durability`]) before record `y` of the same producer was first sent to the same
//!   partition, every copy of `y` in the final log lies after `x`'s offset.
//! - *Idempotence*: an idempotent producer never resends a record under a new sequence, so its
//!   records in a partition appear in strictly increasing record-number order — in the final
//!   log and within every fetch. (This forbids duplicates and reordering, including of records
//!   whose produce was indeterminate.)
//! - *No phantoms*: every value read decodes exactly, and some produce of it to that partition
//!   that may have happened was sent before it was read.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::durability::protected;
use super::history::{Flush, History, Outcome, Produce, Tick, Tp};
use super::{Findings, Rule, values};

/// Kafka's OFFSET_OUT_OF_RANGE.
const OFFSET_OUT_OF_RANGE: i16 = 1;

/// Produce attempts by record identity.
pub(crate) type Sends<'a> = BTreeMap<(u32, u64), Vec<&'a Produce>>;

pub(crate) fn sends(history: &History) -> Sends<'_> {
    let mut out: Sends<'_> = BTreeMap::new();
    for p in &history.produces {
        for &n in &p.numbers {
            out.entry((p.producer, n)).or_default().push(p);
        }
    }
    out
}

/// Checks rules (b), (c) and phantoms.
pub fn check(history: &History, findings: &mut Findings) {
    let sends = sends(history);
    let final_at = history.final_read_at.unwrap_or(Tick::MAX);
    for f in history.fetches.iter().filter(|f| f.error_code == 0) {
        let where_ = format!("fetch by {} of {:?} from {}", f.consumer, f.tp, f.fetch_offset);
        let skip = |_: i64| false;
        dense(&f.records, f.fetch_offset, Some(f.high_watermark), skip, &where_, findings);
        idempotent(history, &f.records, &f.tp, &where_, findings);
        phantoms(&sends, &f.records, &f.tp, f.received, &where_, findings);
    }
    for (tp, records) in &history.final_log {
        let where_ = format!("final read of {tp:?}");
        let damaged = |offset: i64| history.damaged_at(tp, offset);
        dense(records, 0, None, damaged, &where_, findings);
        idempotent(history, records, tp, &where_, findings);
        phantoms(&sends, records, tp, final_at, &where_, findings);
        producer_order(history, &sends, tp, records, findings);
    }
    high_watermark(history, findings);
}

/// Checks that `records` go up by one from `from`, passing over only offsets `may_skip` names.
fn dense(
    records: &[(i64, Option<Bytes>)],
    from: i64,
    high_watermark: Option<i64>,
    may_skip: impl Fn(i64) -> bool,
    where_: &str,
    findings: &mut Findings,
) {
    let mut expected = from;
    for (offset, _) in records {
        while expected < *offset && may_skip(expected) {
            expected += 1;
        }
        if *offset != expected {
            findings
                .push(Rule::Order, format!("{where_}: offset {offset} where {expected} was due"));
            return;
        }
        expected += 1;
    }
    if let Some(hw) = high_watermark
        && expected > from
        && expected > hw
    {
        findings
            .push(Rule::Order, format!("{where_}: read up to {expected} past high watermark {hw}"));
    }
}

fn idempotent(
    history: &History,
    records: &[(i64, Option<Bytes>)],
    tp: &Tp,
    where_: &str,
    findings: &mut Findings,
) {
    let mut last: BTreeMap<u32, (u64, i64)> = BTreeMap::new();
    for (offset, value) in records {
        let Some((producer, n)) = value.as_deref().and_then(values::decode) else { continue };
        if history.producers.get(&producer) != Some(&true) {
            continue;
        }
        if let Some(&(prev, at)) = last.get(&producer)
            && n <= prev
        {
            findings.push(
                Rule::Idempotence,
                format!(
                    "{where_}: idempotent producer {producer} record {n} at {offset} after its \
                     record {prev} at {at} in {tp:?}"
                ),
            );
        }
        last.insert(producer, (n, *offset));
    }
}

fn phantoms(
    sends: &Sends<'_>,
    records: &[(i64, Option<Bytes>)],
    tp: &Tp,
    seen: Tick,
    where_: &str,
    findings: &mut Findings,
) {
    for (offset, value) in records {
        let Some((producer, n)) = value.as_deref().and_then(values::decode) else {
            findings.push(
                Rule::Phantom,
                format!("{where_}: offset {offset} holds a value nobody wrote"),
            );
            continue;
        };
        let sent = sends.get(&(producer, n)).is_some_and(|attempts| {
            attempts.iter().any(|p| p.tp == *tp && p.sent < seen && p.outcome.may_have_happened())
        });
        if !sent {
            findings.push(
                Rule::Phantom,
                format!("{where_}: offset {offset} holds producer {producer} record {n}, never sent there"),
            );
        }
    }
}

fn producer_order(
    history: &History,
    sends: &Sends<'_>,
    tp: &Tp,
    records: &[(i64, Option<Bytes>)],
    findings: &mut Findings,
) {
    // Per producer: protected acks in this partition as (acked tick, last offset), by tick.
    let mut acks: BTreeMap<u32, Vec<(Tick, i64)>> = BTreeMap::new();
    for p in history.produces.iter().filter(|p| p.tp == *tp && protected(history, p)) {
        if let Outcome::Ok(at, base) = p.outcome {
            acks.entry(p.producer).or_default().push((at, base + p.numbers.len() as i64 - 1));
        }
    }
    for list in acks.values_mut() {
        list.sort();
        let mut max = i64::MIN;
        for entry in list.iter_mut() {
            max = max.max(entry.1);
            entry.1 = max;
        }
    }
    for (offset, value) in records {
        let Some((producer, n)) = value.as_deref().and_then(values::decode) else { continue };
        let Some(list) = acks.get(&producer) else { continue };
        let first_sent = sends
            .get(&(producer, n))
            .and_then(|a| a.iter().filter(|p| p.tp == *tp).map(|p| p.sent).min())
            .unwrap_or(Tick::MAX);
        let before = list.partition_point(|(at, _)| *at < first_sent);
        if let Some(&(_, floor)) = before.checked_sub(1).and_then(|i| list.get(i))
            && *offset <= floor
        {
            findings.push(
                Rule::Order,
                format!(
                    "{tp:?}: producer {producer} record {n} (first sent at tick {first_sent}) at \
                     offset {offset}, not after its record acked earlier at offset {floor}"
                ),
            );
        }
    }
}

/// The high watermark never goes back on `flush.policy=ack` topics.
fn high_watermark(history: &History, findings: &mut Findings) {
    // Per partition: (tick known, high watermark at least) from answers.
    let mut floors: BTreeMap<&Tp, Vec<(Tick, i64)>> = BTreeMap::new();
    for f in history.fetches.iter().filter(|f| f.error_code == 0) {
        floors.entry(&f.tp).or_default().push((f.received, f.high_watermark));
    }
    for p in &history.produces {
        if let Outcome::Ok(at, base) = p.outcome
            && p.acks != 0
        {
            floors.entry(&p.tp).or_default().push((at, base + p.numbers.len() as i64));
        }
    }
    for (tp, list) in floors.iter_mut() {
        if history.flush(&tp.0) != Flush::Ack {
            continue;
        }
        list.sort();
        let mut max = i64::MIN;
        for entry in list.iter_mut() {
            max = max.max(entry.1);
            entry.1 = max;
        }
        for f in history.fetches.iter().filter(|f| f.tp == **tp) {
            let known = list.partition_point(|(at, _)| *at < f.sent);
            let Some(&(_, floor)) = known.checked_sub(1).and_then(|i| list.get(i)) else {
                continue;
            };
            let regressed = match f.error_code {
                0 => f.high_watermark < floor,
                OFFSET_OUT_OF_RANGE => f.fetch_offset <= floor,
                _ => false,
            };
            if regressed {
                findings.push(
                    Rule::Order,
                    format!(
                        "fetch by {} of {tp:?} from {} at tick {}: high watermark {} (error {}) \
                         after {floor} was known",
                        f.consumer, f.fetch_offset, f.sent, f.high_watermark, f.error_code
                    ),
                );
            }
        }
    }
}
