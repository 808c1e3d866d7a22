//! A member's fetches and commits, each recorded in the history as it happens.

use std::collections::BTreeMap;

use super::{BACKOFF, FETCH_WAIT, Member, Next};
use crate::checker::history::{Fetch, Outcome, Tp};
use crate::client::admin::EARLIEST;
use crate::client::fetch::{FetchWant, FetchedPartition};
use crate::client::{ClientError, codes};
use crate::workload::broker::GROUP;

impl Member {
    /// One fetch of every assigned partition from its position.
    pub(super) async fn fetch(&mut self) {
        let wants: Vec<FetchWant> = self
            .assigned
            .iter()
            .map(|tp| FetchWant {
                topic: tp.0.clone(),
                partition: tp.1,
                offset: self.positions.get(tp).copied().unwrap_or(0),
            })
            .collect();
        let sent = self.shared.with_history(|h| h.tick());
        let parts = match self.client.fetch(&wants, FETCH_WAIT).await {
            Ok(parts) => parts,
            Err(e) => {
                tracing::debug!("{}: fetch: {e}", self.name);
                self.env.clock.sleep(BACKOFF).await;
                return;
            }
        };
        let received = self.shared.with_history(|h| h.tick());
        for part in parts {
            self.take(part, sent, received).await;
        }
    }

    /// Records one partition's answer and moves its position.
    async fn take(&mut self, part: FetchedPartition, sent: u64, received: u64) {
        let tp: Tp = (part.topic.clone(), part.partition);
        if let Some(why) = &part.corrupt {
            let at = part.fetch_offset;
            self.shared
                .corrupt_batch(format!("{}: corrupt batch in {tp:?} from {at}: {why}", self.name));
        }
        let fetch = Fetch {
            consumer: format!("{}/g{}", self.name, self.generation),
            tp: tp.clone(),
            fetch_offset: part.fetch_offset,
            error_code: part.error_code,
            high_watermark: part.high_watermark,
            records: part.records.iter().map(|r| (r.offset, r.value.clone())).collect(),
            sent,
            received,
        };
        self.shared.with_history(|h| h.fetches.push(fetch));
        match part.error_code {
            codes::NONE => {
                if let Some(last) = part.records.last() {
                    self.positions.insert(tp, last.offset + 1);
                }
            }
            codes::CORRUPT_MESSAGE => {
                // A damaged batch: seek past it one offset at a time, as an application would
                // (the checkers say whether it was one the workload damaged).
                self.positions.insert(tp, part.fetch_offset + 1);
            }
            codes::OFFSET_OUT_OF_RANGE => {
                // auto.offset.reset=earliest.
                if let Ok(offsets) = self.client.list_offsets(&tp.0, &[tp.1], EARLIEST).await
                    && let Some(Ok(start)) = offsets.get(&tp.1)
                {
                    self.positions.insert(tp, *start);
                }
            }
            _ => {}
        }
    }

    /// Commits every position that moved since its last commit; `Some` when the answer says
    /// the generation is over.
    pub(super) async fn commit(&mut self) -> Option<Next> {
        let offsets: BTreeMap<Tp, i64> = self
            .positions
            .iter()
            .filter(|(tp, position)| self.committed.get(*tp) != Some(*position))
            .map(|(tp, position)| (tp.clone(), *position))
            .collect();
        if offsets.is_empty() || self.member_id.is_empty() {
            return None;
        }
        let (member, generation) = (self.member_id.clone(), self.generation);
        let started: BTreeMap<Tp, usize> = self.shared.with_history(|h| {
            offsets
                .iter()
                .map(|(tp, &o)| {
                    (tp.clone(), h.start_commit(GROUP, &member, generation, tp.clone(), o))
                })
                .collect()
        });
        let result = self.client.offset_commit(GROUP, generation, &member, &offsets).await;
        let answers = match result {
            Ok(answers) => answers,
            Err(e) => {
                let sent = !matches!(&e, ClientError::Call(c) if !c.is_indeterminate());
                self.shared.with_history(|h| {
                    for &index in started.values() {
                        h.finish_commit(index, |at| {
                            if sent { Outcome::Lost(at) } else { Outcome::NotSent }
                        });
                    }
                });
                return None;
            }
        };
        let mut next = None;
        for (tp, index) in started {
            let code = answers.get(&tp).copied().unwrap_or(codes::UNKNOWN_TOPIC_OR_PARTITION);
            let offset = offsets.get(&tp).copied().unwrap_or(-1);
            self.shared.with_history(|h| {
                h.finish_commit(index, |at| {
                    if code == codes::NONE {
                        Outcome::Ok(at, offset)
                    } else {
                        Outcome::Failed(at, code)
                    }
                })
            });
            match code {
                codes::NONE => {
                    self.committed.insert(tp, offset);
                }
                codes::REBALANCE_IN_PROGRESS | codes::ILLEGAL_GENERATION => {
                    next = Some(Next::Rejoin)
                }
                codes::UNKNOWN_MEMBER_ID => next = Some(Next::Restart),
                _ => {}
            }
        }
        next
    }
}
