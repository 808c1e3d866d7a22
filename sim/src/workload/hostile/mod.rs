//! The hostile workload: requests of every API Weir answers, at every version it advertises,
//! mutated, must never panic a broker, never get an answer that does not decode, and never
//! damage data they do not name.
//!
//! One node, or (odd seeds) three, each a controller and a broker. Topic `precious` (two
//! partitions, on every node) holds acknowledged records; topic `scratch` is
//! the one the destructive requests (DeleteTopics, DeleteRecords, CreatePartitions, the config
//! changes, reassignments) name. A client then sends a few hundred requests built as real
//! clients build them, each for a random API and version (see [`requests`]): numeric fields now
//! and then at an edge of their type (0, −1, 1, the smallest, the largest), and most bodies
//! then mutated: windows overwritten with edge values or random bytes, cut short, grown, a bit
//! flipped, or the header given a version outside the advertised range. Each request goes to a
//! random node on a connection of its own and waits a while for its answer.
//!
//! Judged: no panic (the simulator turns one into the seed's failure); every answer is a whole
//! frame, and every answer to a request whose header is intact carries its correlation id and
//! decodes as that API's response at that version, to the last byte; a request whose bytes were
//! left as built (its fields may still be at edges) is answered or waited on, never met with a
//! closed connection; at least a quarter of the requests are answered (so the
//! mutations do not all die in the decoder); afterwards the first node answers ApiVersions on a
//! new connection, and every acknowledged record of `precious` reads back at its offset from
//! the partition's leader.
//!
//! A process that runs this must install `weir::runtime::alloc::LazyHugeAlloc` as its global
//! allocator, as the `weir` binary does: the protocol decoder reserves what a hostile array
//! count asks for before it finds the bytes missing.

mod requests;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::{Env, timeout};

use self::requests::{Rng, mutate, request, s};
use super::Report;
use crate::client::Client;
use crate::workload::cluster::{Cluster, ClusterSpec};

/// Requests sent per seed.
const REQUESTS: usize = 250;
/// How long one request waits for its answer (a Fetch may wait, a JoinGroup may rebalance).
const ANSWER_WAIT: Duration = Duration::from_secs(3);
/// The largest answer read.
const ANSWER_BYTES_MAX: usize = 64 << 20;
/// Partitions of `precious`.
const PARTITIONS: i32 = 2;
/// How long setting up (and finding a leader afterwards) may take.
const SETUP_BOUND: Duration = Duration::from_secs(60);
/// Records acknowledged to `precious` before the hostile requests.
const PRECIOUS_RECORDS: i32 = 8;

/// Whether `body` decodes as `key`'s response at `version`, to the last byte.
fn decodes(key: ApiKey, version: i16, mut body: Bytes) -> bool {
    macro_rules! whole {
        ($response:ty) => {
            <$response>::decode(&mut body, version).is_ok() && !body.has_remaining()
        };
    }
    match key {
        ApiKey::Produce => whole!(ProduceResponse),
        ApiKey::Fetch => whole!(FetchResponse),
        ApiKey::ListOffsets => whole!(ListOffsetsResponse),
        ApiKey::Metadata => whole!(MetadataResponse),
        ApiKey::OffsetCommit => whole!(OffsetCommitResponse),
        ApiKey::OffsetFetch => whole!(OffsetFetchResponse),
        ApiKey::FindCoordinator => whole!(FindCoordinatorResponse),
        ApiKey::JoinGroup => whole!(JoinGroupResponse),
        ApiKey::Heartbeat => whole!(HeartbeatResponse),
        ApiKey::LeaveGroup => whole!(LeaveGroupResponse),
        ApiKey::SyncGroup => whole!(SyncGroupResponse),
        ApiKey::DescribeGroups => whole!(DescribeGroupsResponse),
        ApiKey::ListGroups => whole!(ListGroupsResponse),
        ApiKey::ApiVersions => whole!(ApiVersionsResponse),
        ApiKey::CreateTopics => whole!(CreateTopicsResponse),
        ApiKey::DeleteTopics => whole!(DeleteTopicsResponse),
        ApiKey::DeleteRecords => whole!(DeleteRecordsResponse),
        ApiKey::InitProducerId => whole!(InitProducerIdResponse),
        ApiKey::OffsetForLeaderEpoch => whole!(OffsetForLeaderEpochResponse),
        ApiKey::DescribeConfigs => whole!(DescribeConfigsResponse),
        ApiKey::DescribeLogDirs => whole!(DescribeLogDirsResponse),
        ApiKey::AlterConfigs => whole!(AlterConfigsResponse),
        ApiKey::CreatePartitions => whole!(CreatePartitionsResponse),
        ApiKey::IncrementalAlterConfigs => whole!(IncrementalAlterConfigsResponse),
        ApiKey::ElectLeaders => whole!(ElectLeadersResponse),
        ApiKey::AlterPartitionReassignments => whole!(AlterPartitionReassignmentsResponse),
        ApiKey::DescribeCluster => whole!(DescribeClusterResponse),
        ApiKey::DeleteGroups => whole!(DeleteGroupsResponse),
        _ => false,
    }
}

