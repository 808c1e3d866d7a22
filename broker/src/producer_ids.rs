//! Producer ids for idempotent producers. Ids are handed out from blocks whose end is made
//! durable before any id in them is given out, so a restarted broker never reuses an id.

use std::path::Path;

use bytes::Bytes;

use crate::io::Disk;
use crate::log::checkpoint;
use crate::model::{ProducerEpoch, ProducerId};
use crate::topics::META_DIR;

/// Ids reserved per write of the checkpoint.
pub const PRODUCER_ID_BLOCK: i64 = 1_000;
const FILE: &str = "producer-ids.checkpoint";
const KIND: u8 = 11;

/// Allocates producer ids.
pub struct ProducerIds {
    next: i64,
    reserved_until: i64,
}

impl ProducerIds {
    /// Loads the allocator; the first id given out is past every id given out before.
    pub async fn load(disk: &dyn Disk) -> std::io::Result<ProducerIds> {
        let dir = Path::new(META_DIR);
        disk.create_dir(dir).await?;
        let reserved = match checkpoint::read(disk, dir, FILE, KIND).await {
            Ok(Some((_, body))) => body.as_ref().try_into().map(i64::from_be_bytes).unwrap_or(0),
            Ok(None) => 0,
            Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        };
        Ok(ProducerIds { next: reserved, reserved_until: reserved })
    }

    /// A fresh id with epoch 0.
    pub async fn allocate(
        &mut self,
        disk: &dyn Disk,
    ) -> std::io::Result<(ProducerId, ProducerEpoch)> {
        if self.next >= self.reserved_until {
            let until = self.next + PRODUCER_ID_BLOCK;
            let body = Bytes::copy_from_slice(&until.to_be_bytes());
            checkpoint::write_atomic(
                disk,
                Path::new(META_DIR),
                FILE,
                checkpoint::encode(KIND, 1, &body),
            )
            .await?;
            self.reserved_until = until;
        }
        let id = self.next;
        self.next += 1;
        Ok((ProducerId(id), ProducerEpoch(0)))
    }

    /// Whether `id` was ever handed out.
    pub fn was_allocated(&self, id: ProducerId) -> bool {
        (0..self.reserved_until).contains(&id.0)
    }
}
