//! A null broker: a Kafka endpoint on loopback that answers ApiVersions, Metadata, CreateTopics,
//! Produce, ListOffsets and Fetch, and discards every record it is sent. Nothing is stored,
//! checked or synced; each produce is acknowledged as soon as its request has been read and
//! decoded, and counts its records so that offsets advance. A fetch is answered from memory
//! with one prepared batch of 1 KiB records, copied and stamped with the offset asked for, up
//! to what was produced (FindCoordinator gets COORDINATOR_NOT_AVAILABLE: there are no groups).
//!
//! Driven by the same librdkafka clients as the brokers, it measures what the clients and the
//! loopback network reach on this machine when the broker costs (almost) nothing: the ceiling
//! any broker's produce and consume figures sit under, and the floor under any broker's
//! produce-ack latency. It is a baseline, not a broker: it keeps no log.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsResponse, FetchResponse,
    FindCoordinatorResponse, ListOffsetsResponse, MetadataResponse, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir::protocol::api::{Request, Response};
use weir::protocol::codec::{advertised_versions, decode_request, encode_response};

use super::client::Result;

/// The node id the sink answers as.
const NODE_ID: i32 = 1;
/// Largest request frame the sink reads (librdkafka's default `message.max.bytes` is 1 MB).
const FRAME_MAX_BYTES: usize = 64 << 20;
/// Records in the batch a fetch is answered with: about 1 MB, within librdkafka's default
/// per-partition fetch size (1 MiB).
const FETCH_BATCH_RECORDS: usize = 960;
/// The highest Fetch version the sink answers: the last that names topics (13 on name them by
/// id, which the sink's metadata does not give).
const FETCH_VERSION_MAX: i16 = 12;
/// Kafka's COORDINATOR_NOT_AVAILABLE error code.
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// ListOffsets' timestamp for the log start.
const EARLIEST: i64 = -2;
/// Offset of the record count in a RecordBatch v2 header.
const RECORD_COUNT_AT: usize = 57;
/// Bytes of a RecordBatch v2 header.
const BATCH_HEADER_BYTES: usize = 61;

/// Topics the sink has been told of (by CreateTopics or Metadata): partitions, and the next
/// offset to hand out per partition.
#[derive(Default)]
struct Topics(HashMap<String, Vec<i64>>);

impl Topics {
    /// The next offset of `topic`'s partition `partition`, if the sink knows it.
    fn end(&self, topic: &str, partition: i32) -> Option<i64> {
        let ends = self.0.get(topic)?;
        usize::try_from(partition).ok().and_then(|i| ends.get(i)).copied()
    }
}

/// A running null broker.
pub struct Sink {
    /// Where clients connect.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Sink {
    /// Starts the sink on `listen` (port 0: an ephemeral one), one thread per connection.
    pub fn start(listen: SocketAddr) -> Result<Sink> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let topics = Arc::new(Mutex::new(Topics::default()));
        let batch = crate::logbench::one_batch(FETCH_BATCH_RECORDS)?;
        let acceptor = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let topics = Arc::clone(&topics);
                    let batch = batch.clone();
                    std::thread::spawn(move || {
                        // A connection ends when the client closes it or sends what the sink
                        // does not answer; either way there is nothing more to do with it.
                        let _ = serve(stream, addr, &topics, &batch);
                    });
                }
            })
        };
        Ok(Sink { addr, stop, acceptor: Some(acceptor) })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the acceptor so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn serve(
    mut stream: TcpStream,
    addr: SocketAddr,
    topics: &Mutex<Topics>,
    batch: &Bytes,
) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut size = [0u8; 4];
    loop {
        stream.read_exact(&mut size)?;
        let len = i32::from_be_bytes(size);
        let len = usize::try_from(len).ok().filter(|&l| l <= FRAME_MAX_BYTES);
        let Some(len) = len else { return Err("bad frame size".into()) };
        let mut body = BytesMut::zeroed(len);
        stream.read_exact(&mut body)?;
        let decoded = decode_request(body.freeze())?;
        let Some(response) = answer(decoded.request, addr, topics, batch)? else { continue };
        let frame = encode_response(&decoded.header, &response).ok_or("cannot encode")?;
        for piece in frame.pieces() {
            stream.write_all(piece)?;
        }
    }
}

