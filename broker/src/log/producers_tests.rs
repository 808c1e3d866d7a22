//! Unit tests for [`super`]: the producer state's decision on each batch, what it knows after
//! passing damage, and its snapshots.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::log::batch::parse_header;
use crate::log::encode::{BatchOptions, RecordSpec, encode_batch};

/// A stamped header of `count` records from producer `id`, timestamped `ts`.
fn header(id: i64, epoch: i16, seq: i32, count: i32, base: i64, ts: i64) -> BatchHeader {
    let record = |delta| RecordSpec {
        offset_delta: delta,
        timestamp: ts,
        key: None,
        value: None,
        headers: Vec::new(),
    };
    let records: Vec<RecordSpec> = (0..count).map(record).collect();
    let options = BatchOptions {
        base_offset: base,
        producer_id: id,
        producer_epoch: epoch,
        base_sequence: seq,
        ..BatchOptions::default()
    };
    let bytes = encode_batch(&records, &options).unwrap();
    parse_header(&bytes).unwrap()
}

type Outcome = Result<Decision, ProducerError>;

/// A log end and producer state: produce as the leader would.
#[derive(Default)]
struct Leader {
    state: ProducerStateManager,
    log_end: i64,
}

impl Leader {
    fn produce(&mut self, id: i64, epoch: i16, seq: i32, count: i32) -> Outcome {
        let header = header(id, epoch, seq, count, self.log_end, self.log_end);
        let decision = self.state.check(&header)?;
        if decision == Decision::Append {
            let last = Offset(header.last_offset());
            self.state.record(&header, Offset(self.log_end), last);
            self.log_end = last.0 + 1;
        }
        Ok(decision)
    }
}

fn duplicate(base: i64, last: i64) -> Outcome {
    Ok(Decision::Duplicate {
        base_offset: Offset(base),
        last_offset: Offset(last),
        max_timestamp: TimestampMs(base),
    })
}

fn out_of_order(epoch: i16, expected: i32, got: i32) -> Outcome {
    Err(ProducerError::OutOfOrderSequence {
        producer_id: ProducerId(1),
        epoch: ProducerEpoch(epoch),
        expected: Sequence(expected),
        got: Sequence(got),
    })
}

/// A state rebuilt past a damaged batch cannot tell a retry of it from a new batch for a
/// producer the damaged batch may belong to: one it does not know, or one whose newest
/// known batch is older. A producer with a batch past the damage is known exactly.
#[test]
fn a_state_rebuilt_past_damage_is_uncertain_only_of_producers_the_damage_may_hold() {
    let mut leader = Leader::default();
    assert_eq!(leader.produce(1, 0, 0, 2), Ok(Decision::Append)); // offsets 0..=1
    assert_eq!(leader.produce(2, 0, 0, 2), Ok(Decision::Append)); // 2..=3
    // 4..=5 damaged (producer 2's sequences 2 and 3); the replay then records producer
    // 2's next batch at 6.
    leader.state.record(&header(2, 0, 4, 1, 6, 6), Offset(6), Offset(6));
    let next = |id: i64, seq: i32| header(id, 0, seq, 1, 7, 7);
    assert!(!leader.state.uncertain(&next(1, 2)), "no damage passed yet");
    leader.state.passed_damage(Offset(5));
    assert_eq!(leader.state.damage_passed(), Some(Offset(5)));
    assert!(leader.state.uncertain(&next(1, 2)), "producer 1's next may be the damaged batch");
    assert!(leader.state.uncertain(&next(3, 0)), "an unknown producer's first may be it");
    assert!(!leader.state.uncertain(&next(2, 5)), "producer 2 wrote past the damage");
    assert!(!leader.state.uncertain(&next(-1, -1)), "no producer id: no sequence to repeat");
    leader.state.passed_damage(Offset(3));
    assert_eq!(leader.state.damage_passed(), Some(Offset(5)), "the newest damage counts");
}

