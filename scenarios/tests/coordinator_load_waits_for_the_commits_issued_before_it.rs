//! A load of an offsets partition sees every batch of group records the coordinator issued
//! before it. A batch issued just before its group was given up is still appended and its
//! commit acknowledged, but, the group given up, its records are no longer replayed into
//! memory: the load that takes the group over again must find them in the log. The load
//! therefore waits until every batch queued before it has been appended. Read at once, it could
//! run ahead of that append and serve the group without an acknowledged commit.
//!
//! A single node's group commits offset 10. A commit of offset 20 is then issued at the
//! coordinator (its batch queued for appending, not yet appended), and at that very instant the
//! group's offsets partition is led in the next epoch and the coordinator told (as a metadata
//! pass that found the partition led here again in a later epoch does): the group is given up
//! and its partition loaded again. The commit must be acknowledged, and once the partition is
//! loaded the group's committed offset must be 20.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use weir::coordinator::{CommitRequest, Generation, GroupId, MemberId, OffsetCommit, Response};
use weir::model::{LeaderEpoch, Offset, TopicPartition};
use weir_scenarios::group::{NextEpoch, SimpleGroup};
use weir_scenarios::{ensure, for_each_seed};

/// The offset the group commits first.
const FIRST: i64 = 10;
/// The offset committed as the partition is taken over again.
const SECOND: i64 = 20;
/// How long the second commit may take to be answered.
const COMMIT_BOUND: Duration = Duration::from_secs(10);

fn scenario(seed: u64) -> Result<(), String> {
    let mut g = SimpleGroup::one_node(seed, FIRST)?;

    let next = NextEpoch::of(&g.c, 0, g.index)?;
    let request = CommitRequest {
        version: 8,
        group_id: GroupId(g.group.clone()),
        generation: Generation::NONE,
        member_id: MemberId::from(""),
        instance_id: None,
        retention_ms: None,
        offsets: vec![OffsetCommit {
            partition: TopicPartition::new("data", 0),
            offset: Offset(SECOND),
            leader_epoch: LeaderEpoch::NONE,
            metadata: None,
            topic_id: None,
        }],
    };
    let answer: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (slot, id) = (Arc::clone(&answer), GroupId(g.group.clone()));
    let _commit = g.c.sim.spawn(g.c.nodes[0], "commit-at-takeover", move |_env| async move {
        let groups = [id];
        let mut call = std::pin::pin!(
            next.broker.groups.call(&groups, |co, id, now| co.commit(id, request, now))
        );
        // Polled once: the commit's batch is queued for appending.
        let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        let outcome = if first.is_ready() {
            format!("answered before its batch was appended: {first:?}")
        } else {
            match next.take_lead().and_then(|()| next.tell_coordinator()) {
                Err(e) => format!("the takeover failed: {e}"),
                Ok(()) => match call.await {
                    Ok(Response::Commit(r)) if r.partitions.iter().all(|p| p.error.is_none()) => {
                        "acknowledged".to_owned()
                    }
                    other => format!("answered {other:?}"),
                },
            }
        };
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    });
    let done = g.c.run_until(COMMIT_BOUND, |_| answer.lock().is_ok_and(|a| a.is_some()));
    ensure(done, || format!("the commit was not answered within {COMMIT_BOUND:?}"))?;
    let outcome = answer.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
    ensure(outcome == "acknowledged", || format!("the commit at the takeover: {outcome}"))?;
    g.await_loaded()?;
    let got = g.committed()?;
    ensure(got == SECOND, || {
        format!(
            "the group's committed offset is {got} after the load, not the acknowledged {SECOND}"
        )
    })
}

#[test]
fn coordinator_load_waits_for_the_commits_issued_before_it() {
    for_each_seed("coordinator_load_waits_for_the_commits_issued_before_it", 0..16, scenario);
}
