//! Simulated randomness: a ChaCha stream per node and incarnation, derived from the run's seed.

use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use weir::io::Entropy;

use crate::trace::{Event, mix};
use crate::world::{World, lock};

/// One node's random stream for one life: restarting the node gives it a fresh stream, as a
/// rebooted machine would have.
pub struct SimEntropy {
    world: Arc<World>,
    rng: Mutex<ChaCha8Rng>,
}

impl SimEntropy {
    pub(crate) fn new(world: Arc<World>, node: usize, incarnation: u64) -> SimEntropy {
        let seed = mix(world.seed ^ mix(node as u64 + 1) ^ mix(incarnation.wrapping_mul(0x51)));
        SimEntropy { world, rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)) }
    }
}

impl Entropy for SimEntropy {
    fn next_u64(&self) -> u64 {
        let value = lock(&self.rng).next_u64();
        self.world.trace.fold(Event::Entropy, value);
        value
    }
}
