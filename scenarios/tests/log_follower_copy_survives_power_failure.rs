//! A follower's copy of a leader's log, through `Log::append_replicated`: batches keep the
//! leader's offsets and epochs, the copy is byte-identical across segment rolls and survives a
//! power failure once flushed, and a batch that does not continue the log, is corrupt, or
//! comes from an older epoch is refused with nothing written.

use std::path::PathBuf;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use weir::io::Env;
use weir::log::batch;
use weir::log::split::split_batches;
use weir::log::{AppendError, Log, LogConfig};
use weir::model::{LeaderEpoch, Offset};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Small segments, so the copy crosses several.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4_000,
        index_interval_bytes: 256,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn batch(seed: u64, n: usize) -> Bytes {
    weir_scenarios::log::varied_batch(seed, n, 5, (50, 400))
}

/// Every batch of `log` from its start, as stored.
async fn all_batches(log: &Log) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    let end = log.log_end_offset();
    while at < end {
        let read = log.read(at, 1 << 20, end).await.expect("a readable log");
        out.extend(split_batches(&read.records).map(|b| b.expect("whole batches")));
        at = read.next_offset;
    }
    out
}

async fn run(env: Env, seed: u64) -> Result<Vec<Bytes>, String> {
    let leader = Log::open(env.clone(), PathBuf::from("leader-0"), config())
        .await
        .map_err(|e| e.to_string())?;
    let follower = Log::open(env.clone(), PathBuf::from("follower-0"), config())
        .await
        .map_err(|e| e.to_string())?;
    for n in 0..20 {
        leader.append(batch(seed, n), LeaderEpoch(1)).await.map_err(|e| e.to_string())?;
    }
    leader.begin_epoch(LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
    for n in 20..40 {
        leader.append(batch(seed, n), LeaderEpoch(3)).await.map_err(|e| e.to_string())?;
    }
    let batches = all_batches(&leader).await;
    ensure(batches.len() == 40, || format!("{} batches in the leader", batches.len()))?;
    // A batch that skips ahead is refused.
    let refused = follower.append_replicated(batches[1].clone()).await;
    ensure(matches!(refused, Err(AppendError::OutOfOrder { expected: Offset(0), .. })), || {
        format!("a gap: {refused:?}")
    })?;
    for b in &batches[..30] {
        follower.append_replicated(b.clone()).await.map_err(|e| e.to_string())?;
    }
    // A flipped byte fails the CRC; nothing is written.
    let mut corrupt = BytesMut::from(&batches[30][..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40;
    let refused = follower.append_replicated(corrupt.freeze()).await;
    ensure(matches!(refused, Err(AppendError::Invalid(_))), || format!("corrupt: {refused:?}"))?;
    for b in &batches[30..] {
        follower.append_replicated(b.clone()).await.map_err(|e| e.to_string())?;
    }
    follower.flush().await.map_err(|e| e.to_string())?;
    let epochs: Vec<_> = follower.epochs().entries().to_vec();
    let leader_epochs: Vec<_> = leader.epochs().entries().to_vec();
    ensure(epochs == leader_epochs, || {
        format!("follower epochs {epochs:?}, leader {leader_epochs:?}")
    })?;
    Ok(batches)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(600);
    let batches =
        sim.block_on(host, limit, move |env| run(env, seed)).ok_or("the copy did not finish")??;
    sim.power_fail(host);
    sim.start(host);
    let after = sim.block_on(host, limit, |env: Env| async move {
        let follower = Log::open(env, PathBuf::from("follower-0"), config())
            .await
            .map_err(|e| e.to_string())?;
        let copy = all_batches(&follower).await;
        let end = follower.log_end_offset();
        // A batch from an epoch older than the newest the copy holds is refused.
        let mut stale = BytesMut::from(&batch(0, 99)[..]);
        batch::stamp(&mut stale, end.0, 1).map_err(|e| e.to_string())?;
        let refused = follower.append_replicated(stale.freeze()).await;
        let stale_refused = matches!(refused, Err(AppendError::StaleEpoch { .. }));
        let unchanged = follower.log_end_offset() == end;
        Ok::<_, String>((copy, end, stale_refused && unchanged))
    });
    let (copy, end, stale_refused) = after.ok_or("the reopen did not finish")??;
    ensure(stale_refused, || "a batch of an older epoch was taken".to_owned())?;
    ensure(copy == batches, || {
        format!(
            "the copy differs after a power failure: {} of {} batches",
            copy.len(),
            batches.len()
        )
    })?;
    ensure(end.0 > 0, || "an empty copy".to_owned())
}

#[test]
fn log_follower_copy_survives_power_failure() {
    for_each_seed("log_follower_copy_survives_power_failure", 0..16, scenario);
}

/// A replica that led epoch 5 without writing a record (deposed before its first write) and
/// now follows a leader whose log of epoch 1 matches its own up to its end: until the empty
/// epoch is forgotten the leader's batches look stale, and once it is forgotten they are taken
/// and survive a power failure.
fn empty_epoch_scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(600);
    let setup = sim.block_on(host, limit, move |env: Env| async move {
        let follower = Log::open(env, PathBuf::from("follower-0"), config())
            .await
            .map_err(|e| e.to_string())?;
        for n in 0..3 {
            let mut b = BytesMut::from(&batch(seed, n)[..]);
            batch::stamp(&mut b, follower.log_end_offset().0, 1).map_err(|e| e.to_string())?;
            follower.append_replicated(b.freeze()).await.map_err(|e| e.to_string())?;
        }
        follower.flush().await.map_err(|e| e.to_string())?;
        follower.begin_epoch(LeaderEpoch(5)).await.map_err(|e| e.to_string())?;
        let end = follower.log_end_offset();
        let mut next = BytesMut::from(&batch(seed, 3)[..]);
        batch::stamp(&mut next, end.0, 1).map_err(|e| e.to_string())?;
        let refused = follower.append_replicated(next.freeze()).await;
        ensure(matches!(refused, Err(AppendError::StaleEpoch { .. })), || {
            format!("a batch of epoch 1 after an empty epoch 5: {refused:?}")
        })?;
        follower.forget_epochs_at_end().await.map_err(|e| e.to_string())?;
        ensure(follower.log_end_offset() == end, || "forgetting an epoch cut records".to_owned())?;
        let mut next = BytesMut::from(&batch(seed, 3)[..]);
        batch::stamp(&mut next, end.0, 1).map_err(|e| e.to_string())?;
        follower.append_replicated(next.freeze()).await.map_err(|e| e.to_string())?;
        follower.flush().await.map_err(|e| e.to_string())
    });
    setup.ok_or("the setup did not finish")??;
    sim.power_fail(host);
    sim.start(host);
    let after = sim.block_on(host, limit, move |env: Env| async move {
        let follower = Log::open(env, PathBuf::from("follower-0"), config())
            .await
            .map_err(|e| e.to_string())?;
        let latest = follower.epochs().latest();
        ensure(latest.map(|(e, _)| e) == Some(LeaderEpoch(1)), || {
            format!("latest epoch after a power failure: {latest:?}, not epoch 1")
        })?;
        let batches = all_batches(&follower).await.len();
        ensure(batches == 4, || format!("{batches} batches after a power failure, not 4"))
    });
    after.ok_or("the reopen did not finish")?
}

#[test]
fn an_epoch_led_without_a_record_is_forgotten_by_the_follower() {
    for_each_seed("log_follower_copy_survives_power_failure", 0..8, empty_epoch_scenario);
}
