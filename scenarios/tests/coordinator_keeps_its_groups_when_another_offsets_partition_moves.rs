//! Fault scenario: a broker coordinating a group in the middle of a rebalance takes over the
//! leadership of another `__consumer_offsets` partition (the broker leading it died). Only the
//! new partition's groups are loaded; the group already served here carries on untouched. A
//! coordinator that gave up every group and loaded them all again on any move answered the
//! group's parked JoinGroup NOT_COORDINATOR and forgot its rebalance: every group of the broker
//! paid for a move that did not concern it.
//!
//! Three nodes, the offsets topic replicated three ways. A member forms the group; a second
//! member's JoinGroup is parked while the group waits for the first to rejoin. The broker that
//! leads the offsets partition whose leadership passes to the group's coordinator when it dies
//! is killed. Once the coordinator leads that partition and has loaded it, the parked join must
//! still be waiting, and the first member's rejoin must complete the rebalance: both joins
//! answered with the next generation. Last, a request for a group of the third offsets
//! partition, which another node leads, run at the coordinator past the handlers' check (as a
//! request that passed it just before its group was given up would), must be refused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weir::coordinator::{Generation, GroupId, HeartbeatRequest, MemberId};
use weir::groups::{Unavailable, partition_for};
use weir::topics::OFFSETS_TOPIC;
use weir_scenarios::group::{create_offsets_partition, join_and_commit};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::group::{Joined, MemberConfig};
use weir_sim::client::{Client, ClientError};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, OFFSETS_TOPIC_PARTITIONS};

/// Long enough for the members' session and the rebalance to outlast the leadership move.
const MEMBER_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the offsets partitions may take to have all three replicas in sync.
const SETTLE_BOUND: Duration = Duration::from_secs(60);
/// How long the moved partition may take to reach the coordinator and be loaded there.
const MOVE_BOUND: Duration = Duration::from_secs(60);

type Slot = Arc<Mutex<Option<Result<Joined, ClientError>>>>;

