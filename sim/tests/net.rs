//! The simulated network: FIFO byte streams, latency, partitions by direction, clogs, resets.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::io::{Conn, Env, timeout};
use weir_sim::{Host, Latency, Sim, boot};

const PORT: u16 = 1000;

/// A host that accepts connections and echoes every byte back.
fn echo_host(sim: &Sim, name: &str) -> Host {
    sim.add_host(
        name,
        boot(|env: Env| async move {
            let listener = env.net.bind(SocketAddr::from(([0, 0, 0, 0], PORT))).await.unwrap();
            while let Ok((mut conn, _)) = listener.accept().await {
                env.spawn("echo", async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = conn.read(&mut buf).await {
                        if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        }),
    )
}

async fn connect(env: &Env, addr: SocketAddr) -> Box<dyn Conn> {
    env.net.connect(addr).await.unwrap()
}

async fn read_some(env: &Env, conn: &mut Box<dyn Conn>, within: Duration) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 64];
    match timeout(&*env.clock, within, conn.read(&mut buf)).await {
        Ok(Ok(n)) => Some(buf[..n].to_vec()),
        _ => None,
    }
}

#[test]
fn streams_are_fifo_and_respect_latency() {
    let sim = Sim::new(1);
    sim.set_latency(Latency {
        min: Duration::from_millis(5),
        max: Duration::from_millis(20),
        ..Latency::default()
    });
    let server = echo_host(&sim, "server");
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(server), PORT);
    let got = sim.block_on(client, Duration::from_secs(10), move |env| async move {
        let mut conn = connect(&env, addr).await;
        let start = env.clock.now();
        let sent: Vec<u8> = (0..=255).collect();
        for byte in &sent {
            conn.write_all(&[*byte]).await.unwrap();
        }
        let mut back = vec![0u8; sent.len()];
        conn.read_exact(&mut back).await.unwrap();
        (sent == back, env.clock.now() - start)
    });
    let (same, took) = got.unwrap();
    assert!(same, "bytes came back reordered or changed");
    assert!(
        took >= Duration::from_millis(10),
        "a round trip took {took:?}, less than twice the least latency"
    );
}

#[test]
fn one_way_partition_stops_delivery_in_that_direction_only() {
    let sim = Sim::new(2);
    let a = sim.add_client("a");
    let b = sim.add_client("b");
    // b accepts one connection and hands its end to the test.
    let (mut a_end, mut b_end) = accepted_pair(&sim, a, b, PORT);
    sim.partition_one_way(a, b);
    // a → b is cut: b hears nothing.
    let (a_end2, b_got) = sim
        .block_on(b, Duration::from_secs(5), move |env| async move {
            a_end.write_all(b"x").await.unwrap();
            let got = read_some(&env, &mut b_end, Duration::from_secs(2)).await;
            ((a_end, b_end), got)
        })
        .unwrap();
    assert_eq!(b_got, None, "bytes crossed a one-way partition");
    let (mut a_end, mut b_end) = a_end2;
    // b → a still flows.
    let (back, a_end_b) = sim
        .block_on(a, Duration::from_secs(5), move |env| async move {
            b_end.write_all(b"y").await.unwrap();
            let got = read_some(&env, &mut a_end, Duration::from_secs(2)).await;
            (got, (a_end, b_end))
        })
        .unwrap();
    assert_eq!(back.as_deref(), Some(&b"y"[..]));
    // Healing delivers what was held, in order.
    sim.heal_all();
    let (_a_end, mut b_end) = a_end_b;
    let held = sim
        .block_on(b, Duration::from_secs(5), move |env| async move {
            read_some(&env, &mut b_end, Duration::from_secs(2)).await
        })
        .unwrap();
    assert_eq!(held.as_deref(), Some(&b"x"[..]));
}

#[test]
fn two_way_partition_times_out_new_connections_and_heal_restores_them() {
    let sim = Sim::new(3);
    let server = echo_host(&sim, "server");
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(server), PORT);
    sim.run_for(Duration::from_millis(10));
    sim.partition(&[client], &[server]);
    let err = sim.block_on(client, Duration::from_secs(10), move |env| async move {
        env.net.connect(addr).await.err().map(|e| e.kind())
    });
    assert_eq!(err, Some(Some(std::io::ErrorKind::TimedOut)));
    sim.heal_all();
    let ok = sim.block_on(client, Duration::from_secs(10), move |env| async move {
        env.net.connect(addr).await.is_ok()
    });
    assert_eq!(ok, Some(true));
}

#[test]
fn connecting_where_nothing_listens_is_refused() {
    let sim = Sim::new(4);
    let quiet = sim.add_client("quiet");
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(quiet), PORT);
    let err = sim.block_on(client, Duration::from_secs(10), move |env| async move {
        env.net.connect(addr).await.err().map(|e| e.kind())
    });
    assert_eq!(err, Some(Some(std::io::ErrorKind::ConnectionRefused)));
}