/// The sink's answer, or `None` where Kafka sends none (acks=0 produce); an error for a
/// request it does not answer, which ends the connection.
fn answer(
    request: Request,
    addr: SocketAddr,
    topics: &Mutex<Topics>,
    batch: &Bytes,
) -> Result<Option<Response>> {
    let mut topics = topics.lock().unwrap_or_else(|p| p.into_inner());
    let response = match request {
        Request::ApiVersions(_) => {
            let mut r = ApiVersionsResponse::default();
            let answered = [
                ApiKey::ApiVersions,
                ApiKey::Metadata,
                ApiKey::CreateTopics,
                ApiKey::Produce,
                ApiKey::ListOffsets,
                ApiKey::Fetch,
                ApiKey::FindCoordinator,
            ];
            r.api_keys = advertised_versions()
                .into_iter()
                .filter(|v| answered.iter().any(|k| *k as i16 == v.api_key))
                .map(|mut v| {
                    if v.api_key == ApiKey::Fetch as i16 {
                        v.max_version = v.max_version.min(FETCH_VERSION_MAX);
                    }
                    v
                })
                .collect();
            Some(Response::ApiVersions(r))
        }
        Request::CreateTopics(request) => {
            let mut r = CreateTopicsResponse::default();
            for topic in request.topics {
                let partitions = topic.num_partitions.max(1);
                topics.0.insert(topic.name.0.to_string(), vec![0; partitions as usize]);
                let mut result = CreatableTopicResult::default();
                result.name = topic.name;
                result.num_partitions = partitions;
                result.replication_factor = 1;
                r.topics.push(result);
            }
            Some(Response::CreateTopics(r))
        }
        Request::Metadata(request) => {
            let mut r = MetadataResponse::default();
            let mut broker = MetadataResponseBroker::default();
            broker.node_id = BrokerId(NODE_ID);
            broker.host = StrBytes::from_string(addr.ip().to_string());
            broker.port = i32::from(addr.port());
            r.brokers = vec![broker];
            r.controller_id = BrokerId(NODE_ID);
            r.cluster_id = Some(StrBytes::from_static_str("null-sink"));
            let names: Vec<String> = match request.topics {
                Some(wanted) => {
                    wanted.into_iter().filter_map(|t| t.name.map(|n| n.0.to_string())).collect()
                }
                None => topics.0.keys().cloned().collect(),
            };
            for name in names {
                let partitions = topics.0.entry(name.clone()).or_insert_with(|| vec![0]).len();
                let mut topic = MetadataResponseTopic::default();
                topic.name = Some(TopicName(StrBytes::from_string(name)));
                topic.partitions = (0..partitions as i32)
                    .map(|index| {
                        let mut p = MetadataResponsePartition::default();
                        p.partition_index = index;
                        p.leader_id = BrokerId(NODE_ID);
                        p.replica_nodes = vec![BrokerId(NODE_ID)];
                        p.isr_nodes = vec![BrokerId(NODE_ID)];
                        p
                    })
                    .collect();
                r.topics.push(topic);
            }
            Some(Response::Metadata(r))
        }
        Request::Produce(request) => {
            let acks = request.acks;
            let mut r = ProduceResponse::default();
            for data in request.topic_data {
                let next = topics.0.entry(data.name.0.to_string()).or_insert_with(|| vec![0]);
                let mut out = TopicProduceResponse::default();
                out.name = data.name;
                for partition in data.partition_data {
                    let mut p = PartitionProduceResponse::default();
                    p.index = partition.index;
                    p.log_append_time_ms = -1;
                    match usize::try_from(partition.index).ok().and_then(|i| next.get_mut(i)) {
                        Some(offset) => {
                            p.base_offset = *offset;
                            *offset += records_in(partition.records.as_ref());
                        }
                        None => {
                            p.error_code = UNKNOWN_TOPIC_OR_PARTITION;
                            p.base_offset = -1;
                        }
                    }
                    out.partition_responses.push(p);
                }
                r.responses.push(out);
            }
            // acks=0: the records count, but Kafka sends no answer.
            (acks != 0).then_some(Response::Produce(r))
        }
        Request::FindCoordinator(_) => {
            let mut r = FindCoordinatorResponse::default();
            r.error_code = COORDINATOR_NOT_AVAILABLE;
            Some(Response::FindCoordinator(r))
        }
        Request::ListOffsets(request) => {
            let mut r = ListOffsetsResponse::default();
            for topic in request.topics {
                let mut out = ListOffsetsTopicResponse::default();
                for partition in topic.partitions {
                    let mut p = ListOffsetsPartitionResponse::default();
                    p.partition_index = partition.partition_index;
                    p.timestamp = -1;
                    p.leader_epoch = -1;
                    match topics.end(&topic.name, partition.partition_index) {
                        Some(end) => {
                            p.offset = if partition.timestamp == EARLIEST { 0 } else { end }
                        }
                        None => p.error_code = UNKNOWN_TOPIC_OR_PARTITION,
                    }
                    out.partitions.push(p);
                }
                out.name = topic.name;
                r.topics.push(out);
            }
            Some(Response::ListOffsets(r))
        }
        Request::Fetch(request) => {
            let mut r = FetchResponse::default();
            for topic in request.topics {
                let mut out = FetchableTopicResponse::default();
                for partition in topic.partitions {
                    let mut p = PartitionData::default();
                    p.partition_index = partition.partition;
                    p.preferred_read_replica = BrokerId(-1);
                    p.aborted_transactions = Some(Vec::new());
                    match topics.end(&topic.topic, partition.partition) {
                        Some(end) => {
                            p.high_watermark = end;
                            p.last_stable_offset = end;
                            if partition.fetch_offset < end {
                                p.records = Some(stamped(batch, partition.fetch_offset));
                            }
                        }
                        None => p.error_code = UNKNOWN_TOPIC_OR_PARTITION,
                    }
                    out.partitions.push(p);
                }
                out.topic = topic.topic;
                r.responses.push(out);
            }
            Some(Response::Fetch(r))
        }
        other => return Err(format!("the sink does not answer {:?}", other.key()).into()),
    };
    Ok(response)
}

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION error code.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// A copy of `batch` with its base offset set to `offset` (outside the CRC, as a broker stamps
/// it): the read a broker would make, from memory.
fn stamped(batch: &Bytes, offset: i64) -> Bytes {
    let mut copy = BytesMut::from(&batch[..]);
    copy[..8].copy_from_slice(&offset.to_be_bytes());
    copy.freeze()
}