#[test]
fn retries_of_the_last_five_batches_are_duplicates_and_older_ones_out_of_order() {
    let mut leader = Leader::default();
    for batch in 0..6 {
        assert_eq!(leader.produce(1, 0, batch * 2, 2), Ok(Decision::Append));
    }
    for batch in 1..6 {
        let base = i64::from(batch) * 2;
        assert_eq!(leader.produce(1, 0, batch * 2, 2), duplicate(base, base + 1));
    }
    assert_eq!(leader.produce(1, 0, 0, 2), out_of_order(0, 12, 0), "forgotten sixth");
    assert_eq!(leader.produce(1, 0, 2, 1), out_of_order(0, 12, 2), "same start, shorter");
    assert_eq!(leader.produce(1, 0, 14, 1), out_of_order(0, 12, 14), "gap");
    assert_eq!(leader.produce(1, 0, 12, 1), Ok(Decision::Append));
    assert_eq!(leader.state.last_sequence(ProducerId(1)), Some(Sequence(12)));
    assert_eq!(leader.state.entry(ProducerId(1)).map(|e| e.batches().len()), Some(5));
}

#[test]
fn epochs_fence_older_ones_and_start_again_at_zero() {
    let mut leader = Leader::default();
    assert_eq!(leader.produce(1, 3, 0, 1), Ok(Decision::Append));
    let stale = ProducerError::InvalidProducerEpoch {
        producer_id: ProducerId(1),
        current: ProducerEpoch(3),
        got: ProducerEpoch(2),
    };
    assert_eq!(leader.produce(1, 2, 1, 1), Err(stale));
    assert_eq!(leader.produce(1, 4, 1, 1), out_of_order(4, 0, 1));
    assert_eq!(leader.produce(1, 4, 0, 1), Ok(Decision::Append));
    assert_eq!(leader.state.producer_epoch(ProducerId(1)), Some(ProducerEpoch(4)));
    let stale = ProducerError::InvalidProducerEpoch {
        producer_id: ProducerId(1),
        current: ProducerEpoch(4),
        got: ProducerEpoch(3),
    };
    assert_eq!(leader.produce(1, 3, 0, 1), Err(stale), "a retry from the old epoch");
    assert_eq!(stale.response_error(), ResponseError::InvalidProducerEpoch);
}

#[test]
fn unknown_producers_start_anywhere_and_sequences_wrap() {
    let mut leader = Leader::default();
    assert_eq!(leader.produce(1, 0, i32::MAX - 3, 2), Ok(Decision::Append));
    assert_eq!(leader.produce(1, 0, i32::MAX - 1, 4), Ok(Decision::Append), "straddles");
    assert_eq!(leader.state.last_sequence(ProducerId(1)), Some(Sequence(1)));
    assert_eq!(leader.produce(1, 0, 2, 1), Ok(Decision::Append));
    assert_eq!(leader.produce(1, 0, i32::MAX - 1, 4), duplicate(2, 5));
    assert_eq!(leader.produce(1, 0, i32::MAX - 3, 2), duplicate(0, 1));
    assert_eq!(leader.produce(1, 0, 4, 1), out_of_order(0, 3, 4));
    assert_eq!(leader.produce(2, 0, i32::MAX, 1), Ok(Decision::Append));
    assert_eq!(leader.produce(2, 0, 0, 1), Ok(Decision::Append), "wraps exactly");
}

#[test]
fn batches_without_a_producer_id_bypass_every_check() {
    let mut leader = Leader::default();
    for (epoch, seq) in [(-1, -1), (0, 0), (0, 0)] {
        assert_eq!(leader.produce(-1, epoch, seq, 1), Ok(Decision::Append));
    }
    assert!(leader.state.is_empty());
    let missing = leader.produce(1, 0, -1, 1);
    let got = ProducerError::InvalidSequence { producer_id: ProducerId(1), got: Sequence(-1) };
    assert_eq!(missing, Err(got));
    assert_eq!(got.response_error(), ResponseError::InvalidRecord);
}

