use proptest::prelude::*;

use super::*;

fn cache(entries: &[(i32, i64)]) -> EpochCache {
    let mut c = EpochCache::default();
    for &(e, s) in entries {
        assert!(c.assign(LeaderEpoch(e), Offset(s)), "entries must increase");
    }
    c
}

/// Asks `leader` as a follower would, once.
fn ask(leader: &EpochCache, leader_end: i64, epoch: LeaderEpoch) -> (LeaderEpoch, Offset) {
    leader.end_offset_for(epoch, Offset(leader_end))
}

#[test]
fn same_epoch_cuts_to_the_shorter_end() {
    // KIP-101 case 1: the follower has more of epoch 1 than the new leader kept.
    let follower = cache(&[(1, 0)]);
    let leader = cache(&[(1, 0), (2, 5)]);
    let answer = ask(&leader, 8, LeaderEpoch(1));
    assert_eq!(answer, (LeaderEpoch(1), Offset(5)));
    assert_eq!(resolve(&follower, Offset(7), answer), Divergence::TruncateTo(Offset(5)));
    // A follower with less than the leader's epoch-1 data keeps all of it.
    assert_eq!(resolve(&follower, Offset(3), answer), Divergence::TruncateTo(Offset(3)));
}

#[test]
fn an_epoch_the_leader_never_had_is_cut_even_below_the_high_watermark() {
    // KIP-101 case 2: the follower led epoch 2 briefly; the new leader (epoch 3) never saw it.
    let follower = cache(&[(1, 0), (2, 4)]);
    let leader = cache(&[(1, 0), (3, 4)]);
    let answer = ask(&leader, 6, LeaderEpoch(2));
    assert_eq!(answer, (LeaderEpoch(1), Offset(4)));
    // The follower has epoch 1, so one round settles it: offsets from 4 on go.
    assert_eq!(resolve(&follower, Offset(6), answer), Divergence::TruncateTo(Offset(4)));
}

#[test]
fn a_missing_epoch_takes_another_round() {
    // KIP-279: the leader answers epoch 2, which the follower never had; the follower's epoch 1
    // ran to 6, the leader's to 3.
    let follower = cache(&[(1, 0), (3, 6)]);
    let leader = cache(&[(1, 0), (2, 3), (4, 8)]);
    let answer = ask(&leader, 9, LeaderEpoch(3));
    assert_eq!(answer, (LeaderEpoch(2), Offset(8)));
    assert_eq!(resolve(&follower, Offset(9), answer), Divergence::AskAgain(Offset(6)));
    let mut truncated = follower.clone();
    truncated.truncate_from(Offset(6));
    let again = first_question(&truncated).expect("epoch 1 is left");
    let answer = ask(&leader, 9, again);
    assert_eq!(answer, (LeaderEpoch(1), Offset(3)));
    assert_eq!(resolve(&truncated, Offset(6), answer), Divergence::TruncateTo(Offset(3)));
}

#[test]
fn an_undefined_answer_changes_nothing() {
    let follower = cache(&[(1, 0), (5, 3)]);
    let stale = cache(&[(1, 0)]);
    let answer = ask(&stale, 3, LeaderEpoch(5));
    assert_eq!(answer, (LeaderEpoch(-1), Offset(-1)));
    assert_eq!(resolve(&follower, Offset(9), answer), Divergence::Unknown);
}

#[test]
fn an_empty_follower_starts_from_nothing() {
    let leader = cache(&[(1, 0)]);
    assert_eq!(first_question(&EpochCache::default()), None);
    let answer = ask(&leader, 4, LeaderEpoch(0));
    assert_eq!(
        resolve(&EpochCache::default(), Offset(0), answer),
        Divergence::TruncateTo(Offset(0))
    );
}

/// One replica in the model: records are (epoch, unique id), and the epoch cache as the log
/// keeps it.
#[derive(Clone, Debug, Default)]
struct Replica {
    log: Vec<(i32, u32)>,
    epochs: EpochCache,
}

