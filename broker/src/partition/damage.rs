//! The damaged batches a partition's log is known to hold ([`KnownDamage`]), and their
//! checkpoint (`damaged-batches-checkpoint`), so that what the broker learned survives a
//! restart: a replica that reopens a log with damage in it goes on reporting it to the
//! controller and, following, asks its leader to repair it at once, instead of waiting until a
//! read happens to meet it again.
//!
//! The checkpoint is written with the partition's others, only when the set changed since the
//! last one; a partition that never met damage has none. What it lists is believed only once
//! read again: at open, an offset whose batch reads intact (repaired, or replaced since by a
//! cut and a new copy, before the checkpoint caught up) is dropped; one whose batch cannot be
//! read (the disk failed the read) is kept.

use std::collections::BTreeSet;
use std::path::Path;

use bytes::{Buf, BufMut, BytesMut};

use crate::io::Disk;
use crate::log::{Log, ReadError, checkpoint};
use crate::model::Offset;

/// The most damaged batches a partition remembers: past it, the lowest is forgotten (it is the
/// first that retention deletes).
pub const KNOWN_DAMAGE_MAX: usize = 64;
/// File name of the known-damage checkpoint, in the partition's folder.
pub const DAMAGE_CHECKPOINT: &str = "damaged-batches-checkpoint";
/// Checkpoint kind of [`DAMAGE_CHECKPOINT`] (after the cleaner's, 4).
pub const DAMAGE_CHECKPOINT_KIND: u8 = 5;
const DAMAGE_CHECKPOINT_VERSION: u8 = 1;

/// The offsets of the damaged batches known in a log, and whether that changed since it was
/// last checkpointed.
#[derive(Clone, Debug, Default)]
pub(crate) struct KnownDamage {
    offsets: BTreeSet<Offset>,
    /// Changes made so far.
    changes: u64,
    /// `changes` as of the last checkpoint written.
    saved: u64,
}

impl KnownDamage {
    /// Adds damage at `offset`, forgetting any below `start`, the log start, and the lowest
    /// past [`KNOWN_DAMAGE_MAX`].
    pub(crate) fn note(&mut self, offset: Offset, start: Offset) {
        let before = self.offsets.clone();
        self.offsets.insert(offset);
        self.offsets.retain(|&at| at >= start);
        while self.offsets.len() > KNOWN_DAMAGE_MAX {
            self.offsets.pop_first();
        }
        self.changed_from(&before);
    }

    /// Forgets damage at or past `end`: the log was cut there.
    pub(crate) fn forget_from(&mut self, end: Offset) {
        let before = self.offsets.len();
        self.offsets.retain(|&at| at < end);
        self.changed_if(self.offsets.len() != before);
    }

    /// Forgets damage in `first..=last`: that batch was repaired, or reads intact.
    pub(crate) fn forget(&mut self, first: Offset, last: Offset) {
        let before = self.offsets.len();
        self.offsets.retain(|&at| at < first || at > last);
        self.changed_if(self.offsets.len() != before);
    }

    /// The lowest known damage in `[start, end)`, the log as it is now.
    pub(crate) fn within(&self, start: Offset, end: Offset) -> Option<Offset> {
        self.offsets.range(start..end).next().copied()
    }

    /// Every offset known damaged.
    pub(crate) fn offsets(&self) -> BTreeSet<Offset> {
        self.offsets.clone()
    }

    /// What to checkpoint, if it changed since the last checkpoint: the change count to pass
    /// to [`KnownDamage::saved`] once written, and the offsets.
    pub(crate) fn unsaved(&self) -> Option<(u64, Vec<Offset>)> {
        (self.changes != self.saved).then(|| (self.changes, self.offsets.iter().copied().collect()))
    }

    /// The checkpoint of the set as of `changes` was written.
    pub(crate) fn saved(&mut self, changes: u64) {
        self.saved = self.saved.max(changes);
    }

    fn changed_from(&mut self, before: &BTreeSet<Offset>) {
        let changed = *before != self.offsets;
        self.changed_if(changed);
    }

    fn changed_if(&mut self, changed: bool) {
        if changed {
            self.changes += 1;
        }
    }
}

