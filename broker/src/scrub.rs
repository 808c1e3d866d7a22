//! Scrubbing: a background pass over every hosted partition's log that reads each batch below
//! its high watermark and checks it in full, as any read does, at a bounded byte rate. Damage on
//! disk (a latent sector error) is so found while other replicas still hold the batch intact,
//! before a consumer or a follower catching up needs it and before another fault takes the
//! other copies. Damage found is handled as a read's ([`Partition::damage_found_in_background`]):
//! noted and reported to the controller; on a leader, the first time, leadership moves; a
//! follower then repairs its copy from its leader's (see `fetcher`).
//!
//! Passes start `log_scrub_interval_ms` apart by the wall clock, from the end of the last one.
//! Where the pass under way has got to is kept in [`SCRUB_CHECKPOINT`] at the root of the data
//! folder, at most [`SCRUB_CURSOR_SAVE_INTERVAL`] behind, so a broker restarted more often than
//! a pass takes still covers every partition. A data folder without one (a new broker) counts
//! as scrubbed when the scrub first starts.
//!
//! Reads go through the page cache, as every read does: a batch still cached is checked as the
//! cache holds it, not as the device does, and a pass moves old data through the cache.

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::io::{Clock, Disk, Instant};
use crate::log::{ReadError, checkpoint};
use crate::model::{Offset, PartitionIndex, TopicPartition};
use crate::node::Broker;
use crate::partition::Partition;

/// Where the scrub has got to, in the data folder's root.
pub const SCRUB_CHECKPOINT: &str = "scrub-checkpoint";
/// Its checkpoint kind.
pub const SCRUB_CHECKPOINT_KIND: u8 = 6;
const SCRUB_CHECKPOINT_VERSION: u8 = 1;
/// Bytes of batches read at a time.
pub const SCRUB_READ_BYTES: usize = 1 << 20;
/// How far behind the pass the checkpoint may fall.
pub const SCRUB_CURSOR_SAVE_INTERVAL: Duration = Duration::from_secs(60);
/// The longest sleep while waiting for the next pass: the wall clock is read again after it,
/// so a clock set forward or back is followed.
const SCRUB_WAIT_STEP: Duration = Duration::from_secs(60);
/// Reads of one stretch the disk fails before the scrub goes on past it.
pub const SCRUB_READ_ATTEMPTS: usize = 3;
/// How long the scrub holds the broker while waiting for it to be ready, between looks.
const READY_WAIT_STEP: Duration = Duration::from_secs(1);
/// The longest topic name a checkpoint holds (Kafka's limit is 249 bytes).
const TOPIC_NAME_BYTES_MAX: usize = 255;

/// How the scrub runs (see [`crate::config::BrokerConfig`]).
#[derive(Clone, Copy, Debug)]
pub struct ScrubConfig {
    /// Time from the end of one pass to the start of the next.
    pub interval: Duration,
    /// The byte rate the scrub reads at.
    pub bytes_per_sec: u64,
}

/// Where the scrub stands, as its checkpoint records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrubState {
    /// When the last whole pass ended (wall clock, ms).
    pub finished_ms: i64,
    /// Where the pass under way has got to: every partition ordered before this one has been
    /// scrubbed, and this one below the offset.
    pub cursor: Option<(TopicPartition, Offset)>,
}

impl ScrubState {
    fn encode(&self) -> Bytes {
        let mut body = BytesMut::with_capacity(32);
        body.put_i64(self.finished_ms);
        match &self.cursor {
            Some((tp, at)) if tp.topic.len() <= TOPIC_NAME_BYTES_MAX => {
                body.put_u8(1);
                body.put_u16(tp.topic.len() as u16);
                body.put_slice(tp.topic.as_bytes());
                body.put_i32(tp.partition.0);
                body.put_i64(at.0);
            }
            _ => body.put_u8(0),
        }
        checkpoint::encode(SCRUB_CHECKPOINT_KIND, SCRUB_CHECKPOINT_VERSION, &body)
    }

    /// The state a whole checkpoint file holds, if it is one and well formed.
    pub fn from_checkpoint(bytes: &Bytes) -> Option<ScrubState> {
        match checkpoint::decode(SCRUB_CHECKPOINT_KIND, bytes) {
            Ok((SCRUB_CHECKPOINT_VERSION, body)) => ScrubState::decode(&body),
            _ => None,
        }
    }

