//! A coordinator whose `__consumer_offsets` partition is led by this broker again, but in a
//! later leader epoch than the one its groups were loaded in, must not serve them from memory:
//! in between, another leader may have taken their requests and written records this broker
//! never replayed. It stops serving them as soon as the partition's role carries the new
//! epoch, and serves them again only once the partition is loaded anew.
//!
//! A broker normally sees the epoch in between (it follows the other leader, and the takeover
//! is dropped), but a metadata pass that fails midway, after the partition took a role, is not
//! followed by the coordinator's pass over its takeovers; the next pass may then find the
//! partition led here again in a later epoch. The scenario stands in for that sequence on a
//! single node: the group commits offset 10; a commit of offset 20, as another leader would have
//! written it, is appended to the group's offsets partition past the coordinator; the partition
//! then takes the leader role in the next epoch, as a pass applying a later image would give
//! it. At once the group must not be served; once the coordinator's takeovers are brought up to
//! date (as the next pass does) the partition must be loaded again, and the group's committed
//! offset must be 20. Served from memory, it would still be 10.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::coordinator::{CommittedOffset, GroupId, Record};
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::model::{LeaderEpoch, Offset, TimestampMs, TopicPartition};
use weir::partition::Acks;
use weir_scenarios::group::{NextEpoch, SimpleGroup, offsets_partition};
use weir_scenarios::{ensure, for_each_seed};

/// The offset the group commits through the coordinator.
const SERVED: i64 = 10;
/// The offset of the commit written past the coordinator, as another leader would have.
const WRITTEN_ELSEWHERE: i64 = 20;
/// How long the append past the coordinator may take.
const APPEND_BOUND: Duration = Duration::from_secs(10);

fn scenario(seed: u64) -> Result<(), String> {
    let mut g = SimpleGroup::one_node(seed, SERVED)?;
    let index = g.index;
    ensure(g.committed()? == SERVED, || "the group's commit did not read back".to_owned())?;

    let (_, partition) = offsets_partition(&g.c, 0, index)?;

    // The commit another leader would have written: in the log, not in the coordinator's memory.
    let record = Record::Offset {
        group: GroupId(g.group.clone()),
        partition: TopicPartition::new("data", 0),
        value: Some(CommittedOffset {
            offset: Offset(WRITTEN_ELSEWHERE),
            leader_epoch: LeaderEpoch::NONE,
            metadata: String::new(),
            commit_timestamp: TimestampMs(0),
            expire_timestamp: None,
        }),
    };
    let spec = RecordSpec {
        offset_delta: 0,
        timestamp: 0,
        key: Some(record.encode_key().map_err(|e| format!("{e:?}"))?),
        value: record.encode_value().map_err(|e| format!("{e:?}"))?,
        headers: Vec::new(),
    };
    let batch = encode_batch(&[spec], &BatchOptions::default()).map_err(|e| format!("{e:?}"))?;
    let appended: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (slot, target) = (Arc::clone(&appended), Arc::clone(&partition));
    let _append = g.c.sim.spawn(g.c.nodes[0], "append-elsewhere", move |_env| async move {
        let outcome = match target.produce(batch, Acks::All).await {
            Ok((_, completion)) => match completion.await {
                Ok(()) => "acknowledged".to_owned(),
                Err(e) => format!("not acknowledged: {e}"),
            },
            Err(e) => format!("refused: {e}"),
        };
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    });
    let done = g.c.run_until(APPEND_BOUND, |_| appended.lock().is_ok_and(|a| a.is_some()));
    ensure(done, || "the append past the coordinator did not finish".to_owned())?;
    let outcome = appended.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
    ensure(outcome == "acknowledged", || format!("the append past the coordinator: {outcome}"))?;
    ensure(g.committed()? == SERVED, || {
        "the coordinator replayed a record it did not write before any new load".to_owned()
    })?;

    // The partition is led here in the next epoch, with no pass over the takeovers in between.
    drop(partition);
    let next = NextEpoch::of(&g.c, 0, index)?;
    next.take_lead()?;
    ensure(!next.broker.groups.is_loaded(index), || {
        format!("the groups loaded in epoch {:?} are served in epoch {:?}", next.before, next.after)
    })?;
    // The next pass over the takeovers loads the partition again.
    next.tell_coordinator()?;
    drop(next);
    g.await_loaded()?;
    let got = g.committed()?;
    ensure(got == WRITTEN_ELSEWHERE, || {
        format!("the group's committed offset is {got} after the new load, not {WRITTEN_ELSEWHERE}")
    })
}

#[test]
fn coordinator_led_again_in_a_new_epoch_loads_its_groups_again() {
    for_each_seed("coordinator_led_again_in_a_new_epoch_loads_its_groups_again", 0..6, scenario);
}
