//! Simulated randomness: a ChaCha stream per node, incarnation and `Env`, derived from the run's
//! seed.

use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use weir::io::Entropy;

use crate::trace::{Event, mix};
use crate::world::{World, lock};

/// One node's random stream for one life: restarting the node gives it a fresh stream, as a
/// rebooted machine would have. Every `Env` handed out for the same life gets a stream of its
/// own (`stream` 0 is the boot `Env`), so two tasks never draw the same numbers.
pub struct SimEntropy {
    world: Arc<World>,
    rng: Mutex<ChaCha8Rng>,
}

impl SimEntropy {
    pub(crate) fn new(world: Arc<World>, node: usize, incarnation: u64, stream: u64) -> SimEntropy {
        let life = mix(world.seed ^ mix(node as u64 + 1) ^ mix(incarnation.wrapping_mul(0x51)));
        let seed = if stream == 0 { life } else { mix(life ^ mix(stream ^ 0x5747_ea11)) };
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
