//! The checkers catch what they claim to catch, and only that: small hand-made histories, one
//! rule each, with and without the violation (testing the tester).

use bytes::Bytes;
use weir_sim::checker::history::{
    Assignment, DamagedGroupRecord, Fetch, Flush, GroupRecordLost, OffsetRead, Outcome, Tp,
};
use weir_sim::checker::{History, check, values};
use weir_sim::client::codes;

fn tp(p: i32) -> Tp {
    ("t".to_owned(), p)
}

fn history(flush: Flush) -> History {
    let mut h = History::default();
    h.topics.insert("t".to_owned(), (1, flush));
    h.producers.insert(1, true);
    h.producers.insert(2, false);
    h
}

/// Producer `producer` sends records `numbers`, acknowledged at `offset` (or not, on `None`).
fn produce(h: &mut History, producer: u32, numbers: &[u64], offset: Option<i64>) {
    let index = h.start_produce(producer, tp(0), -1, numbers.to_vec());
    h.finish_produce(index, |at| match offset {
        Some(o) => Outcome::Ok(at, o),
        None => Outcome::Lost(at),
    });
}

fn final_log(h: &mut History, records: &[(u32, u64)]) {
    h.final_read_at = Some(h.tick());
    let log = records
        .iter()
        .enumerate()
        .map(|(i, &(p, n))| (i as i64, Some(values::encode(p, n))))
        .collect();
    h.final_log.insert(tp(0), log);
}

fn lines(h: &History) -> Vec<String> {
    check(h).into_lines()
}

fn breaks(h: &History, rule: &str) -> bool {
    lines(h).iter().any(|l| l.starts_with(&format!("[{rule}]")))
}

#[test]
fn acknowledged_writes_must_survive_unless_interval_and_power_lost() {
    let mut h = history(Flush::Ack);
    produce(&mut h, 2, &[0, 1], Some(0));
    final_log(&mut h, &[(2, 0), (2, 1)]);
    assert!(lines(&h).is_empty(), "{:?}", lines(&h));

    let mut h = history(Flush::Ack);
    produce(&mut h, 2, &[0, 1], Some(0));
    h.power_failure();
    final_log(&mut h, &[(2, 0)]);
    assert!(breaks(&h, "Durability"));

    let mut h = history(Flush::Interval);
    produce(&mut h, 2, &[0, 1], Some(0));
    h.power_failure();
    final_log(&mut h, &[(2, 0)]);
    assert!(!breaks(&h, "Durability"), "{:?}", lines(&h));
}

#[test]
fn idempotent_duplicates_and_phantoms_are_caught_but_plain_retries_are_not() {
    let mut h = history(Flush::Ack);
    produce(&mut h, 1, &[0], None);
    produce(&mut h, 1, &[0], Some(1));
    final_log(&mut h, &[(1, 0), (1, 0)]);
    assert!(breaks(&h, "Idempotence"));

    let mut h = history(Flush::Ack);
    produce(&mut h, 2, &[0], None);
    produce(&mut h, 2, &[0], Some(1));
    final_log(&mut h, &[(2, 0), (2, 0)]);
    assert!(lines(&h).is_empty(), "{:?}", lines(&h));

    let mut h = history(Flush::Ack);
    final_log(&mut h, &[(2, 7)]);
    assert!(breaks(&h, "Phantom"));
}

#[test]
fn a_record_sent_after_an_ack_may_not_land_before_it() {
    let mut h = history(Flush::Ack);
    produce(&mut h, 2, &[0], None);
    produce(&mut h, 2, &[1], Some(1));
    produce(&mut h, 2, &[2], None);
    final_log(&mut h, &[(2, 2), (2, 1)]);
    assert!(breaks(&h, "Order"));
}

