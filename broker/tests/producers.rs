//! Properties of the idempotent-producer state in `weir::log::producers`, against a reference
//! model that keeps each producer's whole history and restates Kafka's rules directly:
//!
//! - on any interleaving of producers sending new batches, retries of old ones, gaps, epoch
//!   bumps, stale epochs, sequences near `i32::MAX` and non-idempotent batches, with expiry and
//!   snapshot round trips in between, every decision is the model's;
//! - replaying the log after the newest snapshot (or from the start, if nothing expired)
//!   rebuilds exactly the live state.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;

use weir::log::batch::{BatchHeader, parse_header};
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::producers::{Decision, PRODUCER_BATCHES_KEPT, ProducerError, ProducerStateManager};
use weir::model::{Offset, ProducerEpoch, ProducerId, Sequence, TimestampMs};

/// Sequences live in `0..=i32::MAX` and wrap.
const SEQUENCE_SPACE: i64 = i32::MAX as i64 + 1;

#[derive(Clone, Copy, Debug)]
enum EpochMove {
    Same,
    Bump,
    Stale,
}

#[derive(Clone, Copy, Debug)]
enum SeqMove {
    Next,
    /// Resend the k-th newest batch (0 = newest), same epoch and range.
    Retry(usize),
    Gap(i64),
    Zero,
    NearMax(i32),
    Any(i32),
}

#[derive(Clone, Debug)]
enum Op {
    Send { producer: i64, epoch: EpochMove, seq: SeqMove, count: i32 },
    NotIdempotent { kafkajs: bool },
    Expire { idle_ms: i64 },
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    let epoch = prop_oneof![
        6 => Just(EpochMove::Same),
        1 => Just(EpochMove::Bump),
        1 => Just(EpochMove::Stale),
    ];
    let seq = prop_oneof![
        8 => Just(SeqMove::Next),
        4 => (0..PRODUCER_BATCHES_KEPT + 2).prop_map(SeqMove::Retry),
        1 => (1i64..3).prop_map(SeqMove::Gap),
        1 => Just(SeqMove::Zero),
        1 => (0..3).prop_map(SeqMove::NearMax),
        1 => (0..=i32::MAX).prop_map(SeqMove::Any),
    ];
    let send = (0i64..3, epoch, seq, 1i32..4).prop_map(|(producer, epoch, seq, count)| Op::Send {
        producer,
        epoch,
        seq,
        count,
    });
    prop_oneof![
        20 => send,
        1 => any::<bool>().prop_map(|kafkajs| Op::NotIdempotent { kafkajs }),
        1 => (1i64..200).prop_map(|idle_ms| Op::Expire { idle_ms }),
        2 => Just(Op::Snapshot),
    ]
}

/// One batch the model remembers.
#[derive(Clone, Copy, Debug)]
struct Sent {
    first: i32,
    count: i32,
    base: i64,
    last: i64,
    timestamp: i64,
}

/// The reference: each producer's epoch and every batch it wrote in that epoch.
#[derive(Clone, Debug, Default)]
struct Model {
    producers: BTreeMap<i64, (i16, Vec<Sent>)>,
}

fn last_sequence(first: i32, count: i32) -> i32 {
    ((i64::from(first) + i64::from(count) - 1) % SEQUENCE_SPACE) as i32
}

fn next_sequence(last: i32) -> i32 {
    ((i64::from(last) + 1) % SEQUENCE_SPACE) as i32
}