/// What the requests of one seed met.
#[derive(Default, Debug)]
struct Tally {
    sent: usize,
    answered: usize,
    garbage: Vec<String>,
}

/// What one request met.
enum Met {
    /// An answer frame (its body).
    Answered(Bytes),
    /// The broker closed the connection (or refused it) without a whole answer frame.
    Closed,
    /// No answer within [`ANSWER_WAIT`] (acks=0, a long wait, or a frame it still waits on).
    Silent,
    /// An answer frame that is not one: a size out of range, or fewer bytes than it said.
    BadFrame(String),
}

/// Sends one frame on a new connection and reads one answer, if one comes within
/// [`ANSWER_WAIT`].
async fn exchange(env: &Env, addr: SocketAddr, frame: &[u8]) -> Met {
    let clock = Arc::clone(&env.clock);
    let work = async {
        let Ok(mut conn) = env.net.connect(addr).await else { return Met::Closed };
        if conn.write_all(frame).await.is_err() {
            return Met::Closed;
        }
        let Ok(size) = conn.read_i32().await else { return Met::Closed };
        let Some(len) = usize::try_from(size).ok().filter(|&n| n <= ANSWER_BYTES_MAX) else {
            return Met::BadFrame(format!("a frame of {size} bytes"));
        };
        let mut body = vec![0u8; len];
        match conn.read_exact(&mut body).await {
            Ok(_) => Met::Answered(Bytes::from(body)),
            Err(_) => Met::BadFrame(format!("a frame of {len} bytes cut short")),
        }
    };
    timeout(&*clock, ANSWER_WAIT, work).await.unwrap_or(Met::Silent)
}

/// The client's part: [`REQUESTS`] requests, each on its own connection.
async fn hostile_client(env: Env, addrs: &[SocketAddr], seed: u64, tally: Arc<Mutex<Tally>>) {
    let mut rng = Rng(seed ^ 0x5eed_f00d);
    let mut scratch_ids = 0;
    for correlation in 0..REQUESTS as i32 {
        let Some((key, version, mut body)) = request(&mut rng, &mut scratch_ids) else {
            continue;
        };
        let intact_header = !rng.chance(5);
        let sent_version =
            if intact_header { version } else { version + 20 - rng.below(40) as i16 };
        let pristine = mutate(&mut rng, &mut body) && intact_header;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = sent_version;
        header.correlation_id = correlation;
        header.client_id = Some(s("fuzz"));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        let header_version = key.request_header_version(version);
        let mut head = BytesMut::new();
        if header.encode(&mut head, header_version).is_err() {
            continue;
        }
        frame.extend_from_slice(&head);
        frame.extend_from_slice(&body);
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        let addr = addrs[rng.below(addrs.len())];
        let met = exchange(&env, addr, &frame).await;
        let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
        t.sent += 1;
        let mut answer = match met {
            Met::Answered(answer) => answer,
            Met::Silent => continue,
            Met::Closed if !pristine => continue,
            Met::Closed => {
                t.garbage
                    .push(format!("{key:?} v{version}: a request as built closed its connection"));
                continue;
            }
            Met::BadFrame(why) => {
                t.garbage.push(format!("{key:?} v{sent_version}: {why}"));
                continue;
            }
        };
        t.answered += 1;
        if !intact_header {
            continue;
        }
        let header = ResponseHeader::decode(&mut answer, key.response_header_version(version));
        match header {
            Ok(h) if h.correlation_id == correlation && decodes(key, version, answer) => {}
            other => t.garbage.push(format!("{key:?} v{version}: header {other:?}")),
        }
    }
}