#[test]
fn fetches_must_be_dense_and_agree_with_each_other() {
    let fetch = |h: &mut History, from: i64, records: Vec<(i64, Option<Bytes>)>| {
        let sent = h.tick();
        let received = h.tick();
        let f = Fetch {
            consumer: "c".to_owned(),
            tp: tp(0),
            fetch_offset: from,
            error_code: 0,
            high_watermark: 10,
            records,
            sent,
            received,
        };
        h.fetches.push(f);
    };
    let mut h = history(Flush::Ack);
    produce(&mut h, 2, &[0, 1, 2], Some(0));
    fetch(&mut h, 0, vec![(0, Some(values::encode(2, 0))), (2, Some(values::encode(2, 2)))]);
    assert!(breaks(&h, "Order"));

    let mut h = history(Flush::Ack);
    produce(&mut h, 2, &[0], None);
    produce(&mut h, 2, &[1], None);
    fetch(&mut h, 0, vec![(0, Some(values::encode(2, 0)))]);
    fetch(&mut h, 0, vec![(0, Some(values::encode(2, 1)))]);
    assert!(breaks(&h, "OneValuePerOffset"));

    let mut h = history(Flush::Interval);
    produce(&mut h, 2, &[0], None);
    produce(&mut h, 2, &[1], None);
    fetch(&mut h, 0, vec![(0, Some(values::encode(2, 0)))]);
    h.power_failure();
    fetch(&mut h, 0, vec![(0, Some(values::encode(2, 1)))]);
    assert!(!breaks(&h, "OneValuePerOffset"), "{:?}", lines(&h));
}

fn commit(h: &mut History, offset: i64, acked: bool) {
    let index = h.start_commit("g", "m", 1, tp(0), offset);
    h.finish_commit(index, |at| if acked { Outcome::Ok(at, offset) } else { Outcome::Lost(at) });
}

fn read_committed(h: &mut History, offset: i64) {
    let sent = h.tick();
    let received = h.tick();
    h.offset_reads.push(OffsetRead { group: "g".to_owned(), tp: tp(0), offset, sent, received });
}

#[test]
fn committed_offsets_move_only_by_commits() {
    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit(&mut h, 9, true);
    read_committed(&mut h, 9);
    commit(&mut h, 3, true);
    read_committed(&mut h, 3);
    assert!(lines(&h).is_empty(), "{:?}", lines(&h));

    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit(&mut h, 9, true);
    read_committed(&mut h, 5);
    assert!(breaks(&h, "Commits"));

    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    read_committed(&mut h, -1);
    assert!(breaks(&h, "Commits"));

    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit(&mut h, 9, false);
    read_committed(&mut h, 9);
    read_committed(&mut h, 5);
    assert!(breaks(&h, "Commits"));
}

fn commit_refused(h: &mut History, offset: i64, code: i16) {
    let index = h.start_commit("g", "m", 1, tp(0), offset);
    h.finish_commit(index, |at| Outcome::Failed(at, code));
}

#[test]
fn a_commit_refused_after_its_append_may_take_effect_later_but_not_one_refused_before() {
    // NOT_COORDINATOR can answer a commit whose record was appended and then committed by the
    // next leader of the offsets partition: the new coordinator shows it after the refusal.
    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit_refused(&mut h, 9, codes::NOT_COORDINATOR);
    read_committed(&mut h, 5);
    read_committed(&mut h, 9);
    assert!(lines(&h).is_empty(), "{:?}", lines(&h));

    // A generation error comes before anything is written.
    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit_refused(&mut h, 9, codes::ILLEGAL_GENERATION);
    read_committed(&mut h, 5);
    read_committed(&mut h, 9);
    assert!(breaks(&h, "Commits"));
}

/// The workload damages a batch of `__consumer_offsets` holding `lost` now.
fn damage_group_record(h: &mut History, lost: GroupRecordLost) {
    let at = h.tick();
    h.damaged_group_records.push(DamagedGroupRecord { at, lost });
}

fn lost_commit(group: &str, offset: i64) -> GroupRecordLost {
    GroupRecordLost::Offset { group: group.to_owned(), tp: tp(0), offset: Some(offset) }
}

