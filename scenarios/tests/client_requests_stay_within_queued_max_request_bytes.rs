//! `queued_max_request_bytes` (Kafka's `queued.max.request.bytes`) on one node, with a budget
//! of 64 KiB. Host A opens a connection and sends a frame's size and the first bytes of its
//! body, then stops sending: the frame holds its share of the budget while it is read.
//!
//! Held whole (a frame of exactly the budget in even seeds, of twice the budget in odd ones,
//! which takes all of it): the broker holds the whole budget; host B's ApiVersions, sent next
//! on a connection of its own, is not answered for 10 s, its frame waiting unread (and counted
//! as one wait); once A closes its connection mid-frame, the bytes are given back and B is
//! answered within a second. With frames read without waiting, B is answered at once.
//!
//! Held in half: B's ApiVersions fits beside A's frame and is answered at once, no wait
//! counted.
//!
//! Given back at once: a frame of the whole budget that does not decode (an unknown API),
//! sent behind a long poll of 30 s, closes its connection once the poll is answered, but holds
//! no bytes meanwhile: B is answered at once.
//!
//! Not held while replicated: on three nodes, an acks=all produce of 20 KiB to a partition of
//! two replicas (neither the active controller) whose follower is cut off from its leader is
//! appended and waits for that follower, unanswered, while the leader holds no request bytes.

use std::time::Duration;

use bytes::{BufMut, Bytes};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir_scenarios::held::{Seen, open, open_sending, open_sending_to};
use weir_scenarios::wire::{frame, long_poll};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// The budget under test.
const BUDGET: usize = 64 << 10;
/// Bytes of A's body sent before it stops.
const SENT: usize = 100;
/// Time for a connection to be made and answered.
const SETTLE: Duration = Duration::from_secs(2);
/// How long a waiting connection is watched for an answer that must not come.
const WATCH: Duration = Duration::from_secs(10);

/// A frame's size, declared `declared`, and the first [`SENT`] bytes of its body.
fn started_frame(declared: usize) -> Vec<u8> {
    let mut bytes = u32::try_from(declared).unwrap_or(u32::MAX).to_be_bytes().to_vec();
    bytes.extend(std::iter::repeat_n(0x5a, SENT));
    bytes
}

/// `nodes` nodes with the budget, nothing held.
fn start_nodes(seed: u64, nodes: usize) -> Result<Cluster, String> {
    let spec = ClusterSpec {
        queued_max_request_bytes: i64::try_from(BUDGET).unwrap_or(i64::MAX),
        ..ClusterSpec::combined(nodes)
    };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.run_for(Duration::from_secs(1));
    ensure(held(&c) == 0, || format!("{} request bytes held before the test", held(&c)))?;
    Ok(c)
}

/// One node with the budget, nothing held; the bytes it holds are given by `held`.
fn start(seed: u64) -> Result<Cluster, String> {
    start_nodes(seed, 1)
}

fn held(c: &Cluster) -> usize {
    held_by(c, 0)
}

fn held_by(c: &Cluster, ix: usize) -> usize {
    c.broker(ix).map_or(usize::MAX, |b| b.request_bytes_in_use())
}

fn held_whole(seed: u64) -> Result<(), String> {
    let mut c = start(seed)?;
    let declared = if seed.is_multiple_of(2) { BUDGET } else { 2 * BUDGET };
    let mut hog = open_sending(&c, c.client, "a", started_frame(declared));
    c.run_for(SETTLE);
    ensure(held(&c) == BUDGET, || {
        format!("a frame of {declared} B being read holds {} B of {BUDGET}", held(&c))
    })?;
    let b = c.sim.add_client("client-b");
    let waiting = open(&c, b, "b");
    c.run_for(WATCH);
    ensure(waiting.seen() == Seen::Waiting, || {
        format!("B's request while A's frame holds the budget: {:?}, not waiting", waiting.seen())
    })?;
    let waits = c.broker(0).map_or(0, |b| b.request_memory_waits());
    ensure(waits == 1, || format!("{waits} frames counted as waiting for request memory, not 1"))?;
    let closed_at = c.sim.now();
    hog.close();
    c.run_for(SETTLE);
    match waiting.seen() {
        Seen::Answered(at) if at - closed_at <= Duration::from_secs(1) => {}
        seen => {
            return Err(format!("B's request after A closed: {seen:?} (closed at {closed_at:?})"));
        }
    }
    ensure(held(&c) == 0, || format!("{} request bytes held once both were done", held(&c)))
}

