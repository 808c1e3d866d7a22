use std::time::Duration;

use proptest::prelude::*;

use super::*;

const LAG: Duration = Duration::from_secs(30);

fn at(secs: u64) -> Instant {
    Instant::from_nanos(secs * 1_000_000_000)
}

fn config(min_isr: usize, durable_acks: bool) -> LeaderConfig {
    LeaderConfig { min_insync_replicas: min_isr, replica_lag_time_max: LAG, durable_acks }
}

/// Leader 1 of `replicas` with `isr`, at partition epoch `epoch` and leader-epoch start
/// `start`, its log at `ends` (log end, durable end, high watermark).
fn leader(
    config: LeaderConfig,
    replicas: &[BrokerId],
    isr: &[BrokerId],
    (epoch, start): (i32, i64),
    (end, durable, hw): (i64, i64, i64),
) -> LeaderReplica {
    let assignment =
        Assignment { replicas, isr, partition_epoch: epoch, epoch_start: Offset(start) };
    let ends =
        LogEnds { log_end: Offset(end), durable_end: Offset(durable), high_watermark: Offset(hw) };
    LeaderReplica::new(config, 1, assignment, ends, at(0))
}

/// Leader 1 of replicas 1, 2, 3, all in sync, an empty log.
fn three(min_isr: usize) -> LeaderReplica {
    leader(config(min_isr, false), &[1, 2, 3], &[1, 2, 3], (0, 0), (0, 0, 0))
}

#[test]
fn high_watermark_is_the_least_end_in_the_isr() {
    let mut r = three(2);
    assert_eq!(r.on_append(Offset(10)), None, "followers have nothing yet");
    assert_eq!(r.on_fetch(2, (None, Offset(10)), at(1)), Ok(None), "follower 3 still has nothing");
    assert_eq!(r.on_fetch(3, (None, Offset(7)), at(1)), Ok(Some(Offset(7))));
    assert_eq!(r.on_fetch(3, (None, Offset(10)), at(2)), Ok(Some(Offset(10))));
    assert_eq!(r.high_watermark(), Offset(10));
    assert_eq!(r.on_fetch(4, (None, Offset(10)), at(2)), Err(ReplicationError::NotAReplica(4)));
}

#[test]
fn the_leaders_durable_end_bounds_the_high_watermark_under_the_ack_policy() {
    let mut r = leader(config(1, true), &[1, 2], &[1, 2], (0, 0), (0, 0, 0));
    r.on_append(Offset(5));
    assert_eq!(r.on_fetch(2, (None, Offset(5)), at(1)), Ok(None), "the leader has not synced");
    assert_eq!(r.on_durable(Offset(5)), Some(Offset(5)));
}

#[test]
fn a_new_leader_alone_in_its_isr_starts_at_its_durable_end() {
    // Re-elected over its own log, synced to 9 while its last high watermark said 6 (a sync
    // had completed, and acknowledged, just before the election).
    let r = leader(config(1, true), &[1], &[1], (1, 9), (9, 9, 6));
    assert_eq!(r.high_watermark(), Offset(9));
    // Under the interval policy the log end counts; with followers in the ISR nothing moves
    // until they fetch.
    let r = leader(config(1, false), &[1, 2], &[1], (1, 9), (9, 4, 6));
    assert_eq!(r.high_watermark(), Offset(9));
    let r = leader(config(1, true), &[1, 2], &[1, 2], (1, 9), (9, 9, 6));
    assert_eq!(r.high_watermark(), Offset(6));
    let r = leader(config(2, true), &[1, 2], &[1], (1, 9), (9, 9, 6));
    assert_eq!(r.high_watermark(), Offset(6), "below min.insync.replicas it stays");
}

#[test]
fn a_follower_out_of_the_isr_does_not_hold_the_high_watermark_back() {
    let mut r = leader(config(2, false), &[1, 2, 3], &[1, 2], (0, 0), (0, 0, 0));
    r.on_append(Offset(4));
    assert_eq!(r.on_fetch(2, (None, Offset(4)), at(1)), Ok(Some(Offset(4))));
    assert_eq!(r.follower(3).map(|f| f.fetched), Some(Offset(0)));
}

#[test]
fn below_min_insync_replicas_acks_all_is_refused_and_the_high_watermark_stays() {
    let mut r = leader(config(2, false), &[1, 2, 3], &[1], (0, 0), (0, 0, 0));
    assert_eq!(r.check_acks_all(), Err(ReplicationError::NotEnoughReplicas { isr: 1, min: 2 }));
    assert_eq!(r.on_append(Offset(3)), None, "an ISR of one below a minimum of two");
    assert_eq!(r.ack_status(Offset(3)), AckStatus::NotEnoughReplicasAfterAppend);
}

