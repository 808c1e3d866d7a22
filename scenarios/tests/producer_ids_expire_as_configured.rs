//! Scenario: `producer.id.expiration.ms` is the broker's setting, as in Kafka (KIP-854), and
//! a partition forgets an idempotent producer that long after its newest batch. On two single
//! nodes, one with the setting at a minute and one with Kafka's day, an idempotent producer
//! writes one batch (sequence 0), is idle for two minutes, then sends a batch at sequence 5:
//! where it was forgotten, that batch starts its sequences afresh and is written; where it is
//! still known, it is out of order (OUT_OF_ORDER_SEQUENCE_NUMBER) and refused.

use std::time::Duration;

use bytes::Bytes;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::client::admin::ProducerIdentity;
use weir_sim::client::produce::{Acks, PartitionBatch, ProduceOutcome};
use weir_sim::client::{Client, codes};
use weir_sim::workload::cluster::{Cluster, ClusterSpec};

const IDLE: Duration = Duration::from_secs(120);

/// One batch at `sequence` from `producer` to `t`-0 at node 0: its error code.
fn write(c: &mut Cluster, producer: ProducerIdentity, sequence: i32) -> Result<i16, String> {
    let addr = c.addr(0);
    let outcome = c
        .client_call(Duration::from_secs(30), move |env| async move {
            let batch = PartitionBatch {
                partition: 0,
                base_sequence: sequence,
                records: vec![(None, Bytes::from_static(b"v"))],
            };
            Client::new(env, addr, "producer")
                .produce("t", Acks::All, Some(producer), &[batch])
                .await
        })
        .ok_or("the produce got no answer")?
        .map_err(|e| e.to_string())?;
    match outcome {
        ProduceOutcome::Answered(acks) => acks.first().map(|a| a.error_code).ok_or("no ack".into()),
        ProduceOutcome::Unacknowledged => Err("unacknowledged".into()),
    }
}

fn scenario(seed: u64) -> Result<(), String> {
    for (expiration_ms, forgotten) in [(60_000, true), (86_400_000, false)] {
        let spec = ClusterSpec {
            producer_id_expiration_ms: expiration_ms,
            checkpoint_ms: 5_000,
            ..ClusterSpec::combined(1)
        };
        let mut c = Cluster::new_settled(seed, spec)?;
        c.create_topic(0, "t", 1).map_err(|e| e.to_string())?;
        let addr = c.addr(0);
        let producer = c
            .client_call(Duration::from_secs(30), move |env| async move {
                Client::new(env, addr, "producer").init_producer_id(None).await
            })
            .ok_or("no producer id")?
            .map_err(|e| e.to_string())?;
        let first = write(&mut c, producer, 0)?;
        ensure(first == 0, || format!("the first batch: {first}"))?;
        c.run_for(IDLE);
        let later = write(&mut c, producer, 5)?;
        let expected = if forgotten { 0 } else { codes::OUT_OF_ORDER_SEQUENCE_NUMBER };
        ensure(later == expected, || {
            format!("sequence 5 after {IDLE:?} idle, expiration {expiration_ms} ms: {later}")
        })?;
        c.watch_verdict()?;
    }
    Ok(())
}

#[test]
fn producer_ids_expire_as_configured() {
    for_each_seed("producer_ids_expire_as_configured", 0..2, scenario);
}
