//! An offset commit whose records make a batch larger than the offsets topic takes
//! (`max.message.bytes`) is refused with INVALID_COMMIT_OFFSET_SIZE, as Kafka's coordinator
//! refuses it, and changes nothing; smaller commits of the same group go
//! on. Before, the refusal was taken for a failure of the coordinator's log and answered
//! NOT_COORDINATOR, which sends a client to find the coordinator again and back to the same
//! broker, to be refused again, for ever.

use std::collections::BTreeMap;
use std::time::Duration;

use weir::groups::partition_for;
use weir::topics::OFFSETS_TOPIC;
use weir_scenarios::group::{commit_simple, committed_simple, create_offsets_partition};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// The offsets topic's `max.message.bytes` here: a commit of a few partitions fits, one of
/// [`WIDE`] does not.
const OFFSETS_BATCH_MAX: &str = "2000";
/// Partitions in the commit that is too large.
const WIDE: i32 = 100;
/// Kafka's INVALID_COMMIT_OFFSET_SIZE.
const INVALID_COMMIT_OFFSET_SIZE: i16 = 28;
/// How long a call may take.
const CALL_BOUND: Duration = Duration::from_secs(30);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "data", WIDE).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let addr = c.addr(0);
    let partition = partition_for(&group, OFFSETS_TOPIC_PARTITIONS);
    create_offsets_partition(&mut c, &[addr], &group, partition)?;
    commit_simple(&mut c, addr, &group, &("data".to_owned(), 0), 7)?;
    let limited = c
        .client_call(CALL_BOUND, move |env| async move {
            let mut client = Client::new(env, addr, "admin");
            let setting = ("max.message.bytes", OFFSETS_BATCH_MAX);
            client.set_topic_config(OFFSETS_TOPIC, setting, CALL_BOUND).await
        })
        .ok_or("the config change was not answered")?;
    limited.map_err(|e| format!("the config change failed: {e}"))?;
    let applied = c.run_until(CALL_BOUND, |c| {
        let log = c.broker(0).and_then(|b| b.catalog.partition(OFFSETS_TOPIC, partition));
        log.is_some_and(|p| p.log.config().max_message_bytes.to_string() == OFFSETS_BATCH_MAX)
    });
    ensure(applied, || "the offsets partition did not take the new limit".to_owned())?;
    let end = c.log_end(0, OFFSETS_TOPIC, partition);
    let name = group.clone();
    let codes = c
        .client_call(CALL_BOUND, move |env| async move {
            let mut client = Client::new(env, addr, "committer");
            let wide: BTreeMap<_, _> = (0..WIDE).map(|p| (("data".to_owned(), p), 9)).collect();
            client.offset_commit(&name, -1, "", &wide).await
        })
        .ok_or("the wide commit was not answered")?
        .map_err(|e| format!("the wide commit failed: {e}"))?;
    ensure(codes.len() == WIDE as usize, || format!("{} partitions answered", codes.len()))?;
    ensure(codes.values().all(|&code| code == INVALID_COMMIT_OFFSET_SIZE), || {
        format!("a commit too large for the offsets topic answered {:?}", codes.values().next())
    })?;
    ensure(c.log_end(0, OFFSETS_TOPIC, partition) == end, || {
        "the refused commit changed the offsets partition".to_owned()
    })?;
    let kept = committed_simple(&mut c, addr, &group, &("data".to_owned(), 0))?;
    ensure(kept == 7, || format!("after the refused commit, data-0 reads {kept}, not 7"))?;
    commit_simple(&mut c, addr, &group, &("data".to_owned(), 0), 8)?;
    let moved = committed_simple(&mut c, addr, &group, &("data".to_owned(), 0))?;
    ensure(moved == 8, || format!("a later commit reads back {moved}, not 8"))?;
    c.watch_verdict()
}

#[test]
fn coordinator_refuses_a_commit_too_large_for_its_log() {
    for_each_seed("coordinator_refuses_a_commit_too_large_for_its_log", 0..4, scenario);
}