#[test]
fn a_damaged_commit_record_may_take_the_group_back_to_what_was_committed_before_it() {
    // The record of 9 is damaged: a coordinator that loads the groups again serves 5, or
    // nothing if compaction had removed 5 in favour of 9.
    for served in [5, -1] {
        let mut h = history(Flush::Ack);
        commit(&mut h, 5, true);
        commit(&mut h, 9, true);
        read_committed(&mut h, 9);
        damage_group_record(&mut h, lost_commit("g", 9));
        read_committed(&mut h, served);
        assert!(lines(&h).is_empty(), "{served}: {:?}", lines(&h));
    }

    // Not before the damage.
    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit(&mut h, 9, true);
    read_committed(&mut h, 5);
    damage_group_record(&mut h, lost_commit("g", 9));
    assert!(breaks(&h, "Commits"));

    // Not to a value first committed after the damage and since overwritten.
    let mut h = history(Flush::Ack);
    commit(&mut h, 9, true);
    damage_group_record(&mut h, lost_commit("g", 9));
    commit(&mut h, 7, true);
    commit(&mut h, 12, true);
    read_committed(&mut h, 7);
    assert!(breaks(&h, "Commits"));

    // Not past a later commit whose record is intact: the load serves it.
    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit(&mut h, 9, true);
    commit(&mut h, 12, true);
    damage_group_record(&mut h, lost_commit("g", 9));
    read_committed(&mut h, 5);
    assert!(breaks(&h, "Commits"));

    // Not for another group's damaged record.
    let mut h = history(Flush::Ack);
    commit(&mut h, 5, true);
    commit(&mut h, 9, true);
    damage_group_record(&mut h, lost_commit("other", 9));
    read_committed(&mut h, 5);
    assert!(breaks(&h, "Commits"));
}

fn assign(h: &mut History, generation: i32, member: &str, partition: i32) {
    let sent = h.tick();
    let at = h.tick();
    h.assignments.push(Assignment {
        group: "g".to_owned(),
        generation,
        member: member.to_owned(),
        partitions: vec![tp(partition)],
        sent,
        at,
    });
}

#[test]
fn two_owners_of_a_partition_in_one_generation_are_caught() {
    let mut h = history(Flush::Ack);
    assign(&mut h, 1, "a", 0);
    assign(&mut h, 2, "b", 0);
    assert!(lines(&h).is_empty(), "{:?}", lines(&h));
    assign(&mut h, 2, "c", 0);
    assert!(breaks(&h, "Ownership"));

    let mut h = history(Flush::Ack);
    assign(&mut h, 2, "a", 0);
    assign(&mut h, 2, "a", 1);
    assert!(breaks(&h, "Ownership"));
}

#[test]
fn a_damaged_group_record_lets_its_generation_be_numbered_again_and_no_other() {
    let lost = |generation| GroupRecordLost::Metadata { group: "g".to_owned(), generation };
    // Generation 3's record is lost: the group may be back at 2 and deal 3 again.
    let mut h = history(Flush::Ack);
    assign(&mut h, 2, "a", 0);
    assign(&mut h, 3, "a", 0);
    assign(&mut h, 3, "b", 1);
    damage_group_record(&mut h, lost(3));
    assign(&mut h, 3, "b", 0);
    assign(&mut h, 3, "a", 1);
    // An earlier generation may be dealt again too.
    assign(&mut h, 2, "b", 0);
    assert!(lines(&h).is_empty(), "{:?}", lines(&h));

    // Not a generation past the lost record's.
    let mut h = history(Flush::Ack);
    assign(&mut h, 4, "a", 0);
    damage_group_record(&mut h, lost(3));
    assign(&mut h, 4, "b", 0);
    assert!(breaks(&h, "Ownership"));

    // Not two answers both asked for before the damage.
    let mut h = history(Flush::Ack);
    assign(&mut h, 3, "a", 0);
    assign(&mut h, 3, "b", 0);
    damage_group_record(&mut h, lost(3));
    assert!(breaks(&h, "Ownership"));
}