#[test]
fn acks_all_waits_for_every_isr_member_then_is_done() {
    let mut r = three(2);
    assert_eq!(r.check_acks_all(), Ok(()));
    r.on_append(Offset(2));
    assert_eq!(r.ack_status(Offset(2)), AckStatus::Waiting);
    r.on_fetch(2, (None, Offset(2)), at(1)).expect("a replica");
    assert_eq!(r.ack_status(Offset(2)), AckStatus::Waiting, "follower 3 is in sync too");
    r.on_fetch(3, (None, Offset(2)), at(1)).expect("a replica");
    assert_eq!(r.ack_status(Offset(2)), AckStatus::Done);
}

#[test]
fn a_lagging_follower_is_dropped_and_a_caught_up_one_rejoins() {
    let mut r = three(2);
    r.on_append(Offset(5));
    r.on_fetch(2, (None, Offset(5)), at(10)).expect("a replica");
    r.on_fetch(3, (None, Offset(1)), at(10)).expect("a replica");
    assert_eq!(r.propose(at(20)), None, "nobody has lagged for 30 s yet");
    let shrink = r.propose(at(31)).expect("follower 3 has lagged for 31 s");
    assert_eq!(shrink.isr, BTreeSet::from([1, 2]));
    assert_eq!(r.propose(at(32)), None, "one change in flight at a time");
    // Until the shrink commits, follower 3 still bounds the high watermark.
    assert_eq!(r.high_watermark(), Offset(1));
    assert_eq!(r.on_isr_committed(&[1, 2], 1), Some(Offset(5)));
    assert_eq!(r.ack_status(Offset(5)), AckStatus::Done);
    // Follower 3 catches up with the high watermark and is proposed back.
    r.on_fetch(3, (None, Offset(5)), at(40)).expect("a replica");
    let expand = r.propose(at(40)).expect("follower 3 caught up");
    assert_eq!(
        expand,
        IsrProposal { isr: BTreeSet::from([1, 2, 3]), partition_epoch: 1, joining: Vec::new() }
    );
    r.on_append(Offset(6));
    r.on_fetch(2, (None, Offset(6)), at(41)).expect("a replica");
    assert_eq!(r.high_watermark(), Offset(5), "a member being added counts at once");
    assert_eq!(r.on_isr_committed(&[1, 2, 3], 2), None);
    assert_eq!(r.on_fetch(3, (None, Offset(6)), at(42)), Ok(Some(Offset(6))));
}

#[test]
fn a_refused_follower_is_not_proposed_again_until_it_fetches() {
    // Follower 2 is out of the ISR and looks caught up (the log is empty), but it is dead:
    // the controller refuses to add it (fenced).
    let mut r = leader(config(1, false), &[1, 2], &[1], (1, 0), (0, 0, 0));
    let expand = r.propose(at(1)).expect("follower 2 looks caught up");
    assert_eq!(expand.isr, BTreeSet::from([1, 2]));
    r.on_append(Offset(3));
    assert_eq!(r.on_durable(Offset(3)), None, "the member being added bounds the watermark");
    assert_eq!(
        r.on_refused(at(1)),
        Some(Offset(3)),
        "the refusal frees the high watermark at once"
    );
    assert_eq!(r.ack_status(Offset(3)), AckStatus::Done);
    assert_eq!(r.propose(at(2)), None, "not proposed again before it fetches");
    r.on_fetch(2, (None, Offset(3)), at(3)).expect("a replica");
    assert_eq!(r.propose(at(3)).map(|p| p.isr), Some(BTreeSet::from([1, 2])));
}

#[test]
fn a_refused_follower_is_not_proposed_again_within_the_backoff() {
    let mut r = leader(config(1, false), &[1, 2], &[1], (1, 0), (0, 0, 0));
    assert!(r.propose(at(1)).is_some(), "follower 2 looks caught up");
    r.on_refused(at(1));
    // It fetches at once (alive, but its log cannot take writes): not asked for yet.
    r.on_fetch(2, (None, Offset(0)), at(1)).expect("a replica");
    assert_eq!(r.propose(at(1)), None, "asked again within the backoff");
    assert_eq!(r.propose(at(2)).map(|p| p.isr), Some(BTreeSet::from([1, 2])));
}

#[test]
fn a_follower_behind_the_start_of_the_leader_epoch_does_not_rejoin() {
    let mut r = leader(config(1, false), &[1, 2], &[1], (3, 10), (10, 10, 8));
    r.on_fetch(2, (None, Offset(9)), at(1)).expect("a replica");
    assert_eq!(r.propose(at(1)), None, "offset 9 is before the epoch's start at 10");
    r.on_fetch(2, (None, Offset(10)), at(2)).expect("a replica");
    assert!(r.propose(at(2)).is_some());
}

