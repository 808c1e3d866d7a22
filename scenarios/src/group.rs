//! Helpers for scenarios that drive a consumer group through a coordinator move: which errors
//! mean "ask again shortly", retrying a call on them, finding the coordinator, a group's first
//! join and commit, a simple group's commit and committed offset of one partition, and an
//! offsets partition led again in a new epoch.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir::controller::records::{BrokerId, PartitionRecord};
use weir::model::LeaderEpoch;
use weir::node::Broker;
use weir::partition::Partition;
use weir::partition::replica::{Committed, Role};
use weir::replication::leader::Assignment;
use weir::topics::OFFSETS_TOPIC;
use weir_sim::client::group::{Joined, MemberConfig};
use weir_sim::client::offsets::Tp;
use weir_sim::client::{Client, ClientError, codes};
use weir_sim::workload::cluster::{Cluster, node_id};

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

/// The `replica.lag.time.max.ms` given to a role taken by [`NextEpoch::take_lead`].
const LAG_TIME_MAX: Duration = Duration::from_secs(30);

/// `__consumer_offsets`-`index` at a node that leads it, to be given the leader role in the
/// next epoch straight on the partition ([`NextEpoch::take_lead`]): as a metadata pass applying
/// a later image would, when the broker saw no pass with another leader in between. The
/// coordinator is told only by [`NextEpoch::tell_coordinator`], as the pass's call of
/// [`Groups::lead_partitions`] tells it after the roles are taken.
///
/// This fakes the role: no controller committed the new epoch (in production a broker leads
/// the same partition in a later epoch only through committed metadata, e.g. fenced, then
/// given its partitions back). The committed image still names the old epoch, so the scenario
/// must let no later metadata change reach the node: a pass would take the old epoch back,
/// which the log refuses, and the partition would stop taking writes.
///
/// [`Groups::lead_partitions`]: weir::groups::Groups::lead_partitions
pub struct NextEpoch {
    /// The broker.
    pub broker: Arc<Broker>,
    /// The partition.
    pub partition: Arc<Partition>,
    /// The epoch it is led in at first.
    pub before: LeaderEpoch,
    /// The epoch it is led in once the role is taken.
    pub after: LeaderEpoch,
    /// Its committed record, at first.
    record: PartitionRecord,
    /// The node's broker id.
    me: BrokerId,
}

impl NextEpoch {
    /// The group's offsets partition `index` at node `ix`, which must lead it.
    pub fn of(c: &Cluster, ix: usize, index: i32) -> Result<NextEpoch, String> {
        let (broker, partition) = offsets_partition(c, ix, index)?;
        let before = match partition.role() {
            Role::Leader { epoch, .. } => epoch,
            other => return Err(format!("{OFFSETS_TOPIC}-{index} is not led here: {other:?}")),
        };
        let record = c.committed_partition(OFFSETS_TOPIC, index).ok_or("no committed record")?;
        let after = LeaderEpoch(before.0 + 1);
        Ok(NextEpoch { broker, partition, before, after, record, me: node_id(ix) })
    }

    /// Gives the partition the leader role in the next epoch, the same replicas in sync.
    pub fn take_lead(&self) -> Result<(), String> {
        let committed = Committed {
            leader: self.me,
            leader_epoch: self.after,
            assignment: Assignment {
                replicas: &self.record.replicas,
                isr: &self.record.isr,
                partition_epoch: self.record.partition_epoch + 1,
                epoch_start: self.partition.log.log_end_offset(),
            },
        };
        let now = self.broker.env.clock.now();
        self.partition.apply_committed(self.me, committed, 1, LAG_TIME_MAX, now);
        let led =
            matches!(self.partition.role(), Role::Leader { epoch, .. } if epoch == self.after);
        crate::ensure(led, || {
            format!("{} did not take the lead in {:?}", self.partition.tp, self.after)
        })
    }

    /// Brings the coordinator's takeovers up to date with the partition's role, as the pass's
    /// call of `lead_partitions` does.
    pub fn tell_coordinator(&self) -> Result<(), String> {
        let topic = self.broker.catalog.get(OFFSETS_TOPIC).ok_or("no offsets topic")?;
        self.broker.groups.lead_partitions(topic, vec![Arc::clone(&self.partition)]);
        Ok(())
    }
}

/// Node `ix`'s broker and its `__consumer_offsets`-`index`.
pub fn offsets_partition(
    c: &Cluster,
    ix: usize,
    index: i32,
) -> Result<(Arc<Broker>, Arc<Partition>), String> {
    let broker = c.broker(ix).ok_or("the node is not running")?;
    let partition =
        broker.catalog.get(OFFSETS_TOPIC).and_then(|t| t.partition(index)).ok_or_else(|| {
            format!("{OFFSETS_TOPIC}-{index} is not open at node {}", node_id(ix))
        })?;
    Ok((broker, partition))
}

/// A single node whose simple group `group-<seed>` has committed an offset for `data`-0 (see
/// [`SimpleGroup::one_node`]).
pub struct SimpleGroup {
    /// The cluster of one node.
    pub c: Cluster,
    /// The group.
    pub group: String,
    /// Its partition of the offsets topic.
    pub index: i32,
    /// The node's client address.
    pub addr: SocketAddr,
    /// The partition the group commits for: `data`-0.
    pub data: Tp,
}

/// How long a new load of an offsets partition may take.
pub const LOAD_BOUND: Duration = Duration::from_secs(30);

impl SimpleGroup {
    /// A settled single node with a topic `data` of one partition, for which the simple group
    /// `group-<seed>` has committed `offset`.
    pub fn one_node(seed: u64, offset: i64) -> Result<SimpleGroup, String> {
        let mut c =
            Cluster::new_settled(seed, weir_sim::workload::cluster::ClusterSpec::combined(1))?;
        c.create_topic(0, "data", 1).map_err(|e| e.to_string())?;
        let group = format!("group-{seed}");
        let index = weir::groups::partition_for(
            &group,
            weir_sim::workload::cluster::OFFSETS_TOPIC_PARTITIONS,
        );
        let addr = c.addr(0);
        create_offsets_partition(&mut c, &[addr], &group, index)?;
        let data = ("data".to_owned(), 0);
        commit_simple(&mut c, addr, &group, &data, offset)?;
        Ok(SimpleGroup { c, group, index, addr, data })
    }

    /// The group's committed offset for `data`-0 as the coordinator answers it.
    pub fn committed(&mut self) -> Result<i64, String> {
        committed_simple(&mut self.c, self.addr, &self.group, &self.data)
    }

    /// Runs until the group's offsets partition is loaded (again), for at most [`LOAD_BOUND`].
    pub fn await_loaded(&mut self) -> Result<(), String> {
        let index = self.index;
        let loaded = self
            .c
            .run_until(LOAD_BOUND, |c| c.broker(0).is_some_and(|b| b.groups.is_loaded(index)));
        crate::ensure(loaded, || format!("the partition was not loaded within {LOAD_BOUND:?}"))
    }
}
