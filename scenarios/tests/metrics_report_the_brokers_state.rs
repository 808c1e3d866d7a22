//! Scenario: each broker's metrics listener (`GET /metrics`, Prometheus' text format) reports
//! what the broker and the metadata say: requests counted by API as they are read, and timed
//! until answered (a consumer's long poll of an empty partition lands in the bucket of its
//! wait, and every histogram's buckets are cumulative up to its count); a consumer group's
//! state, members and committed offset reported by its coordinator alone; the records and bytes
//! the leader took from the producer, served to its followers and to a consumer; one active
//! controller across the cluster; every partition led by exactly one broker; each replica's log
//! end and the leader's high watermark at what was acknowledged; no partition under-replicated
//! while all replicas are in sync, and the leader's partitions under-replicated (and below
//! `min.insync.replicas` where set so) once a follower is killed and falls out of the ISR; a
//! leader cut off from the others reports itself fenced and leading nothing. Every series and
//! every family's TYPE appears once. Requests the listener does not serve get their HTTP error,
//! and one that never finishes its headers is closed within the read timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::FetchRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::fetcher::FETCH_MAX_WAIT;
use weir_scenarios::group::join_and_commit;
use weir_scenarios::wire::long_poll;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::group::MemberConfig;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, METRICS_PORT, node_id};

const TOPIC: &str = "watched";
const PARTITIONS: i32 = 2;
const RECORDS: i64 = 5;
const GROUP: &str = "watchers";
/// How long a scrape may take.
const SCRAPE_LIMIT: Duration = Duration::from_secs(20);
/// How long unfinished headers may hold a connection: the listener's read timeout, and a little.
const UNFINISHED_LIMIT: Duration = Duration::from_secs(3);
/// The consumer's long poll: longer than any replica's fetch waits, so it alone lands in the
/// histogram's bucket from 1 s to 2.5 s.
const LONG_POLL: Duration = Duration::from_secs(2);
const _: () = assert!(FETCH_MAX_WAIT.as_millis() < 1_000, "replicas' fetches wait 1 s or more");

/// Sends `request` to node `ix`'s metrics listener and reads until it closes: the answer's
/// bytes, or why there were none.
fn exchange(c: &mut Cluster, ix: usize, request: Vec<u8>) -> Result<String, String> {
    exchange_within(c, ix, request, SCRAPE_LIMIT)
}

/// [`exchange`], answered and closed within `limit`.
fn exchange_within(
    c: &mut Cluster,
    ix: usize,
    request: Vec<u8>,
    limit: Duration,
) -> Result<String, String> {
    let addr = std::net::SocketAddr::new(c.addr(ix).ip(), METRICS_PORT);
    c.client_call(limit, move |env| async move {
        let mut conn = env.net.connect(addr).await.map_err(|e| format!("connect: {e}"))?;
        conn.write_all(&request).await.map_err(|e| format!("write: {e}"))?;
        let mut answer = Vec::new();
        conn.read_to_end(&mut answer).await.map_err(|e| format!("read: {e}"))?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    })
    .ok_or_else(|| format!("no answer from node {ix}'s metrics within {limit:?}"))?
}