#[test]
fn a_follower_whose_log_starts_before_the_leaders_does_not_rejoin() {
    let mut r = leader(config(1, false), &[1, 2], &[1], (3, 0), (10, 10, 10));
    r.on_log_start(Offset(6));
    r.on_fetch(2, (None, Offset(10)), at(1)).expect("a replica");
    assert!(!r.on_follower_log_start(2, Offset(0)), "zero is what the leader assumed");
    assert_eq!(r.propose(at(1)), None, "records 0..6 deleted on the leader are still on it");
    assert!(r.on_follower_log_start(2, Offset(6)));
    assert_eq!(r.propose(at(2)).map(|p| p.isr), Some(BTreeSet::from([1, 2])));
}

#[test]
fn the_low_watermark_is_the_least_start_in_the_maximal_isr() {
    let mut r = three(1);
    r.on_log_start(Offset(8));
    assert_eq!(r.low_watermark(), Offset(0), "no follower has said where it starts");
    r.on_follower_log_start(2, Offset(8));
    r.on_follower_log_start(3, Offset(5));
    assert_eq!(r.low_watermark(), Offset(5));
    assert!(!r.on_follower_log_start(3, Offset(2)), "an older fetch's start is not taken");
    assert_eq!(r.low_watermark(), Offset(5));
    // Follower 3 lags and is being removed: it still counts until the removal commits.
    r.on_fetch(2, (None, Offset(0)), at(31)).expect("a replica");
    let shrink = r.propose(at(31)).expect("follower 3 lagged");
    assert_eq!(shrink.isr, BTreeSet::from([1, 2]));
    assert_eq!(r.low_watermark(), Offset(5));
    r.on_isr_committed(&[1, 2], shrink.partition_epoch + 1);
    assert_eq!(r.low_watermark(), Offset(8), "follower 3 can no longer be elected");
}

#[test]
fn a_stale_isr_answer_clears_the_proposal_but_changes_nothing() {
    let mut r = three(1);
    r.on_fetch(2, (None, Offset(0)), at(0)).expect("a replica");
    let _ = r.propose(at(31)).expect("both followers lagged");
    r.on_isr_committed(&[1], 5);
    assert_eq!(r.isr(), &BTreeSet::from([1]));
    r.on_isr_committed(&[1, 2, 3], 4);
    assert_eq!(r.isr(), &BTreeSet::from([1]), "epoch 4 is older than 5");
    assert!(r.pending().is_none());
}

#[test]
fn a_replica_added_within_the_epoch_is_followed_and_proposed_once_caught_up() {
    let mut r = leader(config(1, false), &[1, 2], &[1, 2], (0, 0), (0, 0, 0));
    r.on_append(Offset(6));
    r.on_fetch(2, (None, Offset(6)), at(1)).expect("a replica");
    assert_eq!(r.on_fetch(4, (None, Offset(0)), at(1)), Err(ReplicationError::NotAReplica(4)));
    // A move adds 4 (the ISR unchanged).
    r.on_isr_committed(&[1, 2], 1);
    r.on_replicas_committed(&[4, 1, 2], at(1));
    assert_eq!(r.on_fetch(4, (None, Offset(3)), at(2)), Ok(None), "4 is not in sync");
    assert_eq!(r.propose(at(2)), None, "4 is behind the high watermark");
    r.on_fetch(4, (None, Offset(6)), at(3)).expect("a replica now");
    let proposal = r.propose(at(3)).expect("4 caught up");
    assert_eq!(proposal.isr, BTreeSet::from([1, 2, 4]));
}

#[test]
fn a_replica_dropped_within_the_epoch_no_longer_counts_nor_holds_the_high_watermark() {
    let mut r = leader(config(1, false), &[1, 2, 3], &[1, 2, 3], (0, 0), (0, 0, 0));
    r.on_append(Offset(8));
    r.on_fetch(2, (None, Offset(8)), at(1)).expect("a replica");
    // 3 lags; the leader asks to drop it, and a move dropping 3 commits first.
    let _ = r.propose(at(40)).expect("3 lagged");
    let moved = r.on_isr_committed(&[1, 2], 1);
    let moved = r.on_replicas_committed(&[1, 2], at(40)).or(moved);
    assert_eq!(moved, Some(Offset(8)), "3 held it back; it is gone");
    assert!(r.pending().is_none());
    assert_eq!(r.on_fetch(3, (None, Offset(8)), at(41)), Err(ReplicationError::NotAReplica(3)));
    assert_eq!(r.follower(3), None);
}