#[test]
fn expiry_truncation_and_log_start_forget_producers() {
    let mut leader = Leader::default();
    for id in 1..=3 {
        leader.produce(id, 0, 0, 2).unwrap();
    }
    leader.produce(1, 0, 2, 2).unwrap();
    // Offsets (and timestamps): producer 1 at 0-1 and 6-7, 2 at 2-3, 3 at 4-5.
    let mut state = leader.state.clone();
    assert_eq!(state.expire(2 + 5, 5), 1, "producer 2, last written at 2");
    assert_eq!(state.iter().map(|(id, _)| id.0).collect::<Vec<_>>(), [1, 3]);
    let mut state = leader.state.clone();
    assert_eq!(state.truncate_from(Offset(5)), 1, "producer 3's batch straddles 5");
    assert_eq!(state.last_sequence(ProducerId(1)), Some(Sequence(1)));
    let mut state = leader.state.clone();
    assert_eq!(state.remove_below(Offset(4)), 1, "producer 2 ended at 3");
    assert_eq!(state.len(), 2);
    assert_eq!(state.last_sequence(ProducerId(1)), Some(Sequence(3)));
}

#[test]
fn snapshots_round_trip_and_replay_reproduces_the_state() {
    let mut leader = Leader::default();
    let mut log = Vec::new();
    for step in 0..40i32 {
        let (id, seq) = (i64::from(step % 3), step / 3);
        let header = header(id, 1, seq, 1, leader.log_end, step.into());
        log.push(header);
        leader.produce(id, 1, seq, 1).unwrap();
    }
    let snapshot = leader.state.encode_snapshot(Offset(leader.log_end));
    let decoded = ProducerStateManager::decode_snapshot(&snapshot);
    assert_eq!(decoded, Ok((Offset(leader.log_end), leader.state.clone())));

    let mut from_scratch = ProducerStateManager::new();
    let mut from_snapshot = None;
    for (at, header) in log.iter().enumerate() {
        if at == 17 {
            let bytes = from_scratch.encode_snapshot(Offset(header.base_offset()));
            from_snapshot = ProducerStateManager::decode_snapshot(&bytes).ok();
        }
        let offsets = (Offset(header.base_offset()), Offset(header.last_offset()));
        from_scratch.record(header, offsets.0, offsets.1);
        if let Some((_, state)) = from_snapshot.as_mut() {
            state.record(header, offsets.0, offsets.1);
        }
    }
    assert_eq!(from_scratch, leader.state);
    assert_eq!(from_snapshot.map(|(_, state)| state), Some(leader.state));
}

