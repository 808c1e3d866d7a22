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
use weir::groups::partition_for;
use weir::model::{LeaderEpoch, Offset, TopicPartition};
use weir_scenarios::group::{NextEpoch, commit_simple, committed_simple, create_offsets_partition};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// The offset the group commits first.
const FIRST: i64 = 10;
/// The offset committed as the partition is taken over again.
const SECOND: i64 = 20;
/// How long the second commit may take to be answered.
const COMMIT_BOUND: Duration = Duration::from_secs(10);
/// How long the new load may take.
const LOAD_BOUND: Duration = Duration::from_secs(30);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let index = partition_for(&group, OFFSETS_TOPIC_PARTITIONS);
    let addr = c.addr(0);
    create_offsets_partition(&mut c, &[addr], &group, index)?;
    let data = ("data".to_owned(), 0);
    commit_simple(&mut c, addr, &group, &data, FIRST)?;

    let next = NextEpoch::of(&c, 0, index)?;
    let request = CommitRequest {
        version: 8,
        group_id: GroupId(group.clone()),
        generation: Generation::NONE,
        member_id: MemberId::from(""),
        instance_id: None,
        offsets: vec![OffsetCommit {
            partition: TopicPartition::new("data", 0),
            offset: Offset(SECOND),
            leader_epoch: LeaderEpoch::NONE,
            metadata: None,
        }],
    };
    let answer: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (slot, id) = (Arc::clone(&answer), GroupId(group.clone()));
    let _commit = c.sim.spawn(c.nodes[0], "commit-at-takeover", move |_env| async move {
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
    let done = c.run_until(COMMIT_BOUND, |_| answer.lock().is_ok_and(|a| a.is_some()));
    ensure(done, || format!("the commit was not answered within {COMMIT_BOUND:?}"))?;
    let outcome = answer.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
    ensure(outcome == "acknowledged", || format!("the commit at the takeover: {outcome}"))?;
    let loaded =
        c.run_until(LOAD_BOUND, |c| c.broker(0).is_some_and(|b| b.groups.is_loaded(index)));
    ensure(loaded, || format!("the partition was not loaded again within {LOAD_BOUND:?}"))?;
    let got = committed_simple(&mut c, addr, &group, &data)?;
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
