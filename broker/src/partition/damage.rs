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
//! read (the disk failed the read) is kept. A checkpoint the disk fails to read at open is read
//! again at the partition's checkpoints, and not written over, until it reads or, while new
//! damage waits to be written, [`DAMAGE_CHECKPOINT_REREAD_ATTEMPTS`] reads of it failed. New
//! damage met meanwhile is known while the broker runs, but a crash or a shutdown before the
//! checkpoint reads forgets it (the scrub holds its cursor before it, so that its next pass
//! meets it again).

use std::collections::BTreeSet;
use std::path::Path;

use bytes::{Buf, BufMut, BytesMut};

use crate::io::Disk;
use crate::log::{Log, ReadError, checkpoint};
use crate::model::Offset;

/// The most damaged batches a partition remembers: past it, the lowest is forgotten (it is the
/// first that retention deletes).
pub const KNOWN_DAMAGE_MAX: usize = 64;
/// Failed reads again of a known-damage checkpoint the disk could not read at open, while new
/// damage waits to be written, after which it is written over all the same (see
/// [`KnownDamage::reread`]). The partition's periodic checkpoints read it again, a minute
/// apart by default.
pub const DAMAGE_CHECKPOINT_REREAD_ATTEMPTS: u32 = 3;
/// The most ranges [`KnownDamage::forget`] remembers having forgotten while the checkpoint
/// is unread; past it, the oldest go (what they stop holding back reads intact at the next
/// repair asked for).
const FORGOTTEN_WHILE_UNREAD_MAX: usize = 2 * KNOWN_DAMAGE_MAX;
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
    /// While the checkpoint on disk could not be read, at open and since: nothing is written
    /// over it meanwhile ([`KnownDamage::reread`]).
    unread: Option<Unread>,
}

/// The state of a known-damage checkpoint the disk could not read.
#[derive(Clone, Debug, Default)]
struct Unread {
    /// Reads of it again that failed while new damage waited to be written.
    failed: u32,
    /// The ranges forgotten since (repaired, or cut off): what it lists there is not
    /// believed once it reads.
    forgotten: Vec<(Offset, Offset)>,
}

/// A new read of a known-damage checkpoint, for [`KnownDamage::reread`].
#[derive(Debug)]
pub(crate) enum Reread {
    /// It read: of what it lists, `still` are still damaged ([`still_damaged`]); `dropped`
    /// if it lists any other.
    Offsets { still: BTreeSet<Offset>, dropped: bool },
    /// It read, but is [`Listed::Ignored`].
    Ignored,
    /// The disk failed the read again.
    Failed,
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
        self.forget(end, Offset(i64::MAX));
    }

    /// Forgets damage in `first..=last`: that batch was repaired, or reads intact.
    pub(crate) fn forget(&mut self, first: Offset, last: Offset) {
        let before = self.offsets.len();
        self.offsets.retain(|&at| at < first || at > last);
        self.changed_if(self.offsets.len() != before);
        if let Some(unread) = &mut self.unread {
            if unread.forgotten.len() == FORGOTTEN_WHILE_UNREAD_MAX {
                unread.forgotten.remove(0);
            }
            unread.forgotten.push((first, last));
        }
    }

    /// The lowest known damage in `[start, end)`, the log as it is now.
    pub(crate) fn within(&self, start: Offset, end: Offset) -> Option<Offset> {
        self.offsets.range(start..end).next().copied()
    }

    /// Every offset known damaged.
    pub(crate) fn offsets(&self) -> BTreeSet<Offset> {
        self.offsets.clone()
    }

    /// What to checkpoint, if it changed since the last checkpoint and the checkpoint on disk
    /// is not still unread: the change count to pass to [`KnownDamage::saved`] once written,
    /// and the offsets.
    pub(crate) fn unsaved(&self) -> Option<(u64, Vec<Offset>)> {
        (self.changes != self.saved && self.unread.is_none())
            .then(|| (self.changes, self.offsets.iter().copied().collect()))
    }

    /// Whether the checkpoint on disk is still to be read again ([`KnownDamage::reread`]).
    pub(crate) fn unread(&self) -> bool {
        self.unread.is_some()
    }

    /// Whether a change waits to be written while the checkpoint on disk is still unread.
    pub(crate) fn held_back(&self) -> bool {
        self.unread.is_some() && self.changes != self.saved
    }

    /// Takes in a new read of the checkpoint that could not be read before. If it read, what
    /// it lists that is still damaged joins what is known (but not below the log start
    /// `start`, nor where forgotten since the read began or since open), and it may be
    /// written over from now on. If it failed again while new damage waits to be written, for
    /// the [`DAMAGE_CHECKPOINT_REREAD_ATTEMPTS`]th time, it may be written over all the same,
    /// so that new damage is not kept from the disk for ever: what it lists is lost then, and
    /// found again by the reads and the scrub that meet it. A failure with nothing waiting
    /// costs nothing: it is read again at the next checkpoint.
    pub(crate) fn reread(&mut self, listed: Reread, start: Offset) {
        let Some(unread) = self.unread.take() else { return };
        match listed {
            Reread::Offsets { still, dropped } => {
                let before = self.offsets.clone();
                let forgotten =
                    |at: &Offset| unread.forgotten.iter().any(|&(f, l)| f <= *at && *at <= l);
                self.offsets.extend(still.range(start..).filter(|at| !forgotten(at)));
                while self.offsets.len() > KNOWN_DAMAGE_MAX {
                    self.offsets.pop_first();
                }
                self.changed_from(&before);
                self.changed_if(dropped);
            }
            Reread::Ignored => self.changed_if(true),
            Reread::Failed if self.changes == self.saved => self.unread = Some(unread),
            Reread::Failed => {
                let failed = unread.failed + 1;
                if failed < DAMAGE_CHECKPOINT_REREAD_ATTEMPTS {
                    self.unread = Some(Unread { failed, ..unread });
                }
            }
        }
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

/// What a known-damage checkpoint lists, as far as it could be read.
#[derive(Debug)]
pub(crate) enum Listed {
    /// These offsets (none where there is no checkpoint).
    Offsets(Vec<Offset>),
    /// The disk failed the read: the file may read next time, and is not written over
    /// meanwhile (see [`KnownDamage::reread`]).
    Unreadable(checkpoint::CheckpointError),
    /// Malformed, or of a version this code does not read: written afresh at the next
    /// checkpoint, so that it is not warned of at every start (what it listed is lost, and
    /// found again by the reads and the scrub that meet it).
    Ignored(Ignored),
}

/// Why a known-damage checkpoint that read is not believed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Ignored {
    /// Its body does not decode.
    #[error("malformed")]
    Malformed,
    /// Another release wrote it.
    #[error("version {0}; this code reads version {DAMAGE_CHECKPOINT_VERSION}")]
    Version(u8),
    /// Its frame does not check.
    #[error(transparent)]
    Frame(checkpoint::CheckpointError),
}

