//! Vocabulary shared by every layer: newtypes for the numbers that must never be confused, and
//! the named limits in [`limits`].
//!
//! Kafka puts offsets, epochs, ids and timestamps on the wire as bare integers of a few widths;
//! inside Weir each has its own type, so an offset can never be passed where an epoch is meant.

pub mod limits;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, DefaultHasher};

/// A `HashMap` whose hasher has fixed keys, so iteration order depends only on the contents —
/// never on the process — and simulations replay exactly.
pub type DetHashMap<K, V> = HashMap<K, V, BuildHasherDefault<DefaultHasher>>;

/// A `HashSet` with a fixed-key hasher; see [`DetHashMap`].
pub type DetHashSet<T> = HashSet<T, BuildHasherDefault<DefaultHasher>>;

macro_rules! newtype {
    ($(#[$meta:meta])* $name:ident($inner:ty)) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

newtype!(
    /// A record's position in its partition: dense from the log start, never reused.
    Offset(i64)
);
newtype!(
    /// The generation of a partition's leadership, stamped on every batch the leader appends.
    LeaderEpoch(i32)
);
newtype!(
    /// A broker's (or controller's) id, as configured (`node.id`).
    NodeId(i32)
);
newtype!(
    /// An idempotent producer's id, assigned by InitProducerId.
    ProducerId(i64)
);
newtype!(
    /// An idempotent producer's epoch; a newer epoch fences older ones.
    ProducerEpoch(i16)
);
newtype!(
    /// An idempotent producer's sequence number: per partition, one per record, counting up
    /// from 0 in each producer epoch and wrapping from `i32::MAX` to 0.
    Sequence(i32)
);
newtype!(
    /// Milliseconds since the Unix epoch (record timestamps, retention). Wall time: may be
    /// skewed between nodes.
    TimestampMs(i64)
);
newtype!(
    /// A partition's index within its topic.
    PartitionIndex(i32)
);

impl Offset {
    /// The offset after this one.
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }

    /// How many offsets lie from `earlier` up to (not including) `self`; zero if `earlier` is
    /// later.
    pub fn distance_from(self, earlier: Offset) -> u64 {
        u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0)
    }
}

impl LeaderEpoch {
    /// "No epoch" on the wire.
    pub const NONE: LeaderEpoch = LeaderEpoch(-1);
}

impl Sequence {
    /// "No sequence" on the wire: a batch from a producer without idempotence.
    pub const NONE: Sequence = Sequence(-1);

    /// The sequence after this one, wrapping from `i32::MAX` to 0 as Kafka's
    /// `DefaultRecordBatch.incrementSequence` does; after [`Sequence::NONE`] comes 0.
    pub fn next(self) -> Sequence {
        Sequence(if self.0 == i32::MAX { 0 } else { self.0 + 1 })
    }
}

/// A topic's stable 128-bit id (Kafka's topic UUID).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    /// The all-zero id, which Kafka uses to mean "no id".
    pub const ZERO: TopicId = TopicId([0; 16]);
}

impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A partition of a named topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's index.
    pub partition: PartitionIndex,
}

impl TopicPartition {
    /// Builds one.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition { topic: topic.into(), partition: PartitionIndex(partition) }
    }

    /// The partition's folder name, as Kafka names it: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition.0)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition.0)
    }
}