    /// The state a checkpoint body records, if it is well formed.
    fn decode(mut body: &[u8]) -> Option<ScrubState> {
        if body.remaining() < 9 {
            return None;
        }
        let finished_ms = body.get_i64();
        let cursor = match body.get_u8() {
            0 => None,
            1 => {
                if body.remaining() < 2 {
                    return None;
                }
                let len = usize::from(body.get_u16());
                if len > TOPIC_NAME_BYTES_MAX || body.remaining() != len + 12 {
                    return None;
                }
                let topic = std::str::from_utf8(&body[..len]).ok()?.to_owned();
                body.advance(len);
                let partition = PartitionIndex(body.get_i32());
                Some((TopicPartition { topic, partition }, Offset(body.get_i64())))
            }
            _ => return None,
        };
        (body.remaining() == 0).then_some(ScrubState { finished_ms, cursor })
    }
}

/// Whether `broker` is gone or stopping.
fn stopping(broker: &Weak<Broker>) -> bool {
    broker.upgrade().is_none_or(|b| b.stopping())
}

/// What the data folder holds of the scrub's state.
#[derive(Debug)]
pub enum Loaded {
    /// A well-formed checkpoint.
    Found(ScrubState),
    /// No checkpoint: a new data folder.
    Missing,
    /// One that cannot be read or is malformed.
    Unreadable,
}

/// The scrub state the data folder records.
pub async fn load(disk: &dyn Disk) -> Loaded {
    let root = Path::new("");
    match checkpoint::read(disk, root, SCRUB_CHECKPOINT, SCRUB_CHECKPOINT_KIND).await {
        Ok(Some((SCRUB_CHECKPOINT_VERSION, body))) => match ScrubState::decode(&body) {
            Some(state) => Loaded::Found(state),
            None => {
                tracing::warn!("ignoring the scrub checkpoint: malformed");
                Loaded::Unreadable
            }
        },
        Ok(Some((version, _))) => {
            tracing::warn!(version, "ignoring the scrub checkpoint: unknown version");
            Loaded::Unreadable
        }
        Ok(None) => Loaded::Missing,
        Err(e) => {
            tracing::warn!("ignoring the scrub checkpoint: {e}");
            Loaded::Unreadable
        }
    }
}

/// Durably records `state`.
pub async fn store(disk: &dyn Disk, state: &ScrubState) -> std::io::Result<()> {
    checkpoint::write_atomic(disk, Path::new(""), SCRUB_CHECKPOINT, state.encode()).await
}

/// What one pass found.
#[derive(Debug, Default)]
struct PassStats {
    partitions: usize,
    bytes: u64,
    damaged: usize,
    /// Stretches the disk failed to read, however often asked.
    unreadable: usize,
}

/// How scrubbing one partition ended.
enum Ended {
    /// Its whole stretch was read, or the rest of it cannot be (its log is offline, or it is
    /// no longer hosted here).
    Done,
    /// The broker is stopping: the pass is abandoned where it got to.
    Stopping,
}

/// The scrub of one broker: its state and how it paces itself.
pub struct Scrubber {
    clock: Arc<dyn Clock>,
    disk: Arc<dyn Disk>,
    config: ScrubConfig,
    state: ScrubState,
    /// When the checkpoint was last written.
    saved_at: Instant,
    /// Damage found in this pass could not be recorded: the cursor stays where it was until
    /// the pass ends.
    cursor_held: bool,
}

impl Scrubber {
    /// Loads the scrub state from the data folder. A folder without any counts as scrubbed
    /// now (and says so, durably); one whose checkpoint cannot be read is scrubbed at once.
    pub async fn load(clock: Arc<dyn Clock>, disk: Arc<dyn Disk>, config: ScrubConfig) -> Self {
        let state = match load(&*disk).await {
            Loaded::Found(state) => state,
            Loaded::Missing => {
                let state = ScrubState { finished_ms: clock.wall_ms(), cursor: None };
                if let Err(e) = store(&*disk, &state).await {
                    tracing::warn!("writing the scrub checkpoint: {e}");
                }
                state
            }
            Loaded::Unreadable => ScrubState { finished_ms: i64::MIN, cursor: None },
        };
        let saved_at = clock.now();
        Scrubber { clock, disk, config, state, saved_at, cursor_held: false }
    }

