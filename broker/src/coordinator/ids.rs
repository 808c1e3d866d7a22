//! Member ids: `<client.id>-<uuid>` for dynamic members, `<group.instance.id>-<uuid>` for static
//! ones, as Kafka builds them.
//!
//! The randomness is a ChaCha stream seeded by the caller (from `Env::entropy`), never a global
//! generator, so a simulation run hands out the same ids every time.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use super::codec::STRING_BYTES_MAX;
use super::types::MemberId;

/// The length of `-` plus a hyphenated UUID.
const UUID_SUFFIX_BYTES: usize = 37;

/// Generates member ids.
#[derive(Clone, Debug)]
pub struct IdGenerator {
    rng: ChaCha8Rng,
}

impl IdGenerator {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> IdGenerator {
        IdGenerator { rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// A fresh member id: `prefix` (cut short if the id would not fit a Kafka string), `-`,
    /// and a random version-4 UUID.
    pub fn member_id(&mut self, prefix: &str) -> MemberId {
        let mut cut = prefix.len().min(STRING_BYTES_MAX - UUID_SUFFIX_BYTES);
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.rng.next_u64().to_le_bytes());
        bytes[8..].copy_from_slice(&self.rng.next_u64().to_le_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let mut id = String::with_capacity(cut + UUID_SUFFIX_BYTES);
        id.push_str(&prefix[..cut]);
        id.push('-');
        for (i, b) in bytes.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                id.push('-');
            }
            id.push_str(&format!("{b:02x}"));
        }
        MemberId(id)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_uuids_and_deterministic() {
        let mut a = IdGenerator::new(7);
        let mut b = IdGenerator::new(7);
        let id = a.member_id("consumer-1");
        assert_eq!(id, b.member_id("consumer-1"));
        let uuid = id.as_str().strip_prefix("consumer-1-").unwrap();
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.as_bytes()[14], b'4');
        assert_ne!(a.member_id("consumer-1"), id);
    }

    #[test]
    fn long_prefixes_are_cut_to_fit() {
        let id = IdGenerator::new(1).member_id(&"é".repeat(STRING_BYTES_MAX));
        assert!(id.as_str().len() <= STRING_BYTES_MAX);
    }
}