fn scenario(seed: u64) -> Result<(), String> {
    let spec = ClusterSpec { replication: 3, ..ClusterSpec::combined(3) };
    let mut c = Cluster::new_settled(seed, spec)?;
    c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
    let group = format!("group-{seed}");
    let home = partition_for(&group, OFFSETS_TOPIC_PARTITIONS);
    let addrs: Vec<_> = (0..3).map(|ix| c.addr(ix)).collect();
    create_offsets_partition(&mut c, &addrs, &group, home)?;
    let whole = c.run_until(SETTLE_BOUND, |c| {
        (0..OFFSETS_TOPIC_PARTITIONS)
            .all(|p| c.committed_partition(OFFSETS_TOPIC, p).is_some_and(|r| r.isr.len() == 3))
    });
    ensure(whole, || "the offsets partitions' ISRs are not whole".to_owned())?;
    let member = MemberConfig {
        group: group.clone(),
        session_timeout: MEMBER_TIMEOUT,
        rebalance_timeout: MEMBER_TIMEOUT,
    };
    let offsets = [(("data".to_owned(), 0), 10 + seed as i64)].into_iter().collect();
    let (a, m) = (addrs.clone(), member.clone());
    let (coordinator, first) = c
        .client_call(Duration::from_secs(60), move |env| async move {
            join_and_commit(&env, &a, &m, &offsets).await
        })
        .ok_or("the first member's join did not finish")??;
    let coordinator_ix = c.ix_of(coordinator).ok_or("no such node")?;
    // The partition whose leadership passes to the coordinator when its leader dies: the
    // controller hands it to the next in-sync replica after the leader, in assignment order.
    let (moved, victim) = (0..OFFSETS_TOPIC_PARTITIONS)
        .filter(|&p| p != home)
        .filter_map(|p| {
            let record = c.committed_partition(OFFSETS_TOPIC, p)?;
            let at = record.replicas.iter().position(|&r| r == record.leader)?;
            let next =
                record.replicas.iter().cycle().skip(at + 1).find(|&&r| r != record.leader)?;
            (*next == coordinator).then_some((p, record.leader))
        })
        .next()
        .ok_or("no offsets partition passes to the coordinator when its leader dies")?;
    let victim_ix = c.ix_of(victim).ok_or("no such node")?;

    // The second member's JoinGroup, parked until the first rejoins.
    let parked: Slot = Arc::new(Mutex::new(None));
    let (slot, addr, m) = (Arc::clone(&parked), addrs[coordinator_ix], member.clone());
    let _join = c.sim.spawn(c.client, "parked-join", move |env| async move {
        let mut client = Client::new(env, addr, "second");
        let joined = client.join_group(&m, "", Bytes::new()).await;
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(joined);
    });
    c.run_for(Duration::from_secs(2));
    let answered = |slot: &Slot| slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(early) = answered(&parked) {
        return Err(format!("the second member's join was answered at once: {early:?}"));
    }

    c.sim.kill(c.nodes[victim_ix]);
    let arrived = c.run_until(MOVE_BOUND, |c| {
        c.committed_partition(OFFSETS_TOPIC, moved).is_some_and(|r| r.leader == coordinator)
            && c.broker(coordinator_ix).is_some_and(|b| b.groups.is_loaded(moved))
    });
    ensure(arrived, || format!("{OFFSETS_TOPIC}-{moved} was not loaded at node {coordinator}"))?;
    if let Some(answer) = answered(&parked) {
        return Err(format!(
            "the parked join was answered when {OFFSETS_TOPIC}-{moved} moved: {answer:?}"
        ));
    }

    let (m, id) = (member.clone(), first.member_id.clone());
    let rejoined = c
        .client_call(Duration::from_secs(60), move |env| async move {
            Client::new(env, addr, "first").join_group(&m, &id, Bytes::new()).await
        })
        .ok_or("the first member's rejoin did not finish")?
        .map_err(|e| format!("the first member's rejoin: {e}"))?;
    let next = first.generation + 1;
    ensure(rejoined.generation == next, || {
        format!("the rejoin got generation {}, not {next}", rejoined.generation)
    })?;
    let done = c.run_until(Duration::from_secs(10), |_| {
        parked.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    });
    ensure(done, || "the parked join was never answered".to_owned())?;
    let second = answered(&parked)
        .ok_or("no answer")?
        .map_err(|e| format!("the parked join was answered {e}"))?;
    ensure(second.generation == next, || {
        format!("the parked join got generation {}, not {next}", second.generation)
    })?;
    refuses_groups_it_does_not_serve(&mut c, coordinator_ix, home, moved)?;
    c.watch_verdict()
}

/// A request for a group of the offsets partition that node `ix` neither led nor took over
/// (neither `home` nor `moved`), run straight at its coordinator, past the handlers' check
/// (which a request passes just before its group is given up): refused, not run.
fn refuses_groups_it_does_not_serve(
    c: &mut Cluster,
    ix: usize,
    home: i32,
    moved: i32,
) -> Result<(), String> {
    let other = (0..).map(|i| format!("other-{i}")).find(|g| {
        let p = partition_for(g, OFFSETS_TOPIC_PARTITIONS);
        p != home && p != moved
    });
    let group = GroupId::from(other.ok_or("no such group")?.as_str());
    let broker = c.broker(ix).ok_or("the coordinator is not running")?;
    let answer: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&answer);
    let _call = c.sim.spawn(c.nodes[ix], "direct-call", move |_env| async move {
        let request = HeartbeatRequest {
            group_id: group.clone(),
            generation: Generation(1),
            member_id: MemberId::from("m"),
            instance_id: None,
        };
        let called = broker.groups.call(&[group], |c, id, now| c.heartbeat(id, request, now)).await;
        let outcome = match called {
            Ok(response) => format!("answered {response:?}"),
            Err(Unavailable::NotServed) => "refused as not served here".to_owned(),
            Err(e) => format!("not answered: {e}"),
        };
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    });
    let finished =
        c.run_until(Duration::from_secs(5), |_| answer.lock().is_ok_and(|a| a.is_some()));
    ensure(finished, || "the direct call did not finish".to_owned())?;
    let outcome = answer.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
    ensure(outcome == "refused as not served here", || {
        format!("a heartbeat for a group node {} does not serve was {outcome}", ix + 1)
    })
}

#[test]
fn coordinator_keeps_its_groups_when_another_offsets_partition_moves() {
    for_each_seed(
        "coordinator_keeps_its_groups_when_another_offsets_partition_moves",
        0..8,
        scenario,
    );
}
