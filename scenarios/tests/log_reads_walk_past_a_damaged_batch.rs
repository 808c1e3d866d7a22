//! A damaged batch must fail only the reads of its own offsets. A read walks from the index
//! entry at or below the offset it wants, checking every batch it passes; a latent sector error
//! in one of them failed every read of the intact batches after it up to the next entry (a
//! consumer or follower at those offsets was stuck for good).
//!
//! The log holds 20 batches with an index entry about every six (the default interval), in an
//! active segment or in a sealed one (by seed). While the log runs, one batch is damaged in place
//! in its records or in its length field, or two batches in a row are (by seed). Then, from every
//! offset: a read of a damaged batch's offsets must fail as corrupt, and any other read must
//! return exactly the stored batches from the one holding it on (stopping before a damaged one).

use std::time::Duration;

use weir_scenarios::for_each_seed;
use weir_scenarios::log::{check_reads_around_damage, damage_batch, log_of_batches};
use weir_sim::Sim;

/// Batches in the segment read.
const BATCHES: u8 = 20;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let sealed = seed % 2 == 1;
    // Any batch but the first (whose reads start at the segment's start anyway).
    let first_damaged = 1 + (seed / 2 % u64::from(BATCHES - 1)) as u8;
    let how = seed / 38 % 3;
    let damaged: Vec<u8> = if how == 2 && first_damaged + 1 < BATCHES {
        vec![first_damaged, first_damaged + 1]
    } else {
        vec![first_damaged]
    };
    let (log, stored) = log_of_batches(&sim, host, BATCHES, sealed)?;
    for &n in &damaged {
        // In the records (inside the CRC), or in the length field (outside it).
        let within = if how == 1 { 8 + seed as usize % 4 } else { 61 + seed as usize % 40 };
        damage_batch(&sim, host, &stored, usize::from(n), within)?;
    }
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        check_reads_around_damage(&log, &stored, &damaged).await
    })
    .ok_or("the reads did not finish")?
}

#[test]
fn log_reads_walk_past_a_damaged_batch() {
    for_each_seed("log_reads_walk_past_a_damaged_batch", 0..114, scenario);
}
