//! A client connection on which nothing is read or written for `connections_max_idle_ms`, and
//! that is owed no response, is closed by the broker; one waiting for an answer, or in use, is
//! not.
//!
//! One node, `connections_max_idle_ms` of 10 s. From one client host: a connection that sends
//! nothing; one that sends half a frame and stalls; one whose Fetch long-polls for 25 s on an
//! empty partition; one that sends a Metadata request every 4 s for 40 s. From another client
//! host: three connections that each had a Metadata request answered, then the host loses power
//! (it goes silent: no close ever reaches the broker). Judged by the broker's count of open
//! client connections, and by what the clients saw:
//! - 13 s after the power failure only the long poll and the busy connection are left;
//! - the long poll is answered, and its connection closed 10 s (plus slack, not less) after the
//!   answer;
//! - the busy connection lasts as long as it sends, and is closed 10 s after it stops;
//! - the silent and the stalled connections see the broker close them (end of stream) 10 to
//!   12 s after they opened.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::{Conn, Env};
use weir_scenarios::wire::{answer, frame, long_poll};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// The broker's idle limit in this scenario.
const IDLE: Duration = Duration::from_secs(10);
/// Slack for delivery and the broker's timer.
const SLACK: Duration = Duration::from_secs(2);
/// How long the Fetch waits for records that never come.
const LONG_POLL: Duration = Duration::from_secs(25);
/// How long the busy connection keeps sending, and how often.
const BUSY_FOR: Duration = Duration::from_secs(40);
const BUSY_EVERY: Duration = Duration::from_secs(4);
/// Connections of the client host that loses power.
const VANISHING: usize = 3;

/// Waits until the broker closes `conn` (end of stream or reset): when it did.
async fn closed(env: &Env, conn: &mut Box<dyn Conn>) -> Duration {
    let mut byte = [0u8; 1];
    while let Ok(1) = conn.read(&mut byte).await {}
    Duration::from_nanos(env.clock.now().as_nanos())
}

/// What the clients saw: when each connection was closed by the broker, and when the long
/// poll was answered.
#[derive(Default, Debug)]
struct Seen {
    silent_closed: Option<Duration>,
    stalled_closed: Option<Duration>,
    long_poll_answered: Option<Duration>,
    busy_answers: usize,
    vanishing_answers: usize,
}

type Shared = Arc<Mutex<Seen>>;