/// The known-damage checkpoint in `dir`, as far as it reads.
pub(crate) async fn read_listed(disk: &dyn Disk, dir: &Path) -> Listed {
    match checkpoint::read(disk, dir, DAMAGE_CHECKPOINT, DAMAGE_CHECKPOINT_KIND).await {
        Ok(Some((DAMAGE_CHECKPOINT_VERSION, body))) => match decode(&body) {
            Some(offsets) => Listed::Offsets(offsets),
            None => Listed::Ignored(Ignored::Malformed),
        },
        Ok(Some((version, _))) => Listed::Ignored(Ignored::Version(version)),
        Ok(None) => Listed::Offsets(Vec::new()),
        Err(e @ checkpoint::CheckpointError::Io { .. }) => Listed::Unreadable(e),
        Err(e) => Listed::Ignored(Ignored::Frame(e)),
    }
}

/// Of the offsets `listed`, those still in `log` whose batch still reads as damaged, or cannot
/// be read now (the disk failed the read, or the log is offline: the batch is not known to be
/// intact). A batch that reads intact was repaired, or replaced since by a cut and a new copy
/// before the checkpoint caught up.
pub(crate) async fn still_damaged(log: &Log, listed: &[Offset]) -> BTreeSet<Offset> {
    let mut damaged = BTreeSet::new();
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    for &at in listed.iter().filter(|&&at| at >= start && at < end) {
        match log.read(at, 1, end).await {
            Ok(_) | Err(ReadError::OutOfRange { .. }) => {}
            Err(ReadError::Corrupt { .. }) => {
                damaged.insert(at);
            }
            Err(e @ (ReadError::Io(_) | ReadError::Offline(_))) => {
                tracing::warn!(log = %log.dir().display(), offset = at.0, "could not read a batch listed as damaged, so it is kept as damaged: {e}");
                damaged.insert(at);
            }
        }
    }
    damaged
}

