//! The follower's side of finding where its log diverges from a new leader's (KIP-101, with
//! KIP-279's extra rounds), sans-IO.
//!
//! Before fetching from a leader of a new epoch, the follower asks the leader
//! (OffsetForLeaderEpoch) where the follower's newest epoch ends in the leader's log. The leader
//! answers with the largest epoch it has at or below the one asked and where that epoch ends.
//! Both logs agree up to the smaller of the two ends of that epoch; past it they may hold
//! different records at the same offsets, and the follower cuts its log there — never at its
//! high watermark, which may be stale. When the follower does not have the epoch the leader
//! answered with, it cannot tell where the leader's epoch began, so it cuts as far as it can
//! be sure of and asks again about its newest remaining epoch, which is older than the last one
//! asked: the rounds end.
//!
//! The leader records its epoch in its own cache when it takes over (before writing anything),
//! so a current leader always knows an epoch at or above any follower's; an undefined answer
//! means the answering broker is behind (a deposed leader): the follower waits and asks again.

use crate::log::epochs::EpochCache;
use crate::model::{LeaderEpoch, Offset};

/// What the follower does with the leader's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divergence {
    /// Cut the log at this offset (nothing to cut if it is the log end) and fetch from there.
    TruncateTo(Offset),
    /// Cut the log at this offset, then ask the leader again about the newest epoch left.
    AskAgain(Offset),
    /// The leader knows no epoch at or below the one asked: ask again later (it is not the
    /// current leader).
    Unknown,
}

/// The epoch a follower first asks about: its newest (none for an empty log).
pub fn first_question(local: &EpochCache) -> Option<LeaderEpoch> {
    local.latest().map(|(epoch, _)| epoch)
}

/// Resolves the leader's answer `(epoch, end_offset)` against the follower's `local` epochs
/// and log end.
pub fn resolve(local: &EpochCache, local_end: Offset, answer: (LeaderEpoch, Offset)) -> Divergence {
    let (leader_epoch, leader_end) = answer;
    if leader_epoch.0 < 0 || leader_end.0 < 0 {
        return Divergence::Unknown;
    }
    let (floor, floor_end) = local.end_offset_for(leader_epoch, local_end);
    if floor.0 < 0 {
        // The follower has no epoch at or below the answer: nothing is known to agree.
        return Divergence::TruncateTo(local_end.min(leader_end).min(first_start(local)));
    }
    let cut = leader_end.min(floor_end).min(local_end);
    if floor == leader_epoch { Divergence::TruncateTo(cut) } else { Divergence::AskAgain(cut) }
}

fn first_start(local: &EpochCache) -> Offset {
    local.entries().first().map_or(Offset(0), |(_, start)| *start)
}

#[cfg(test)]
#[path = "follower_tests.rs"]
mod tests;
