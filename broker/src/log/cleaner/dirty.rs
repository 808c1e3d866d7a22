//! The cleaner checkpoint (`cleaner-offset-checkpoint`): the log's first dirty offset, below
//! which every pass so far has cleaned.
//!
//! Kafka keeps one such file per log folder for all partitions; Weir keeps one per partition
//! folder, beside the partition's other checkpoints, so a partition's state moves and is
//! deleted as one folder. It is written only after every group of a pass has been swapped in
//! durably, so it never claims more than the disk holds. A lost or unreadable checkpoint only
//! makes the next pass treat clean data as dirty again, which costs work but is always correct.

use std::path::Path;

use crate::io::Disk;
use crate::log::checkpoint;
use crate::model::Offset;

/// File name of the cleaner checkpoint, in the partition's folder.
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Checkpoint kind of [`CLEANER_CHECKPOINT`] (1: partition, 2: leader epochs, 3: producers).
pub const CLEANER_CHECKPOINT_KIND: u8 = 4;
const CLEANER_CHECKPOINT_VERSION: u8 = 1;

/// The stored first dirty offset, if there is a valid checkpoint.
pub(super) async fn load(disk: &dyn Disk, dir: &Path) -> Option<Offset> {
    match checkpoint::read(disk, dir, CLEANER_CHECKPOINT, CLEANER_CHECKPOINT_KIND).await {
        Ok(Some((_, body))) => decode(&body),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(log = %dir.display(), "ignoring cleaner checkpoint: {e}");
            None
        }
    }
}

/// Durably records `first_dirty`.
pub(super) async fn store(disk: &dyn Disk, dir: &Path, first_dirty: Offset) -> std::io::Result<()> {
    let framed = checkpoint::encode(
        CLEANER_CHECKPOINT_KIND,
        CLEANER_CHECKPOINT_VERSION,
        &first_dirty.0.to_be_bytes(),
    );
    checkpoint::write_atomic(disk, dir, CLEANER_CHECKPOINT, framed).await
}

fn decode(body: &[u8]) -> Option<Offset> {
    let raw: [u8; 8] = body.try_into().ok()?;
    Some(Offset(i64::from_be_bytes(raw))).filter(|o| o.0 >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_and_nonsense_is_refused() {
        assert_eq!(decode(&42i64.to_be_bytes()), Some(Offset(42)));
        assert_eq!(decode(&(-1i64).to_be_bytes()), None);
        assert_eq!(decode(&[0; 7]), None);
        assert_eq!(decode(&[0; 9]), None);
    }
}
