//! Produce: one RecordBatch v2 per partition, built with the broker's own encoder, stamped with
//! the producer's id, epoch and base sequence when the producer is idempotent.

use bytes::Bytes;
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};

use super::admin::{ProducerIdentity, name};
use super::{CallError, Client, ClientError, REQUEST_TIMEOUT, versions};

/// How many replicas must have a batch before the broker answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Acks {
    /// acks=0: no answer at all; the outcome is never known.
    None,
    /// acks=1: the leader has it.
    Leader,
    /// acks=all (-1): every in-sync replica has it.
    All,
}

impl Acks {
    /// The wire value.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// The records for one partition of one produce request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionBatch {
    /// The partition.
    pub partition: i32,
    /// The sequence of the first record (ignored without a producer identity).
    pub base_sequence: i32,
    /// Keys and values, in order.
    pub records: Vec<(Option<Bytes>, Bytes)>,
}

/// One partition's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionAck {
    /// The partition.
    pub partition: i32,
    /// The error code (0: appended at `base_offset`).
    pub error_code: i16,
    /// Offset of the batch's first record, -1 on error.
    pub base_offset: i64,
}

/// What a produce request came back with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProduceOutcome {
    /// The broker answered, per partition.
    Answered(Vec<PartitionAck>),
    /// acks=0: the request left; nothing more will ever be known.
    Unacknowledged,
}

/// Builds one partition's batch.
fn batch(
    batch: &PartitionBatch,
    producer: Option<ProducerIdentity>,
    timestamp_ms: i64,
) -> Result<Bytes, ClientError> {
    let records: Vec<RecordSpec> = batch
        .records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| RecordSpec {
            offset_delta: i as i32,
            timestamp: timestamp_ms,
            key: key.clone(),
            value: Some(value.clone()),
            headers: Vec::new(),
        })
        .collect();
    let mut options = BatchOptions::default();
    if let Some(p) = producer {
        options.producer_id = p.id;
        options.producer_epoch = p.epoch;
        options.base_sequence = batch.base_sequence;
    }
    encode_batch(&records, &options)
        .map_err(|e| ClientError::Call(CallError::Encode(e.to_string())))
}

impl Client {
    /// Produces `batches` to `topic`. `producer` makes the batches idempotent. The deadline is
    /// the client's; the broker is given the same as its own timeout.
    pub async fn produce(
        &mut self,
        topic: &str,
        acks: Acks,
        producer: Option<ProducerIdentity>,
        batches: &[PartitionBatch],
    ) -> Result<ProduceOutcome, ClientError> {
        self.produce_within(topic, acks, producer, batches, REQUEST_TIMEOUT).await
    }

    /// [`Client::produce`] with `deadline` for the client and the broker.
    pub async fn produce_within(
        &mut self,
        topic: &str,
        acks: Acks,
        producer: Option<ProducerIdentity>,
        batches: &[PartitionBatch],
        deadline: std::time::Duration,
    ) -> Result<ProduceOutcome, ClientError> {
        self.produce_timed(topic, acks, producer, batches, deadline, deadline).await
    }

    /// [`Client::produce`] giving the broker `broker_timeout` (the request's `timeout_ms`) and
    /// waiting `deadline` for the answer.
    pub async fn produce_timed(
        &mut self,
        topic: &str,
        acks: Acks,
        producer: Option<ProducerIdentity>,
        batches: &[PartitionBatch],
        broker_timeout: std::time::Duration,
        deadline: std::time::Duration,
    ) -> Result<ProduceOutcome, ClientError> {
        let timestamp_ms = self.env().clock.wall_ms();
        let mut data = TopicProduceData::default();
        data.name = name(topic);
        for b in batches {
            let mut part = PartitionProduceData::default();
            part.index = b.partition;
            part.records = Some(batch(b, producer, timestamp_ms)?);
            data.partition_data.push(part);
        }
        let mut request = ProduceRequest::default();
        request.acks = acks.wire();
        request.timeout_ms = i32::try_from(broker_timeout.as_millis()).unwrap_or(i32::MAX);
        request.topic_data = vec![data];
        if acks == Acks::None {
            self.send_only(&request, versions::PRODUCE, deadline).await?;
            return Ok(ProduceOutcome::Unacknowledged);
        }
        let response = self.call(&request, versions::PRODUCE, deadline).await?;
        let acks: Vec<PartitionAck> = response
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .map(|p| PartitionAck {
                partition: p.index,
                error_code: p.error_code,
                base_offset: p.base_offset,
            })
            .collect();
        if acks.len() != batches.len() {
            return Err(ClientError::Malformed("a partition is missing from the answer"));
        }
        Ok(ProduceOutcome::Answered(acks))
    }
}
