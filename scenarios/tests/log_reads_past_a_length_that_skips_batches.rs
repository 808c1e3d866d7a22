//! A read walking past a damaged batch must not lose the intact batches right after it when the
//! damaged length field leads exactly to a later batch. A flipped bit adds a power of two to a
//! length, and where the batches it steps over add up to that, the walk once went on from the
//! later batch: the intact batches between were answered CORRUPT_MESSAGE for good (a cluster
//! seed lost six offsets of its only in-sync replica that way).
//!
//! The log holds 20 batches with an index entry about every six. One batch's length field is
//! made to lead exactly past the two or three batches after it (by seed), or its last offset
//! delta (inside its CRC) is flipped, so that its header disagrees with the batch its intact
//! length leads to (which must still be found). Then, from every offset: a read of the damaged batch's offsets must
//! fail as corrupt, and any other read must return exactly the stored batches from the one
//! holding it on (stopping before the damaged one).

use std::time::Duration;

use bytes::Bytes;
use weir_scenarios::for_each_seed;
use weir_scenarios::log::{check_reads_around_damage, dir, log_of_batches};
use weir_sim::Sim;

/// Batches in the segment read.
const BATCHES: u8 = 20;
/// Where a batch's length field starts.
const LENGTH_AT: u64 = 8;
/// Where a batch's last offset delta starts.
const LAST_OFFSET_DELTA_AT: u64 = 23;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let sealed = seed % 2 == 1;
    // Any batch but the first, with four after it.
    let damaged = 1 + (seed / 2 % u64::from(BATCHES - 5)) as u8;
    let skipped = 2 + (seed / 32 % 2) as usize;
    let delta = seed / 64 % 2 == 1;
    let (log, stored) = log_of_batches(&sim, host, BATCHES, sealed)?;
    let n = usize::from(damaged);
    let at: u64 = stored[..n].iter().map(|b| b.len() as u64).sum();
    let (pos, bytes) = if delta {
        // Deltas are small: setting bit 30 makes the count the header states wrong.
        (at + LAST_OFFSET_DELTA_AT, Bytes::from_static(&[0x40]))
    } else {
        let leads_to: u64 = stored[n..=n + skipped].iter().map(|b| b.len() as u64).sum();
        let length = u32::try_from(leads_to - 12).map_err(|e| e.to_string())?;
        (at + LENGTH_AT, Bytes::copy_from_slice(&length.to_be_bytes()))
    };
    let segment = dir().join(format!("{:020}.log", 0));
    sim.block_on(host, Duration::from_secs(60), move |env| async move {
        let file = env.disk.open(&segment).await.map_err(|e| e.to_string())?;
        file.write_at(pos, bytes).await.map_err(|e| e.to_string())?;
        check_reads_around_damage(&log, &stored, &[damaged]).await
    })
    .ok_or("the reads did not finish")?
}

#[test]
fn log_reads_past_a_length_that_skips_batches() {
    for_each_seed("log_reads_past_a_length_that_skips_batches", 0..96, scenario);
}
