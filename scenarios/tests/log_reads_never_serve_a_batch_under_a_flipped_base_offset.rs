//! A read that walks past damage must never serve records under offsets they were not written
//! at. A batch's base offset lies outside its CRC, so a flipped bit there leaves a batch that
//! passes its checks under other offsets. Walking past a damaged batch, the log believes the
//! batches after it only where their offsets chain to a known end; a second damaged batch in
//! the chain breaks it, and was crossed on the word of the offsets the chain had reached. With
//! a flipped base offset just before that second damaged batch, the chain was believed, and
//! the batch was served under offsets shifted by the flip.
//!
//! Here batch `d` is damaged in its records, batch `d + 1` in the last byte of its base offset,
//! and batch `d + 2` in its records, in an active or a sealed segment (by seed). From every
//! offset: reads of those three batches' offsets must fail as corrupt, reads before them must
//! return exactly the stored batches up to them, and any read that succeeds must return exactly
//! the stored batches from the one holding its offset.
//!
//! For one seed in four, batch `d` is damaged in its records and batch `d + 4` in its base
//! offset instead: the three intact batches between them vouch for their offsets (each agrees
//! with the one before), so every read but those of the two damaged batches must succeed, and
//! return every batch up to the next damaged one. In another variant only `d` (records) and
//! `d + 1` (base offset) are damaged: the batch after them breaks the flipped one's chain but is
//! intact, and must read, as every batch after it.
//!
//! Two more variants leave a lone intact batch between damaged ones whose nearest headers were
//! hit where they would vouch for it, and it must still read (broker sweep seeds 0x33e6 and
//! 0x355f): `d` and `d + 1` damaged in their records and `d + 3` in its base offset (the two
//! batches before it, together, state where it starts); and `d` damaged in its last offset delta
//! and `d + 2` in its base offset (the one after states how many offsets it holds up to the
//! intact batches after it).

use std::time::Duration;

use bytes::Bytes;
use weir::log::ReadError;
use weir::log::split::split_batches;
use weir::model::Offset;
use weir_scenarios::log::{BATCH_RECORDS, damage_batch, log_of_batches};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches in the segment read.
const BATCHES: u8 = 20;
/// The last byte of a batch's base offset (bytes 0 to 7, big-endian).
const BASE_OFFSET_LAST_BYTE: usize = 7;
/// A byte of a batch's records, inside its CRC.
const RECORDS_BYTE: usize = 70;
/// The first byte of a batch's last offset delta (inside its CRC).
const LAST_OFFSET_DELTA_FIRST_BYTE: usize = 23;
/// The damage patterns, by seed.
const VARIANTS: u64 = 5;

fn offset_of(n: u8) -> Offset {
    Offset(i64::from(n) * BATCH_RECORDS)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let sealed = seed % 2 == 1;
    let d = 1 + (seed / 2 / VARIANTS % u64::from(BATCHES - 5)) as u8;
    let (log, stored) = log_of_batches(&sim, host, BATCHES, sealed)?;
    let damage = |n: u8, byte: usize| damage_batch(&sim, host, &stored, usize::from(n), byte);
    // Which batches are damaged, and whether every other batch must read.
    let (damaged, strict): (Vec<u8>, bool) = match seed / 2 % VARIANTS {
        4 => {
            damage(d, RECORDS_BYTE)?;
            damage(d + 1, RECORDS_BYTE)?;
            damage(d + 3, BASE_OFFSET_LAST_BYTE)?;
            (vec![d, d + 1, d + 3], true)
        }
        3 => {
            damage(d, LAST_OFFSET_DELTA_FIRST_BYTE)?;
            damage(d + 2, BASE_OFFSET_LAST_BYTE)?;
            (vec![d, d + 2], true)
        }
        2 => {
            damage(d, RECORDS_BYTE)?;
            damage(d + 4, BASE_OFFSET_LAST_BYTE)?;
            (vec![d, d + 4], true)
        }
        1 => {
            damage(d, RECORDS_BYTE)?;
            damage(d + 1, BASE_OFFSET_LAST_BYTE)?;
            (vec![d, d + 1], true)
        }
        _ => {
            damage(d, RECORDS_BYTE)?;
            damage(d + 1, BASE_OFFSET_LAST_BYTE)?;
            damage(d + 2, RECORDS_BYTE)?;
            (vec![d, d + 1, d + 2], false)
        }
    };
    let last_damaged = damaged.iter().copied().max().unwrap_or(d);
    sim.block_on(host, Duration::from_secs(60), move |_env| async move {
        let upper = offset_of(BATCHES);
        for from in 0..upper.0 {
            let from = Offset(from);
            let holder = (from.0 / BATCH_RECORDS) as u8;
            let read = log.read(from, 1 << 20, upper).await;
            if damaged.contains(&holder) {
                ensure(matches!(read, Err(ReadError::Corrupt { .. })), || {
                    let read = read.as_ref().map(|r| (r.records.len(), r.next_offset));
                    format!("reading {from} in damaged batch {holder} gave {read:?} (bytes, next)")
                })?;
                continue;
            }
            let read = match read {
                Ok(read) => read,
                Err(e) if holder > last_damaged && !strict => {
                    // Past the damage a read may fail too (what vouched for where these batches
                    // start was lost), but it must say so, not serve wrong offsets.
                    ensure(matches!(e, ReadError::Corrupt { .. }), || {
                        format!("reading {from} past the damage failed with {e}")
                    })?;
                    continue;
                }
                Err(e) => {
                    return Err(format!(
                        "reading {from} (batch {holder}; {damaged:?} damaged): {e}"
                    ));
                }
            };
            let got: Vec<Bytes> = split_batches(&read.records)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("reading {from}: {e}"))?;
            let last = damaged.iter().copied().find(|&n| n > holder).unwrap_or(BATCHES);
            let want = &stored[usize::from(holder)..usize::from(last)];
            ensure(!got.is_empty() && want.starts_with(&got), || {
                format!(
                    "reading {from} returned {} batches that are not batches {holder}.. as stored \
                     (batches {damaged:?} are damaged)",
                    got.len(),
                )
            })?;
            if strict || holder < last_damaged {
                ensure(got.len() == want.len(), || {
                    format!("reading {from} returned {} batches, not {}", got.len(), want.len())
                })?;
            }
        }
        Ok(())
    })
    .ok_or("the reads did not finish")?
}

#[test]
fn log_reads_never_serve_a_batch_under_a_flipped_base_offset() {
    for_each_seed("log_reads_never_serve_a_batch_under_a_flipped_base_offset", 0..100, scenario);
}
