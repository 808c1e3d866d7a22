//! The hostile workload: requests of every API Weir answers, at every version it advertises,
//! mutated, must never panic a broker, never get an answer that does not decode, and never
//! damage data they do not name.
//!
//! One node, or (odd seeds) three, each a controller and a broker. Topic `precious` (two
//! partitions, on every node) holds acknowledged records; topic `scratch` is
//! the one the destructive requests (DeleteTopics, DeleteRecords, CreatePartitions, the config
//! changes, reassignments) name. A client then sends about 250 requests built as real
//! clients build them, each for a random API and version (see [`requests`]): numeric fields now
//! and then at an edge of their type (0, −1, 1, the smallest, the largest), and most bodies
//! then mutated: windows overwritten with edge values or random bytes, cut short, grown, a bit
//! flipped, or the header given a version outside the advertised range. Each request goes to a
//! random node on a connection of its own and waits a while for its answer, or now and then
//! in a burst of up to 8 written back to back on one connection. Now and then the client also
//! joins a group as a real consumer would, and sends a burst of that member's requests (sync,
//! heartbeat, commit, fetch offsets, leave, describe) with its real member id and generation to
//! its coordinator, so that they get past the coordinator's first checks. And now and then it
//! sends the nodes' metrics listeners a hostile scrape instead (see [`scrapes`]).
//!
//! Judged: no panic (the simulator turns one into the seed's failure); answers come in the
//! order the requests were sent; every answer is a whole frame, and every answer to a request whose header is intact carries its correlation id and
//! decodes as that API's response at that version, to the last byte; a request whose bytes were
//! left as built (its fields may still be at edges) is answered or waited on, never met with a
//! closed connection; at least a sixth of the requests sent alone are answered (so the
//! mutations do not all die in the decoder); once the client has finished, no node keeps a
//! connection of it open for longer than its last requests may take, nor any request bytes
//! (in the seeds that hold requests within `queued_max_request_bytes`, see [`request_bytes`]);
//! afterwards every node serves four scrapes at once from the client's address, as many as one
//! address may have (the hostile scrapes gave their places back), the first node answers
//! ApiVersions on a
//! new connection, and every acknowledged record of `precious` reads back at its offset from
//! the partition's leader.
//!
//! A process that runs this must install `weir::runtime::alloc::LazyHugeAlloc` as its global
//! allocator, as the `weir` binary does: the protocol decoder reserves what a hostile array
//! count asks for before it finds the bytes missing.

mod requests;
mod scrapes;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::{Env, timeout};
use weir::server::metrics::SCRAPES_PER_IP_MAX;

use self::requests::{Member, Rng, member_request, mutate, request, s};
use super::Report;
use crate::client::Client;
use crate::client::assignment::encode_subscription;
use crate::client::group::MemberConfig;
use crate::workload::cluster::{Cluster, ClusterSpec, METRICS_PORT};

/// Requests sent per seed.
const REQUESTS: usize = 250;
/// How long one request waits for its answer (a Fetch may wait, a JoinGroup may rebalance).
const ANSWER_WAIT: Duration = Duration::from_secs(3);
/// How often requests go in a burst on one connection, and the most in one burst.
const BURST_PERCENT: usize = 8;
const BURST_MAX: usize = 8;
/// How often the client joins a group as a member and sends that member's requests, the
/// groups it joins, and the member's session and rebalance timeouts.
const MEMBER_PERCENT: usize = 6;
const MEMBER_GROUPS: usize = 3;
const MEMBER_SESSION: Duration = Duration::from_secs(10);
const MEMBER_REBALANCE: Duration = Duration::from_secs(3);
/// At least one in this many requests sent alone must be answered (about two in five are;
/// a quarter failed one seed of 9,000 by chance, with about a hundred sent alone).
const ANSWERED_FLOOR: usize = 6;
/// The largest answer read.
const ANSWER_BYTES_MAX: usize = 64 << 20;
/// How long the connections of the finished client may stay open on the nodes: a reader
/// notices a close only between requests, and a burst of admin requests already received is
/// handled one after another, each waiting up to 30 s for the controller (a request naming
/// several resources may wait that long for each).
const CLOSE_BOUND: Duration = Duration::from_secs(300);
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
        ApiKey::DescribeProducers => whole!(DescribeProducersResponse),
        ApiKey::DescribeQuorum => whole!(DescribeQuorumResponse),
        ApiKey::DescribeAcls => whole!(DescribeAclsResponse),
        ApiKey::CreateAcls => whole!(CreateAclsResponse),
        ApiKey::DeleteAcls => whole!(DeleteAclsResponse),
        ApiKey::DescribeClientQuotas => whole!(DescribeClientQuotasResponse),
        ApiKey::DescribeUserScramCredentials => whole!(DescribeUserScramCredentialsResponse),
        ApiKey::ListTransactions => whole!(ListTransactionsResponse),
        _ => false,
    }
}

