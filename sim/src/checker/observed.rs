//! (d) Never two different records at one offset.
//!
//! Rule: every time a client learns what is at an offset — a successful produce (its records at
//! `base_offset + i`), a fetch, the final read — it is an observation over the interval of ticks
//! from request to answer. Two observations of one offset must show the same value, unless the
//! topic has `flush.policy=interval` and the broker lost power between the earlier one's start
//! and the later one's end (then the first may legitimately have been lost and the offset
//! reused).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::history::{Flush, History, Outcome, Tick, Tp};
use super::{Findings, Rule, values};

/// One sighting of a value at an offset.
struct Sighting {
    value: Option<Bytes>,
    start: Tick,
    end: Tick,
    source: String,
}

/// Checks rule (d).
pub fn check(history: &History, findings: &mut Findings) {
    let mut seen: BTreeMap<(&Tp, i64), Vec<Sighting>> = BTreeMap::new();
    for p in &history.produces {
        let Outcome::Ok(at, base) = p.outcome else { continue };
        for (i, &n) in p.numbers.iter().enumerate() {
            seen.entry((&p.tp, base + i as i64)).or_default().push(Sighting {
                value: Some(values::encode(p.producer, n)),
                start: p.sent,
                end: at,
                source: format!("ack to producer {}", p.producer),
            });
        }
    }
    for f in history.fetches.iter().filter(|f| f.error_code == 0) {
        for (offset, value) in &f.records {
            seen.entry((&f.tp, *offset)).or_default().push(Sighting {
                value: value.clone(),
                start: f.sent,
                end: f.received,
                source: format!("fetch by {}", f.consumer),
            });
        }
    }
    let final_at = history.final_read_at.unwrap_or(Tick::MAX);
    for (tp, records) in &history.final_log {
        for (offset, value) in records {
            seen.entry((tp, *offset)).or_default().push(Sighting {
                value: value.clone(),
                start: final_at,
                end: final_at,
                source: "final read".to_owned(),
            });
        }
    }
    for ((tp, offset), sightings) in &seen {
        compare(history, tp, *offset, sightings, findings);
    }
}

fn compare(
    history: &History,
    tp: &Tp,
    offset: i64,
    sightings: &[Sighting],
    findings: &mut Findings,
) {
    let interval = history.flush(&tp.0) == Flush::Interval;
    let Some(first) = sightings.first() else { return };
    // Fast path: everyone saw the same thing.
    if sightings.iter().all(|s| s.value == first.value) {
        return;
    }
    for (i, a) in sightings.iter().enumerate() {
        for b in sightings.iter().skip(i + 1) {
            if a.value == b.value {
                continue;
            }
            let (from, to) = (a.start.min(b.start), a.end.max(b.end));
            if interval && history.power_failed_between(from, to) {
                continue;
            }
            let show = |v: &Option<Bytes>| v.as_deref().map(values::decode);
            findings.push(
                Rule::OneValuePerOffset,
                format!(
                    "{tp:?} offset {offset}: {} (ticks {}..{}) saw {:?}, {} (ticks {}..{}) saw {:?}",
                    a.source,
                    a.start,
                    a.end,
                    show(&a.value),
                    b.source,
                    b.start,
                    b.end,
                    show(&b.value)
                ),
            );
            return;
        }
    }
}