/// The damage the checkpoint of the log in `log`'s folder lists that is still in the log and
/// still reads as damaged, or cannot be read now (the disk failed the read, or the log is
/// offline: the batch is not known to be intact); counted as a change to checkpoint if that is
/// not all it listed, or if the checkpoint is malformed or of a version this code does not
/// read: it is then written afresh, so that it is not warned of at every start (what it listed
/// is lost, and found again by the reads and the scrub that meet it). A checkpoint the disk
/// failed to read is left as it is.
pub(crate) async fn load(log: &Log, disk: &dyn Disk) -> KnownDamage {
    let dir = log.dir();
    let listed = match checkpoint::read(disk, dir, DAMAGE_CHECKPOINT, DAMAGE_CHECKPOINT_KIND).await
    {
        Ok(Some((DAMAGE_CHECKPOINT_VERSION, body))) => decode(&body).ok_or("malformed".to_owned()),
        Ok(Some((version, _))) => {
            Err(format!("version {version}; this code reads version {DAMAGE_CHECKPOINT_VERSION}"))
        }
        Ok(None) => return KnownDamage::default(),
        Err(e @ checkpoint::CheckpointError::Io { .. }) => {
            // A failed read is not rewritten: the file may read next time.
            tracing::warn!(log = %dir.display(), "ignoring the known-damage checkpoint: {e}");
            Ok(Vec::new())
        }
        Err(e) => Err(e.to_string()),
    };
    let unread = listed.as_ref().err().cloned();
    if let Some(why) = &unread {
        tracing::warn!(log = %dir.display(), "ignoring the known-damage checkpoint: {why}");
    }
    let listed = listed.unwrap_or_default();
    let mut known = KnownDamage::default();
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    for &at in listed.iter().filter(|&&at| at >= start && at < end) {
        match log.read(at, 1, end).await {
            // Reads intact (repaired, or replaced since), or no longer in the log.
            Ok(_) | Err(ReadError::OutOfRange { .. }) => {}
            Err(ReadError::Corrupt { .. }) => {
                known.offsets.insert(at);
            }
            // Not known either way: still believed damaged, as listed.
            Err(e @ (ReadError::Io(_) | ReadError::Offline(_))) => {
                tracing::warn!(log = %dir.display(), offset = at.0, "could not read a batch listed as damaged, so it is kept as damaged: {e}");
                known.offsets.insert(at);
            }
        }
    }
    // Rewritten at the next checkpoint if anything listed was dropped (none is written for a
    // log that lists nothing).
    let dropped = known.offsets.len() != listed.len();
    known.changed_if(dropped || unread.is_some());
    if !known.offsets.is_empty() {
        tracing::warn!(log = %dir.display(), offsets = ?known.offsets, "the log holds damaged batches, as known before the restart");
    }
    known
}

/// Durably records `offsets` as the log's known damage.
pub(crate) async fn store(disk: &dyn Disk, dir: &Path, offsets: &[Offset]) -> std::io::Result<()> {
    let mut body = BytesMut::with_capacity(4 + offsets.len() * 8);
    body.put_u32(u32::try_from(offsets.len()).unwrap_or(u32::MAX));
    for at in offsets {
        body.put_i64(at.0);
    }
    let framed = checkpoint::encode(DAMAGE_CHECKPOINT_KIND, DAMAGE_CHECKPOINT_VERSION, &body);
    checkpoint::write_atomic(disk, dir, DAMAGE_CHECKPOINT, framed).await
}

/// The offsets a checkpoint body lists, if it is well formed (at most [`KNOWN_DAMAGE_MAX`]).
fn decode(mut body: &[u8]) -> Option<Vec<Offset>> {
    if body.remaining() < 4 {
        return None;
    }
    let count = usize::try_from(body.get_u32()).ok()?;
    if count > KNOWN_DAMAGE_MAX || body.remaining() != count * 8 {
        return None;
    }
    Some((0..count).map(|_| Offset(body.get_i64())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_damage_keeps_every_batch_still_in_the_log() {
        let mut known = KnownDamage::default();
        known.note(Offset(30), Offset(0));
        known.note(Offset(80), Offset(0));
        assert_eq!(known.within(Offset(0), Offset(100)), Some(Offset(30)));
        // Deleted past the first: the second is still there.
        assert_eq!(known.within(Offset(40), Offset(100)), Some(Offset(80)));
        // Cut below the second: only the first.
        known.forget_from(Offset(50));
        assert_eq!(known.within(Offset(0), Offset(100)), Some(Offset(30)));
        assert_eq!(known.within(Offset(40), Offset(100)), None);
        // Damage below the log start is dropped as new damage is noted; at most the newest
        // KNOWN_DAMAGE_MAX are kept.
        for at in 100..100 + KNOWN_DAMAGE_MAX as i64 + 1 {
            known.note(Offset(at), Offset(40));
        }
        assert_eq!(known.within(Offset(0), Offset(1_000)), Some(Offset(101)));
        assert_eq!(known.offsets.len(), KNOWN_DAMAGE_MAX);
    }

    #[test]
    fn only_a_changed_set_is_checkpointed_again() {
        let mut known = KnownDamage::default();
        assert_eq!(known.unsaved(), None, "nothing known, nothing to write");
        known.note(Offset(7), Offset(0));
        let (changes, offsets) = known.unsaved().expect("a change");
        assert_eq!(offsets, vec![Offset(7)]);
        known.saved(changes);
        assert_eq!(known.unsaved(), None);
        // Noting what is known, or forgetting what is not, changes nothing.
        known.note(Offset(7), Offset(0));
        known.forget(Offset(20), Offset(29));
        known.forget_from(Offset(8));
        assert_eq!(known.unsaved(), None);
        known.forget(Offset(6), Offset(8));
        assert_eq!(known.unsaved().map(|(_, o)| o), Some(vec![]));
    }

    #[test]
    fn a_checkpoint_body_lists_what_was_stored_or_nothing() {
        let mut body = BytesMut::new();
        body.put_u32(2);
        body.put_i64(5);
        body.put_i64(900);
        assert_eq!(decode(&body), Some(vec![Offset(5), Offset(900)]));
        assert_eq!(decode(&body[..body.len() - 1]), None, "short");
        let mut many = BytesMut::new();
        many.put_u32(KNOWN_DAMAGE_MAX as u32 + 1);
        many.extend_from_slice(&vec![0u8; (KNOWN_DAMAGE_MAX + 1) * 8]);
        assert_eq!(decode(&many), None, "more than a partition remembers");
    }
}
