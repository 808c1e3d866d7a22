//! Repair of a damaged batch in place, from an intact copy another replica holds.
//!
//! A batch that fails its checks however often it is read (a latent sector error: bits changed
//! on the device after they were synced) stays damaged in this log for good, though the
//! replicas hold it byte for byte alike: the leader's copy, its offsets and leader epoch
//! stamped, is what every follower appended. So a follower that knows of damage in its log asks
//! its leader for that batch and writes the intact copy over the damaged one where it fits
//! exactly. Where that is:
//! - the walk to the copy's base offset, past damage before it as reads walk past it, meets
//!   damage;
//! - the damaged bytes there begin where a batch with the copy's base offset begins: the walk
//!   expects exactly that offset there (in a log without gaps in its offsets); or the damaged
//!   header states it, there or where the length
//!   fields of the damaged batches before it lead; or it lies the copy's length before where
//!   reads go on past the damage.
//!
//! What it takes for the copy to fit:
//! - what lies there now is not an intact batch, or is the copy with its base offset or leader
//!   epoch (fields outside the CRC) changed;
//! - the copy ends where the damaged batch did: at the segment's end, which is the offset after
//!   the copy's last, or where an intact batch begins with the offset after the copy's last (or
//!   a later one, where offsets may have gaps), or a damaged one whose header states exactly
//!   that offset, or (without gaps) one intact by its own checks whose base offset was flipped;
//! - in a log that may have gaps in its offsets (compacted), the damaged batch's own length
//!   field also states the copy's length: there, each replica compacts its own copy, and a
//!   longer copy could otherwise reach over intact batches whose offsets a gap hides;
//! - the copy passes every check a replicated batch does, its leader epoch included.
//!
//! The copy is synced before the repair is reported, and read back. A failed write or sync
//! takes the log offline, as any failed write does: a sync that failed may have dropped other
//! writes not yet synced. A torn write leaves the batch as damaged as it was: its checks still
//! fail, so nothing changes for a reader. The offsets, positions and indexes stay as they are.

use bytes::Bytes;

use super::batch;
use super::batch::BATCH_HEADER_BYTES;
use super::epochs::EpochCache;
use super::error::{Offline, ReadError};
use super::partition_log::Log;
use super::read::Plan;
use super::segment;
use super::walk::{DAMAGED_IN_A_ROW_MAX, Epochs, WalkStop, Walker, states_base_at, walk_past};
use crate::io::File;
use crate::model::Offset;

/// The end of a batch's base offset field (the batch's first 8 bytes).
const BASE_OFFSET_END: usize = 8;
/// Where a batch's partition leader epoch field starts (after the batch length) and ends.
const LEADER_EPOCH_START: usize = 12;
const LEADER_EPOCH_END: usize = 16;

/// What a repair did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// The damaged batch holding `base..=last` was replaced by the intact copy.
    Repaired {
        /// The batch's first offset.
        base: Offset,
        /// Its last offset.
        last: Offset,
    },
    /// This log's batch holding `base..=last`, where the copy's base offset lies, reads intact:
    /// nothing to repair.
    Intact {
        /// The batch's first offset.
        base: Offset,
        /// Its last offset.
        last: Offset,
    },
    /// The walk to the copy's base offset met damage that begins at this earlier offset: that
    /// batch must be repaired first.
    Earlier(Offset),
    /// The copy does not fit the damaged bytes (or lies outside the log): left as it was.
    Mismatch(&'static str),
}

/// Where the walk to a copy's base offset ended.
enum Found {
    /// The damaged batch the copy may replace starts at this byte.
    Slot(u64),
    /// The answer without a write.
    Done(Repair),
}

