//! Scenario: ListOffsets never offers an offset a leader change could take back. A 3-node
//! cluster's leader takes a record with acks=1 while its answers to the followers are held
//! back, so the record, the newest and so the one with the largest timestamp, stays at the
//! high watermark. MAX_TIMESTAMP then answers offset −1, as Kafka's does, where it gave the
//! record's offset before; LATEST gives the high watermark. Once the followers have the record,
//! MAX_TIMESTAMP gives its offset. (LATEST_TIERED, which needs v9, is in
//! `list_offsets_answers_as_kafka`.)

use std::collections::BTreeMap;
use std::time::Duration;

use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::Client;
use weir_sim::client::admin::{LATEST, MAX_TIMESTAMP};
use weir_sim::client::produce::Acks;
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

/// Records written with acks=all before the one at the high watermark.
const COMMITTED: i64 = 2;

/// The offsets node `ix` gives for `t`-0 at each of `timestamps`.
fn listed(c: &mut Cluster, ix: usize, timestamps: &[i64]) -> Result<BTreeMap<i64, i64>, String> {
    let addr = c.addr(ix);
    let timestamps = timestamps.to_vec();
    c.client_call(Duration::from_secs(10), move |env| async move {
        let mut client = Client::new(env, addr, "reader");
        let mut out = BTreeMap::new();
        for at in timestamps {
            let answer = client.list_offsets("t", &[0], at).await.map_err(|e| e.to_string())?;
            match answer.get(&0) {
                Some(Ok(offset)) => out.insert(at, *offset),
                other => return Err(format!("ListOffsets({at}) answered {other:?}")),
            };
        }
        Ok(out)
    })
    .ok_or("ListOffsets got no answer")?
}

fn scenario(seed: u64) -> Result<(), String> {
    let mut c = Cluster::new_settled(seed, ClusterSpec::combined(3))?;
    c.create_replicated_topic(seed as usize % 3, "t", 1, 3, &[]).map_err(|e| e.to_string())?;
    c.run_for(Duration::from_secs(2));
    for n in 0..COMMITTED {
        let offset = c
            .produce(0, "t", 0, &format!("committed-{n}"), Duration::from_secs(10))
            .ok_or("no acks=all write")?;
        ensure(offset == n, || format!("write {n} landed at {offset}"))?;
    }
    let image = c.committed_image().ok_or("no committed image")?;
    let partition = image.topic("t").ok_or("no topic")?.partitions[&0].clone();
    let leader = c.ix_of(partition.leader).ok_or("no leader")?;
    for &r in partition.replicas.iter().filter(|&&r| r != partition.leader) {
        let follower = c.ix_of(r).ok_or("no follower node")?;
        c.sim.clog(c.nodes[leader], c.nodes[follower]);
    }
    // A later wall-clock time than the committed records'.
    c.run_for(Duration::from_millis(50));
    let pending = c
        .produce_with(leader, "t", 0, "pending", Acks::Leader)
        .map_err(|e| format!("the acks=1 write failed: {e:?}"))?;
    ensure(pending == COMMITTED, || format!("the acks=1 write landed at {pending}"))?;
    let got = listed(&mut c, leader, &[LATEST, MAX_TIMESTAMP])?;
    let want = BTreeMap::from([(LATEST, COMMITTED), (MAX_TIMESTAMP, -1)]);
    ensure(got == want, || {
        format!(
            "with offset {pending} above the high watermark, ListOffsets gave {got:?}, want {want:?}"
        )
    })?;

    c.sim.heal_all();
    let replicated = c.run_until(Duration::from_secs(10), |c| {
        c.broker(leader)
            .and_then(|b| b.catalog.partition("t", 0))
            .is_some_and(|p| p.high_watermark().0 > pending)
    });
    ensure(replicated, || "the high watermark did not pass the acks=1 write".to_string())?;
    let got = listed(&mut c, leader, &[MAX_TIMESTAMP])?;
    ensure(got.get(&MAX_TIMESTAMP) == Some(&pending), || {
        format!("once replicated, MAX_TIMESTAMP gave {got:?}, want {pending}")
    })?;
    c.watch_verdict()
}

#[test]
fn list_offsets_offers_nothing_past_the_high_watermark() {
    for_each_seed("list_offsets_offers_nothing_past_the_high_watermark", 0..3, scenario);
}