/// What the requests of one seed met.
#[derive(Default, Debug)]
struct Tally {
    sent: usize,
    answered: usize,
    /// Requests sent alone on a connection, and those of them answered.
    alone: usize,
    alone_answered: usize,
    garbage: Vec<String>,
    /// Scrapes of the metrics listeners sent, and those of them served (200).
    scrapes: usize,
    scrapes_served: usize,
    /// Request frames that waited for request memory on the nodes.
    memory_waits: u64,
}

/// One request as sent.
struct Sent {
    key: ApiKey,
    /// The version it was built at.
    version: i16,
    /// The version its header names (another, outside the range, where the header was broken).
    sent_version: i16,
    correlation: i32,
    intact_header: bool,
    /// Neither its header nor its body was touched after it was built.
    pristine: bool,
    frame: Vec<u8>,
}

/// Builds one request for a random API and version, mutated as the seed draws.
fn build(rng: &mut Rng, scratch_ids: &mut u32, correlation: i32) -> Option<Sent> {
    let built = request(rng, scratch_ids)?;
    mutated(rng, built, correlation)
}

/// Frames a request built as a client builds it, mutated as the seed draws.
fn mutated(rng: &mut Rng, (key, version, mut body): Built, correlation: i32) -> Option<Sent> {
    let broken = rng.chance(5);
    let sent_version = if broken { version + 20 - rng.below(40) as i16 } else { version };
    let intact_header = sent_version == version;
    let pristine = mutate(rng, &mut body) && intact_header;
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = sent_version;
    header.correlation_id = correlation;
    header.client_id = Some(s("fuzz"));
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header.encode(&mut frame, key.request_header_version(version)).ok()?;
    frame.extend_from_slice(&body);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Some(Sent {
        key,
        version,
        sent_version,
        correlation,
        intact_header,
        pristine,
        frame: frame.to_vec(),
    })
}

/// A request as built: its API, version and body.
type Built = (ApiKey, i16, Vec<u8>);

/// How reading a connection's answers ended.
enum End {
    /// No answer came within [`ANSWER_WAIT`] (acks=0, a long wait, or a frame it still waits
    /// on).
    Silent,
    /// The broker closed the connection (or refused it).
    Closed,
    /// An answer frame that is not one: a size out of range, or fewer bytes than it said.
    BadFrame(String),
}

/// Sends `burst` back to back on a new connection and reads answers, each within
/// [`ANSWER_WAIT`] of the last: the answer frames in the order they came, and how reading ended.
async fn exchange(env: &Env, addr: SocketAddr, burst: &[Sent]) -> (Vec<Bytes>, End) {
    let clock = Arc::clone(&env.clock);
    let mut answers = Vec::new();
    let Ok(mut conn) = env.net.connect(addr).await else { return (answers, End::Closed) };
    let bytes: Vec<u8> = burst.iter().flat_map(|sent| sent.frame.iter().copied()).collect();
    // A failed write (the broker closed on a bad frame) still leaves the answers it owed.
    let _ = conn.write_all(&bytes).await;
    while answers.len() < burst.len() {
        let next = async {
            let mut size = [0u8; 4];
            let mut got = 0;
            while got < size.len() {
                match conn.read(&mut size[got..]).await {
                    Ok(0) | Err(_) if got == 0 => return Err(End::Closed),
                    Ok(0) | Err(_) => {
                        return Err(End::BadFrame(format!("a size cut short after {got} bytes")));
                    }
                    Ok(n) => got += n,
                }
            }
            let size = i32::from_be_bytes(size);
            let Some(len) = usize::try_from(size).ok().filter(|&n| n <= ANSWER_BYTES_MAX) else {
                return Err(End::BadFrame(format!("a frame of {size} bytes")));
            };
            let mut body = vec![0u8; len];
            match conn.read_exact(&mut body).await {
                Ok(_) => Ok(Bytes::from(body)),
                Err(_) => Err(End::BadFrame(format!("a frame of {len} bytes cut short"))),
            }
        };
        match timeout(&*clock, ANSWER_WAIT, next).await {
            Ok(Ok(answer)) => answers.push(answer),
            Ok(Err(end)) => return (answers, end),
            Err(_) => return (answers, End::Silent),
        }
    }
    (answers, End::Silent)
}

