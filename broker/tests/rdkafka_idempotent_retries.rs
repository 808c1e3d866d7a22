//! Idempotence under real retries: librdkafka produces through a proxy that cuts the
//! connection at random points, so that produce responses are lost after the broker appended
//! the batch and the client retries it on a new connection. Every record must be stored exactly
//! once, in the order it was sent.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use support::{TestBroker, config, scratch};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const WAIT: Duration = Duration::from_secs(60);
const RECORDS: usize = 120;
/// Produce responses the proxy swallows (each forcing a retry of an appended batch).
const CUTS: u64 = 4;

/// Forwards connections to `target`. While `cutting` holds and fewer than [`CUTS`] cuts were
/// made, a connection whose broker answers a Produce request is cut just before that answer is
/// forwarded: the batch was appended, the client never hears so, and must retry it.
async fn cutting_proxy(
    listener: TcpListener,
    target: SocketAddr,
    cuts: Arc<AtomicU64>,
    cutting: Arc<AtomicBool>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else { return };
        let (cuts, cutting) = (Arc::clone(&cuts), Arc::clone(&cutting));
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else { return };
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let produces = Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
            let seen = Arc::clone(&produces);
            let upstream = tokio::spawn(async move {
                while let Some(frame) = read_frame(&mut client_read).await {
                    let key = i16::from_be_bytes([frame[4], frame[5]]);
                    let correlation =
                        i32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
                    if key == 0 {
                        seen.lock().unwrap().insert(correlation);
                    }
                    if server_write.write_all(&frame).await.is_err() {
                        return;
                    }
                }
            });
            while let Some(frame) = read_frame(&mut server_read).await {
                let correlation = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                let is_produce = produces.lock().unwrap().contains(&correlation);
                if is_produce
                    && cutting.load(Ordering::Relaxed)
                    && cuts.load(Ordering::Relaxed) < CUTS
                {
                    cuts.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                if client_write.write_all(&frame).await.is_err() {
                    break;
                }
            }
            upstream.abort();
        });
    }
}

/// One frame, size prefix included.
async fn read_frame(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<Vec<u8>> {
    let size = stream.read_u32().await.ok()?;
    let mut frame = size.to_be_bytes().to_vec();
    frame.resize(4 + size as usize, 0);
    stream.read_exact(&mut frame[4..]).await.ok()?;
    (frame.len() >= 12).then_some(frame)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_batches_are_stored_once_and_in_order() {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_addr = proxy.local_addr().unwrap();
    let mut settings = config(scratch());
    settings.advertised_port = proxy_addr.port();
    let broker = TestBroker::start_with(settings).await;
    broker.broker.create_topic("exactly-once", 1, 1, &[], false).await.unwrap();
    let cuts = Arc::new(AtomicU64::new(0));
    let cutting = Arc::new(AtomicBool::new(true));
    tokio::spawn(cutting_proxy(proxy, broker.addr, Arc::clone(&cuts), Arc::clone(&cutting)));

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", proxy_addr.to_string())
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .set("linger.ms", "2")
        .set("batch.num.messages", "3")
        .set("retry.backoff.ms", "20")
        .set("request.timeout.ms", "2000")
        .set("socket.timeout.ms", "2000")
        .set("reconnect.backoff.ms", "20")
        .create()
        .unwrap();
    let started = std::time::Instant::now();
    let values: Vec<String> = (0..RECORDS).map(|i| format!("value-{i:05}")).collect();
    let deliveries: Vec<_> = values
        .iter()
        .map(|v| {
            producer
                .send_result(FutureRecord::<(), _>::to("exactly-once").payload(v))
                .map_err(|(e, _)| e)
                .unwrap()
        })
        .collect();
    for delivery in deliveries {
        delivery.await.unwrap().map_err(|(e, _)| e).unwrap();
    }
    eprintln!("produced after {:?}", started.elapsed());
    cutting.store(false, Ordering::Relaxed);
    assert_eq!(cuts.load(Ordering::Relaxed), CUTS, "every planned cut forced a retry");

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "check")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("exactly-once", 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let high = consumer.fetch_watermarks("exactly-once", 0, WAIT).unwrap().1;
    let mut read = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while (read.len() as i64) < high && std::time::Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            read.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    assert_eq!(
        high as usize, RECORDS,
        "duplicates or losses: {} records stored for {RECORDS} sent",
        high
    );
    assert_eq!(read, values);
}
