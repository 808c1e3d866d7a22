//! Production randomness: a ChaCha stream seeded once from the operating system.

use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

use rand_chacha::ChaCha12Rng;
use rand_core::{Rng, SeedableRng};

use crate::io::Entropy;

/// Random numbers seeded from OS entropy at start-up.
pub struct OsSeededEntropy {
    rng: Mutex<ChaCha12Rng>,
}

impl OsSeededEntropy {
    /// Seeds a new stream. std's `RandomState` draws its keys from the operating system's random
    /// source, which spares a dependency for the 32 bytes needed once per process.
    pub fn new() -> OsSeededEntropy {
        let mut seed = [0u8; 32];
        for (i, chunk) in seed.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_usize(i);
            chunk.copy_from_slice(&hasher.finish().to_le_bytes());
        }
        OsSeededEntropy { rng: Mutex::new(ChaCha12Rng::from_seed(seed)) }
    }
}

impl Default for OsSeededEntropy {
    fn default() -> Self {
        OsSeededEntropy::new()
    }
}

impl Entropy for OsSeededEntropy {
    fn next_u64(&self) -> u64 {
        // A poisoned lock still holds a valid generator; keep using it.
        let mut rng = self.rng.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        rng.next_u64()
    }
}