    /// Runs passes, each once it is due, for as long as `broker` does.
    pub async fn run(mut self, broker: Weak<Broker>) {
        loop {
            if !self.wait_for_pass(&broker).await || !self.wait_for_partitions(&broker).await {
                return;
            }
            let Some(stats) = self.pass(&broker).await else { return };
            self.cursor_held = false;
            self.state = ScrubState { finished_ms: self.clock.wall_ms(), cursor: None };
            self.save().await;
            tracing::info!(
                partitions = stats.partitions,
                bytes = stats.bytes,
                damaged = stats.damaged,
                unreadable = stats.unreadable,
                "scrub pass finished"
            );
        }
    }

    /// Sleeps until the next pass is due; false if the broker stopped meanwhile. A pass that
    /// ended in the future (the wall clock was set back since) counts as ended now, so that a
    /// clock once far ahead does not put the scrub off for as long.
    async fn wait_for_pass(&mut self, broker: &Weak<Broker>) -> bool {
        let interval_ms = i64::try_from(self.config.interval.as_millis()).unwrap_or(i64::MAX);
        loop {
            if stopping(broker) {
                return false;
            }
            let now = self.clock.wall_ms();
            self.state.finished_ms = self.state.finished_ms.min(now);
            let wait = self.state.finished_ms.saturating_add(interval_ms).saturating_sub(now);
            if wait <= 0 || self.state.cursor.is_some() {
                return true;
            }
            let wait = Duration::from_millis(u64::try_from(wait).unwrap_or(u64::MAX));
            self.clock.sleep(wait.min(SCRUB_WAIT_STEP)).await;
        }
    }

    /// Waits until the broker has opened the partitions the metadata gives it (at start-up, a
    /// pass, resumed or not, would otherwise find none and end at once); false if it stopped
    /// meanwhile.
    async fn wait_for_partitions(&self, broker: &Weak<Broker>) -> bool {
        loop {
            let Some(b) = broker.upgrade().filter(|b| !b.stopping()) else { return false };
            if b.wait_ready(READY_WAIT_STEP).await {
                return true;
            }
            drop(b);
            self.clock.sleep(READY_WAIT_STEP).await;
        }
    }

    /// One pass over the partitions hosted as it starts, in order, from the cursor; `None` if
    /// the broker stopped. Each is looked up again when its turn comes (one deleted or moved
    /// away meanwhile is passed over: holding it would hold its files).
    async fn pass(&mut self, broker: &Weak<Broker>) -> Option<PassStats> {
        let b = broker.upgrade()?;
        let mut hosted: Vec<TopicPartition> = b.partitions().iter().map(|p| p.tp.clone()).collect();
        drop(b);
        hosted.sort();
        let mut stats = PassStats::default();
        for tp in hosted {
            let from = match &self.state.cursor {
                Some((at_tp, _)) if *at_tp > tp => continue,
                Some((at_tp, at)) if *at_tp == tp => Some(*at),
                _ => None,
            };
            let partition = broker.upgrade()?.hosted(&tp);
            let Some(partition) = partition else { continue };
            let ended = self.partition(&partition, from, &mut stats, broker).await;
            // A shutdown closes the logs under the pass: a read that failed for it did not
            // end the partition.
            if matches!(ended, Ended::Stopping) || stopping(broker) {
                self.save().await;
                return None;
            }
            stats.partitions += 1;
        }
        Some(stats)
    }