impl Model {
    /// Kafka's rules, restated over the full history.
    fn decide(
        &self,
        id: i64,
        epoch: i16,
        first: i32,
        count: i32,
    ) -> Result<Decision, ProducerError> {
        let Some((current, history)) = self.producers.get(&id) else {
            return Ok(Decision::Append);
        };
        let kept = &history[history.len().saturating_sub(PRODUCER_BATCHES_KEPT)..];
        let last = last_sequence(first, count);
        let same_range =
            |sent: &&Sent| sent.first == first && last_sequence(sent.first, sent.count) == last;
        if epoch == *current
            && let Some(sent) = kept.iter().find(same_range)
        {
            return Ok(Decision::Duplicate {
                base_offset: Offset(sent.base),
                last_offset: Offset(sent.last),
                max_timestamp: TimestampMs(sent.timestamp),
            });
        }
        if epoch < *current {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id: ProducerId(id),
                current: ProducerEpoch(*current),
                got: ProducerEpoch(epoch),
            });
        }
        let expected = match history.last() {
            Some(newest) if epoch == *current => {
                next_sequence(last_sequence(newest.first, newest.count))
            }
            _ => 0,
        };
        if first == expected {
            return Ok(Decision::Append);
        }
        Err(ProducerError::OutOfOrderSequence {
            producer_id: ProducerId(id),
            epoch: ProducerEpoch(epoch),
            expected: Sequence(expected),
            got: Sequence(first),
        })
    }

    fn append(&mut self, id: i64, epoch: i16, sent: Sent) {
        let (current, history) = self.producers.entry(id).or_insert((epoch, Vec::new()));
        if *current != epoch {
            *current = epoch;
            history.clear();
        }
        history.push(sent);
    }

    fn expire(&mut self, now: i64, idle_ms: i64) {
        self.producers.retain(|_, (_, history)| {
            history.last().is_some_and(|newest| now - newest.timestamp < idle_ms)
        });
    }

    /// The epoch and sequences of a send, chosen from the model's view of the producer.
    fn choose(&self, id: i64, epoch: EpochMove, seq: SeqMove, count: i32) -> (i16, i32, i32) {
        let Some((current, history)) = self.producers.get(&id) else {
            return (0, choose_seq(seq, 0), count);
        };
        if let SeqMove::Retry(k) = seq
            && let Some(sent) = history.iter().rev().nth(k)
        {
            return (*current, sent.first, sent.count);
        }
        let next = history
            .last()
            .map_or(0, |newest| next_sequence(last_sequence(newest.first, newest.count)));
        let epoch = match epoch {
            EpochMove::Same => *current,
            EpochMove::Bump => current + 1,
            EpochMove::Stale => (current - 1).max(0),
        };
        (epoch, choose_seq(seq, next), count)
    }
}

fn choose_seq(seq: SeqMove, next: i32) -> i32 {
    match seq {
        SeqMove::Next | SeqMove::Retry(_) => next,
        SeqMove::Gap(gap) => ((i64::from(next) + gap) % SEQUENCE_SPACE) as i32,
        SeqMove::Zero => 0,
        SeqMove::NearMax(below) => i32::MAX - below,
        SeqMove::Any(seq) => seq,
    }
}

fn header(id: i64, epoch: i16, seq: i32, count: i32, base: i64, timestamp: i64) -> BatchHeader {
    let records: Vec<RecordSpec> = (0..count)
        .map(|offset_delta| RecordSpec {
            offset_delta,
            timestamp,
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: Vec::new(),
        })
        .collect();
    let options = BatchOptions {
        base_offset: base,
        producer_id: id,
        producer_epoch: epoch,
        base_sequence: seq,
        ..BatchOptions::default()
    };
    parse_header(&encode_batch(&records, &options).unwrap()).unwrap()
}

/// The system under test, its log, and the newest point replay may start from.
struct Harness {
    state: ProducerStateManager,
    model: Model,
    log: Vec<BatchHeader>,
    now: i64,
    /// A snapshot and how many log batches it covers; `None` once expiry has made the start of
    /// the log useless for replay and no snapshot has been taken since.
    replay_from: Option<(bytes::Bytes, usize)>,
}

impl Harness {
    fn new() -> Harness {
        let empty = ProducerStateManager::new().encode_snapshot(Offset(0));
        Harness {
            state: ProducerStateManager::new(),
            model: Model::default(),
            log: Vec::new(),
            now: 0,
            replay_from: Some((empty, 0)),
        }
    }

    fn log_end(&self) -> i64 {
        self.log.last().map_or(0, |header| header.last_offset() + 1)
    }

    fn write(&mut self, header: BatchHeader) {
        let (base, last) = (Offset(header.base_offset()), Offset(header.last_offset()));
        self.state.record(&header, base, last);
        self.log.push(header);
    }

