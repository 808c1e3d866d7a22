//! A consumer group's committed offsets of a topic go when the topic is deleted, as Kafka's
//! coordinator removes them: a topic made again under the same name starts with no committed
//! offset, so the group resumes as its `auto.offset.reset` says. Before, the group kept its
//! positions in the deleted log, and resumed from them in the new one, skipping its first
//! records or reading past its end. The group's offsets of other topics stay. (A deletion seen
//! only as the name under a new id, the topic made again, is `groups::TopicsSeen`'s unit test.)

use std::time::Duration;

use weir::groups::partition_for;
use weir_scenarios::group::{commit_simple, committed_simple, create_offsets_partition};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// How long a call, or the broker's learning of a change, may take.
const CALL_BOUND: Duration = Duration::from_secs(30);

/// Deletes `topic` through node 0.
fn delete(c: &mut Cluster, topic: &'static str) -> Result<(), String> {
    let addr = c.addr(0);
    c.client_call(CALL_BOUND, move |env| async move {
        Client::new(env, addr, "admin").delete_topic(topic).await
    })
    .ok_or("the deletion was not answered")?
    .map_err(|e| format!("the deletion failed: {e}"))
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
    c.create_topic(0, "other", 1).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let addr = c.addr(0);
    let partition = partition_for(&group, OFFSETS_TOPIC_PARTITIONS);
    create_offsets_partition(&mut c, &[addr], &group, partition)?;
    let data = ("data".to_owned(), 0);
    let other = ("other".to_owned(), 0);
    commit_simple(&mut c, addr, &group, &data, 5)?;
    commit_simple(&mut c, addr, &group, &other, 6)?;
    delete(&mut c, "data")?;
    let gone = c.run_until(CALL_BOUND, |c| {
        let image = c.broker(0).and_then(|b| b.membership().map(|m| m.image()));
        image.is_some_and(|i| i.topic("data").is_none())
    });
    ensure(gone, || "the broker did not learn of the deletion".to_owned())?;
    c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
    let committed = committed_simple(&mut c, addr, &group, &data)?;
    ensure(committed == -1, || format!("data-0 of the new topic reads committed {committed}"))?;
    let kept = committed_simple(&mut c, addr, &group, &other)?;
    ensure(kept == 6, || format!("other-0 reads committed {kept}, not 6"))?;
    // The new topic's commits are its own.
    commit_simple(&mut c, addr, &group, &data, 2)?;
    let again = committed_simple(&mut c, addr, &group, &data)?;
    ensure(again == 2, || format!("a commit to the new topic reads back {again}"))?;
    c.watch_verdict()
}

#[test]
fn group_offsets_of_a_deleted_topic_are_removed() {
    for_each_seed("group_offsets_of_a_deleted_topic_are_removed", 0..4, scenario);
}
