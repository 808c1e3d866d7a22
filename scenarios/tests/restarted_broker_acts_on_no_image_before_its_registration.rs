//! Fault scenario: a broker restarted while cut off from the rest of the metadata quorum may
//! be handed an image older than the one it acted on before it stopped — one where it still
//! leads a partition whose ISR has grown since. It must act on no image before one holds its
//! new registration (committed by a real quorum, so holding every change committed before it):
//! taking the lead in the old image, it would compute the high watermark over the old, smaller
//! ISR and serve and acknowledge records a member of the grown ISR lacks, which that member,
//! elected next, writes other records over. Once the quorum is back within reach it registers,
//! takes its part, and rejoins the ISR.

use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_replicated_topic(0, "t", 1, 3, &[]).map_err(|e| e.to_string())?;
    c.await_isr_size(("t", 0), 3, Duration::from_secs(30))?;
    let cut = (seed % 3) as usize;
    let host = c.nodes[cut];
    c.sim.kill(host);
    c.sim.isolate(host);
    c.sim.start(host);
    c.run_for(Duration::from_secs(5));
    let broker = c.broker(cut).ok_or("the restarted broker is not running")?;
    // It was handed an image that gives it a part in `t` (or the check below proves nothing).
    let node = broker.config.node_id;
    let image = broker.membership().map(|m| m.image()).ok_or("no membership")?;
    let named = image.partition("t", 0).is_some_and(|p| p.replicas.contains(&node));
    ensure(named, || format!("node{} was handed no image naming it a replica of t-0", cut + 1))?;
    let hosted: Vec<String> =
        broker.catalog.partitions().iter().map(|p| p.tp.to_string()).collect();
    ensure(hosted.is_empty(), || {
        format!("node{} took part in {hosted:?} before registering again", cut + 1)
    })?;
    c.sim.heal_all();
    c.settle("the heal")?;
    c.await_isr_size(("t", 0), 3, Duration::from_secs(30))
        .map_err(|e| format!("node{} did not rejoin: {e}", cut + 1))
}

#[test]
fn restarted_broker_acts_on_no_image_before_its_registration() {
    for_each_seed("restarted_broker_acts_on_no_image_before_its_registration", 0..6, scenario);
}
