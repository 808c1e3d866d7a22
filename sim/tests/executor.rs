//! The discrete-event executor: time jumps, seeded ordering, node lifecycle.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_sim::{NodeStatus, RunOutcome, Sim, boot};

#[test]
fn idle_time_is_skipped_not_ticked() {
    let sim = Sim::new(1);
    let host = sim.add_client("h");
    let done = sim.block_on(host, Duration::from_secs(7200), |env| async move {
        env.clock.sleep(Duration::from_secs(3600)).await;
        env.clock.now()
    });
    assert_eq!(done.map(|t| t.as_nanos()), Some(3_600_000_000_000));
    assert_eq!(sim.now(), Duration::from_secs(3600));
    assert!(sim.stats().polls < 10, "an hour of sleeping took {} polls", sim.stats().polls);
}

#[test]
fn run_reports_idle_when_nothing_can_happen() {
    let sim = Sim::new(1);
    sim.add_client("h");
    assert_eq!(sim.run_for(Duration::from_secs(5)), RunOutcome::Idle);
    assert_eq!(sim.now(), Duration::from_secs(5), "time passes even when nothing can happen");
    let host = sim.add_client("g");
    sim.spawn(
        host,
        "sleeper",
        |env| async move { env.clock.sleep(Duration::from_secs(100)).await },
    );
    assert_eq!(sim.run_for(Duration::from_secs(5)), RunOutcome::TimeLimit);
    assert_eq!(sim.now(), Duration::from_secs(10));
}

/// Two tasks ready at the same instant run in an order chosen by the seed.
fn first_of_two(seed: u64) -> usize {
    let sim = Sim::new(seed);
    let host = sim.add_client("h");
    let order = Arc::new(Mutex::new(Vec::new()));
    for i in 0..2 {
        let order = Arc::clone(&order);
        sim.spawn(host, "racer", move |_env| async move { order.lock().unwrap().push(i) });
    }
    sim.run_for(Duration::from_secs(1));
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 2);
    order[0]
}

#[test]
fn ready_tasks_are_ordered_by_the_seed() {
    let firsts: Vec<usize> = (0..64).map(first_of_two).collect();
    assert!(
        firsts.contains(&0) && firsts.contains(&1),
        "the seed never changed the order: {firsts:?}"
    );
    assert_eq!(first_of_two(17), first_of_two(17));
}

#[test]
fn paused_host_makes_no_progress_while_its_clock_runs() {
    let sim = Sim::new(3);
    let ticks = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&ticks);
    let host = sim.add_host(
        "h",
        boot(move |env| {
            let counter = Arc::clone(&counter);
            async move {
                loop {
                    env.clock.sleep(Duration::from_millis(100)).await;
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
        }),
    );
    sim.run_for(Duration::from_secs(1));
    let before = ticks.load(Ordering::Relaxed);
    assert!((9..=10).contains(&before), "{before}");
    sim.pause(host);
    assert_eq!(sim.status(host), NodeStatus::Paused);
    sim.run_for(Duration::from_secs(5));
    assert_eq!(ticks.load(Ordering::Relaxed), before, "a paused host ran");
    sim.resume(host);
    sim.run_for(Duration::from_millis(50));
    // The overdue timer fires at once on resume: the clock kept running while paused.
    assert_eq!(ticks.load(Ordering::Relaxed), before + 1);
    sim.run_for(Duration::from_secs(1));
    assert!(ticks.load(Ordering::Relaxed) >= before + 10);
}

struct DropGuard(Arc<AtomicUsize>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn kill_drops_tasks_mid_flight_and_restart_boots_again() {
    let sim = Sim::new(4);
    let boots = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let (b, d) = (Arc::clone(&boots), Arc::clone(&drops));
    let host = sim.add_host(
        "h",
        boot(move |env| {
            b.fetch_add(1, Ordering::Relaxed);
            let guard = DropGuard(Arc::clone(&d));
            async move {
                let _guard = guard;
                env.clock.sleep(Duration::from_secs(1_000)).await;
            }
        }),
    );
    sim.run_for(Duration::from_secs(1));
    assert_eq!((boots.load(Ordering::Relaxed), drops.load(Ordering::Relaxed)), (1, 0));
    sim.kill(host);
    assert_eq!(sim.status(host), NodeStatus::Down);
    assert_eq!(drops.load(Ordering::Relaxed), 1, "the killed task was not dropped");
    assert_eq!(sim.stats().live_tasks, 0);
    sim.start(host);
    sim.run_for(Duration::from_secs(1));
    assert_eq!(boots.load(Ordering::Relaxed), 2);
    // A spawner from the dead life starts nothing.
    let stale = sim.env(host);
    sim.restart(host);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let handle = stale.spawn("ghost", async move {
        r.fetch_add(1, Ordering::Relaxed);
    });
    sim.run_for(Duration::from_secs(1));
    assert_eq!(ran.load(Ordering::Relaxed), 0);
    assert!(handle.is_finished());
}

#[test]
fn abort_stops_a_task() {
    let sim = Sim::new(5);
    let host = sim.add_client("h");
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropGuard(Arc::clone(&drops));
    let handle = sim.spawn(host, "long", move |env| async move {
        let _guard = guard;
        env.clock.sleep(Duration::from_secs(1_000)).await;
    });
    sim.run_for(Duration::from_secs(1));
    assert!(!handle.is_finished());
    handle.abort();
    assert!(handle.is_finished());
    assert_eq!(drops.load(Ordering::Relaxed), 1);
}

#[test]
fn timeout_fires_on_simulated_time() {
    let sim = Sim::new(6);
    let host = sim.add_client("h");
    let out = sim.block_on(host, Duration::from_secs(60), |env| async move {
        let slow = weir::io::timeout(
            &*env.clock,
            Duration::from_secs(2),
            env.clock.sleep(Duration::from_secs(5)),
        )
        .await;
        let fast = weir::io::timeout(&*env.clock, Duration::from_secs(2), async { 7 }).await;
        (slow, fast, env.clock.now())
    });
    let (slow, fast, at) = out.unwrap();
    assert_eq!(slow, Err(weir::io::TimedOut));
    assert_eq!(fast, Ok(7));
    assert_eq!(at.as_nanos(), 2_000_000_000);
}
