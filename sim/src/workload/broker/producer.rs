//! A producer task: batches of self-describing records to random partitions, one batch in
//! flight, retried while its outcome is unknown.
//!
//! An idempotent producer gets an id from InitProducerId, numbers each partition's records with
//! sequences and retries a batch with the same sequence, as Kafka's producer does; when it gives
//! up on a batch (too many attempts, or a fatal answer such as OUT_OF_ORDER_SEQUENCE_NUMBER) it
//! bumps its epoch itself, as Kafka's Java producer does (KIP-360; a fresh id from
//! InitProducerId once the epoch is spent), restarts every sequence at 0 and never sends those
//! records again — so each record is only ever sent under one (epoch, sequence), and a batch
//! given up on is fenced wherever the new epoch has written, which is what lets the checker
//! demand "at most once, in order". A plain producer retries the same records as new appends (Kafka's
//! non-idempotent retries), so its records may appear more than once.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use weir::io::Env;

use super::setup::ProducerSpec;
use super::{LiveGuard, Shared};
use crate::checker::history::{Outcome, Tp};
use crate::checker::values;
use crate::client::admin::ProducerIdentity;
use crate::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use crate::client::{Client, ClientError, codes};

/// Records per batch, at most.
pub const BATCH_RECORDS_MAX: u64 = 5;
/// Longest pause between batches.
pub const THINK_MS_MAX: u64 = 100;
/// Attempts at one batch before giving up on it.
pub const ATTEMPTS_MAX: u32 = 12;
/// Pause after a failed attempt (doubled per attempt up to [`BACKOFF_MS_MAX`]).
pub const BACKOFF_MS_MIN: u64 = 50;
/// Longest pause between attempts.
pub const BACKOFF_MS_MAX: u64 = 1_000;

/// Answers after which an idempotent producer must not retry with the same sequence.
fn fatal_for_idempotence(code: i16) -> bool {
    matches!(
        code,
        codes::OUT_OF_ORDER_SEQUENCE_NUMBER
            | codes::DUPLICATE_SEQUENCE_NUMBER
            | codes::INVALID_PRODUCER_EPOCH
            | codes::UNKNOWN_PRODUCER_ID
    )
}

struct Producer {
    env: Env,
    client: Client,
    shared: Shared,
    spec: ProducerSpec,
    identity: Option<ProducerIdentity>,
    sequences: BTreeMap<Tp, i32>,
    next_number: u64,
}

/// What one attempt came to.
enum Attempt {
    /// Acknowledged, or sent with acks=0: nothing more to do.
    Done,
    /// Outcome unknown or refused for a reason that may pass: try again.
    Retry,
    /// Refused for good.
    GiveUp,
}

/// Runs a producer until told to stop.
pub(crate) async fn run(env: Env, shared: Shared, spec: ProducerSpec) {
    let _live = LiveGuard::new(&shared.producers_live);
    let client = Client::new(env.clone(), shared.broker, &format!("producer{}", spec.number));
    let mut p = Producer {
        env,
        client,
        shared,
        spec,
        identity: None,
        sequences: BTreeMap::new(),
        next_number: 0,
    };
    while !p.shared.stop_producing.load(Ordering::Relaxed) {
        if p.spec.idempotent && p.identity.is_none() {
            p.new_identity().await;
            continue;
        }
        let tp = p.pick_partition();
        let count = 1 + p.env.entropy.below(BATCH_RECORDS_MAX);
        let numbers: Vec<u64> = (p.next_number..p.next_number + count).collect();
        p.next_number += count;
        p.send(tp, numbers).await;
        p.env.clock.sleep(Duration::from_millis(p.env.entropy.below(THINK_MS_MAX))).await;
    }
}

impl Producer {
    fn pick_partition(&self) -> Tp {
        let all = self.shared.partitions();
        let at = self.env.entropy.below(all.len().max(1) as u64) as usize;
        all.get(at).cloned().unwrap_or_else(|| ("events".to_owned(), 0))
    }