#[test]
fn damaged_snapshots_are_rejected() {
    let mut leader = Leader::default();
    for id in 0..3 {
        leader.produce(id, 0, 0, 3).unwrap();
    }
    leader.produce(2, 0, 3, 1).unwrap();
    let snapshot = leader.state.encode_snapshot(Offset(leader.log_end));
    for cut in 0..snapshot.len() {
        assert!(ProducerStateManager::decode_snapshot(&snapshot[..cut]).is_err());
    }
    let good = checkpoint::decode(PRODUCER_SNAPSHOT_KIND, &snapshot).unwrap().1.to_vec();
    let invalid = |patch: &dyn Fn(&mut Vec<u8>), why: &'static str| {
        let mut body = good.clone();
        patch(&mut body);
        let framed = checkpoint::encode(PRODUCER_SNAPSHOT_KIND, 1, &body);
        let decoded = ProducerStateManager::decode_snapshot(&framed);
        assert_eq!(decoded, Err(SnapshotError::Invalid(why)));
    };
    invalid(&|b| b[8..12].copy_from_slice(&u32::MAX.to_be_bytes()), "more producers than bytes");
    invalid(&|b| b[8..12].copy_from_slice(&2u32.to_be_bytes()), "bytes after the last producer");
    invalid(
        &|b| b[..8].copy_from_slice(&8i64.to_be_bytes()),
        "batch at or after the snapshot offset",
    );
    invalid(&|b| b[22] = 0, "batch count out of range");
    invalid(&|b| b[22] = 6, "batch count out of range");
    invalid(&|b| b.truncate(b.len() - 1), "truncated");
    invalid(&|b| b[149..157].copy_from_slice(&0i64.to_be_bytes()), "batch offsets not increasing");
    invalid(&|b| b[12..20].copy_from_slice(&(-1i64).to_be_bytes()), "negative producer id");
    invalid(&|b| b[55..63].copy_from_slice(&0i64.to_be_bytes()), "producer ids not increasing");
    invalid(&|b| b[23..27].copy_from_slice(&(-1i32).to_be_bytes()), "negative sequence");
    invalid(&|b| b[31..39].copy_from_slice(&9i64.to_be_bytes()), "batch offsets out of order");
    let other_version = checkpoint::encode(PRODUCER_SNAPSHOT_KIND, 3, &good);
    let decoded = ProducerStateManager::decode_snapshot(&other_version);
    assert_eq!(decoded, Err(SnapshotError::UnsupportedVersion(3)));
}

/// A state rebuilt past damage says so in its snapshot (version 2), and a restart from it
/// is as wary as the state was; one without damage keeps version 1's bytes.
#[test]
fn a_snapshot_keeps_the_damage_its_state_passed() {
    let mut leader = Leader::default();
    leader.produce(1, 0, 0, 3).unwrap();
    leader.produce(2, 0, 0, 1).unwrap();
    let end = Offset(leader.log_end);
    let clean = leader.state.encode_snapshot(end);
    assert_eq!(checkpoint::decode(PRODUCER_SNAPSHOT_KIND, &clean).unwrap().0, 1);
    leader.state.passed_damage(Offset(2));
    let wary = leader.state.encode_snapshot(end);
    let (version, body) = checkpoint::decode(PRODUCER_SNAPSHOT_KIND, &wary).unwrap();
    assert_eq!(version, PRODUCER_SNAPSHOT_VERSION_DAMAGE_PASSED);
    let (at, state) = ProducerStateManager::decode_snapshot(&wary).unwrap();
    assert_eq!((at, &state), (end, &leader.state));
    assert_eq!(state.damage_passed(), Some(Offset(2)));
    for cut in 0..wary.len() {
        assert!(ProducerStateManager::decode_snapshot(&wary[..cut]).is_err());
    }
    for damaged in [-1i64, end.0, end.0 + 1] {
        let mut patched = body.to_vec();
        let at = patched.len() - 8;
        patched[at..].copy_from_slice(&damaged.to_be_bytes());
        let framed = checkpoint::encode(PRODUCER_SNAPSHOT_KIND, version, &patched);
        assert_eq!(
            ProducerStateManager::decode_snapshot(&framed),
            Err(SnapshotError::Invalid("damaged batch outside the snapshot")),
            "damage at {damaged}"
        );
    }
}

#[test]
fn snapshot_file_names_and_choice() {
    assert_eq!(snapshot_file_name(Offset(42)), "00000000000000000042.snapshot");
    assert_eq!(parse_snapshot_file_name("00000000000000000042.snapshot"), Some(Offset(42)));
    for name in ["00000000000000000042.log", "42.snapshot", "00000000000000000042.snapshot.tmp"] {
        assert_eq!(parse_snapshot_file_name(name), None, "{name}");
    }
    let available = [Offset(5), Offset(50), Offset(20), Offset(10), Offset(20)];
    assert_eq!(snapshots_to_try(available, Offset(10), Offset(20)), [Offset(20), Offset(10)]);
}