#[derive(Clone, Debug)]
enum Op {
    Append(u8),
    Durable(u8),
    Fetch(BrokerId, u8),
    Tick(u8),
    Commit(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u8..5).prop_map(Op::Append),
        (0u8..5).prop_map(Op::Durable),
        (2i32..5, 0u8..40).prop_map(|(r, o)| Op::Fetch(r, o)),
        (0u8..20).prop_map(Op::Tick),
        any::<bool>().prop_map(Op::Commit),
    ]
}

proptest! {
    /// Whatever happens, the high watermark never goes back, never passes the leader's end
    /// (its durable end under the ack policy) or any maximal-ISR member's, and moves only
    /// while the ISR meets the minimum.
    #[test]
    fn high_watermark_is_safe(ops in proptest::collection::vec(op(), 1..200), min_isr in 1usize..4, durable in any::<bool>()) {
        let mut r = leader(config(min_isr, durable), &[1, 2, 3, 4], &[1, 2, 3], (0, 0), (0, 0, 0));
        let (mut end, mut synced, mut now) = (0i64, 0i64, 0u64);
        for op in ops {
            let before = r.high_watermark();
            let isr_before = r.isr().len();
            match op {
                Op::Append(n) => { end += i64::from(n); r.on_append(Offset(end)); }
                Op::Durable(n) => { synced = (synced + i64::from(n)).min(end); r.on_durable(Offset(synced)); }
                Op::Fetch(f, o) => { r.on_fetch(f, (None, Offset(i64::from(o).min(end))), at(now)).expect("a replica"); }
                Op::Tick(s) => { now += u64::from(s); let _ = r.propose(at(now)); }
                Op::Commit(apply) => {
                    if let Some(p) = r.pending().cloned() {
                        let isr: Vec<BrokerId> = if apply { p.isr.into_iter().collect() } else { r.isr().iter().copied().collect() };
                        r.on_isr_committed(&isr, p.partition_epoch + 1);
                    }
                }
            }
            let hw = r.high_watermark();
            prop_assert!(hw >= before, "the high watermark went back");
            prop_assert!(hw <= Offset(end));
            if durable { prop_assert!(hw <= Offset(synced)); }
            if hw > before { prop_assert!(isr_before.max(r.isr().len()) >= min_isr); }
            for m in r.maximal_isr() {
                if let Some(f) = r.follower(m) {
                    // Members that joined after the high watermark passed them are fine: they
                    // are only admitted once they have caught up with it.
                    prop_assert!(hw <= f.fetched || hw == before, "hw {hw} passed member {m} at {}", f.fetched);
                }
            }
        }
    }
}

#[test]
fn an_unrelated_image_change_keeps_the_change_in_flight() {
    let mut r = three(1);
    r.on_fetch(2, (None, Offset(0)), at(0)).expect("a replica");
    let asked = r.propose(at(31)).expect("both followers lagged");
    r.on_isr_committed(&[1, 2, 3], asked.partition_epoch);
    assert_eq!(r.pending(), Some(&asked), "nothing newer than its base was committed");
    assert_eq!(r.propose(at(32)), None, "one change in flight at a time");
}

#[test]
fn a_follower_in_a_new_run_starts_afresh_and_joins_under_that_run() {
    let mut r = three(2);
    r.on_append(Offset(5));
    r.on_fetch(2, (Some(BrokerEpoch(20)), Offset(5)), at(1)).expect("a replica");
    r.on_fetch(3, (Some(BrokerEpoch(30)), Offset(5)), at(1)).expect("a replica");
    r.on_follower_log_start(3, Offset(2));
    assert_eq!(r.high_watermark(), Offset(5));
    r.on_isr_committed(&[1, 2], 1);
    // Follower 3 restarted (run 31) on an empty disk: what run 30 held no longer counts.
    r.on_fetch(3, (Some(BrokerEpoch(31)), Offset(0)), at(2)).expect("a replica");
    let state = r.follower(3).expect("a replica");
    assert_eq!(
        (state.fetched, state.log_start, state.epoch),
        (Offset(0), Offset(0), Some(BrokerEpoch(31)))
    );
    // A fetch of run 30 still held in a long poll is not passed in (the handler checks the
    // run against the metadata); the state stays run 31's.
    assert_eq!(r.propose(at(2)), None, "it holds nothing yet");
    // It catches up, and is proposed with the run that did.
    r.on_fetch(3, (Some(BrokerEpoch(31)), Offset(5)), at(3)).expect("a replica");
    r.on_follower_log_start(3, Offset(0));
    let expand = r.propose(at(3)).expect("caught up in run 31");
    assert_eq!(expand.isr, BTreeSet::from([1, 2, 3]));
    assert_eq!(expand.joining, vec![(3, BrokerEpoch(31))]);
}
