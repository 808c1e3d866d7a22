//! A partition must open again when the replay of its producer state meets a batch damaged in
//! place by a latent sector error (it fails its checks however often it is read). Here the
//! producer snapshot is damaged too, so the replay starts at the log's start and reads every
//! batch. Before, the replay failed on the damaged batch, the partition failed to open, and it
//! stayed offline at every restart, whatever its other batches held.
//!
//! Three idempotent producers write the batches in turn. After the reopen:
//! - every batch but the damaged one reads back exactly;
//! - a read of the damaged batch fails as corrupt, and says that reads go on at the batch after
//!   it;
//! - the producer state knows each producer's last batch, unless that is the damaged one: a
//!   retry of it is a duplicate with its original offsets, not a new batch;
//! - the producer state says it passed the damaged batch, so that a retry of that batch, which
//!   it would take for new, is left to a replica that knows it, for as long as such a retry
//!   may come; and the snapshot taken after the reopen says so too, so that the next reopen,
//!   which replays nothing, knows it as well.
//!
//! With an odd seed the batches fill several segments, so the damage may lie in a sealed one.
//! The damaged byte is in the batch's records or, for one seed in four, in its length field.

use std::time::Duration;

use bytes::Bytes;
use weir::log::batch::parse_header;
use weir::log::checkpoint;
use weir::log::encode::{BatchOptions, RecordSpec, encode_batch};
use weir::log::producers::{
    Decision, PRODUCER_SNAPSHOT_KIND, decode_snapshot_body, snapshot_file_name,
};
use weir::log::{LogConfig, ReadError};
use weir::model::Offset;
use weir::partition::PRODUCER_RETRY_WINDOW;
use weir_scenarios::log::{dir, open_partition, read_range};
use weir_scenarios::{ensure, for_each_seed};
use weir_sim::Sim;

/// Batches written, and the idempotent producers writing them in turn.
const BATCHES: usize = 12;
const PRODUCERS: usize = 3;
/// Records in each batch.
const RECORDS: usize = 2;
/// Where a batch's length field lies, and where its records begin.
const LENGTH_FIELD: usize = 8;
const HEADER_BYTES: usize = 61;

fn config(seed: u64) -> LogConfig {
    let segment_bytes = if seed % 2 == 1 { 1_500 } else { 1 << 20 };
    LogConfig { segment_bytes, retention_ms: -1, ..LogConfig::default() }
}

/// Batch `n` as the leader stored it: producer `n % PRODUCERS + 1`, its sequences consecutive.
fn stored_batch(n: usize) -> Bytes {
    let records: Vec<RecordSpec> = (0..RECORDS)
        .map(|i| RecordSpec {
            offset_delta: i as i32,
            timestamp: 1_000 + n as i64,
            key: Some(Bytes::from(format!("k{n}-{i}"))),
            value: Some(Bytes::from(vec![n as u8; 300])),
            headers: Vec::new(),
        })
        .collect();
    let options = BatchOptions {
        base_offset: (n * RECORDS) as i64,
        leader_epoch: 1,
        producer_id: (n % PRODUCERS + 1) as i64,
        producer_epoch: 0,
        base_sequence: ((n / PRODUCERS) * RECORDS) as i32,
        ..BatchOptions::default()
    };
    encode_batch(&records, &options).expect("a valid batch")
}

fn offset_of(n: usize) -> Offset {
    Offset((n * RECORDS) as i64)
}

