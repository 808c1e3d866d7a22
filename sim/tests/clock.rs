//! Simulated clocks: wall time skews per host, monotonic time never goes back.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_sim::Sim;
use weir_sim::clock::SIM_EPOCH_MS;

#[test]
fn wall_time_skews_per_host_while_monotonic_time_never_decreases() {
    let sim = Sim::new(9);
    let (a, b) = (sim.add_client("a"), sim.add_client("b"));
    sim.clock_jump(a, 5_000);
    sim.clock_drift(b, 100_000); // 10% fast
    let samples = Arc::new(Mutex::new(Vec::new()));
    for host in [a, b] {
        let samples = Arc::clone(&samples);
        sim.spawn(host, "sampler", move |env| async move {
            for _ in 0..100 {
                samples.lock().unwrap().push((host.index(), env.clock.now(), env.clock.wall_ms()));
                env.clock.sleep(Duration::from_millis(100)).await;
            }
        });
    }
    sim.run_for(Duration::from_secs(5));
    sim.clock_jump(a, -60_000);
    sim.run_for(Duration::from_secs(6));
    let samples = samples.lock().unwrap();
    let per_host = |ix: usize| -> Vec<(u64, i64)> {
        samples.iter().filter(|s| s.0 == ix).map(|s| (s.1.as_nanos(), s.2)).collect()
    };
    let (sa, sb) = (per_host(0), per_host(1));
    assert_eq!((sa.len(), sb.len()), (100, 100));
    for series in [&sa, &sb] {
        assert!(series.windows(2).all(|w| w[0].0 <= w[1].0), "monotonic time went back");
    }
    // Host a: +5 s, then jumps back a minute: its wall clock goes backwards once.
    assert_eq!(sa[0].1, SIM_EPOCH_MS + 5_000);
    assert!(sa.windows(2).any(|w| w[1].1 < w[0].1), "the backward jump is not visible");
    // Host b drifts: after ~10 s it is about a second ahead of true time.
    let (t, wall) = *sb.last().unwrap();
    let skew = wall - (SIM_EPOCH_MS + (t / 1_000_000) as i64);
    assert!((900..=1_000).contains(&skew), "drift skew {skew} ms");
    // The same instant reads differently on the two hosts.
    assert_ne!(sa[50].1, sb[50].1);
    assert_eq!(sa[50].0, sb[50].0);
}