fn held_in_half(seed: u64) -> Result<(), String> {
    let mut c = start(seed)?;
    let _hog = open_sending(&c, c.client, "a", started_frame(BUDGET / 2));
    c.run_for(SETTLE);
    ensure(held(&c) == BUDGET / 2, || format!("half the budget held: {} B", held(&c)))?;
    let b = c.sim.add_client("client-b");
    let beside = open(&c, b, "b");
    c.run_for(SETTLE);
    ensure(beside.answered(), || format!("B's request beside A's frame: {:?}", beside.seen()))?;
    let waits = c.broker(0).map_or(u64::MAX, |b| b.request_memory_waits());
    ensure(waits == 0, || format!("{waits} frames counted as waiting for request memory"))?;
    ensure(held(&c) == BUDGET / 2, || format!("after B's answer, {} B held", held(&c)))
}

fn undecodable_behind_a_long_poll(seed: u64) -> Result<(), String> {
    let mut c = start(seed)?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    c.run_for(SETTLE);
    let mut bytes = frame(ApiKey::Fetch, 12, 1, &long_poll("t", Duration::from_secs(30)));
    bytes.put_u32(u32::try_from(BUDGET).unwrap_or(u32::MAX));
    // An API no broker knows, version 0, correlation id 2; the rest of the frame is zeros.
    let mut body = vec![0u8; BUDGET];
    body[..8].copy_from_slice(&[0x03, 0xe7, 0, 0, 0, 0, 0, 2]);
    bytes.extend_from_slice(&body);
    let poll = open_sending(&c, c.client, "a", bytes);
    c.run_for(SETTLE);
    ensure(poll.seen() == Seen::Waiting, || format!("the long poll: {:?}", poll.seen()))?;
    ensure(held(&c) == 0, || format!("{} B held by a frame that did not decode", held(&c)))?;
    let b = c.sim.add_client("client-b");
    let other = open(&c, b, "b");
    c.run_for(SETTLE);
    ensure(other.answered(), || format!("B's request: {:?}, not answered", other.seen()))
}

fn produce_being_replicated(seed: u64) -> Result<(), String> {
    const VALUE_BYTES: usize = 20 << 10;
    let mut c = start_nodes(seed, 3)?;
    // Two replicas, neither the active controller: cut off from each other, both keep their
    // sessions, and the leader waits for its follower.
    let (name, p) = c.create_topic_away_from_controller("r", 2, &[])?;
    c.await_isr_size((&name, 0), 2, Duration::from_secs(30))?;
    let leader = c.ix_of(p.leader).ok_or("no leader")?;
    let follower = p
        .replicas
        .iter()
        .filter_map(|&id| c.ix_of(id))
        .find(|&ix| ix != leader)
        .ok_or("no follower")?;
    c.sim.partition(&[c.nodes[follower]], &[c.nodes[leader]]);
    let record = RecordSpec {
        offset_delta: 0,
        timestamp: 1_000,
        key: None,
        value: Some(Bytes::from(vec![b'x'; VALUE_BYTES])),
        headers: Vec::new(),
    };
    let records = encode_batch(&[record], &BatchOptions::default()).map_err(|e| e.to_string())?;
    let mut part = PartitionProduceData::default();
    part.index = 0;
    part.records = Some(records);
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_string(name.clone()));
    topic.partition_data = vec![part];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 20_000;
    request.topic_data = vec![topic];
    let produce =
        open_sending_to(&c, leader, c.client, "p", frame(ApiKey::Produce, 7, 1, &request));
    c.run_for(SETTLE);
    ensure(produce.seen() == Seen::Waiting, || {
        format!("the produce with a follower cut off: {:?}, not waiting", produce.seen())
    })?;
    let log_end = c.log_end(leader, &name, 0);
    ensure(log_end == Some(1), || format!("the leader's log end: {log_end:?}, not 1"))?;
    ensure(held_by(&c, leader) == 0, || {
        format!("{} B held by the leader while its produce is replicated", held_by(&c, leader))
    })
}

#[test]
fn a_frame_that_does_not_decode_holds_no_request_memory() {
    for_each_seed(
        "a_frame_that_does_not_decode_holds_no_request_memory",
        0..4,
        undecodable_behind_a_long_poll,
    );
}

#[test]
fn a_produce_waiting_for_its_followers_holds_no_request_memory() {
    for_each_seed(
        "a_produce_waiting_for_its_followers_holds_no_request_memory",
        0..4,
        produce_being_replicated,
    );
}

#[test]
fn a_request_waits_while_frames_being_read_hold_the_budget() {
    for_each_seed("a_request_waits_while_frames_being_read_hold_the_budget", 0..4, held_whole);
}

#[test]
fn a_request_that_fits_beside_frames_being_read_is_answered_at_once() {
    for_each_seed(
        "a_request_that_fits_beside_frames_being_read_is_answered_at_once",
        0..4,
        held_in_half,
    );
}
