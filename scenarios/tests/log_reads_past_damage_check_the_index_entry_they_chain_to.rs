//! A read that meets a damaged batch walks past it only where the batches after it continue
//! each other's offsets to the next index entry, or, where no intact batch lies between the
//! damage and that entry, takes the entry's offset as where the damage ends. In a sealed
//! segment that entry is read from the index file, and the read may itself be corrupt: a
//! coordinator loading its groups past a damaged batch read an entry whose offset had a bit
//! flipped in transit (offset 16385 in a log ending at 105), resumed there, and lost every
//! group record after the damage (cluster sweep seed 0x2ee: generations dealt again). An entry
//! read from a file is now believed only where the batch at its position states its offset
//! (two reads of different files agree); else the walk chains to the segment's end, which the
//! log keeps in memory.
//!
//! A sealed segment of 20 batches; the batch just before one of its index entries (by seed) is
//! damaged in place, and one byte of that entry in the index file (its offset's or its
//! position's, by seed) is flipped for good, as a misread would give it. In some seeds the
//! entry is left intact and the batch it points at is damaged too, in its records: the entry
//! still marks where the first damage ends. Then, from every offset: a read of a damaged
//! batch's offsets must fail as corrupt, and any other read must return exactly the stored
//! batches from the one holding it on, stopping before a damaged one.

use std::time::Duration;

use weir_scenarios::for_each_seed;
use weir_scenarios::log::{check_reads_around_damage, damage_batch, dir, log_of_batches};
use weir_sim::Sim;

/// Batches in the sealed segment.
const BATCHES: u8 = 20;
/// Bytes of an index entry: its offset (relative to the segment's base), then its position.
const ENTRY_BYTES: usize = 8;

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let (log, stored) = log_of_batches(&sim, host, BATCHES, true)?;
    let index = dir().join(format!("{:020}.index", 0));
    let entries = sim.durable_contents(host, &index).map_err(|e| e.to_string())?;
    // Entries past the first batch (one before the damaged batch's end), by seed.
    let positions: Vec<(usize, u32)> = entries
        .chunks_exact(ENTRY_BYTES)
        .enumerate()
        .filter_map(|(i, e)| Some((i, u32::from_be_bytes(e[4..8].try_into().ok()?))))
        .filter(|&(_, position)| position > 0)
        .collect();
    let &(entry, position) =
        positions.get(seed as usize % positions.len().max(1)).ok_or("no index entry")?;
    // The batch that ends where the entry points.
    let mut end = 0usize;
    let damaged = stored
        .iter()
        .position(|b| {
            end += b.len();
            end == position as usize
        })
        .ok_or("the entry points at no batch's start")?;
    let within = 61 + seed as usize % 40;
    let mut damaged = vec![damaged];
    if seed % 5 == 4 && damaged[0] + 1 < stored.len() {
        damaged.push(damaged[0] + 1);
    } else {
        // A byte of the entry's offset (the high ones turn it into one far past the segment,
        // the low one into a near one) or the low byte of its position.
        let byte = [1, 2, 3, 7][(seed / 3 % 4) as usize];
        sim.corrupt_file(host, &index, (entry * ENTRY_BYTES + byte) as u64)
            .map_err(|e| format!("flipping the index entry: {e}"))?;
    }
    for &n in &damaged {
        damage_batch(&sim, host, &stored, n, within)?;
    }
    let damaged: Vec<u8> = damaged.into_iter().map(|n| n as u8).collect();
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        check_reads_around_damage(&log, &stored, &damaged).await
    })
    .ok_or("the reads did not finish")?
}

#[test]
fn log_reads_past_damage_check_the_index_entry_they_chain_to() {
    for_each_seed("log_reads_past_damage_check_the_index_entry_they_chain_to", 0..24, scenario);
}
