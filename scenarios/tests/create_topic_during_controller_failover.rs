//! Fault scenario: a client creates a topic through a broker that is not the controller, and the
//! active controller is killed (or loses power) a random moment after the request left — before,
//! during or after the commit. The client retries until answered, as Kafka admin clients do.
//! The topic must end up created exactly once: one topic id on every node, every partition
//! placed and led by a live broker, writable, and on the right disks — no half-created topic,
//! no second copy from the retry.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::workload::cluster::{Cluster, ClusterSpec, SETTLE_BOUND};

/// Partitions of the topic.
const PARTITIONS: i32 = 5;
/// How long the client keeps retrying.
const CREATE_LIMIT: Duration = Duration::from_secs(60);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    let controller = c.active_controller().ok_or("no active controller")?;
    let via = (controller + 1 + (seed as usize % 2)) % 3;
    let addr = c.addr(via);
    let outcome: Arc<Mutex<Option<Result<u32, String>>>> = Arc::default();
    let out = Arc::clone(&outcome);
    let _task = c.sim.spawn(c.client, "create", move |env| async move {
        let started = env.clock.now();
        let mut attempts = 0u32;
        let result = loop {
            attempts += 1;
            let mut client = Client::new(env.clone(), addr, "admin");
            match client.create_topic("during", PARTITIONS, &[]).await {
                Ok(()) => break Ok(attempts),
                Err(e) if env.clock.now() - started > CREATE_LIMIT => break Err(e.to_string()),
                Err(_) => env.clock.sleep(Duration::from_millis(250)).await,
            }
        };
        *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
    });
    // The request is in flight somewhere between the broker, the controller and the quorum.
    c.run_for(Duration::from_micros(500 + (seed * 7_919) % 30_000));
    if seed.is_multiple_of(2) {
        c.sim.kill(c.nodes[controller]);
    } else {
        c.sim.power_fail(c.nodes[controller]);
    }
    c.run_for(Duration::from_secs(3));
    c.sim.start(c.nodes[controller]);
    let done = |_: &Cluster| outcome.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    ensure(c.run_until(CREATE_LIMIT * 2, done), || "the create never finished".to_owned())?;
    let attempts =
        outcome.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or("no outcome")??;
    println!("seed {seed:#x}: created after {attempts} attempts");
    c.settle("the failover")?;
    let image = c.committed_image().ok_or("no committed image")?;
    let topic = image.topic("during").ok_or("the acknowledged topic is not committed")?.clone();
    ensure(topic.partitions.len() == PARTITIONS as usize, || {
        format!("{} partitions committed", topic.partitions.len())
    })?;
    ensure(image.topics.values().filter(|t| t.name == "during").count() == 1, || {
        "the topic was created twice".to_owned()
    })?;
    ensure(
        c.run_until(SETTLE_BOUND, |c| {
            (0..3).all(|ix| {
                c.broker(ix)
                    .and_then(|b| b.membership().map(|m| m.image()))
                    .is_some_and(|i| i.topic("during").is_some_and(|t| t.id == topic.id))
            })
        }),
        || "some node never learned the topic under its one id".to_owned(),
    )?;
    for p in 0..PARTITIONS {
        c.produce(via, "during", p, "x", Duration::from_secs(10)).ok_or_else(|| {
            format!("during-{p} took no write (after {attempts} create attempts)")
        })?;
    }
    for ix in 0..3 {
        let want = c.expected_folders(ix).ok_or("no image")?;
        let have = c.partition_folders(ix).ok_or("cannot list the disk")?;
        ensure(have == want, || format!("node{}: folders {have:?}, expected {want:?}", ix + 1))?;
    }
    c.watch_verdict()
}

#[test]
fn create_topic_during_controller_failover() {
    for_each_seed("create_topic_during_controller_failover", 0..32, scenario);
}
