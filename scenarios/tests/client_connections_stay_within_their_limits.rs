//! `max_connections_per_ip` and `max_connections` (Kafka's `max.connections.per.ip` and
//! `max.connections`) on one node, with connections held open from two client hosts. Each
//! connection sends one ApiVersions request as it opens.
//!
//! Per address (limit 3): host A's first three connections are answered; its fourth is closed
//! unanswered; host B's connection is answered, its address having none open; once one of A's
//! first three closes, a new one from A is answered.
//!
//! In total (limit 3): A's three connections are answered; B's, opened next, is not answered
//! while they stay open (the broker does not accept it, nor close it: it waits); once one of
//! A's closes, B's is answered, within a second.
//!
//! A connection its client closes stops counting at once, even with an answer still pending
//! (a long-poll Fetch of 30 s, closed after 2): the broker's count of open connections is back
//! to none within a second of the close, as Kafka drops a closed peer's pending answers.
//! Before, it counted until the long poll ended, so it kept its address's and the broker's
//! slot for up to that long.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use tokio::io::AsyncWriteExt;
use weir_scenarios::held::{Held, Seen, open};
use weir_scenarios::wire::{frame, long_poll};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Host;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// The limit under test, per address or in total.
const LIMIT: usize = 3;
/// Time for a connection to be made and answered.
const SETTLE: Duration = Duration::from_secs(2);
/// How long a waiting connection is watched for an answer that must not come.
const WATCH: Duration = Duration::from_secs(10);

/// A one-node cluster with `spec` and no connection of its own open; a second client host.
fn start(seed: u64, spec: ClusterSpec) -> Result<(Cluster, Host), String> {
    let mut c = Cluster::new_settled(seed, spec)?;
    c.run_for(Duration::from_secs(1));
    let open = c.broker(0).ok_or("no broker")?.open_connections();
    ensure(open == 0, || format!("{open} connections open before the test"))?;
    let other = c.sim.add_client("client-b");
    Ok((c, other))
}

/// Opens [`LIMIT`] connections from `host`, each of which must be answered.
fn open_up_to_the_limit(c: &mut Cluster, host: Host) -> Result<Vec<Held>, String> {
    let first: Vec<Held> = (0..LIMIT).map(|i| open(c, host, &format!("a{i}"))).collect();
    c.run_for(SETTLE);
    ensure(first.iter().all(Held::answered), || {
        let seen: Vec<Seen> = first.iter().map(Held::seen).collect();
        format!("A's first {LIMIT} not all answered: {seen:?}")
    })?;
    Ok(first)
}

fn per_ip(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { max_connections_per_ip: LIMIT, ..ClusterSpec::combined(1) };
    let (mut c, b) = start(seed, spec)?;
    let a = c.client;
    let mut first = open_up_to_the_limit(&mut c, a)?;
    let over = open(&c, a, "a-over");
    let other = open(&c, b, "b");
    c.run_for(SETTLE);
    ensure(matches!(over.seen(), Seen::Closed(_)), || {
        format!("A's connection past the limit: {:?}, not closed", over.seen())
    })?;
    ensure(other.answered(), || format!("B's connection: {:?}, not answered", other.seen()))?;
    first[0].close();
    c.run_for(SETTLE);
    let again = open(&c, a, "a-again");
    c.run_for(SETTLE);
    ensure(again.answered(), || {
        format!("A's connection after one closed: {:?}, not answered", again.seen())
    })
}

fn total(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { max_connections: LIMIT, ..ClusterSpec::combined(1) };
    let (mut c, b) = start(seed, spec)?;
    let a = c.client;
    let mut first = open_up_to_the_limit(&mut c, a)?;
    let waiting = open(&c, b, "b");
    c.run_for(WATCH);
    ensure(waiting.seen() == Seen::Waiting, || {
        format!("B's connection past the limit: {:?}, not waiting", waiting.seen())
    })?;
    let closed_at = c.sim.now();
    first[(seed % LIMIT as u64) as usize].close();
    c.run_for(SETTLE);
    match waiting.seen() {
        Seen::Answered(at) if at - closed_at <= Duration::from_secs(1) => Ok(()),
        seen => Err(format!("B's connection after one closed: {seen:?} (closed at {closed_at:?})")),
    }
}

fn closed_with_an_answer_pending(seed: u64) -> Result<(), String> {
    const WAIT: Duration = Duration::from_secs(30);
    const HOLD: Duration = Duration::from_secs(2);
    let (mut c, _) = start(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    c.run_for(SETTLE);
    let open = |c: &Cluster| c.broker(0).map_or(usize::MAX, |b| b.open_connections());
    ensure(open(&c) == 0, || format!("{} connections open before the long poll", open(&c)))?;
    let addr = c.addr(0);
    let _poll = c.sim.spawn(c.client, "long-poll", move |env| async move {
        let Ok(mut conn) = env.net.connect(addr).await else { return };
        if conn.write_all(&frame(ApiKey::Fetch, 12, 1, &long_poll("t", WAIT))).await.is_ok() {
            env.clock.sleep(HOLD).await;
        }
    });
    c.run_for(HOLD / 2);
    ensure(open(&c) == 1, || format!("{} connections open during the long poll", open(&c)))?;
    c.run_for(HOLD / 2 + SETTLE / 2);
    ensure(open(&c) == 0, || {
        format!("{} connections open a second after the client closed its long poll", open(&c))
    })
}

#[test]
fn a_connection_closed_by_its_client_stops_counting_at_once() {
    for_each_seed(
        "a_connection_closed_by_its_client_stops_counting_at_once",
        0..4,
        closed_with_an_answer_pending,
    );
}

#[test]
fn a_connection_past_max_connections_per_ip_is_closed() {
    for_each_seed("a_connection_past_max_connections_per_ip_is_closed", 0..4, per_ip);
}

#[test]
fn a_connection_past_max_connections_waits_for_one_to_close() {
    for_each_seed("a_connection_past_max_connections_waits_for_one_to_close", 0..4, total);
}
