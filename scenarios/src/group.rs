//! Helpers for scenarios that drive a consumer group through a coordinator move: which errors
//! mean "ask again shortly", retrying a call on them, finding the coordinator, a group's first
//! join and commit, and a simple group's commit and committed offset of one partition.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use weir::topics::OFFSETS_TOPIC;
use weir_sim::client::group::{Joined, MemberConfig};
use weir_sim::client::offsets::Tp;
use weir_sim::client::{Client, ClientError, codes};
use weir_sim::workload::cluster::Cluster;

/// Retries of a group call that the coordinator answers "not yet".
pub const RETRIES: usize = 100;
/// Pause between retries.
pub const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Whether a group call's error means "ask again shortly" during a coordinator move.
pub fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Kafka(code) => [
            codes::COORDINATOR_LOAD_IN_PROGRESS,
            codes::NOT_COORDINATOR,
            codes::COORDINATOR_NOT_AVAILABLE,
        ]
        .contains(code),
        ClientError::Call(_) => true,
        ClientError::Malformed(_) => false,
    }
}

/// Evaluates the call expression (a future) until it succeeds or fails for good, up to
/// [`RETRIES`] times, sleeping [`RETRY_PAUSE`] on `$env`'s clock between tries. The outcome is
/// `Result<_, String>`.
#[macro_export]
macro_rules! retry {
    ($env:expr, $call:expr) => {{
        let mut outcome = Err(String::from("never tried"));
        for _ in 0..$crate::group::RETRIES {
            match $call.await {
                Ok(value) => {
                    outcome = Ok(value);
                    break;
                }
                Err(e) if $crate::group::transient(&e) => {
                    outcome = Err(e.to_string());
                    $env.clock.sleep($crate::group::RETRY_PAUSE).await;
                }
                Err(e) => {
                    outcome = Err(format!("{e} (code {:?})", e.code()));
                    break;
                }
            }
        }
        outcome
    }};
}

/// The coordinator of `group` as some broker of `addrs` names it (asked in turn).
pub async fn find(env: &weir::io::Env, addrs: &[SocketAddr], group: &str) -> Result<i32, String> {
    for attempt in 0..RETRIES {
        let mut client = Client::new(env.clone(), addrs[attempt % addrs.len()], "finder");
        if let Ok(found) = client.find_coordinator(group).await {
            return Ok(found.node_id);
        }
        env.clock.sleep(RETRY_PAUSE).await;
    }
    Err("no broker named a coordinator".to_owned())
}

/// The coordinator of `group` once some broker of `addrs` names one other than `old` (asked
/// every half second, as long as the caller's limit allows).
pub async fn find_moved(
    env: &weir::io::Env,
    addrs: &[SocketAddr],
    group: &str,
    old: i32,
) -> Result<i32, String> {
    loop {
        let named = find(env, addrs, group).await?;
        if named != old {
            return Ok(named);
        }
        env.clock.sleep(Duration::from_millis(500)).await;
    }
}

/// The group's only member joins at the coordinator some broker of `addrs` names (member id
/// given by the coordinator), takes the whole assignment and commits `offsets`. Returns the
/// coordinator's node id and the join.
pub async fn join_and_commit(
    env: &weir::io::Env,
    addrs: &[SocketAddr],
    member: &MemberConfig,
    offsets: &BTreeMap<Tp, i64>,
) -> Result<(i32, Joined), String> {
    let coordinator = find(env, addrs, &member.group).await?;
    let mut client = Client::new(env.clone(), addrs[(coordinator - 1) as usize], "member");
    let joined = crate::retry!(env, client.join_group(member, "", Bytes::new()))?;
    let assignment = vec![(joined.member_id.clone(), Bytes::new())];
    crate::retry!(env, client.sync_group(member, &joined, assignment.clone()))?;
    let answered = client
        .offset_commit(&member.group, joined.generation, &joined.member_id, offsets)
        .await
        .map_err(|e| e.to_string())?;
    if answered.values().any(|&code| code != codes::NONE) {
        return Err(format!("commit: {answered:?}"));
    }
    Ok((coordinator, joined))
}

/// How long a simple group's commit or offset fetch may take, retries included.
pub const SIMPLE_CALL_LIMIT: Duration = Duration::from_secs(60);

/// Commits `offset` for `tp` in the simple group `group` (no member, no generation) through
/// `addr`, asking again while the coordinator is not ready.
pub fn commit_simple(
    c: &mut Cluster,
    addr: SocketAddr,
    group: &str,
    tp: &Tp,
    offset: i64,
) -> Result<(), String> {
    let (name, tp) = (group.to_owned(), tp.clone());
    let codes = c
        .client_call(SIMPLE_CALL_LIMIT, move |env| async move {
            let mut client = Client::new(env.clone(), addr, "committer");
            let wanted = BTreeMap::from([(tp, offset)]);
            crate::retry!(env, client.offset_commit(&name, -1, "", &wanted))
        })
        .ok_or("the commit did not finish")??;
    crate::ensure(codes.values().all(|&code| code == 0), || format!("commit answered {codes:?}"))
}

/// `group`'s committed offset for `tp` (-1: none), asked of `addr` again while the coordinator
/// is not ready.
pub fn committed_simple(
    c: &mut Cluster,
    addr: SocketAddr,
    group: &str,
    tp: &Tp,
) -> Result<i64, String> {
    let (name, wanted) = (group.to_owned(), tp.clone());
    let fetched = c
        .client_call(SIMPLE_CALL_LIMIT, move |env| async move {
            let mut client = Client::new(env.clone(), addr, "reader");
            crate::retry!(env, client.offset_fetch(&name, std::slice::from_ref(&wanted)))
        })
        .ok_or("the offset fetch did not finish")??;
    fetched.get(tp).copied().ok_or_else(|| format!("no committed offset of {tp:?} answered"))
}

/// Asks the brokers at `addrs` for `group`'s coordinator, which creates the offsets topic, and
/// waits until the group's partition `partition` of it is open on every node of `c`.
pub fn create_offsets_partition(
    c: &mut Cluster,
    addrs: &[SocketAddr],
    group: &str,
    partition: i32,
) -> Result<(), String> {
    let (name, at) = (group.to_owned(), addrs.to_vec());
    c.client_call(SIMPLE_CALL_LIMIT, move |env| async move { find(&env, &at, &name).await })
        .ok_or("finding the coordinator did not finish")??;
    let created = c.run_until(Duration::from_secs(30), |c| {
        (0..c.nodes.len()).all(|ix| c.log_end(ix, OFFSETS_TOPIC, partition).is_some())
    });
    crate::ensure(created, || format!("{OFFSETS_TOPIC}-{partition} is not on every node"))
}
