//! Randomness: ids, jitter and tie-breaking. In simulation each node draws from its own stream
//! derived from the run's seed, so one seed reproduces every random choice.

/// A node's source of random numbers.
pub trait Entropy: Send + Sync {
    /// The next 64 random bits.
    fn next_u64(&self) -> u64;

    /// Fills `buf` with random bytes.
    fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    /// A uniformly random value in `0..bound` (`bound` > 0), without modulo bias worth noticing
    /// for the small bounds used here.
    fn below(&self, bound: u64) -> u64 {
        assert!(bound > 0, "below(0) has no answer");
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}