impl Log {
    /// Writes `copy`, another replica's intact copy of a batch, over this log's damaged copy of
    /// it, if it fits exactly (see the module documentation), and syncs it.
    pub async fn repair(&self, copy: Bytes) -> Result<Repair, ReadError> {
        let Ok(header) = batch::validate(&copy, copy.len()) else {
            return Ok(Repair::Mismatch("the copy is not an intact batch"));
        };
        let (base, last) = (Offset(header.base_offset()), Offset(header.last_offset()));
        let length = copy.len() as u64;
        // Held by whatever changes the set of segments (roll, cut, retention, the cleaner's
        // swap): the segment planned is the one written.
        let _files = self.files_lock.lock().await;
        let (log_start, log_end, epochs) = {
            let state = self.state();
            state.check_online()?;
            (state.log_start, state.log_end, state.epochs.clone())
        };
        // A batch the log start lies inside (a DeleteRecords to the middle of it) still holds
        // offsets the log serves.
        if last < log_start || last >= log_end {
            return Ok(Repair::Mismatch("the copy lies outside the log"));
        }
        if epochs.epoch_for(base).is_some_and(|e| e.0 != header.partition_leader_epoch()) {
            return Ok(Repair::Mismatch("the copy's leader epoch disagrees with the history"));
        }
        let Some(plan) = self.plan(base) else { return Ok(Repair::Mismatch("no segment")) };
        let position = match self.find_slot(&plan, &epochs, (base, last), length).await? {
            Found::Slot(position) => position,
            Found::Done(repair) => return Ok(repair),
        };
        let file = &*plan.log;
        let (dense, verify) = (self.dense(), || Epochs::Verify(epochs.clone()));
        let after = position + length;
        let ends_there = if after == plan.end {
            plan.end_offset == Offset(last.0 + 1)
        } else if after < plan.end {
            let next = Offset(last.0 + 1);
            let mut walker = Walker::new(file, after, plan.end, next, dense, verify());
            match walker.next().await {
                Ok(Some(w)) => w.position == after,
                // Damaged too (as adjacent batches on one bad sector are): where its header
                // states the offset after the copy's last, or, in a log without gaps in its
                // offsets, where a batch intact by its own checks starts (its base offset,
                // outside its CRC, flipped: it is repaired in turn once this one is).
                Err(WalkStop::Invalid { position, .. }) if position == after => {
                    states_base_at(file, (after, next)).await?
                        || (dense && intact_batch_at(file, after, plan.end).await?)
                }
                _ => false,
            }
        } else {
            false
        };
        if !ends_there {
            return Ok(Repair::Mismatch("the damaged batch does not end where the copy does"));
        }
        let held = file.read_at(position, copy.len()).await?;
        if held == copy {
            return Ok(Repair::Intact { base, last });
        }
        // A batch that passes its own checks but differs from the copy only where its CRC does
        // not reach, in its base offset or leader epoch, is this log's copy with one of those
        // flipped (the walk took it for damage: it disagrees with where it lies, or with this
        // log's epoch history, which the copy agrees with).
        let flipped_outside_crc = held.len() == copy.len()
            && held.get(BASE_OFFSET_END..LEADER_EPOCH_START)
                == copy.get(BASE_OFFSET_END..LEADER_EPOCH_START)
            && held.get(LEADER_EPOCH_END..) == copy.get(LEADER_EPOCH_END..);
        if batch::validate(&held, held.len()).is_ok() && !flipped_outside_crc {
            return Ok(Repair::Mismatch("an intact batch of another content lies there"));
        }
        if !dense && segment::frame_len(&held) != Some(copy.len()) {
            return Ok(Repair::Mismatch("the damaged batch states another length"));
        }
        if let Err(e) = file.write_at(position, copy.clone()).await {
            return Err(self.go_offline(Offline::WriteFailed(e.kind())).into());
        }
        if let Err(e) = file.sync_data().await {
            return Err(self.go_offline(Offline::SyncFailed(e.kind())).into());
        }
        let mut check = Walker::new(file, position, plan.end, base, dense, verify());
        match check.next().await {
            Ok(Some(w)) if w.position == position && w.bytes == copy => {
                tracing::warn!(log = %self.dir.display(), %base, %last, "repaired a damaged batch from another replica's copy");
                Ok(Repair::Repaired { base, last })
            }
            Err(WalkStop::Io(e)) => Err(e.into()),
            _ => Ok(Repair::Mismatch("the copy did not read back")),
        }
    }