impl Replica {
    fn end(&self) -> Offset {
        Offset(self.log.len() as i64)
    }

    fn truncate(&mut self, to: Offset) {
        self.log.truncate(to.0 as usize);
        self.epochs.truncate_from(to);
    }

    fn push(&mut self, record: (i32, u32)) {
        let at = self.end();
        self.epochs.assign(LeaderEpoch(record.0), at);
        self.log.push(record);
    }
}

/// The true divergence point: the longest common prefix of the two logs' records.
fn common_prefix(a: &[(i32, u32)], b: &[(i32, u32)]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Runs the follower's rounds against `leader`: the final cut, after checking that no round
/// cuts a record both logs share.
fn reconcile(follower: &mut Replica, leader: &Replica) -> Result<Offset, TestCaseError> {
    let truth = common_prefix(&follower.log, &leader.log) as i64;
    for _ in 0..64 {
        let Some(epoch) = first_question(&follower.epochs) else {
            follower.truncate(Offset(0));
            return Ok(Offset(0));
        };
        let answer = leader.epochs.end_offset_for(epoch, leader.end());
        match resolve(&follower.epochs, follower.end(), answer) {
            Divergence::TruncateTo(cut) => {
                prop_assert!(cut.0 >= truth, "cut {cut} below the common prefix {truth}");
                follower.truncate(cut);
                return Ok(cut);
            }
            Divergence::AskAgain(cut) => {
                prop_assert!(cut.0 >= truth, "round cut {cut} below the common prefix {truth}");
                follower.truncate(cut);
                let next = first_question(&follower.epochs);
                prop_assert!(next.is_none_or(|e| e < epoch), "a round made no progress");
            }
            Divergence::Unknown => {
                return Err(TestCaseError::fail("the current leader answered undefined"));
            }
        }
    }
    Err(TestCaseError::fail("the rounds did not end"))
}

#[derive(Clone, Debug)]
enum Step {
    /// Replica `r` becomes leader in the next epoch (clean or not: divergence is the point).
    Elect(usize),
    /// The leader appends `n` records.
    Append(u8),
    /// Follower `r` reconciles with the leader and copies up to `n` records.
    Replicate(usize, u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (0usize..3).prop_map(Step::Elect),
        3 => (1u8..6).prop_map(Step::Append),
        3 => ((0usize..3), (0u8..8)).prop_map(|(r, n)| Step::Replicate(r, n)),
    ]
}

proptest! {
    /// Over random histories of elections (unclean ones included), appends and partial
    /// replication, a follower reconciling with the current leader always ends at exactly the
    /// longest common prefix of the two logs — it never keeps a divergent record and never
    /// drops a shared one.
    #[test]
    fn reconciling_finds_the_exact_divergence_point(steps in proptest::collection::vec(step(), 1..120)) {
        let mut replicas = [Replica::default(), Replica::default(), Replica::default()];
        let (mut leader, mut epoch, mut next_id) = (0usize, 0i32, 0u32);
        replicas[0].epochs.assign(LeaderEpoch(0), Offset(0));
        for s in steps {
            match s {
                Step::Elect(r) => {
                    epoch += 1;
                    leader = r;
                    let at = replicas[r].end();
                    // The new leader records its epoch before writing anything.
                    replicas[r].epochs.assign(LeaderEpoch(epoch), at);
                }
                Step::Append(n) => {
                    for _ in 0..n {
                        next_id += 1;
                        replicas[leader].push((epoch, next_id));
                    }
                }
                Step::Replicate(r, n) if r != leader => {
                    let source = replicas[leader].clone();
                    let cut = reconcile(&mut replicas[r], &source)?;
                    prop_assert_eq!(cut.0 as usize, common_prefix(&replicas[r].log, &source.log));
                    let from = replicas[r].log.len();
                    for &record in source.log.iter().skip(from).take(usize::from(n)) {
                        replicas[r].push(record);
                    }
                }
                Step::Replicate(..) => {}
            }
        }
    }
}