fn record(seen: &Shared, f: impl FnOnce(&mut Seen)) {
    f(&mut seen.lock().unwrap_or_else(|p| p.into_inner()));
}

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec {
        connections_max_idle_ms: IDLE.as_millis() as u64,
        ..ClusterSpec::combined(1)
    };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(1));
    let broker = c.broker(0).ok_or("no broker")?;
    let base = broker.open_connections();
    let addr = c.addr(0);
    let seen: Shared = Arc::default();
    let start = c.sim.now();

    let out = Arc::clone(&seen);
    let _silent = c.sim.spawn(c.client, "silent", move |env| async move {
        let Ok(mut conn) = env.net.connect(addr).await else { return };
        let at = closed(&env, &mut conn).await;
        record(&out, |s| s.silent_closed = Some(at));
    });
    let out = Arc::clone(&seen);
    let _stalled = c.sim.spawn(c.client, "stalled", move |env| async move {
        let Ok(mut conn) = env.net.connect(addr).await else { return };
        let mut half = 100i32.to_be_bytes().to_vec();
        half.extend_from_slice(&[0, 3, 0, 12, 0, 0]);
        if conn.write_all(&half).await.is_err() {
            return;
        }
        let at = closed(&env, &mut conn).await;
        record(&out, |s| s.stalled_closed = Some(at));
    });
    let out = Arc::clone(&seen);
    let _long_poll = c.sim.spawn(c.client, "long-poll", move |env| async move {
        let Ok(mut conn) = env.net.connect(addr).await else { return };
        let r = long_poll("t", LONG_POLL);
        if conn.write_all(&frame(ApiKey::Fetch, 12, 1, &r)).await.is_err() {
            return;
        }
        if answer(&mut conn).await.is_some() {
            let at = Duration::from_nanos(env.clock.now().as_nanos());
            record(&out, |s| s.long_poll_answered = Some(at));
        }
        // Then hold the connection without a word.
        closed(&env, &mut conn).await;
    });
    let out = Arc::clone(&seen);
    let _busy = c.sim.spawn(c.client, "busy", move |env| async move {
        let Ok(mut conn) = env.net.connect(addr).await else { return };
        let until = env.clock.now() + BUSY_FOR;
        let mut correlation = 0;
        while env.clock.now() < until {
            correlation += 1;
            let request = frame(ApiKey::Metadata, 9, correlation, &MetadataRequest::default());
            if conn.write_all(&request).await.is_err() || answer(&mut conn).await.is_none() {
                return;
            }
            record(&out, |s| s.busy_answers += 1);
            env.clock.sleep(BUSY_EVERY).await;
        }
        closed(&env, &mut conn).await;
    });
    let vanishing = c.sim.add_client("vanishing");
    for i in 0..VANISHING {
        let out = Arc::clone(&seen);
        let _held = c.sim.spawn(vanishing, &format!("held-{i}"), move |env| async move {
            let Ok(mut conn) = env.net.connect(addr).await else { return };
            let request = frame(ApiKey::Metadata, 9, 1, &MetadataRequest::default());
            if conn.write_all(&request).await.is_err() || answer(&mut conn).await.is_none() {
                return;
            }
            record(&out, |s| s.vanishing_answers += 1);
            closed(&env, &mut conn).await;
        });
    }

    let open = |c: &Cluster| c.broker(0).map_or(0, |b| b.open_connections()).saturating_sub(base);
    let all_in = |c: &Cluster| open(c) == 4 + VANISHING;
    ensure(c.run_until(SLACK, all_in), || {
        format!("{} of {} connections open", open(&c), 4 + VANISHING)
    })?;
    let held = |_: &Cluster| seen.lock().is_ok_and(|s| s.vanishing_answers == VANISHING);
    ensure(c.run_until(SLACK, held), || "the held connections were not answered".to_owned())?;
    c.sim.power_fail(vanishing);
    let failed_at = c.sim.now();

    // The long poll and the busy connection stay; the others go once idle.
    c.run_for(IDLE + SLACK);
    ensure(open(&c) == 2, || {
        format!(
            "{} connections open {:?} after the power failure",
            open(&c),
            c.sim.now() - failed_at
        )
    })?;
    let (silent, stalled) =
        seen.lock().map(|s| (s.silent_closed, s.stalled_closed)).unwrap_or_default();
    // Not before the limit, and not long after.
    let window = (start + IDLE)..=(start + IDLE + SLACK);
    ensure(silent.is_some_and(|at| window.contains(&at)), || {
        format!("the silent connection closed at {silent:?}, not within {window:?}")
    })?;
    ensure(stalled.is_some_and(|at| window.contains(&at)), || {
        format!("the stalled connection closed at {stalled:?}, not within {window:?}")
    })?;

    // The long poll is answered in full, then its connection goes once idle.
    let polled = |_: &Cluster| seen.lock().is_ok_and(|s| s.long_poll_answered.is_some());
    ensure(c.run_until(LONG_POLL + SLACK, polled), || "the long poll was not answered".to_owned())?;
    let answered_at = seen.lock().ok().and_then(|s| s.long_poll_answered).unwrap_or_default();
    ensure(answered_at >= start + LONG_POLL, || {
        format!("the long poll was answered at {answered_at:?}, before its wait ended")
    })?;
    // Writing the answer counts as activity: the connection is idle only from then on.
    c.run_for((answered_at + IDLE - SLACK).saturating_sub(c.sim.now()));
    ensure(open(&c) == 2, || format!("{} open 8 s after the long poll's answer", open(&c)))?;
    c.run_for((answered_at + IDLE + SLACK).saturating_sub(c.sim.now()));
    ensure(open(&c) == 1, || format!("{} open 12 s after the long poll's answer", open(&c)))?;

    // The busy connection lasts while it sends, then goes once idle.
    let busy_end = start + BUSY_FOR;
    c.run_for((busy_end + BUSY_EVERY + IDLE + SLACK).saturating_sub(c.sim.now()));
    let busy = seen.lock().map(|s| s.busy_answers).unwrap_or(0);
    let expected = (BUSY_FOR.as_secs() / BUSY_EVERY.as_secs()) as usize;
    ensure(busy >= expected, || format!("the busy connection had {busy} answers, not {expected}"))?;
    ensure(open(&c) == 0, || format!("{} connections still open at the end", open(&c)))?;
    c.watch_verdict()
}

#[test]
fn idle_client_connections_are_closed() {
    for_each_seed("idle_client_connections_are_closed", 0..6, scenario);
}

/// A client that sat unused longer than the broker's idle limit (the default, 10 minutes) finds
/// out itself and reconnects: its next call succeeds, where a call on the connection the broker
/// closed would fail.
fn returning_client(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    let addr = c.addr(0);
    let idle = Duration::from_millis(ClusterSpec::combined(1).connections_max_idle_ms);
    let outcome = c.client_call(idle * 2, move |env| async move {
        let mut client = weir_sim::client::Client::new(env.clone(), addr, "returning");
        let request = MetadataRequest::default();
        let first = client.call(&request, 9, Duration::from_secs(5)).await;
        env.clock.sleep(idle + Duration::from_secs(60)).await;
        let second = client.call(&request, 9, Duration::from_secs(5)).await;
        (first.is_ok(), second.map(|_| ()))
    });
    ensure(matches!(outcome, Some((true, Ok(())))), || {
        format!("calls before and after the idle limit: {outcome:?}")
    })?;
    let closed = |c: &Cluster| c.broker(0).is_some_and(|b| b.open_connections() == 0);
    ensure(c.run_until(SLACK, closed), || "the client's connection stayed open".to_owned())?;
    c.watch_verdict()
}

#[test]
fn a_client_back_after_the_idle_limit_reconnects() {
    for_each_seed("idle_client_connections_are_closed", 0..3, returning_client);
}