    /// Walks the planned segment to the copy of `base..=last` (`length` bytes), as a read
    /// walks (vouching for epochs by `epochs`, the history as the repair found it), to find
    /// where the damaged batch it may replace starts.
    async fn find_slot(
        &self,
        plan: &Plan,
        epochs: &EpochCache,
        (base, last): (Offset, Offset),
        length: u64,
    ) -> Result<Found, ReadError> {
        let (file, dense) = (&*plan.log, self.dense());
        let verify = || Epochs::Verify(epochs.clone());
        let (from, expected) = plan.start_position(self, base).await?;
        let mut exact = (from, expected) != (0, plan.base);
        let mut walker =
            Walker::new(file, from, plan.end, expected, dense, verify()).starting_at_entry(exact);
        loop {
            let (position, damaged_from) = match walker.next().await {
                Ok(Some(w)) if w.header.last_offset() >= base.0 => {
                    let found = (Offset(w.header.base_offset()), Offset(w.header.last_offset()));
                    return Ok(Found::Done(Repair::Intact { base: found.0, last: found.1 }));
                }
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(Found::Done(Repair::Mismatch("the segment ends first"))),
                Err(WalkStop::Io(e)) => return Err(e.into()),
                Err(WalkStop::Invalid { position, .. }) => (position, walker.expected()),
            };
            if exact && position == from {
                // The index is only a hint and may have been misread: walk from the segment's
                // start instead, as a read does.
                exact = false;
                walker = Walker::new(file, 0, plan.end, plan.base, dense, verify());
                continue;
            }
            exact = false;
            if damaged_from > base {
                return Ok(Found::Done(Repair::Mismatch("the walk passed the copy's base")));
            }
            let exactly = dense.then_some(damaged_from);
            if let Some(slot) = slot(file, (position, exactly), base, plan.end).await? {
                return Ok(Found::Slot(slot));
            }
            // Where reads go on past the damage: before the copy, the walk goes on there; just
            // after it, the copy ends there, if the damaged header there states its base.
            let until = self.chain_end(plan, position).await?;
            let damaged = (position, damaged_from);
            match walk_past(file, damaged, until, Some(epochs)).await? {
                Some((at, next)) if next <= base => {
                    walker = Walker::new(file, at, plan.end, next, dense, verify())
                        .starting_at_entry(true);
                }
                Some((at, next))
                    if next.0 == last.0 + 1
                        && at >= position + length
                        && states_base_at(file, (at - length, base)).await? =>
                {
                    return Ok(Found::Slot(at - length));
                }
                _ => return Ok(Found::Done(Repair::Earlier(damaged_from))),
            }
        }
    }
}

/// Whether a batch that passes its own checks starts at byte `at` (before `end`).
async fn intact_batch_at(file: &dyn File, at: u64, end: u64) -> std::io::Result<bool> {
    let head = file.read_at(at, BATCH_HEADER_BYTES).await?;
    let Some(len) = segment::frame_len(&head).filter(|&len| at + len as u64 <= end) else {
        return Ok(false);
    };
    let whole = file.read_at(at, len).await?;
    Ok(batch::validate(&whole, whole.len()).is_ok())
}

/// Where the damaged batch with base offset `base` starts, the walk having met damage at byte
/// `at`, where a batch with offset `exactly` starts, if the log has no gaps in its offsets:
/// there if that is `base`; else the first header that states `base`, from there on where the
/// length fields of the damaged batches lead, while none states an offset past `base`, for as
/// many damaged batches in a row as a read crosses ([`DAMAGED_IN_A_ROW_MAX`]). `None` if none
/// is found. (Where offsets may have gaps, the walk knows only the least offset the damaged
/// batch may start at: a compaction may have removed the batch the copy is of, here and not
/// on the leader.)
async fn slot(
    file: &dyn File,
    (mut at, exactly): (u64, Option<Offset>),
    base: Offset,
    end: u64,
) -> Result<Option<u64>, ReadError> {
    if exactly == Some(base) {
        return Ok(Some(at));
    }
    for _ in 0..=DAMAGED_IN_A_ROW_MAX {
        let head = file.read_at(at, BATCH_HEADER_BYTES).await?;
        let stated = head.get(..8).and_then(|b| b.try_into().ok()).map(i64::from_be_bytes);
        match stated {
            Some(stated) if stated == base.0 => return Ok(Some(at)),
            Some(stated) if stated < base.0 => {}
            _ => return Ok(None),
        }
        match segment::frame_len(&head) {
            Some(len) if at + (len as u64) < end => at += len as u64,
            _ => return Ok(None),
        }
    }
    Ok(None)
}
