//! What a client's requests set going still happens when the client does not wait for the
//! answers — and what it would not have set going in Kafka does not — one node each:
//! - A produce with acks=all and a timeout of 0 under `flush.policy=ack` is answered
//!   REQUEST_TIMED_OUT before its batch is synced (acks=1 is not bounded by the timeout,
//!   as in Kafka); the batch becomes readable all the same, with no other produce to sync
//!   it. Before, only the answer's wait synced it and moved the high watermark, so it stayed
//!   unreadable.
//! - A produce with acks=0 whose connection closes right after it: its batch becomes readable.
//! - An OffsetCommit on a connection that closes right after it: the commit takes effect, as
//!   the request Kafka is handling when its client leaves does.
//! - An OffsetCommit queued behind a long-poll Fetch (30 s) on a connection that closes right
//!   after: the connection stops counting at once, and the commit is dropped, as Kafka (which
//!   reads one request of a connection at a time) would never have read it. The client commits
//!   again on a new connection; once the long poll's wait has passed, its newer commit still
//!   stands. Finished late, the queued commit would have overwritten it.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{ApiKey, GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::io::AsyncWriteExt;
use weir_scenarios::group::SimpleGroup;
use weir_scenarios::wire::{frame, long_poll};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// How long the effect may take once the client is gone.
const SETTLE: Duration = Duration::from_secs(2);
/// The request-timeout error code.
const REQUEST_TIMED_OUT: i16 = 7;

fn one_record(value: &str) -> PartitionBatch {
    PartitionBatch {
        partition: 0,
        base_sequence: 0,
        records: vec![(None, Bytes::from(value.to_owned()))],
    }
}

/// Whether `value` reads back from `t`-0 at node 0.
fn readable(c: &mut Cluster, value: &str) -> Result<bool, String> {
    let read = c.read_all(0, "t", 0)?;
    Ok(read.values().any(|v| &v[..] == value.as_bytes()))
}

fn produce_timed_out(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    let addr = c.addr(0);
    let outcome = c.client_call(Duration::from_secs(10), move |env| async move {
        let mut client = Client::new(env, addr, "impatient");
        let batch = one_record("given-up");
        client
            .produce_timed("t", Acks::All, None, &[batch], Duration::ZERO, Duration::from_secs(5))
            .await
    });
    let code = match outcome {
        Some(Ok(ProduceOutcome::Answered(acks))) => acks.first().map(|a| a.error_code),
        other => return Err(format!("the produce was not answered: {other:?}")),
    };
    ensure(code == Some(REQUEST_TIMED_OUT), || {
        format!("a produce with timeout 0 answered {code:?}, not REQUEST_TIMED_OUT")
    })?;
    c.run_for(SETTLE);
    ensure(readable(&mut c, "given-up")?, || {
        "the batch of a timed-out produce never became readable".to_owned()
    })
}

fn produce_then_close(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    let addr = c.addr(0);
    let sent = c.client_call(Duration::from_secs(10), move |env| async move {
        let mut client = Client::new(env, addr, "fire-and-forget");
        client.produce("t", Acks::None, None, &[one_record("sent-and-gone")]).await
        // The client, and its connection, are dropped here.
    });
    ensure(matches!(sent, Some(Ok(ProduceOutcome::Unacknowledged))), || {
        format!("the acks=0 produce was not sent: {sent:?}")
    })?;
    c.run_for(SETTLE);
    ensure(readable(&mut c, "sent-and-gone")?, || {
        "the batch of an acks=0 produce whose connection closed never became readable".to_owned()
    })
}

/// An OffsetCommit of `offset` for `data`-0 in `group`, as a simple group sends it.
fn commit_request(group: &str, offset: i64) -> OffsetCommitRequest {
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    commit.generation_id_or_member_epoch = -1;
    let mut partition = OffsetCommitRequestPartition::default();
    partition.partition_index = 0;
    partition.committed_offset = offset;
    let mut topic = OffsetCommitRequestTopic::default();
    topic.name = TopicName(StrBytes::from_static_str("data"));
    topic.partitions = vec![partition];
    commit.topics = vec![topic];
    commit
}

/// Sends `bytes` to the group's coordinator on a new connection and closes it at once.
fn send_and_close(g: &mut SimpleGroup, bytes: Vec<u8>) -> Result<(), String> {
    let addr = g.addr;
    let written = g.c.client_call(Duration::from_secs(10), move |env| async move {
        let mut conn = env.net.connect(addr).await.map_err(|e| e.to_string())?;
        conn.write_all(&bytes).await.map_err(|e| e.to_string())
        // The connection is dropped here.
    });
    ensure(matches!(written, Some(Ok(()))), || format!("the requests were not sent: {written:?}"))
}

fn commit_then_close(seed: u64) -> Result<(), String> {
    let mut g = SimpleGroup::one_node(seed, 3)?;
    let bytes = frame(ApiKey::OffsetCommit, 2, 1, &commit_request(&g.group, 7));
    send_and_close(&mut g, bytes)?;
    g.c.run_for(SETTLE);
    let committed = g.committed()?;
    ensure(committed == 7, || format!("a commit whose connection closed: {committed}, not 7"))
}

fn commit_behind_a_long_poll(seed: u64) -> Result<(), String> {
    let mut g = SimpleGroup::one_node(seed, 3)?;
    let wait = Duration::from_secs(30);
    let mut bytes = frame(ApiKey::Fetch, 12, 1, &long_poll("data", wait));
    bytes.extend(frame(ApiKey::OffsetCommit, 2, 2, &commit_request(&g.group, 5)));
    send_and_close(&mut g, bytes)?;
    g.c.run_for(SETTLE);
    let open = g.c.broker(0).map_or(usize::MAX, |b| b.open_connections());
    ensure(open == 0, || format!("{open} connections open after the client closed"))?;
    // The client, back on a new connection, commits again.
    let (addr, group, data) = (g.addr, g.group.clone(), g.data.clone());
    weir_scenarios::group::commit_simple(&mut g.c, addr, &group, &data, 9)?;
    g.c.run_for(wait);
    let committed = g.committed()?;
    ensure(committed == 9, || {
        format!("the newer commit was overwritten by the one behind the long poll: {committed}")
    })
}

#[test]
fn a_produce_that_timed_out_becomes_readable() {
    for_each_seed("a_produce_that_timed_out_becomes_readable", 0..4, produce_timed_out);
}

#[test]
fn an_acks_0_produce_whose_connection_closed_becomes_readable() {
    for_each_seed(
        "an_acks_0_produce_whose_connection_closed_becomes_readable",
        0..4,
        produce_then_close,
    );
}

#[test]
fn a_commit_whose_connection_closed_right_after_takes_effect() {
    for_each_seed(
        "a_commit_whose_connection_closed_right_after_takes_effect",
        0..4,
        commit_then_close,
    );
}

#[test]
fn a_commit_queued_behind_a_long_poll_of_a_closed_connection_is_dropped() {
    for_each_seed(
        "a_commit_queued_behind_a_long_poll_of_a_closed_connection_is_dropped",
        0..4,
        commit_behind_a_long_poll,
    );
}