/// Records in a produce request's batches, by their headers' counts.
fn records_in(records: Option<&Bytes>) -> i64 {
    let Some(records) = records else { return 0 };
    let mut rest = &records[..];
    let mut count = 0i64;
    while rest.len() >= BATCH_HEADER_BYTES {
        let batch_len = (&rest[8..12]).get_i32();
        let Ok(total) = usize::try_from(batch_len).map(|l| l + 12) else { break };
        count += i64::from((&rest[RECORD_COUNT_AT..RECORD_COUNT_AT + 4]).get_i32());
        rest = rest.get(total..).unwrap_or_default();
    }
    count
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::ProduceRequest;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};

    use super::*;

    /// A RecordBatch v2 header claiming `count` records, with `body` bytes after it.
    fn batch(count: i32, body: usize) -> Vec<u8> {
        let mut b = vec![0u8; BATCH_HEADER_BYTES + body];
        let batch_len = (BATCH_HEADER_BYTES + body - 12) as i32;
        b[8..12].copy_from_slice(&batch_len.to_be_bytes());
        b[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
        b
    }

    fn produce(acks: i16, topic: &str, partition: i32, records: Vec<u8>) -> Request {
        let mut p = PartitionProduceData::default();
        p.index = partition;
        p.records = Some(Bytes::from(records));
        let mut t = TopicProduceData::default();
        t.name = TopicName(StrBytes::from_string(topic.to_owned()));
        t.partition_data = vec![p];
        let mut r = ProduceRequest::default();
        r.acks = acks;
        r.topic_data = vec![t];
        Request::Produce(r)
    }

    fn produced(response: Option<Response>) -> (i16, i64) {
        let Some(Response::Produce(r)) = response else { panic!("not a produce response") };
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    #[test]
    fn records_are_counted_from_every_batch_header() {
        let mut two = batch(3, 100);
        two.extend(batch(5, 7));
        assert_eq!(records_in(Some(&Bytes::from(two))), 8);
        assert_eq!(records_in(None), 0);
        // A truncated batch after a whole one is not counted.
        let mut torn = batch(2, 0);
        torn.extend(&batch(9, 0)[..30]);
        assert_eq!(records_in(Some(&Bytes::from(torn))), 2);
    }

    #[test]
    fn produce_hands_out_consecutive_offsets_and_refuses_unknown_partitions() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        let topics = Mutex::new(Topics::default());
        let served = Bytes::new();
        let answer = |r| answer(r, addr, &topics, &served).expect("answered");
        assert_eq!(produced(answer(produce(1, "t", 0, batch(4, 10)))), (0, 0));
        assert_eq!(produced(answer(produce(-1, "t", 0, batch(2, 10)))), (0, 4));
        assert_eq!(produced(answer(produce(1, "t", 0, batch(1, 10)))), (0, 6));
        assert_eq!(produced(answer(produce(1, "t", 3, batch(1, 10)))), (3, -1));
        assert!(answer(produce(0, "t", 0, batch(1, 10))).is_none(), "acks=0 gets no answer");
        assert_eq!(produced(answer(produce(1, "t", 0, batch(1, 10)))), (0, 8));
    }

    #[test]
    fn a_fetch_gets_the_prepared_batch_at_its_offset_up_to_what_was_produced() {
        use kafka_protocol::messages::FetchRequest;
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        let topics = Mutex::new(Topics::default());
        let served = Bytes::from(batch(960, 100));
        answer(produce(1, "t", 0, batch(2_000, 10)), addr, &topics, &served).expect("answered");
        let fetch = |offset: i64| {
            let mut p = FetchPartition::default();
            p.fetch_offset = offset;
            let mut t = FetchTopic::default();
            t.topic = TopicName(StrBytes::from_static_str("t"));
            t.partitions = vec![p];
            let mut r = FetchRequest::default();
            r.topics = vec![t];
            let Some(Response::Fetch(r)) =
                answer(Request::Fetch(r), addr, &topics, &served).expect("answered")
            else {
                panic!("not a fetch response")
            };
            let p = r.responses[0].partitions[0].clone();
            (p.high_watermark, p.records)
        };
        let (hw, records) = fetch(1_500);
        assert_eq!(hw, 2_000);
        let records = records.expect("records below the high watermark");
        assert_eq!(records.len(), served.len());
        assert_eq!(&records[..8], &1_500i64.to_be_bytes(), "stamped with the offset asked for");
        assert_eq!(&records[8..], &served[8..], "the rest as prepared");
        let (hw, records) = fetch(2_000);
        assert_eq!(hw, 2_000);
        assert!(records.is_none_or(|r| r.is_empty()), "nothing at the high watermark");
    }

    #[test]
    fn a_request_the_sink_does_not_answer_ends_the_connection() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        let topics = Mutex::new(Topics::default());
        let heartbeat = Request::Heartbeat(Default::default());
        assert!(answer(heartbeat, addr, &topics, &Bytes::new()).is_err());
    }
}