fn scenario(seed: u64) -> Result<(), String> {
    let sim = Sim::new(seed);
    let host = sim.add_client("broker");
    let limit = Duration::from_secs(60);
    let batches: Vec<Bytes> = (0..BATCHES).map(stored_batch).collect();
    let copied = batches.clone();
    let placed = sim
        .block_on(host, limit, move |env| async move {
            let partition = open_partition(env, config(seed)).await?;
            partition.append_replicated(&copied).await.map_err(|e| e.to_string())?;
            partition.checkpoint(i64::MAX).await.map_err(|e| e.to_string())?;
            let segments = partition.log.segment_bases();
            Ok::<_, String>(segments)
        })
        .ok_or("the writes did not finish")??;
    let damaged = 1 + seed as usize % (BATCHES - 1);
    let segment = *placed
        .iter()
        .rfind(|&&base| base <= offset_of(damaged))
        .ok_or("no segment holds the damaged batch")?;
    let first_in_segment = (0..BATCHES).find(|&n| offset_of(n) >= segment).unwrap_or(0);
    let at: usize = batches[first_in_segment..damaged].iter().map(Bytes::len).sum();
    let within = if seed % 4 == 3 {
        LENGTH_FIELD + 1
    } else {
        HEADER_BYTES + seed as usize * 7 % (batches[damaged].len() - HEADER_BYTES)
    };

    sim.kill(host);
    let log_file = dir().join(format!("{:020}.log", segment.0));
    sim.corrupt_file(host, &log_file, (at + within) as u64)
        .map_err(|e| format!("damaging batch {damaged}: {e}"))?;
    let end = offset_of(BATCHES);
    sim.corrupt_file(host, dir().join(snapshot_file_name(end)), 20)
        .map_err(|e| format!("damaging the producer snapshot: {e}"))?;
    sim.start(host);

    let (before, damaged_read, after, state, passed, passed_later) = sim
        .block_on(host, limit + PRODUCER_RETRY_WINDOW, move |env| async move {
            let clock = env.clock.clone();
            let disk = env.disk.clone();
            let partition = open_partition(env, config(seed))
                .await
                .map_err(|e| format!("the partition did not open: {e}"))?;
            let passed = partition.producer_damage();
            let log = &partition.log;
            let before = read_range(log, Offset(0), offset_of(damaged)).await?;
            let damaged_read = log.read(offset_of(damaged), 1 << 20, end).await;
            let after = read_range(log, offset_of(damaged + 1), end).await?;
            partition.checkpoint(i64::MAX).await.map_err(|e| e.to_string())?;
            let name = snapshot_file_name(end);
            let snapshot = checkpoint::read(&*disk, &dir(), &name, PRODUCER_SNAPSHOT_KIND)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no producer snapshot after the reopen")?;
            let (_, state) = decode_snapshot_body(snapshot.0, &snapshot.1)
                .map_err(|e| format!("the new snapshot does not decode: {e}"))?;
            // Past the window a retry from before the restart could come in, the mark is done.
            clock.sleep(PRODUCER_RETRY_WINDOW).await;
            let passed_later = partition.producer_damage();
            Ok::<_, String>((before, damaged_read, after, state, passed, passed_later))
        })
        .ok_or("the reopen did not finish")??;

    ensure(before[..] == batches[..damaged], || {
        format!(
            "{} batches read before the damaged batch {damaged}, not those stored",
            before.len()
        )
    })?;
    ensure(after[..] == batches[damaged + 1..], || {
        format!("{} batches read after the damaged batch {damaged}, not those stored", after.len())
    })?;
    let resume = offset_of(damaged + 1);
    ensure(
        matches!(damaged_read, Err(ReadError::Corrupt { resume: Some(r), .. }) if r == resume),
        || {
            format!(
                "reading the damaged batch {damaged} gave {damaged_read:?}, not a corruption \
                 error saying reads go on at {resume}"
            )
        },
    )?;
    let damaged_last = Offset(resume.0 - 1);
    ensure(passed == Some(damaged_last), || {
        format!("the reopened partition says its producer state passed damage at {passed:?}")
    })?;
    ensure(passed_later.is_none(), || {
        format!("{PRODUCER_RETRY_WINDOW:?} after the reopen the mark still says {passed_later:?}")
    })?;
    ensure(state.damage_passed() == Some(damaged_last), || {
        format!("the snapshot after the reopen says damage at {:?}", state.damage_passed())
    })?;
    for last in BATCHES - PRODUCERS..BATCHES {
        if last == damaged {
            continue;
        }
        let header = parse_header(&stored_batch(last)).map_err(|e| e.to_string())?;
        let decision = state.check(&header).map_err(|e| {
            format!("a retry of batch {last} (producer {}) was refused: {e}", header.producer_id())
        })?;
        let original = (offset_of(last), Offset(offset_of(last).0 + RECORDS as i64 - 1));
        ensure(
            matches!(decision, Decision::Duplicate { base_offset, last_offset, .. }
                if (base_offset, last_offset) == original),
            || format!("a retry of batch {last} was taken as {decision:?}, not its duplicate"),
        )?;
    }
    Ok(())
}

#[test]
fn partition_reopens_past_a_damaged_batch() {
    for_each_seed("partition_reopens_past_a_damaged_batch", 0..24, scenario);
}
