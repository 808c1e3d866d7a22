//! Recovery time after a crash (issue 3: it must depend on the unflushed tail, not on the
//! size of the log). A log is written, synced and checkpointed, then a tail is appended and the
//! process "dies": the `Log` is dropped without closing, so the tail is on disk (page cache)
//! but past the recovery point. Opening it again re-verifies the tail only. The same tail on a
//! small log is the baseline: the ratio should be close to 1 however large the big log is.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use weir::log::{FlushPolicy, Log, LogConfig};
use weir::model::LeaderEpoch;

use super::{Result, one_batch};
use crate::baselines::MIB;
use crate::counting::counted_env;
use crate::progress;
use crate::report::{Figure, Report, Target};

/// Batch size of the logs written for recovery, KiB.
const BATCH_KIB: usize = 64;

/// Sizes of the recovery runs.
struct Sizes {
    small: u64,
    big: u64,
    tail: u64,
}

/// Measures recovery of the same tail on a small and on a big log, and a clean reopen of the
/// big one, into `report`.
pub fn figures(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
) -> Result<()> {
    let sizes = if quick {
        Sizes { small: 32 * MIB, big: 512 * MIB, tail: 32 * MIB }
    } else {
        Sizes { small: 64 * MIB, big: 2048 * MIB, tail: 64 * MIB }
    };
    let small = runtime.block_on(recover(dir, "recover-small", sizes.small, sizes.tail))?;
    let big = runtime.block_on(recover(dir, "recover-big", sizes.big, sizes.tail))?;
    let clean = runtime.block_on(recover(dir, "reopen-big", sizes.big, 0))?;
    let mib = |b: u64| b / MIB;
    report.push(
        Figure::plain(
            "log",
            &format!(
                "recover a {} MiB unflushed tail of a {} MiB log",
                mib(sizes.tail),
                mib(sizes.big + sizes.tail)
            ),
            "ms",
            big * 1e3,
            &format!(
                "Log::open after a kill (tail past the recovery point, in page cache); {:.0} MB/s of tail",
                sizes.tail as f64 / big.max(1e-9) / 1e6
            ),
        )
        .against(
            &format!("same tail, {} MiB log", mib(sizes.small + sizes.tail)),
            small * 1e3,
        )
        .target(Target::ratio_at_most(2.0, "≤ 2× (tail, not log size)")),
    );
    report.push(Figure::plain(
        "log",
        &format!("reopen a {} MiB log after a clean close", mib(sizes.big)),
        "ms",
        clean * 1e3,
        "nothing past the recovery point: no batch is re-read",
    ));
    Ok(())
}

/// Writes `flushed` bytes, syncs and checkpoints them, appends `tail` more bytes, drops the
/// log without closing it, and returns the seconds the next open takes.
async fn recover(dir: &Path, name: &str, flushed: u64, tail: u64) -> Result<f64> {
    let batch = one_batch(BATCH_KIB)?;
    let config = LogConfig { flush_policy: FlushPolicy::Interval, ..LogConfig::default() };
    let bar = progress::bar(&format!("log: {name}: writing"), (flushed + tail) / MIB, "MiB");
    let (env, _) = counted_env(dir.to_path_buf());
    let log = Log::open(env, PathBuf::from(name), config.clone()).await?;
    let mut written = 0u64;
    while written < flushed + tail {
        log.append(Bytes::copy_from_slice(&batch), LeaderEpoch(0)).await?;
        written += batch.len() as u64;
        bar.set_position(written / MIB);
        if written >= flushed && written < flushed + batch.len() as u64 {
            log.flush().await?;
            log.checkpoint().await?;
        }
    }
    let end = log.log_end_offset();
    // A kill: no flush, no checkpoint; the tail stays in the page cache.
    drop(log);
    bar.finish_and_clear();
    let (env, _) = counted_env(dir.to_path_buf());
    let start = Instant::now();
    let log = Log::open(env, PathBuf::from(name), config).await?;
    let secs = start.elapsed().as_secs_f64();
    if log.log_end_offset() != end {
        return Err(format!(
            "{name}: recovered to offset {}, expected {}",
            log.log_end_offset().0,
            end.0
        )
        .into());
    }
    log.close().await?;
    std::fs::remove_dir_all(dir.join(name))?;
    Ok(secs)
}