/// Runs one seed.
pub fn run(seed: u64) -> Report {
    let nodes = if seed.is_multiple_of(2) { 1 } else { 3 };
    let mut c = Cluster::new(seed, ClusterSpec::combined(nodes));
    let mut tally = Tally::default();
    let mut violations = Vec::new();
    if let Err(e) = drive(&mut c, seed, &mut tally) {
        violations.push(e);
    }
    violations.extend(tally.garbage.iter().map(|g| format!("a bad answer: {g}")));
    violations.extend(c.violations());
    Report {
        seed,
        trace_hash: c.sim.trace_hash(),
        simulated: c.sim.now(),
        shape: format!("{nodes} node(s), {REQUESTS} hostile requests"),
        counts: format!("{} sent, {} answered", tally.sent, tally.answered),
        acked: PRECIOUS_RECORDS as usize,
        faults: Vec::new(),
        violations,
    }
}

/// Sets up the node, runs the hostile client, and checks the node afterwards; tallies what
/// the requests met in `tally`.
fn drive(c: &mut Cluster, seed: u64, tally: &mut Tally) -> Result<(), String> {
    c.settle("start")?;
    let nodes = c.nodes.len();
    let replication = i16::try_from(nodes).unwrap_or(1);
    c.create_replicated_topic(0, "precious", PARTITIONS, replication, &[])
        .map_err(|e| format!("create precious: {e}"))?;
    for partition in 0..PARTITIONS {
        c.await_isr_size(("precious", partition), nodes, SETUP_BOUND)?;
    }
    c.create_topic(0, "scratch", 1).map_err(|e| format!("create scratch: {e}"))?;
    let mut acknowledged = Vec::new();
    for i in 0..PRECIOUS_RECORDS {
        let partition = i % PARTITIONS;
        let value = format!("record-{i}");
        let offset = c
            .produce(0, "precious", partition, &value, SETUP_BOUND)
            .ok_or_else(|| format!("record {i} was not acknowledged"))?;
        acknowledged.push((partition, offset, value));
    }

    let shared: Arc<Mutex<Tally>> = Arc::default();
    let addrs: Vec<SocketAddr> = (0..nodes).map(|ix| c.addr(ix)).collect();
    let (addr, out) = (c.addr(0), Arc::clone(&shared));
    let done: Arc<Mutex<bool>> = Arc::default();
    let finished = Arc::clone(&done);
    let _task = c.sim.spawn(c.client, "hostile-client", move |env| async move {
        hostile_client(env, &addrs, seed, out).await;
        *finished.lock().unwrap_or_else(|p| p.into_inner()) = true;
    });
    let limit = ANSWER_WAIT * (REQUESTS as u32 + 10);
    let ended = c.run_until(limit, |_| *done.lock().unwrap_or_else(|p| p.into_inner()));
    *tally = std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()));
    if !ended {
        return Err("the hostile client did not finish".to_owned());
    }
    if tally.answered * 4 < tally.sent {
        return Err(format!("only {} of {} requests answered", tally.answered, tally.sent));
    }

    // The broker still serves, and what it acknowledged is intact.
    let versions = c.client_call(Duration::from_secs(10), move |env| async move {
        let mut client = Client::new(env, addr, "after");
        client.call(&ApiVersionsRequest::default(), 3, Duration::from_secs(5)).await
    });
    if !matches!(versions, Some(Ok(ref v)) if v.error_code == 0) {
        return Err(format!("ApiVersions after the hostile requests: {versions:?}"));
    }
    for partition in 0..PARTITIONS {
        let led = |c: &Cluster| {
            c.committed_partition("precious", partition)
                .and_then(|p| c.ix_of(p.leader))
                .filter(|&ix| c.broker(ix).is_some())
        };
        if !c.run_until(SETUP_BOUND, |c| led(c).is_some()) {
            return Err(format!("precious-{partition} has no leader"));
        }
        let leader = led(c).unwrap_or_default();
        let read = c.read_all(leader, "precious", partition)?;
        for (p, offset, value) in acknowledged.iter().filter(|(p, ..)| *p == partition) {
            let got = read.get(offset);
            if got.is_none_or(|g| g != value.as_bytes()) {
                return Err(format!("precious-{p} offset {offset}: {got:?}, not {value}"));
            }
        }
    }
    Ok(())
}
