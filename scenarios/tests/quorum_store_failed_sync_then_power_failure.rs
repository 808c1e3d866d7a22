//! Fault scenario for the metadata quorum's store (fsyncgate): a sync of new entries fails —
//! the kernel keeps the pages readable but will never write them back — and the controller
//! stops. Its process is killed and restarted: the reopened store reads those entries from the
//! page cache and builds on them, persisting more. Then the power fails. Everything the
//! reopened store trusted or acknowledged must still be there, and the store must open: the
//! entries whose write-back was dropped must not turn into a hole in the middle of the log.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use raft::prelude::Entry;
use weir::controller::quorum::store::StoreError;
use weir::controller::quorum::{Persist, QuorumStore};
use weir::io::Env;
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::{DiskFaults, Sim};

/// Where the store lives.
const DIR: &str = "meta/quorum";
/// How long one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(10);

fn entries(first: u64, last: u64, seed: u64) -> Vec<Entry> {
    (first..=last)
        .map(|index| {
            let data = Bytes::from(
                format!("entry {index} of seed {seed}").repeat(1 + (index % 7) as usize),
            );
            Entry { index, term: 1, data, ..Default::default() }
        })
        .collect()
}

/// Opens the store and persists `more` (if any): the indexes it recovered, and the outcome
/// of the persist.
fn open_and_persist(
    sim: &Sim,
    host: weir_sim::Host,
    more: Vec<Entry>,
) -> Result<(Vec<u64>, Outcome), String> {
    let outcome = sim.block_on(host, STEP_LIMIT, move |env: Env| async move {
        let (mut store, recovered) = QuorumStore::open(Arc::clone(&env.disk), Path::new(DIR))
            .await
            .map_err(|e: StoreError| format!("the store did not open: {e}"))?;
        let indexes: Vec<u64> = recovered.entries.iter().map(|e| e.index).collect();
        let persist = Persist { entries: more, ..Default::default() };
        let result = if persist.is_empty() {
            Ok(())
        } else {
            store.persist(&persist).await.map_err(|e| e.to_string())
        };
        Ok((indexes, result))
    });
    outcome.unwrap_or_else(|| Err("the step did not finish".to_owned()))
}

/// What one persist came to.
type Outcome = Result<(), String>;

/// The first life: persists 1..=5, waits while the driver makes every sync fail, persists
/// 6..=8: the outcomes of both persists.
fn first_life(sim: &Sim, host: weir_sim::Host, seed: u64) -> Result<(Outcome, Outcome), String> {
    let slot: Arc<Mutex<Option<_>>> = Arc::default();
    let out = Arc::clone(&slot);
    let _task = sim.spawn(host, "first-life", move |env: Env| async move {
        let result = async {
            let (mut store, _) = QuorumStore::open(Arc::clone(&env.disk), Path::new(DIR))
                .await
                .map_err(|e: StoreError| format!("the store did not open: {e}"))?;
            let first = Persist { entries: entries(1, 5, seed), ..Default::default() };
            let first = store.persist(&first).await.map_err(|e| e.to_string());
            env.clock.sleep(Duration::from_secs(1)).await;
            let second = Persist { entries: entries(6, 8, seed), ..Default::default() };
            let second = store.persist(&second).await.map_err(|e| e.to_string());
            Ok((first, second))
        }
        .await;
        *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
    });
    sim.run_for(Duration::from_millis(500));
    // Every sync fails now: entries 6..=8 are written but never reach the device.
    sim.set_disk_faults(host, DiskFaults { sync_error: 1.0, ..DiskFaults::default() });
    sim.run_until(STEP_LIMIT, || slot.lock().unwrap_or_else(|p| p.into_inner()).is_some());
    let outcome = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    outcome.unwrap_or_else(|| Err("the first life did not finish".to_owned()))
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("controller");
    let (first, failed) = first_life(&sim, host, seed)?;
    first.map_err(|e| format!("the first persist failed: {e}"))?;
    ensure(failed.is_err(), || "a persist whose sync failed reported success".to_owned())?;
    sim.set_disk_faults(host, DiskFaults::default());
    sim.kill(host);
    sim.start(host);
    let (seen, more) = open_and_persist(&sim, host, entries(9, 12, seed))?;
    more.map_err(|e| format!("the persist after the restart failed: {e}"))?;
    // The page cache still held 6..=8, so the reopened store trusted them and built on them.
    let trusted = seen.clone();
    ensure(trusted == (1..=8).collect::<Vec<_>>(), || format!("after the kill: {trusted:?}"))?;
    sim.power_fail(host);
    sim.start(host);
    let (after, _) = open_and_persist(&sim, host, Vec::new())?;
    ensure(after == (1..=12).collect::<Vec<_>>(), || {
        format!("after the power failure the store holds {after:?}, not 1..=12")
    })
}

#[test]
fn quorum_store_failed_sync_then_power_failure() {
    for_each_seed("quorum_store_failed_sync_then_power_failure", 0..40, scenario);
}