/// Judges the answers to `burst`: in the order the requests were sent (a correlation id may be
/// skipped, for a request never answered, but never come back later), each a whole frame, and
/// each answer to an intact header decoding as its API's response at its version to the last
/// byte. A closed connection is a violation where a request left as built, sent before every
/// changed one, went unanswered (a produce excepted: acks=0 is answered by silence). Requests
/// sent alone are also counted apart.
fn judge(burst: &[Sent], answers: Vec<Bytes>, end: End, t: &mut Tally) {
    t.sent += burst.len();
    if burst.len() == 1 {
        t.alone += 1;
        t.alone_answered += usize::from(!answers.is_empty());
    }
    let mut next = 0;
    for mut answer in answers {
        let correlation = answer.get(..4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let Some(correlation) = correlation else {
            t.garbage.push(format!("an answer of {} bytes, too short for a header", answer.len()));
            return;
        };
        let Some(at) = burst[next..].iter().position(|s| s.correlation == correlation) else {
            t.garbage.push(format!("an answer for correlation id {correlation} out of order"));
            return;
        };
        let sent = &burst[next + at];
        next += at + 1;
        t.answered += 1;
        if !sent.intact_header {
            continue;
        }
        let (key, version) = (sent.key, sent.version);
        let header = ResponseHeader::decode(&mut answer, key.response_header_version(version));
        if !(header.is_ok() && decodes(key, version, answer)) {
            t.garbage.push(format!("{key:?} v{version}: an answer that does not decode"));
        }
    }
    match end {
        End::Silent => {}
        End::Closed => {
            // The broker answers what it read before a bad frame, then closes: a request left
            // as built that came before every changed one is owed its answer, unless it is a
            // produce (acks=0 is answered by silence) or comes after an unanswered one (a
            // produce with acks=0 that fails closes the connection instead, as in Kafka).
            let first_changed = burst.iter().position(|s| !s.pristine).unwrap_or(burst.len());
            let from = next.min(first_changed);
            let produce = burst[from..first_changed].iter().position(|s| s.key == ApiKey::Produce);
            let end = produce.map_or(first_changed, |at| from + at);
            let owed: Vec<_> =
                burst[from..end].iter().map(|s| format!("{:?} v{}", s.key, s.version)).collect();
            if !owed.is_empty() {
                t.garbage.push(format!(
                    "requests left as built met a closed connection: {}",
                    owed.join(", ")
                ));
            }
        }
        End::BadFrame(why) => {
            let sent = burst.get(next).map(|s| (s.key, s.sent_version));
            t.garbage.push(format!("after {sent:?}: {why}"));
        }
    }
}

/// Joins one of a few groups as a real consumer would (through its coordinator, found with
/// FindCoordinator), then builds a burst of up to [`BURST_MAX`] requests of that member, with
/// its real member id and generation, for its coordinator: the coordinator's address and the
/// burst, or `None` where the join did not succeed.
async fn member_session(
    env: &Env,
    addrs: &[SocketAddr],
    rng: &mut Rng,
    correlation: &mut i32,
) -> Option<(SocketAddr, Vec<Sent>)> {
    *correlation += 1;
    let group = format!("fuzz-{}", rng.below(MEMBER_GROUPS));
    let mut client = Client::new(env.clone(), addrs[rng.below(addrs.len())], "fuzz-member");
    let coordinator = client.find_coordinator(&group).await.ok()?;
    let addr = *addrs.get(usize::try_from(coordinator.node_id - 1).ok()?)?;
    let mut member = Client::new(env.clone(), addr, "fuzz-member");
    let config = MemberConfig {
        group: group.clone(),
        session_timeout: MEMBER_SESSION,
        rebalance_timeout: MEMBER_REBALANCE,
    };
    let subscription = encode_subscription(&["precious".to_owned()]).ok()?;
    let joined = member.join_group(&config, "", subscription).await.ok()?;
    let place =
        Member { group: &group, member_id: &joined.member_id, generation: joined.generation };
    let mut burst = Vec::new();
    for _ in 0..1 + rng.below(BURST_MAX) {
        *correlation += 1;
        let built = member_request(rng, &place);
        burst.extend(built.and_then(|built| mutated(rng, built, *correlation)));
    }
    Some((addr, burst))
}

/// The client's part: [`REQUESTS`] requests, one at a time on a connection of its own or, now
/// and then, in bursts of up to 8 back to back on one connection.
async fn hostile_client(env: Env, addrs: &[SocketAddr], seed: u64, tally: Arc<Mutex<Tally>>) {
    let mut rng = Rng(seed ^ 0x5eed_f00d);
    let mut scratch_ids = 0;
    let mut correlation = 0;
    while (correlation as usize) < REQUESTS {
        if rng.chance(scrapes::SCRAPE_PERCENT) {
            let addr = SocketAddr::new(addrs[rng.below(addrs.len())].ip(), METRICS_PORT);
            let scraped = scrapes::scrape(&env, addr, &mut rng).await;
            let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
            t.scrapes += 1;
            match scraped {
                Ok(served) => t.scrapes_served += usize::from(served),
                Err(e) => t.garbage.push(format!("metrics listener {addr}: {e}")),
            }
            continue;
        }
        if rng.chance(MEMBER_PERCENT) {
            let burst = member_session(&env, addrs, &mut rng, &mut correlation).await;
            if let Some((addr, burst)) = burst {
                let (answers, end) = exchange(&env, addr, &burst).await;
                judge(&burst, answers, end, &mut tally.lock().unwrap_or_else(|p| p.into_inner()));
            }
            continue;
        }
        let size = if rng.chance(BURST_PERCENT) { 2 + rng.below(BURST_MAX - 1) } else { 1 };
        let mut burst = Vec::with_capacity(size);
        for _ in 0..size {
            correlation += 1;
            burst.extend(build(&mut rng, &mut scratch_ids, correlation));
        }
        if burst.is_empty() {
            continue;
        }
        let addr = addrs[rng.below(addrs.len())];
        let (answers, end) = exchange(&env, addr, &burst).await;
        judge(&burst, answers, end, &mut tally.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// `queued_max_request_bytes` of the nodes: in half the seeds (two of each four), 1–4 KiB,
/// so that requests (mutated ones grown past it among them) wait for one another's bytes.
fn request_bytes(seed: u64) -> i64 {
    match (seed / 2) % 2 {
        0 => ClusterSpec::combined(1).queued_max_request_bytes,
        _ => 1_024 << ((seed / 4) % 3),
    }
}

/// Runs one seed.
pub fn run(seed: u64) -> Report {
    let nodes = if seed.is_multiple_of(2) { 1 } else { 3 };
    let spec = ClusterSpec {
        queued_max_request_bytes: request_bytes(seed),
        metrics: true,
        ..ClusterSpec::combined(nodes)
    };
    let mut c = Cluster::new(seed, spec);
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
        shape: match request_bytes(seed) {
            bytes if bytes > 0 => {
                format!("{nodes} node(s), {REQUESTS} hostile requests within {bytes} B")
            }
            _ => format!("{nodes} node(s), {REQUESTS} hostile requests"),
        },
        counts: format!(
            "{} sent, {} answered, {} frames waited for request memory, {} scrapes ({} served)",
            tally.sent, tally.answered, tally.memory_waits, tally.scrapes, tally.scrapes_served
        ),
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
    // Each exchange waits at most one ANSWER_WAIT per request after the last answer, and a
    // member's join its rebalance: generous, in simulated time.
    let limit = (ANSWER_WAIT + MEMBER_REBALANCE) * (REQUESTS as u32 + 10);
    let ended = c.run_until(limit, |_| *done.lock().unwrap_or_else(|p| p.into_inner()));
    *tally = std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()));
    if !ended {
        return Err("the hostile client did not finish".to_owned());
    }
    if tally.alone_answered * ANSWERED_FLOOR < tally.alone {
        let (answered, alone) = (tally.alone_answered, tally.alone);
        return Err(format!("only {answered} of {alone} requests sent alone answered"));
    }
    // Every connection the client closed is closed on the nodes too, once each request being
    // handled on it (an admin request waits up to its timeout) is done: none leaks.
    let client_ip = c.sim.ip(c.client);
    let open = |c: &Cluster| -> usize {
        (0..c.nodes.len())
            .filter_map(|ix| c.broker(ix))
            .map(|b| b.open_connections_from(client_ip))
            .sum()
    };
    if !c.run_until(CLOSE_BOUND, |c| open(c) == 0) {
        return Err(format!("{} connections of the finished client still open", open(c)));
    }
    // With its connections, every request byte they held is given back (replicas' fetches
    // hold some for a moment while they are handled).
    let held = |c: &Cluster| -> usize {
        (0..c.nodes.len()).filter_map(|ix| c.broker(ix)).map(|b| b.request_bytes_in_use()).sum()
    };
    if !c.run_until(CLOSE_BOUND, |c| held(c) == 0) {
        return Err(format!("{} request bytes still held once the client left", held(c)));
    }
    tally.memory_waits =
        (0..nodes).filter_map(|ix| c.broker(ix)).map(|b| b.request_memory_waits()).sum();

    // Every node still serves as many scrapes at once from the client's address as one
    // address may have: none of those places is still held by a hostile scrape.
    for ix in 0..nodes {
        let addr = SocketAddr::new(c.addr(ix).ip(), METRICS_PORT);
        let statuses = c.client_call(scrapes::SCRAPE_WAIT, move |env| async move {
            let mut conns = Vec::new();
            for _ in 0..SCRAPES_PER_IP_MAX {
                conns.push(env.net.connect(addr).await.ok()?);
            }
            let mut statuses = Vec::new();
            for conn in &mut conns {
                conn.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.ok()?;
            }
            for mut conn in conns {
                let mut answer = Vec::new();
                let _ = conn.read_to_end(&mut answer).await;
                let answer = String::from_utf8_lossy(&answer).into_owned();
                statuses.push(answer.lines().next().unwrap_or("").to_owned());
            }
            Some(statuses)
        });
        let ok = |s: &&String| *s == "HTTP/1.1 200 OK";
        let served = statuses.iter().flatten().flatten().filter(ok).count();
        if served != SCRAPES_PER_IP_MAX {
            return Err(format!("node {ix}'s metrics after the hostile scrapes: {statuses:?}"));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A request as built, of `key`, with correlation id `correlation`.
    fn sent(key: ApiKey, correlation: i32, pristine: bool) -> Sent {
        Sent {
            key,
            version: 1,
            sent_version: 1,
            correlation,
            intact_header: true,
            pristine,
            frame: Vec::new(),
        }
    }

    /// A ListGroups v1 answer for `correlation`.
    fn answer(correlation: i32) -> Bytes {
        let mut body = BytesMut::new();
        body.put_i32(correlation);
        let encoded = ListGroupsResponse::default().encode(&mut body, 1);
        assert!(encoded.is_ok());
        body.freeze()
    }

    #[test]
    fn answers_out_of_order_bad_ones_and_closes_of_requests_as_built_are_violations() {
        let burst: Vec<Sent> = (1..=3).map(|c| sent(ApiKey::ListGroups, c, true)).collect();
        let judged = |answers: Vec<Bytes>, end: End| {
            let mut t = Tally::default();
            judge(&burst, answers, end, &mut t);
            t.garbage
        };
        // In order, one skipped (never answered): fine.
        assert!(judged(vec![answer(1), answer(3)], End::Silent).is_empty());
        // Out of order, or an answer to no request.
        assert_eq!(judged(vec![answer(2), answer(1)], End::Silent).len(), 1);
        assert_eq!(judged(vec![answer(9)], End::Silent).len(), 1);
        // An answer that does not decode (cut short).
        assert_eq!(judged(vec![answer(1).slice(..4)], End::Silent).len(), 1);
        // A close before every request as built was answered; not once all were.
        assert_eq!(judged(vec![answer(1)], End::Closed).len(), 1);
        assert!(judged(vec![answer(1), answer(2), answer(3)], End::Closed).is_empty());
        // A close at a mutated request is its right; a request as built before it is still
        // owed its answer, unless it is a produce (acks=0 answers nothing).
        let judged_mixed = |keys: [ApiKey; 3], answers: Vec<Bytes>| {
            let burst: Vec<Sent> =
                keys.iter().zip(1..).map(|(&key, c)| sent(key, c, c != 3)).collect();
            let mut t = Tally::default();
            judge(&burst, answers, End::Closed, &mut t);
            t.garbage
        };
        let groups = [ApiKey::ListGroups; 3];
        assert!(judged_mixed(groups, vec![answer(1), answer(2)]).is_empty());
        assert_eq!(judged_mixed(groups, vec![answer(1)]).len(), 1);
        let produce = [ApiKey::ListGroups, ApiKey::Produce, ApiKey::ListGroups];
        assert!(judged_mixed(produce, vec![answer(1)]).is_empty());
        // An answer too short to hold a correlation id.
        assert_eq!(judged(vec![Bytes::from_static(&[0, 0])], End::Silent).len(), 1);
    }
}