    /// Scrubs `partition` from `from` (its log start if `None`) to its high watermark as the
    /// pass finds it, or as far as it is synced then if less (a pass chasing the end of a log
    /// written faster than it reads would never end).
    async fn partition(
        &mut self,
        partition: &Partition,
        from: Option<Offset>,
        stats: &mut PassStats,
        broker: &Weak<Broker>,
    ) -> Ended {
        let log = &partition.log;
        let mut at = from.unwrap_or(Offset(0)).max(log.log_start_offset());
        let upper = partition.high_watermark().min(log.durable_offset());
        let mut failures = 0;
        loop {
            if stopping(broker) {
                return Ended::Stopping;
            }
            if at >= upper {
                return Ended::Done;
            }
            let next_segment =
                |offset: Offset| log.segment_bases().into_iter().find(|&b| b > offset);
            let (next, bytes) = match log.read(at, SCRUB_READ_BYTES, upper).await {
                Ok(read) if read.records.is_empty() => return Ended::Done,
                Ok(read) => {
                    let bytes = read.records.len();
                    stats.bytes += bytes as u64;
                    (Some(read.next_offset), bytes)
                }
                Err(ReadError::OutOfRange { log_start, .. }) if at < log_start => {
                    (Some(log_start), 0)
                }
                Err(ReadError::Corrupt { offset, resume, cause }) => {
                    tracing::error!(partition = %partition.tp, %offset, "scrub found damaged data: {cause}");
                    partition.damage_found_in_background(offset, resume);
                    stats.damaged += 1;
                    // Recorded before the cursor can go past it: a crash must not lose both.
                    // Unrecorded, the cursor stays before it for the rest of the pass.
                    if let Err(e) = partition.save_damage().await {
                        tracing::warn!(partition = %partition.tp, "recording the damage found: {e}");
                        self.cursor_held = true;
                    }
                    (resume.or_else(|| next_segment(offset)), SCRUB_READ_BYTES)
                }
                Err(ReadError::Io(e)) if failures + 1 < SCRUB_READ_ATTEMPTS => {
                    tracing::warn!(partition = %partition.tp, %at, "scrub read failed, to be retried: {e}");
                    failures += 1;
                    (Some(at), SCRUB_READ_BYTES)
                }
                Err(ReadError::Io(e)) => {
                    tracing::error!(partition = %partition.tp, %at, "the disk failed every scrub read here; going on at the next segment: {e}");
                    stats.unreadable += 1;
                    (next_segment(at), SCRUB_READ_BYTES)
                }
                // Offline, closed (deleted, or the broker is stopping: looked at above), or
                // past the log's end (cut meanwhile).
                Err(e) => {
                    tracing::debug!(partition = %partition.tp, %at, "scrub stopped: {e}");
                    return Ended::Done;
                }
            };
            let next = next.filter(|&next| next >= at);
            if let Some(next) = next.filter(|&next| next > at) {
                at = next;
                failures = 0;
                if !self.cursor_held {
                    self.state.cursor = Some((partition.tp.clone(), at));
                }
            }
            // Reads of damage or failures, whose bytes are not told, are paced as whole reads.
            self.pace(bytes).await;
            if next.is_none() {
                return Ended::Done;
            }
        }
    }

    /// Waits as long as reading `bytes` takes at the configured rate, and records the cursor
    /// if it is due.
    async fn pace(&mut self, bytes: usize) {
        let rate = u128::from(self.config.bytes_per_sec.max(1));
        let nanos = u64::try_from(bytes as u128 * 1_000_000_000 / rate).unwrap_or(u64::MAX);
        if nanos > 0 {
            self.clock.sleep(Duration::from_nanos(nanos)).await;
        }
        if self.clock.now().saturating_duration_since(self.saved_at) >= SCRUB_CURSOR_SAVE_INTERVAL {
            self.save().await;
        }
    }

    async fn save(&mut self) {
        if let Err(e) = store(&*self.disk, &self.state).await {
            tracing::warn!("writing the scrub checkpoint: {e}");
        }
        self.saved_at = self.clock.now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_body_holds_the_state_or_nothing() {
        let tp = TopicPartition::new("orders", 7);
        for state in [
            ScrubState { finished_ms: 1_700_000_000_000, cursor: None },
            ScrubState { finished_ms: -5, cursor: Some((tp.clone(), Offset(123_456))) },
        ] {
            let framed = state.encode();
            let (version, body) =
                checkpoint::decode(SCRUB_CHECKPOINT_KIND, &framed).expect("framed");
            assert_eq!(version, SCRUB_CHECKPOINT_VERSION);
            assert_eq!(ScrubState::decode(&body), Some(state.clone()));
            for cut in 0..body.len() {
                assert_eq!(ScrubState::decode(&body[..cut]), None, "{cut} bytes of {state:?}");
            }
            let mut longer = body.to_vec();
            longer.push(0);
            assert_eq!(ScrubState::decode(&longer), None, "a byte too many");
        }
        let mut bad_flag = 0i64.to_be_bytes().to_vec();
        bad_flag.push(2);
        assert_eq!(ScrubState::decode(&bad_flag), None, "an unknown cursor flag");
    }
}
