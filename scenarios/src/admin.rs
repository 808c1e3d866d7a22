//! An operator's requests to a cluster, as the scenarios send them.

use std::collections::BTreeMap;
use std::time::Duration;

use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// ElectLeaders' answers: each partition's error code, by topic and index.
pub type Answers = BTreeMap<(String, i32), i16>;

/// ElectLeaders through node `via`: preferred, or `unclean`; for the partitions named, or for
/// every partition that needs it (`None`).
pub fn elect(
    c: &mut Cluster,
    via: usize,
    unclean: bool,
    partitions: Option<Vec<(&'static str, i32)>>,
) -> Result<Answers, String> {
    let addr = c.addr(via);
    c.client_call(Duration::from_secs(40), move |env| async move {
        let mut client = Client::new(env, addr, "operator");
        client.elect_leaders(unclean, partitions.as_deref()).await
    })
    .ok_or("ElectLeaders was not answered")?
    .map_err(|e| format!("ElectLeaders: {e}"))
}

/// [`Answers`] from (topic, partition, code) triples.
pub fn answers(pairs: &[(&str, i32, i16)]) -> Answers {
    pairs.iter().map(|&(t, p, code)| ((t.to_owned(), p), code)).collect()
}

/// A settled cluster of four nodes, three of them voters, whose controller rebalances leaders
/// every `rebalance_secs`, with topic `t` of one partition on `replication` replicas
/// (`flush.policy=ack`, `min.insync.replicas` as given).
pub fn rebalancing_cluster(
    seed: u64,
    rebalance_secs: u64,
    replication: i16,
    min_insync_replicas: &str,
) -> Result<Cluster, String> {
    cluster_with_topic(seed, rebalancing_spec(rebalance_secs), replication, min_insync_replicas)
}

/// Four nodes, three of them voters, whose controller rebalances leaders every
/// `rebalance_secs`.
pub fn rebalancing_spec(rebalance_secs: u64) -> ClusterSpec {
    ClusterSpec {
        voters: 3,
        leader_rebalance_secs: Some(rebalance_secs),
        ..ClusterSpec::combined(4)
    }
}

/// A settled cluster as `spec` describes it, with topic `t` of one partition on `replication`
/// replicas (`flush.policy=ack`, `min.insync.replicas` as given).
pub fn cluster_with_topic(
    seed: u64,
    spec: ClusterSpec,
    replication: i16,
    min_insync_replicas: &str,
) -> Result<Cluster, String> {
    let mut c = Cluster::new_settled(seed, spec)?;
    let configs = [("flush.policy", "ack"), ("min.insync.replicas", min_insync_replicas)];
    c.create_replicated_topic(0, "t", 1, replication, &configs).map_err(|e| e.to_string())?;
    Ok(c)
}

/// Sends `request` in `version` from an operator's client to node `ix`: its answer, or the
/// client's error as text (no answer within 20 s is an error too).
pub fn call<R>(c: &mut Cluster, ix: usize, request: R, version: i16) -> Result<R::Response, String>
where
    R: kafka_protocol::protocol::Request + Send + Sync + 'static,
    R::Response: Send + 'static,
{
    let addr = c.addr(ix);
    c.client_call(Duration::from_secs(20), move |env| async move {
        let mut client = Client::new(env, addr, "operator");
        client.call(&request, version, Duration::from_secs(15)).await.map_err(|e| e.to_string())
    })
    .ok_or("no answer")?
}

/// Whether an answer's `message` is `words`.
pub fn said(message: &Option<kafka_protocol::protocol::StrBytes>, words: &str) -> bool {
    message.as_ref().is_some_and(|m| m.as_str() == words)
}