/// Node `ix`'s metrics, by series (`name{labels}`).
fn scrape(c: &mut Cluster, ix: usize) -> Result<BTreeMap<String, f64>, String> {
    let answer = exchange(c, ix, b"GET /metrics HTTP/1.1\r\nHost: weir\r\n\r\n".to_vec())?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or("no end of headers")?;
    ensure(head.starts_with("HTTP/1.1 200 OK\r\n"), || format!("scrape answered {head}"))?;
    let mut series = BTreeMap::new();
    // Each family's TYPE, by name.
    let mut typed = BTreeMap::new();
    for line in body.lines().filter(|l| !l.is_empty()) {
        if let Some(family) = line.strip_prefix("# TYPE ") {
            let (name, kind) = family.split_once(' ').unwrap_or((family, ""));
            let fresh = typed.insert(name.to_owned(), kind.to_owned()).is_none();
            ensure(fresh, || format!("TYPE of {name} given twice"))?;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (name, value) = line.rsplit_once(' ').ok_or_else(|| format!("bad line {line}"))?;
        let value: f64 = value.parse().map_err(|_| format!("bad value in {line}"))?;
        let family = name.split('{').next().unwrap_or("");
        // A histogram's series are its name with `_bucket`, `_sum` or `_count`.
        let histogram = ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
            let base = family.strip_suffix(suffix)?;
            (typed.get(base).map(String::as_str) == Some("histogram")).then_some(base)
        });
        let known = histogram.is_some() || typed.contains_key(family);
        ensure(known, || format!("{name} before its family's TYPE"))?;
        ensure(series.insert(name.to_owned(), value).is_none(), || format!("{name} twice"))?;
    }
    Ok(series)
}

fn get(series: &BTreeMap<String, f64>, name: &str) -> Result<f64, String> {
    series.get(name).copied().ok_or_else(|| format!("no series {name}"))
}

/// `api`'s request-duration bucket at `le` (0 if the API was never answered).
fn bucket(series: &BTreeMap<String, f64>, api: &str, le: &str) -> f64 {
    let name = format!("weir_request_duration_seconds_bucket{{api=\"{api}\",le=\"{le}\"}}");
    series.get(&name).copied().unwrap_or(0.0)
}

/// Every request-duration histogram's buckets rise with their bounds and end at its count;
/// how many APIs have one.
fn histograms_hold(series: &BTreeMap<String, f64>) -> Result<usize, String> {
    let mut apis = 0;
    for (name, &count) in series.range("weir_request_duration_seconds_count".to_owned()..) {
        let Some(labels) = name.strip_prefix("weir_request_duration_seconds_count") else {
            break;
        };
        apis += 1;
        let api = labels.trim_start_matches("{api=\"").trim_end_matches("\"}");
        let mut below = 0.0;
        for le in weir::server::metrics::DURATION_BOUNDS_US
            .iter()
            .map(|&us| format!("{}", us as f64 / 1e6))
            .chain(["+Inf".to_owned()])
        {
            let n = get(
                series,
                &format!("weir_request_duration_seconds_bucket{{api=\"{api}\",le=\"{le}\"}}"),
            )?;
            ensure(n >= below, || format!("{api}: bucket {le} holds {n}, below {below}"))?;
            below = n;
        }
        ensure(below == count, || format!("{api}: +Inf bucket {below}, count {count}"))?;
        get(series, &format!("weir_request_duration_seconds_sum{labels}"))?;
    }
    Ok(apis)
}

fn partition_series(name: &str, partition: i32) -> String {
    format!("{name}{{topic=\"{TOPIC}\",partition=\"{partition}\"}}")
}