    /// The current producer id with its epoch bumped, or a fresh id (the first, or once the
    /// epoch is spent); sequences restart at 0.
    async fn new_identity(&mut self) {
        self.sequences.clear();
        if let Some(current) = self.identity.filter(|c| c.epoch < i16::MAX) {
            self.identity = Some(ProducerIdentity { epoch: current.epoch + 1, ..current });
            return;
        }
        loop {
            match self.client.init_producer_id(None).await {
                Ok(identity) => {
                    self.identity = Some(identity);
                    return;
                }
                Err(e) => tracing::debug!("producer {}: InitProducerId: {e}", self.spec.number),
            }
            if self.shared.stop_producing.load(Ordering::Relaxed) {
                self.identity = None;
                return;
            }
            self.env.clock.sleep(Duration::from_millis(BACKOFF_MS_MAX)).await;
        }
    }

    /// Sends one batch until it is acknowledged or given up on.
    async fn send(&mut self, tp: Tp, numbers: Vec<u64>) {
        let records: Vec<_> = numbers
            .iter()
            .map(|&n| {
                (Some(format!("p{}", self.spec.number).into()), values::encode(self.spec.number, n))
            })
            .collect();
        let acks = if self.spec.idempotent {
            Acks::All
        } else if self.env.entropy.below(1_000) < self.spec.acks_none_per_mille {
            Acks::None
        } else {
            self.spec.acks
        };
        let mut backoff = BACKOFF_MS_MIN;
        for _ in 0..ATTEMPTS_MAX {
            let batch = PartitionBatch {
                partition: tp.1,
                base_sequence: self.sequences.get(&tp).copied().unwrap_or(0),
                records: records.clone(),
            };
            match self.attempt(&tp, acks, &numbers, batch).await {
                Attempt::Done => return,
                Attempt::GiveUp => break,
                Attempt::Retry => {}
            }
            self.env.clock.sleep(Duration::from_millis(backoff)).await;
            backoff = (backoff * 2).min(BACKOFF_MS_MAX);
        }
        if self.spec.idempotent {
            self.new_identity().await;
        }
    }

    /// One produce request, recorded in the history.
    async fn attempt(
        &mut self,
        tp: &Tp,
        acks: Acks,
        numbers: &[u64],
        batch: PartitionBatch,
    ) -> Attempt {
        let (producer, count) = (self.spec.number, numbers.len() as i32);
        let index = self
            .shared
            .with_history(|h| h.start_produce(producer, tp.clone(), acks.wire(), numbers.to_vec()));
        let result =
            self.client.produce(&tp.0, acks, self.identity, std::slice::from_ref(&batch)).await;
        let answers = match result {
            Ok(ProduceOutcome::Answered(answers)) => answers,
            Ok(ProduceOutcome::Unacknowledged) => {
                // acks=0: sent, never answered, never retried.
                self.shared.with_history(|h| h.finish_produce(index, Outcome::Lost));
                return Attempt::Done;
            }
            Err(ClientError::Call(e)) if !e.is_indeterminate() => {
                self.shared.with_history(|h| h.finish_produce(index, |_| Outcome::NotSent));
                return Attempt::Retry;
            }
            Err(_) => {
                self.shared.with_history(|h| h.finish_produce(index, Outcome::Lost));
                return Attempt::Retry;
            }
        };
        let answer = answers.into_iter().find(|a| a.partition == tp.1);
        match answer {
            Some(a) if a.error_code == codes::NONE && a.base_offset >= 0 => {
                self.shared
                    .with_history(|h| h.finish_produce(index, |at| Outcome::Ok(at, a.base_offset)));
                if self.spec.idempotent {
                    *self.sequences.entry(tp.clone()).or_insert(0) += count;
                }
                Attempt::Done
            }
            Some(a) => {
                let code = if a.error_code == codes::NONE { -1 } else { a.error_code };
                self.shared.with_history(|h| {
                    h.finish_produce(index, |at| Outcome::Failed(at, code));
                    if a.error_code == codes::NONE {
                        h.anomalies
                            .push(format!("produce to {tp:?} acked at offset {}", a.base_offset));
                    }
                });
                if self.spec.idempotent && fatal_for_idempotence(code) {
                    Attempt::GiveUp
                } else {
                    Attempt::Retry
                }
            }
            None => {
                self.shared.with_history(|h| {
                    h.finish_produce(index, Outcome::Lost);
                    h.anomalies.push(format!("produce answer without partition {tp:?}"));
                });
                Attempt::Retry
            }
        }
    }
}