/// The damage the checkpoint of the log in `log`'s folder lists that is still damaged
/// ([`still_damaged`]); counted as a change to checkpoint if that is not all it listed, or if
/// the checkpoint is [`Listed::Ignored`]. A checkpoint the disk failed to read is read again at
/// the partition's next checkpoints ([`KnownDamage::reread`]) before anything is written over
/// it.
/// Rewritten at the next checkpoint if anything listed was dropped (none is written for a log
/// that lists nothing).
pub(crate) async fn load(log: &Log, disk: &dyn Disk) -> KnownDamage {
    let dir = log.dir();
    let mut known = KnownDamage::default();
    match read_listed(disk, dir).await {
        Listed::Offsets(listed) => {
            known.offsets = still_damaged(log, &listed).await;
            known.changed_if(known.offsets.len() != listed.len());
        }
        Listed::Unreadable(why) => {
            tracing::warn!(log = %dir.display(), "could not read the known-damage checkpoint, so it is read again at the next checkpoint: {why}");
            known.unread = Some(Unread::default());
        }
        Listed::Ignored(why) => {
            tracing::warn!(log = %dir.display(), "ignoring the known-damage checkpoint: {why}");
            known.changed_if(true);
        }
    }
    if !known.offsets.is_empty() {
        tracing::warn!(log = %dir.display(), offsets = ?known.offsets, "the log holds damaged batches, as known before the restart");
    }
    known
}

/// Reads the known-damage checkpoint of `log` again, for [`KnownDamage::reread`].
pub(crate) async fn read_again(log: &Log, disk: &dyn Disk) -> Reread {
    let dir = log.dir();
    match read_listed(disk, dir).await {
        Listed::Offsets(listed) => {
            let still = still_damaged(log, &listed).await;
            if !still.is_empty() {
                tracing::warn!(log = %dir.display(), offsets = ?still, "the log holds damaged batches, as known before the restart");
            }
            let dropped = still.len() != listed.len();
            Reread::Offsets { still, dropped }
        }
        Listed::Ignored(why) => {
            tracing::warn!(log = %dir.display(), "ignoring the known-damage checkpoint: {why}");
            Reread::Ignored
        }
        Listed::Unreadable(why) => {
            tracing::warn!(log = %dir.display(), "could not read the known-damage checkpoint again: {why}");
            Reread::Failed
        }
    }
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

    fn unread() -> KnownDamage {
        KnownDamage { unread: Some(Unread::default()), ..KnownDamage::default() }
    }

    fn listing(offsets: &[i64], dropped: bool) -> Reread {
        Reread::Offsets { still: offsets.iter().map(|&o| Offset(o)).collect(), dropped }
    }

    #[test]
    fn an_unread_checkpoint_is_written_over_only_once_read_or_given_up() {
        let mut known = unread();
        // Failed reads while nothing waits to be written cost nothing.
        for _ in 0..2 * DAMAGE_CHECKPOINT_REREAD_ATTEMPTS {
            known.reread(Reread::Failed, Offset(0));
        }
        assert!(known.unread());
        known.note(Offset(50), Offset(0));
        assert_eq!(known.unsaved(), None, "held back while the checkpoint is unread");
        assert!(known.held_back());
        known.reread(Reread::Failed, Offset(0));
        assert!(known.unread());
        assert_eq!(known.unsaved(), None);
        // It reads: what it lists joins what is known, below the log start dropped.
        known.reread(listing(&[3, 20], false), Offset(10));
        assert!(!known.unread() && !known.held_back());
        assert_eq!(known.unsaved().map(|(_, o)| o), Some(vec![Offset(20), Offset(50)]));

        // Failed at every try while new damage waits: written over with what is known.
        let mut known = unread();
        known.note(Offset(50), Offset(0));
        for _ in 1..DAMAGE_CHECKPOINT_REREAD_ATTEMPTS {
            known.reread(Reread::Failed, Offset(0));
            assert_eq!(known.unsaved(), None);
        }
        known.reread(Reread::Failed, Offset(0));
        assert!(!known.unread());
        assert_eq!(known.unsaved().map(|(_, o)| o), Some(vec![Offset(50)]));
    }

    #[test]
    fn what_was_forgotten_while_the_checkpoint_was_unread_is_not_believed_from_it() {
        let mut known = unread();
        known.note(Offset(50), Offset(0));
        // Repaired, then cut: neither is damage any more, whatever the checkpoint says.
        known.forget(Offset(6), Offset(8));
        known.forget_from(Offset(90));
        known.reread(listing(&[3, 7, 60, 95], false), Offset(0));
        assert_eq!(known.unsaved().map(|(_, o)| o), Some(vec![Offset(3), Offset(50), Offset(60)]));
    }

    #[test]
    fn a_reread_checkpoint_that_lists_more_than_is_damaged_is_written_again() {
        // Malformed, or of another version: written afresh.
        let mut known = unread();
        known.reread(Reread::Ignored, Offset(0));
        assert_eq!(known.unsaved().map(|(_, o)| o), Some(vec![]));
        // Lists a batch that reads intact now.
        let mut known = unread();
        known.reread(listing(&[], true), Offset(0));
        assert_eq!(known.unsaved().map(|(_, o)| o), Some(vec![]));
        // Lists only what is still damaged, all of it known: nothing to write.
        let mut known = unread();
        known.reread(listing(&[], false), Offset(0));
        assert!(!known.unread());
        assert_eq!(known.unsaved(), None);
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