/// The HTTP status line node `ix` answers `request` with.
fn status(c: &mut Cluster, ix: usize, request: &[u8]) -> Result<String, String> {
    let answer = exchange(c, ix, request.to_vec())?;
    Ok(answer.lines().next().unwrap_or("").to_owned())
}

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { metrics: true, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_replicated_topic(0, TOPIC, PARTITIONS, 3, &[("min.insync.replicas", "3")])
        .map_err(|e| format!("create {TOPIC}: {e}"))?;
    c.settle("the topic created")?;

    let leader_of = |c: &Cluster, p: i32| {
        c.committed_partition(TOPIC, p)
            .and_then(|r| (0..3).find(|&ix| node_id(ix) == r.leader))
            .ok_or_else(|| format!("{TOPIC}-{p} has no leader"))
    };
    let leader = leader_of(&c, 0)?;
    let produces_before = get(&scrape(&mut c, leader)?, "weir_requests_total{api=\"Produce\"}")?;
    for i in 0..RECORDS {
        c.produce_at(leader, TOPIC, 0, &format!("r{i}"))
            .map_err(|e| format!("produce r{i}: {e:?}"))?;
    }
    // Followers take the records within a few fetches.
    c.run_for(Duration::from_secs(3));

    let mut scrapes = Vec::new();
    for ix in 0..3 {
        scrapes.push(scrape(&mut c, ix)?);
    }
    let produces = get(&scrapes[leader], "weir_requests_total{api=\"Produce\"}")? - produces_before;
    ensure(produces >= RECORDS as f64, || {
        format!("{RECORDS} produces sent to node {leader}, its metrics counted {produces}")
    })?;
    let answered = get(&scrapes[leader], "weir_request_duration_seconds_count{api=\"Produce\"}")?;
    ensure(answered == get(&scrapes[leader], "weir_requests_total{api=\"Produce\"}")?, || {
        format!("node {leader}: produces counted and produces answered differ ({answered})")
    })?;
    for s in &scrapes {
        histograms_hold(s)?;
    }
    ensure(histograms_hold(&scrapes[leader])? > 0, || "no request-duration histogram".to_owned())?;
    let active: f64 =
        scrapes.iter().map(|s| get(s, "weir_active_controller")).sum::<Result<f64, _>>()?;
    ensure(active == 1.0, || format!("{active} active controllers reported"))?;
    let image = c.committed_image().ok_or("no committed image")?;
    let partitions: usize = image.topics.values().map(|t| t.partitions.len()).sum();
    let led: f64 =
        scrapes.iter().map(|s| get(s, "weir_leader_partitions")).sum::<Result<f64, _>>()?;
    ensure(led == partitions as f64, || {
        format!("{led} partitions reported led, the metadata has {partitions}")
    })?;
    for (ix, s) in scrapes.iter().enumerate() {
        let end = get(s, &partition_series("weir_log_end_offset", 0))?;
        ensure(end == RECORDS as f64, || format!("node {ix}: log end of {TOPIC}-0 is {end}"))?;
        let under = get(s, "weir_under_replicated_partitions")?;
        ensure(under == 0.0, || format!("node {ix}: {under} under-replicated, all in sync"))?;
        ensure(get(s, "weir_fenced")? == 0.0, || format!("node {ix} reports itself fenced"))?;
        ensure(get(s, &partition_series("weir_log_size_bytes", 1))? == 0.0, || {
            format!("node {ix}: {TOPIC}-1 was never written, yet has bytes")
        })?;
    }
    let high = get(&scrapes[leader], &partition_series("weir_high_watermark", 0))?;
    ensure(high == RECORDS as f64, || format!("the leader's high watermark is {high}"))?;
    for (ix, s) in scrapes.iter().enumerate() {
        ensure(get(s, "weir_partitions")? >= PARTITIONS as f64, || {
            format!("node {ix} hosts fewer than the {PARTITIONS} partitions it replicates")
        })?;
        ensure(get(s, "weir_offline_partitions")? == 0.0, || format!("node {ix}: offline"))?;
        ensure(get(s, &partition_series("weir_log_start_offset", 0))? == 0.0, || {
            format!("node {ix}: {TOPIC}-0 starts past 0")
        })?;
    }

    // The leader took the records from the producer, the followers from it; a consumer's
    // fetch of the whole partition is served exactly the bytes the producer sent.
    let records_in = partition_series("weir_records_in_total", 0);
    let bytes_in = get(&scrapes[leader], &partition_series("weir_bytes_in_total", 0))?;
    for (ix, s) in scrapes.iter().enumerate() {
        let (records, expected) = (get(s, &records_in)?, if ix == leader { RECORDS } else { 0 });
        ensure(records == expected as f64, || format!("node {ix}: {records} records in"))?;
    }
    let replicated =
        get(&scrapes[leader], &partition_series("weir_replication_bytes_out_total", 0))?;
    ensure(bytes_in > 0.0 && replicated >= 2.0 * bytes_in, || {
        format!("{bytes_in} bytes produced, {replicated} served to the two followers")
    })?;
    let out = |s: &BTreeMap<String, f64>| get(s, &partition_series("weir_bytes_out_total", 0));
    let before = out(&scrapes[leader])?;
    let addr = c.addr(leader);
    let fetched = c.client_call(SCRAPE_LIMIT, move |env| async move {
        let request: FetchRequest = long_poll(TOPIC, Duration::ZERO);
        let mut client = Client::new(env, addr, "reader");
        client.call(&request, 12, SCRAPE_LIMIT).await
    });
    let fetched = fetched.ok_or("the fetch did not finish")?.map_err(|e| format!("fetch: {e}"))?;
    let got: usize = fetched
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum();
    let served = out(&scrape(&mut c, leader)?)? - before;
    ensure(got as f64 == bytes_in && served == bytes_in, || {
        format!("{bytes_in} bytes produced; a fetch of all got {got}, counted as {served} served")
    })?;

    // A consumer's long poll of the empty partition 1 waits out its 2 s: the one request in
    // its leader's Fetch bucket from 1 s to 2.5 s (replicas' fetches wait at most 0.5 s).
    let poller = leader_of(&c, 1)?;
    let window = |s: &BTreeMap<String, f64>| bucket(s, "Fetch", "2.5") - bucket(s, "Fetch", "1");
    let before = window(&scrape(&mut c, poller)?);
    let addr = c.addr(poller);
    let polled = c.client_call(LONG_POLL * 3, move |env| async move {
        let mut request: FetchRequest = long_poll(TOPIC, LONG_POLL);
        request.topics[0].partitions[0].partition = 1;
        let mut client = Client::new(env, addr, "long-poll");
        client.call(&request, 12, LONG_POLL * 2).await
    });
    ensure(matches!(polled, Some(Ok(ref r)) if r.error_code == 0), || {
        format!("the long poll of {TOPIC}-1 answered {polled:?}")
    })?;
    let after = scrape(&mut c, poller)?;
    histograms_hold(&after)?;
    let waited = window(&after) - before;
    ensure(waited == 1.0, || {
        format!("node {poller}: {waited} fetches answered in 1-2.5 s, one long poll of 2 s sent")
    })?;

    // A group's one member commits the end of partition 0: its coordinator, and only it,
    // reports the group Stable with one member and the offset committed (no lag).
    let member = MemberConfig {
        group: GROUP.to_owned(),
        session_timeout: Duration::from_secs(30),
        rebalance_timeout: Duration::from_secs(10),
    };
    let addrs: Vec<_> = (0..3).map(|ix| c.addr(ix)).collect();
    let offsets = [((TOPIC.to_owned(), 0), RECORDS)].into_iter().collect();
    let joined = c.client_call(Duration::from_secs(60), move |env| async move {
        join_and_commit(&env, &addrs, &member, &offsets).await
    });
    let (coordinator, _) = joined.ok_or("the group's join did not finish")??;
    let coordinator = (0..3).find(|&ix| node_id(ix) == coordinator).ok_or("no coordinator")?;
    let committed = format!(
        "weir_group_committed_offset{{group=\"{GROUP}\",topic=\"{TOPIC}\",partition=\"0\"}}"
    );
    for ix in 0..3 {
        let s = scrape(&mut c, ix)?;
        let stable = get(&s, "weir_groups{state=\"Stable\"}")?;
        let members = s.get(&format!("weir_group_members{{group=\"{GROUP}\"}}")).copied();
        let offset = s.get(&committed).copied();
        let expected = if ix == coordinator {
            (1.0, Some(1.0), Some(RECORDS as f64))
        } else {
            (0.0, None, None)
        };
        ensure((stable, members, offset) == expected, || {
            format!(
                "node {ix} (coordinator {coordinator}): {stable} stable groups, {members:?} \
                 members, offset {offset:?}"
            )
        })?;
    }

    // The leader cut off from the others: once its session lapses it may not lead, and its
    // metrics say so, whatever its last metadata says.
    let led_before = get(&scrapes[leader], "weir_leader_partitions")?;
    ensure(led_before >= 1.0, || format!("node {leader} leads {TOPIC}-0, reports {led_before}"))?;
    let others: Vec<_> = (0..3).filter(|&ix| ix != leader).map(|ix| c.nodes[ix]).collect();
    c.sim.partition(&[c.nodes[leader]], &others);
    let mut fenced = None;
    for _ in 0..60 {
        c.run_for(Duration::from_millis(500));
        let s = scrape(&mut c, leader)?;
        if get(&s, "weir_fenced")? == 1.0 {
            fenced = Some(s);
            break;
        }
    }
    let fenced = fenced.ok_or("the cut-off leader never reported itself fenced")?;
    for name in [
        "weir_leader_partitions",
        "weir_under_replicated_partitions",
        "weir_under_min_isr_partitions",
    ] {
        let value = get(&fenced, name)?;
        ensure(value == 0.0, || format!("fenced, node {leader} reports {name} {value}"))?;
    }
    c.sim.heal_all();
    c.settle("the cut-off leader back")?;
    for p in 0..PARTITIONS {
        c.await_isr_size((TOPIC, p), 3, Duration::from_secs(60))?;
    }
    let leader = leader_of(&c, 0)?;

    // A follower dies: once the ISR shrinks, the leader's partitions of the topic are
    // under-replicated, and below min.insync.replicas (3).
    let follower = (0..3).find(|&ix| ix != leader).ok_or("no follower")?;
    c.sim.kill(c.nodes[follower]);
    c.await_isr_size((TOPIC, 0), 2, Duration::from_secs(60))?;
    c.run_for(Duration::from_secs(1));
    // Leadership may have moved since (a preferred-leader election after the heal).
    let leader = leader_of(&c, 0)?;
    let image = c.committed_image().ok_or("no committed image")?;
    let shrunk = image
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter(|r| r.leader == node_id(leader) && r.isr.len() < r.replicas.len())
        .count();
    let s = scrape(&mut c, leader)?;
    let under = get(&s, "weir_under_replicated_partitions")?;
    let below = get(&s, "weir_under_min_isr_partitions")?;
    ensure(shrunk >= 1 && under == shrunk as f64, || {
        format!("the leader reports {under} under-replicated, the metadata {shrunk}")
    })?;
    // Only the topic's partitions have min.insync.replicas 3.
    let watched = image.names.get(TOPIC).and_then(|id| image.topics.get(id));
    let below_expected = watched
        .map(|t| {
            t.partitions.values().filter(|r| r.leader == node_id(leader) && r.isr.len() < 3).count()
        })
        .unwrap_or(0);
    ensure(below_expected >= 1 && below == below_expected as f64, || {
        format!(
            "the leader reports {below} below min.insync.replicas, the metadata {below_expected}"
        )
    })?;

    // What the listener does not serve.
    for (request, expected) in [
        (&b"GET /nothing HTTP/1.1\r\n\r\n"[..], "HTTP/1.1 404 Not Found"),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 405 Method Not Allowed"),
        (b"hello there\r\n\r\n", "HTTP/1.1 400 Bad Request"),
    ] {
        let line = status(&mut c, leader, request)?;
        ensure(line == expected, || {
            format!("{:?} answered {line:?}", String::from_utf8_lossy(request))
        })?;
    }
    let endless = [b'x'; 9000];
    let line = status(&mut c, leader, &endless)?;
    ensure(line == "HTTP/1.1 431 Request Header Fields Too Large", || {
        format!("9000 bytes without an end of headers answered {line:?}")
    })?;
    // Headers never finished: closed, unanswered, within the read timeout.
    let answer =
        exchange_within(&mut c, leader, b"GET /metrics HTTP/1.1\r\n".to_vec(), UNFINISHED_LIMIT)?;
    ensure(answer.is_empty(), || format!("unfinished headers answered {answer:?}"))?;
    c.watch_verdict()
}

#[test]
fn metrics_report_the_brokers_state() {
    for_each_seed("metrics_report_the_brokers_state", 0..2, scenario);
}
