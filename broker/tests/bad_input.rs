//! Hostile and broken input over real TCP: each misbehaving connection gets a clear error or is
//! closed, the broker never panics or aborts, nothing is written, and other connections carry on.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use support::TestBroker;
use support::wire::{frame, read_response, request, send_raw};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Hostile array counts must not abort the process (see weir::runtime::alloc).
#[global_allocator]
static ALLOCATOR: weir::runtime::alloc::LazyHugeAlloc = weir::runtime::alloc::LazyHugeAlloc;

/// Whether the broker closed the connection (EOF or reset) rather than answering.
async fn closed(stream: &mut TcpStream) -> bool {
    read_response(stream).await.is_none()
}

/// A fresh connection still gets ApiVersions answered.
async fn still_serves(broker: &TestBroker) {
    let mut stream = TcpStream::connect(broker.addr).await.unwrap();
    stream
        .write_all(&request(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default()))
        .await
        .unwrap();
    let mut response = read_response(&mut stream).await.expect("the broker stopped answering");
    let header = ResponseHeader::decode(&mut response, 0).unwrap();
    assert_eq!(header.correlation_id, 7);
    let body = ApiVersionsResponse::decode(&mut response, 3).unwrap();
    assert_eq!(body.error_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_oversized_negative_and_truncated_frames_close_only_their_connection() {
    let broker = TestBroker::start().await;
    // A bystander connection opened first must keep working throughout.
    let mut bystander = TcpStream::connect(broker.addr).await.unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"\x00\x00\x00\x08GARBAGE!".to_vec()),
        ("oversized size", (200u32 << 20).to_be_bytes().to_vec()),
        ("negative size", (-5i32).to_be_bytes().to_vec()),
        ("too short for a header", frame(&[0, 18])),
        ("unknown api key", frame(&[0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff])),
    ];
    for (name, bytes) in cases {
        let mut stream = send_raw(&broker, &bytes).await;
        assert!(closed(&mut stream).await, "{name}: the connection was not closed");
    }
    // A frame that promises 100 bytes and delivers 10 before hanging up.
    let mut truncated = (100u32).to_be_bytes().to_vec();
    truncated.extend_from_slice(&[0u8; 10]);
    drop(send_raw(&broker, &truncated).await);
    bystander
        .write_all(&request(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default()))
        .await
        .unwrap();
    assert!(read_response(&mut bystander).await.is_some(), "a bystander connection was disturbed");
    still_serves(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_api_versions_version_gets_a_v0_error_listing_versions() {
    let broker = TestBroker::start().await;
    let mut body = BytesMut::new();
    body.put_i16(ApiKey::ApiVersions as i16);
    body.put_i16(99);
    body.put_i32(42);
    body.put_i16(-1); // null client id
    let mut stream = send_raw(&broker, &frame(&body)).await;
    let mut response = read_response(&mut stream).await.expect("no answer to ApiVersions v99");
    let header = ResponseHeader::decode(&mut response, 0).unwrap();
    assert_eq!(header.correlation_id, 42);
    let decoded = ApiVersionsResponse::decode(&mut response, 0).unwrap();
    assert_eq!(decoded.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(
        decoded.api_keys.iter().any(|k| k.api_key == ApiKey::Produce as i16 && k.max_version >= 9)
    );
    // Another API at an unsupported version closes the connection.
    let produce = request(ApiKey::Produce, 9, 1, &ProduceRequest::default());
    let mut bumped = produce.clone();
    bumped[6..8].copy_from_slice(&99i16.to_be_bytes());
    let mut stream = send_raw(&broker, &bumped).await;
    assert!(closed(&mut stream).await);
    still_serves(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_array_count_is_refused_without_allocating_it() {
    let broker = TestBroker::start().await;
    // Metadata v0 whose topic array claims 2^31-1 entries in a 4-byte body.
    let mut body = BytesMut::new();
    body.put_i16(ApiKey::Metadata as i16);
    body.put_i16(0);
    body.put_i32(1);
    body.put_i16(-1);
    body.put_i32(i32::MAX);
    let mut stream = send_raw(&broker, &frame(&body)).await;
    assert!(closed(&mut stream).await);
    still_serves(&broker).await;
}

fn produce_request(topic: &str, records: Bytes) -> ProduceRequest {
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(records);
    let mut data = TopicProduceData::default();
    data.name = TopicName(StrBytes::from_string(topic.to_owned()));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 5_000;
    request.topic_data = vec![data];
    request
}

async fn produce_error(broker: &TestBroker, records: Bytes) -> i16 {
    let mut stream =
        send_raw(broker, &request(ApiKey::Produce, 9, 5, &produce_request("victim", records)))
            .await;
    let mut response = read_response(&mut stream).await.expect("no produce response");
    ResponseHeader::decode(&mut response, 1).unwrap();
    let decoded = ProduceResponse::decode(&mut response, 9).unwrap();
    decoded.responses[0].partition_responses[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_and_oversized_batches_are_refused_and_nothing_is_written() {
    let broker = TestBroker::start().await;
    broker
        .broker
        .create_topic("victim", 1, 1, &[("max.message.bytes".into(), "2000".into())], false)
        .await
        .unwrap();
    let spec = |len: usize| weir::log::encode::RecordSpec {
        offset_delta: 0,
        timestamp: 1,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from(vec![7u8; len])),
        headers: Vec::new(),
    };
    let good = weir::log::encode::encode_batch(&[spec(10)], &Default::default()).unwrap();
    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40;
    assert_eq!(produce_error(&broker, Bytes::from(corrupt)).await, 2, "CORRUPT_MESSAGE");
    let big = weir::log::encode::encode_batch(&[spec(5_000)], &Default::default()).unwrap();
    assert_eq!(produce_error(&broker, big).await, 10, "MESSAGE_TOO_LARGE");
    assert_eq!(
        produce_error(&broker, Bytes::from_static(b"not a batch at all")).await,
        2,
        "CORRUPT_MESSAGE"
    );
    let partition = broker.broker.catalog.partition("victim", 0).unwrap();
    assert_eq!(partition.log.log_end_offset().0, 0, "a refused batch was written");
    assert_eq!(produce_error(&broker, good).await, 0);
    assert_eq!(partition.log.log_end_offset().0, 1);
}

/// A retry of an idempotent producer's batch is known by its header alone, so the whole batch
/// is checked before it is taken for one: a copy with a bit flipped in its records, or with a
/// second batch behind it, is refused (and nothing written), never acknowledged as the batch it
/// resembles. A second batch is invalid, not corrupt, unless the first is corrupt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_copy_of_an_idempotent_batch_is_refused_not_taken_for_a_retry() {
    let broker = TestBroker::start().await;
    broker.broker.create_topic("victim", 1, 1, &[], false).await.unwrap();
    let spec = |value: &'static [u8]| weir::log::encode::RecordSpec {
        offset_delta: 0,
        timestamp: 1,
        key: None,
        value: Some(Bytes::from_static(value)),
        headers: Vec::new(),
    };
    let options = |sequence: i32| weir::log::encode::BatchOptions {
        producer_id: 7,
        producer_epoch: 0,
        base_sequence: sequence,
        ..Default::default()
    };
    let first = weir::log::encode::encode_batch(&[spec(b"first")], &options(0)).unwrap();
    let second = weir::log::encode::encode_batch(&[spec(b"second")], &options(1)).unwrap();
    assert_eq!(produce_error(&broker, first.clone()).await, 0);
    let partition = broker.broker.catalog.partition("victim", 0).unwrap();
    assert_eq!(partition.log.log_end_offset().0, 1);
    // The first batch's header over other records: its CRC no longer matches.
    let mut flipped = first.to_vec();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x01;
    assert_eq!(produce_error(&broker, Bytes::from(flipped)).await, 2, "CORRUPT_MESSAGE");
    // A retry of the first batch with the second behind it, in one records field: refused as
    // more than one batch, which a producer does not retry. With a bit of the first flipped,
    // it is corruption.
    let both = [first.as_ref(), second.as_ref()].concat();
    assert_eq!(produce_error(&broker, Bytes::from(both.clone())).await, 87, "INVALID_RECORD");
    let mut flipped_both = both;
    flipped_both[first.len() - 1] ^= 0x01;
    assert_eq!(produce_error(&broker, Bytes::from(flipped_both)).await, 2, "CORRUPT_MESSAGE");
    assert_eq!(partition.log.log_end_offset().0, 1, "a refused batch was written");
    // The true retry is still answered as the original, and the second batch is written next.
    assert_eq!(produce_error(&broker, first).await, 0);
    assert_eq!(partition.log.log_end_offset().0, 1, "a retry was written again");
    assert_eq!(produce_error(&broker, second).await, 0);
    assert_eq!(partition.log.log_end_offset().0, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_folder_of_another_node_or_a_damaged_identity_is_refused_and_left_alone() {
    use weir::identity::{IdentityError, META_PROPERTIES};
    use weir::node::{Broker, StartError};
    let (dir, _) = TestBroker::start().await.stop().await;
    let identity = dir.join(META_PROPERTIES);
    let written = std::fs::read_to_string(&identity).unwrap();
    assert!(written.contains("node.id=1\n"), "{written}");
    let marker = dir.join(weir::node::CLEAN_SHUTDOWN_MARKER);
    assert!(marker.exists());
    let start = |node_id: i32| {
        let config = weir::config::BrokerConfig { node_id, ..support::config(dir.clone()) };
        Broker::start(weir::runtime::production_env(dir.clone()), config)
    };
    match start(2).await {
        Err(StartError::Identity(IdentityError::OtherNode { found: 1, configured: 2 })) => {}
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("node 2 started over node 1's folder"),
    }
    std::fs::write(&identity, "version=1\nnode.id=1\ndirectory.id=not-hex\n").unwrap();
    match start(1).await {
        Err(StartError::Identity(IdentityError::Malformed(_))) => {}
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("started over a damaged {META_PROPERTIES}"),
    }
    assert!(marker.exists(), "a refused start took the clean shutdown marker");
    assert_eq!(
        std::fs::read_to_string(&identity).unwrap(),
        "version=1\nnode.id=1\ndirectory.id=not-hex\n"
    );
    // Put back as it was, the folder starts again with the same identity.
    std::fs::write(&identity, &written).unwrap();
    let again = TestBroker::restart(dir.clone(), "127.0.0.1:0".parse().unwrap()).await;
    assert_eq!(std::fs::read_to_string(&identity).unwrap(), written);
    drop(again);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_elections_refuse_unknown_types_and_too_many_partitions() {
    let broker = TestBroker::start().await;
    let elect = |version: i16, election_type: i8, partitions: usize| {
        let mut topic = elect_leaders_request::TopicPartitions::default();
        topic.topic = TopicName(StrBytes::from_static_str("nope"));
        topic.partitions = (0..partitions as i32).collect();
        let mut request = ElectLeadersRequest::default();
        request.election_type = election_type;
        request.topic_partitions = Some(vec![topic]);
        request.timeout_ms = 5_000;
        self::request(ApiKey::ElectLeaders, version, 11, &request)
    };
    let answer = |mut response: Bytes, version: i16| {
        ResponseHeader::decode(&mut response, if version >= 2 { 1 } else { 0 }).unwrap();
        ElectLeadersResponse::decode(&mut response, version).unwrap()
    };
    // An election type Kafka does not define.
    let mut stream = send_raw(&broker, &elect(2, 7, 1)).await;
    let response = answer(read_response(&mut stream).await.expect("no answer"), 2);
    assert_eq!(response.error_code, 42, "INVALID_REQUEST");
    assert!(response.replica_election_results.is_empty());
    // More partitions than one request may name.
    let too_many = weir::server::handlers::ELECT_LEADERS_PARTITIONS_MAX + 1;
    let mut stream = send_raw(&broker, &elect(1, 0, too_many)).await;
    let response = answer(read_response(&mut stream).await.expect("no answer"), 1);
    assert_eq!(response.error_code, 42, "INVALID_REQUEST");
    assert!(response.replica_election_results.is_empty());
    // Unknown partitions are answered as such; one named twice is answered once.
    let mut stream = send_raw(&broker, &elect(1, 0, 2)).await;
    let mut pair = answer(read_response(&mut stream).await.expect("no answer"), 1);
    let mut doubled = elect_leaders_request::TopicPartitions::default();
    doubled.topic = TopicName(StrBytes::from_static_str("nope"));
    doubled.partitions = vec![0, 0];
    let mut request = ElectLeadersRequest::default();
    request.topic_partitions = Some(vec![doubled.clone(), doubled]);
    let mut stream = send_raw(&broker, &self::request(ApiKey::ElectLeaders, 1, 12, &request)).await;
    let once = answer(read_response(&mut stream).await.expect("no answer"), 1);
    assert_eq!(once.error_code, 0);
    assert_eq!(once.replica_election_results.len(), 1);
    let partitions = &once.replica_election_results[0].partition_result;
    assert_eq!(partitions.len(), 1, "{partitions:?}");
    assert_eq!((partitions[0].partition_id, partitions[0].error_code), (0, 3));
    assert_eq!(pair.error_code, 0);
    let two = pair.replica_election_results.pop().unwrap().partition_result;
    assert_eq!(two.iter().map(|p| p.error_code).collect::<Vec<_>>(), vec![3, 3]);
    still_serves(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_dirs_asked_for_many_partitions_of_a_long_name_answer_what_is_held() {
    let broker = TestBroker::start().await;
    // A name of the longest a v1 string holds, with 20,000 partitions and the same again.
    let long = "x".repeat(32_000);
    let mut topic = describe_log_dirs_request::DescribableLogDirTopic::default();
    topic.topic = TopicName(StrBytes::from_string(long));
    topic.partitions = (0..20_000).collect();
    let mut request = DescribeLogDirsRequest::default();
    request.topics = Some(vec![topic.clone(), topic]);
    let mut stream =
        send_raw(&broker, &self::request(ApiKey::DescribeLogDirs, 1, 13, &request)).await;
    let mut response = read_response(&mut stream).await.expect("no answer");
    ResponseHeader::decode(&mut response, 0).unwrap();
    let answer = DescribeLogDirsResponse::decode(&mut response, 1).unwrap();
    assert_eq!(answer.results.len(), 1);
    assert_eq!(answer.results[0].error_code, 0);
    assert!(answer.results[0].topics.is_empty(), "no such topic is held");
    still_serves(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_config_changes_that_are_malformed_are_refused_and_change_nothing() {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let broker = TestBroker::start().await;
    let settings = [("retention.ms".to_owned(), "5000".to_owned())];
    broker.broker.create_topic("victim", 1, 1, &settings, false).await.unwrap();
    let before = broker.broker.topic_config("victim").unwrap();
    let change = |name: &'static str, operation: i8, value: Option<&'static str>| {
        let mut config = AlterableConfig::default();
        config.name = StrBytes::from_static_str(name);
        config.config_operation = operation;
        config.value = value.map(StrBytes::from_static_str);
        config
    };
    let cases = [
        // A setting named twice.
        (vec![change("retention.ms", 0, Some("1")), change("retention.ms", 1, None)], 42),
        // SET and APPEND without a value.
        (vec![change("segment.ms", 0, Some("9")), change("retention.ms", 0, None)], 42),
        (vec![change("cleanup.policy", 2, None)], 42),
        // An operation Kafka does not define.
        (vec![change("segment.ms", 0, Some("9")), change("retention.ms", 4, Some("1"))], 42),
        // APPEND to a setting that is not a list, and an unknown setting: INVALID_CONFIG.
        (vec![change("segment.ms", 0, Some("9")), change("retention.ms", 2, Some("1"))], 40),
        (vec![change("segment.ms", 0, Some("9")), change("no.such", 3, Some("1"))], 40),
        // More changes than one resource may hold (every name distinct).
        (
            (0..=weir::server::handlers::CONFIG_CHANGES_MAX)
                .map(|i| change(Box::leak(format!("no.such.{i}").into_boxed_str()), 1, None))
                .collect(),
            42,
        ),
    ];
    for (correlation, (configs, expected)) in cases.into_iter().enumerate() {
        let mut resource = AlterConfigsResource::default();
        resource.resource_type = 2;
        resource.resource_name = StrBytes::from_static_str("victim");
        resource.configs = configs.clone();
        let mut body = IncrementalAlterConfigsRequest::default();
        body.resources = vec![resource];
        let correlation = correlation as i32;
        let bytes = request(ApiKey::IncrementalAlterConfigs, 1, correlation, &body);
        let mut stream = send_raw(&broker, &bytes).await;
        let mut response = read_response(&mut stream).await.expect("no answer");
        ResponseHeader::decode(&mut response, 1).unwrap();
        let answer = IncrementalAlterConfigsResponse::decode(&mut response, 1).unwrap();
        let code = answer.responses[0].error_code;
        assert_eq!(code, expected, "{configs:?}: {:?}", answer.responses[0].error_message);
    }
    // A valid change answered after all of them: the broker's copy then holds everything
    // committed before it, so a refused change that was committed anyway would show.
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_static_str("victim");
    resource.configs = vec![change("segment.ms", 0, Some("8"))];
    let mut body = IncrementalAlterConfigsRequest::default();
    body.resources = vec![resource];
    let bytes = request(ApiKey::IncrementalAlterConfigs, 1, 99, &body);
    let mut stream = send_raw(&broker, &bytes).await;
    let mut response = read_response(&mut stream).await.expect("no answer");
    ResponseHeader::decode(&mut response, 1).unwrap();
    let answer = IncrementalAlterConfigsResponse::decode(&mut response, 1).unwrap();
    assert_eq!(answer.responses[0].error_code, 0, "{:?}", answer.responses[0].error_message);
    let mut expected = before.overrides().clone();
    expected.insert("segment.ms".into(), "8".into());
    assert_eq!(broker.broker.topic_config("victim").unwrap().overrides(), &expected);
    still_serves(&broker).await;
}