/// Opens a connection from `client` to the echo server and checks one round trip.
fn open(sim: &Sim, client: Host, addr: SocketAddr) -> Box<dyn Conn> {
    sim.block_on(client, Duration::from_secs(5), move |env| async move {
        let mut conn = connect(&env, addr).await;
        conn.write_all(b"hi").await.unwrap();
        let mut buf = [0u8; 2];
        conn.read_exact(&mut buf).await.unwrap();
        conn
    })
    .unwrap()
}

fn read_result(sim: &Sim, client: Host, mut conn: Box<dyn Conn>) -> Option<std::io::Result<usize>> {
    sim.block_on(client, Duration::from_secs(60), move |env| async move {
        let mut buf = [0u8; 8];
        timeout(&*env.clock, Duration::from_secs(5), conn.read(&mut buf)).await.ok()
    })
    .unwrap()
}

#[test]
fn killed_peer_resets_connections_but_a_power_failed_one_goes_silent() {
    let sim = Sim::new(5);
    let server = echo_host(&sim, "server");
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(server), PORT);
    sim.run_for(Duration::from_millis(10));

    let conn = open(&sim, client, addr);
    sim.kill(server);
    let read = read_result(&sim, client, conn);
    assert_eq!(
        read.map(|r| r.map_err(|e| e.kind())),
        Some(Err(std::io::ErrorKind::ConnectionReset))
    );

    sim.start(server);
    sim.run_for(Duration::from_millis(10));
    let conn = open(&sim, client, addr);
    sim.power_fail(server);
    assert!(read_result(&sim, client, conn).is_none(), "a power-failed peer answered");
}

#[test]
fn clog_holds_bytes_until_released_and_reset_breaks_the_stream() {
    let sim = Sim::new(6);
    let server = echo_host(&sim, "server");
    let client = sim.add_client("client");
    let addr = SocketAddr::new(sim.ip(server), PORT);
    sim.run_for(Duration::from_millis(10));
    let mut conn = open(&sim, client, addr);
    sim.clog(client, server);
    let (got, conn2) = sim
        .block_on(client, Duration::from_secs(10), move |env| async move {
            conn.write_all(b"abc").await.unwrap();
            (read_some(&env, &mut conn, Duration::from_secs(3)).await, conn)
        })
        .unwrap();
    assert_eq!(got, None, "a clogged link delivered");
    sim.unclog(client, server);
    let mut conn = conn2;
    let (got, conn3) = sim
        .block_on(client, Duration::from_secs(10), move |env| async move {
            let mut buf = [0u8; 3];
            let got = timeout(&*env.clock, Duration::from_secs(3), conn.read_exact(&mut buf))
                .await
                .map(|_| buf.to_vec())
                .ok();
            (got, conn)
        })
        .unwrap();
    assert_eq!(got.as_deref(), Some(&b"abc"[..]));
    sim.reset_connections(client, server);
    let read = read_result(&sim, client, conn3);
    assert_eq!(
        read.map(|r| r.map_err(|e| e.kind())),
        Some(Err(std::io::ErrorKind::ConnectionReset))
    );
}

/// b's end of one connection from a, which b accepts and hands over.
fn accepted_pair(sim: &Sim, a: Host, b: Host, port: u16) -> (Box<dyn Conn>, Box<dyn Conn>) {
    let b_addr = SocketAddr::new(sim.ip(b), port);
    let (tx, rx) = std::sync::mpsc::channel::<Box<dyn Conn>>();
    let tx = std::sync::Mutex::new(tx);
    sim.spawn(b, "acceptor", move |env| async move {
        let listener = env.net.bind(b_addr).await.unwrap();
        let (conn, _) = listener.accept().await.unwrap();
        tx.lock().unwrap().send(conn).unwrap();
        env.clock.sleep(Duration::from_secs(1_000)).await;
    });
    let a_end = sim
        .block_on(a, Duration::from_secs(5), move |env| async move { connect(&env, b_addr).await })
        .unwrap();
    (a_end, rx.try_recv().unwrap())
}

#[test]
fn a_closed_connection_still_delivers_held_bytes_but_an_aborted_one_does_not() {
    for abort in [false, true] {
        let sim = Sim::new(6);
        let a = sim.add_client("a");
        let b = sim.add_client("b");
        let (mut a_end, mut b_end) = accepted_pair(&sim, a, b, PORT);
        sim.partition(&[a], &[b]);
        sim.block_on(a, Duration::from_secs(5), move |_| async move {
            a_end.write_all(b"request").await.unwrap();
            if abort { a_end.abort() } else { drop(a_end) }
        })
        .unwrap();
        sim.heal_all();
        let read = sim
            .block_on(b, Duration::from_secs(10), move |env| async move {
                let mut buf = Vec::new();
                let read =
                    timeout(&*env.clock, Duration::from_secs(5), b_end.read_to_end(&mut buf));
                read.await.ok().map(|r| r.map(|_| buf).map_err(|e| e.kind()))
            })
            .unwrap();
        if abort {
            assert_eq!(
                read,
                Some(Err(std::io::ErrorKind::ConnectionReset)),
                "an aborted connection's held bytes arrived after the heal"
            );
        } else {
            assert_eq!(read, Some(Ok(b"request".to_vec())), "a closed connection lost its bytes");
        }
    }
}
