//! A partition that a broker cannot open after a restart (here its segment file has become a
//! folder, as a damaged file system can leave it) must not keep the broker from opening and
//! serving its other partitions. Before, the first partition that failed to open ended the
//! broker's whole pass over its assignment: every partition after it stayed closed, and the
//! broker took no writes for them, at every retry, for good.
//!
//! Topic `a` (one partition) sorts before topic `b` (two), so its partition is opened first.
//! After the restart, both partitions of `b` must take writes and serve their records, while
//! a write to `a-0` is refused with `KAFKA_STORAGE_ERROR`, as Kafka refuses one to an offline
//! replica (it answered `UNKNOWN_TOPIC_OR_PARTITION`, as if the partition did not exist). Once the folder is gone again, `a-0` must open on a later pass, without
//! another restart, and take writes.

use std::time::Duration;

use weir_scenarios::log::{break_segment, repair_segment};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::workload::cluster::{Cluster, ClusterSpec, ProduceFailure};

/// KAFKA_STORAGE_ERROR: what Kafka answers for an offline replica.
const KAFKA_STORAGE_ERROR: i16 = 56;
/// How long a partition may take to take a write.
const WRITE_LIMIT: Duration = Duration::from_secs(30);

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(1))?;
    c.create_topic(0, "a", 1).map_err(|e| format!("creating a: {e}"))?;
    c.create_topic(0, "b", 2).map_err(|e| format!("creating b: {e}"))?;
    for (topic, partition) in [("a", 0), ("b", 0), ("b", 1)] {
        c.produce(0, topic, partition, "before", WRITE_LIMIT)
            .ok_or_else(|| format!("{topic}-{partition} took no write"))?;
    }
    let node = c.nodes[0];
    break_segment(&c.sim, node, "a-0")?;
    c.sim.kill(node);
    c.sim.start(node);
    c.run_for(Duration::from_secs(1 + seed % 3));

    for partition in 0..2 {
        c.produce(0, "b", partition, "after", WRITE_LIMIT).ok_or_else(|| {
            format!("b-{partition} took no write after the restart, with a-0 unable to open")
        })?;
        let read = c.read_all(0, "b", partition)?;
        let values: Vec<&[u8]> = read.values().map(|v| v.as_ref()).collect();
        ensure(values == [b"before".as_slice(), b"after"], || {
            format!("b-{partition} holds {values:?}, not its two records")
        })?;
    }
    let refused = c.produce_at(0, "a", 0, "while broken");
    ensure(matches!(refused, Err(ProduceFailure::Code(KAFKA_STORAGE_ERROR))), || {
        format!(
            "a write to a-0, whose segment file is a folder, answered {refused:?}, not \
             KAFKA_STORAGE_ERROR"
        )
    })?;

    repair_segment(&c.sim, node, "a-0")?;
    c.produce(0, "a", 0, "repaired", WRITE_LIMIT)
        .ok_or("a-0 took no write once its folder was gone: it was not opened again")?;
    Ok(())
}

#[test]
fn broker_serves_its_other_partitions_when_one_cannot_open() {
    for_each_seed("broker_serves_its_other_partitions_when_one_cannot_open", 0..6, scenario);
}