    fn send(
        &mut self,
        id: i64,
        epoch: EpochMove,
        seq: SeqMove,
        count: i32,
    ) -> Result<(), TestCaseError> {
        self.now += 1 + id;
        let (epoch, first, count) = self.model.choose(id, epoch, seq, count);
        let header = header(id, epoch, first, count, self.log_end(), self.now);
        let expected = self.model.decide(id, epoch, first, count);
        prop_assert_eq!(self.state.check(&header), expected);
        if expected == Ok(Decision::Append) {
            let sent = Sent {
                first,
                count,
                base: header.base_offset(),
                last: header.last_offset(),
                timestamp: self.now,
            };
            self.model.append(id, epoch, sent);
            self.write(header);
        }
        let model = self.model.producers.get(&id);
        let last = model.and_then(|(_, h)| h.last()).map(|s| last_sequence(s.first, s.count));
        prop_assert_eq!(
            self.state.producer_epoch(ProducerId(id)),
            model.map(|(e, _)| ProducerEpoch(*e))
        );
        prop_assert_eq!(self.state.last_sequence(ProducerId(id)), last.map(Sequence));
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Send { producer, epoch, seq, count } => {
                return self.send(producer, epoch, seq, count);
            }
            Op::NotIdempotent { kafkajs } => {
                let (epoch, seq) = if kafkajs { (0, 0) } else { (-1, -1) };
                let header = header(-1, epoch, seq, 1, self.log_end(), self.now);
                prop_assert_eq!(self.state.check(&header), Ok(Decision::Append));
                self.write(header);
            }
            Op::Expire { idle_ms } => {
                let before = self.state.len();
                let removed = self.state.expire(self.now, idle_ms);
                self.model.expire(self.now, idle_ms);
                prop_assert_eq!(before - removed, self.model.producers.len());
                self.replay_from = None;
            }
            Op::Snapshot => {
                let bytes = self.state.encode_snapshot(Offset(self.log_end()));
                let decoded = ProducerStateManager::decode_snapshot(&bytes);
                prop_assert_eq!(&decoded, &Ok((Offset(self.log_end()), self.state.clone())));
                self.state = decoded.unwrap().1;
                self.replay_from = Some((bytes, self.log.len()));
            }
        }
        Ok(())
    }

    /// Loads the replay snapshot and records every later batch: it must rebuild the live state.
    fn check_replay(&self) -> Result<(), TestCaseError> {
        let Some((bytes, covered)) = &self.replay_from else { return Ok(()) };
        let (offset, mut rebuilt) = ProducerStateManager::decode_snapshot(bytes).unwrap();
        let replayed = &self.log[*covered..];
        prop_assert!(replayed.first().is_none_or(|header| header.base_offset() == offset.0));
        for header in replayed {
            rebuilt.record(header, Offset(header.base_offset()), Offset(header.last_offset()));
        }
        prop_assert_eq!(&rebuilt, &self.state);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decisions_match_the_model_and_replay_rebuilds_the_state(
        ops in prop::collection::vec(op(), 1..150),
    ) {
        let mut harness = Harness::new();
        for op in ops {
            harness.apply(op)?;
        }
        harness.check_replay()?;
    }

    #[test]
    fn damaged_snapshots_are_refused_or_canonical(
        ops in prop::collection::vec(op(), 1..40),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut harness = Harness::new();
        for op in ops {
            harness.apply(op)?;
        }
        let snapshot = harness.state.encode_snapshot(Offset(harness.log_end()));
        let (_, body) = weir::log::checkpoint::decode(3, &snapshot).unwrap();
        let mut body = body.to_vec();
        for (at, byte) in damage {
            let at = at.index(body.len());
            body[at] = byte;
        }
        // A valid CRC over the damage: only the body's own checks stand between it and the state.
        let framed = weir::log::checkpoint::encode(3, 1, &body);
        if let Ok((offset, state)) = ProducerStateManager::decode_snapshot(&framed) {
            prop_assert_eq!(state.encode_snapshot(offset), framed);
        }
    }

    #[test]
    fn arbitrary_snapshot_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..300)) {
        let framed = weir::log::checkpoint::encode(3, 1, &body);
        let _ = ProducerStateManager::decode_snapshot(&framed);
        let _ = ProducerStateManager::decode_snapshot(&body);
    }
}
