//! A steady producer for replication scenarios: one task on the client host writing one
//! record at a time to one partition, with `acks=all` (or `acks=1`), routed by Metadata and
//! retried on any failure; it records every acknowledged write with the simulated time of its
//! ack, so a scenario can check that every ack survives a fault and measure how long writes
//! paused.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use super::Cluster;
use crate::client::Client;
use crate::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use crate::world::lock;
use weir::io::{TaskHandle, timeout};

/// Pause after a failed write before asking for metadata again.
pub const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// How long one write may take before the producer gives up on it and looks for the leader
/// again (a dead leader's connections may never answer; a live cluster answers in
/// milliseconds), so the pauses measured are the cluster's, not a client timeout's.
pub const WRITE_DEADLINE: Duration = Duration::from_millis(250);

/// One acknowledged write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acked {
    /// Its offset.
    pub offset: i64,
    /// Its value.
    pub value: String,
    /// Simulated time since the start when the ack arrived.
    pub at: Duration,
}

/// What the producer saw.
#[derive(Default)]
pub struct Record {
    /// Acknowledged writes, in ack order.
    pub acked: Vec<Acked>,
    /// Error codes the broker answered, with how often.
    pub codes: std::collections::BTreeMap<i16, usize>,
}

/// A running steady producer.
pub struct SteadyProducer {
    record: Arc<Mutex<Record>>,
    stop: Arc<AtomicBool>,
    _task: TaskHandle,
}

impl SteadyProducer {
    /// Starts writing `topic`/`partition` through the nodes of `cluster`.
    pub fn start(cluster: &Cluster, topic: &str, partition: i32, acks: Acks) -> SteadyProducer {
        let record = Arc::new(Mutex::new(Record::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let addrs: Vec<SocketAddr> = (0..cluster.nodes.len()).map(|ix| cluster.addr(ix)).collect();
        let (out, halt, topic) = (Arc::clone(&record), Arc::clone(&stop), topic.to_owned());
        let task = cluster.sim.spawn(cluster.client, "steady-producer", move |env| async move {
            let mut via = 0usize;
            while !halt.load(Ordering::Acquire) {
                let mut router = Client::new(env.clone(), addrs[via % addrs.len()], "router");
                via += 1;
                let wanted = [topic.as_str()];
                let asked = router.cluster_view(Some(&wanted));
                let leader = match timeout(&*env.clock, WRITE_DEADLINE, asked).await {
                    Ok(Ok(view)) => view.leader_addr(&topic, partition),
                    _ => None,
                };
                let Some((_, addr)) = leader else {
                    env.clock.sleep(RETRY_PAUSE).await;
                    continue;
                };
                let mut client = Client::new(env.clone(), addr, "steady");
                loop {
                    let value = format!("v{}", lock(&out).acked.len());
                    let batch = PartitionBatch {
                        partition,
                        base_sequence: 0,
                        records: vec![(None, Bytes::from(value.clone()))],
                    };
                    match client.produce_within(&topic, acks, None, &[batch], WRITE_DEADLINE).await
                    {
                        Ok(ProduceOutcome::Answered(answers)) => match answers.first() {
                            Some(a) if a.error_code == 0 => {
                                let at = Duration::from_nanos(env.clock.now().as_nanos());
                                lock(&out).acked.push(Acked { offset: a.base_offset, value, at });
                                if halt.load(Ordering::Acquire) {
                                    return;
                                }
                            }
                            Some(a) => {
                                *lock(&out).codes.entry(a.error_code).or_default() += 1;
                                break;
                            }
                            None => break,
                        },
                        _ => break,
                    }
                }
                env.clock.sleep(RETRY_PAUSE).await;
            }
        });
        SteadyProducer { record, stop, _task: task }
    }

    /// Acknowledged writes so far.
    pub fn acked(&self) -> Vec<Acked> {
        lock(&self.record).acked.clone()
    }

    /// Error codes answered so far.
    pub fn codes(&self) -> std::collections::BTreeMap<i16, usize> {
        lock(&self.record).codes.clone()
    }

    /// Asks the task to stop after its current write.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// The longest pause between consecutive acks that spans `moment` (simulated time since the
/// start), from the last ack before it to the first after it; none if no ack came after.
pub fn pause_around(acked: &[Acked], moment: Duration) -> Option<Duration> {
    let before = acked.iter().filter(|a| a.at <= moment).map(|a| a.at).max().unwrap_or(moment);
    let after = acked.iter().filter(|a| a.at > moment).map(|a| a.at).min()?;
    Some(after - before.max(moment).min(after))
}

/// The client host's clock now, on the scale [`Acked::at`] uses.
pub fn client_time(cluster: &Cluster) -> Duration {
    Duration::from_nanos(cluster.sim.env(cluster.client).clock.now().as_nanos())
}
