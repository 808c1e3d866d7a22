//! What the machine itself can do, measured in the same run as every figure compared with it
//! (these machines are shared and noisy): sequential buffered writes, write+fsync per MiB,
//! the latency of a 4 KiB write+fdatasync loop and page-cache reads on the data folder's disk,
//! and a loopback TCP copy between two threads.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::progress;
use crate::report::{self, Figure, Latency, Report};

/// Bytes in a MiB.
pub const MIB: u64 = 1 << 20;
/// Write and read chunk of the bandwidth baselines.
const CHUNK_BYTES: usize = 1 << 20;
/// Block of the fdatasync latency loop.
const SMALL_WRITE_BYTES: usize = 4096;

/// Pieces per `writev(2)` in [`gathered_write_in`]: with 16 KiB batches, about the 1 MiB of the
/// buffered-write baseline's writes (and of a follower's fetch); with 64 KiB ones, 4 MiB.
pub const GATHERED_PIECES: usize = 64;
/// Buffer of each side of the loopback copy.
const TCP_BUFFER_BYTES: usize = 256 << 10;

/// How much each baseline moves.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Bytes written (and then read) by the buffered write baseline.
    pub write_bytes: u64,
    /// Bytes written by the fsync-per-MiB baseline (or less, when time runs out).
    pub fsync_bytes: u64,
    /// Longest a timed baseline runs.
    pub max_secs: f64,
    /// Bytes copied over loopback TCP (or less, when time runs out).
    pub tcp_bytes: u64,
}

impl Sizes {
    /// Full-size runs, or smaller ones for `--quick`.
    pub fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                write_bytes: 256 * MIB,
                fsync_bytes: 64 * MIB,
                max_secs: 3.0,
                tcp_bytes: 2048 * MIB,
            }
        } else {
            Sizes {
                write_bytes: 1024 * MIB,
                fsync_bytes: 256 * MIB,
                max_secs: 6.0,
                tcp_bytes: 8192 * MIB,
            }
        }
    }
}

/// The baselines of one run. Bandwidths in MB/s (10^6 bytes per second).
#[derive(Clone, Debug, Serialize)]
pub struct Baselines {
    /// Sequential `write(2)` of 1 MiB chunks to a new file, no sync (page cache).
    pub buffered_write_mbs: f64,
    /// Sequential 1 MiB writes, each followed by `fsync`.
    pub fsync_per_mib_mbs: f64,
    /// A loop of 4 KiB appends, each followed by `fdatasync`.
    pub fdatasync_4k: Latency,
    /// `pread(2)` of 1 MiB chunks of a file in the page cache.
    pub page_cache_read_mbs: f64,
    /// One thread writing 256 KiB chunks to another over 127.0.0.1.
    pub tcp_copy_mbs: f64,
}

/// Names used in figures and the table.
pub const BUFFERED_WRITE: &str = "buffered write";
/// See [`BUFFERED_WRITE`].
pub const FSYNC_PER_MIB: &str = "write+fsync/MiB";
/// See [`BUFFERED_WRITE`].
pub const FDATASYNC_4K_P99: &str = "4KiB write+fdatasync p99";
/// See [`BUFFERED_WRITE`].
pub const PAGE_CACHE_READ: &str = "page-cache read";
/// See [`BUFFERED_WRITE`].
pub const TCP_COPY: &str = "loopback TCP copy";

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Measures every baseline using files in `dir` (which must exist), and records them.
pub fn measure(dir: &Path, sizes: Sizes, report: &mut Report) -> Result<Baselines> {
    let file = dir.join("baseline.dat");
    let buffered_write_mbs = buffered_write(&file, sizes.write_bytes)?;
    let page_cache_read_mbs = page_cache_read(&file)?;
    std::fs::remove_file(&file)?;
    let fsync_per_mib_mbs = fsync_per_mib(&file, sizes.fsync_bytes, sizes.max_secs)?;
    std::fs::remove_file(&file)?;
    let fdatasync_4k = fdatasync_loop(&file, sizes.max_secs)?;
    std::fs::remove_file(&file)?;
    let tcp_copy_mbs = tcp_copy(sizes.tcp_bytes, sizes.max_secs)?;
    let b = Baselines {
        buffered_write_mbs,
        fsync_per_mib_mbs,
        fdatasync_4k,
        page_cache_read_mbs,
        tcp_copy_mbs,
    };
    let section = "baseline";
    let size = |bytes: u64| format!("{} MiB", bytes / MIB);
    report.push(Figure::plain(
        section,
        BUFFERED_WRITE,
        "MB/s",
        b.buffered_write_mbs,
        &format!("{} in 1 MiB write(2)s, no sync", size(sizes.write_bytes)),
    ));
    report.push(Figure::plain(
        section,
        FSYNC_PER_MIB,
        "MB/s",
        b.fsync_per_mib_mbs,
        "1 MiB write(2) then fsync, repeated",
    ));
    report.push(Figure::plain(
        section,
        FDATASYNC_4K_P99,
        "µs",
        b.fdatasync_4k.p99_us,
        "4 KiB append then fdatasync, repeated",
    ));
    report.push(Figure::plain(
        section,
        PAGE_CACHE_READ,
        "MB/s",
        b.page_cache_read_mbs,
        "1 MiB pread(2)s of the file just written",
    ));
    report.push(Figure::plain(
        section,
        TCP_COPY,
        "MB/s",
        b.tcp_copy_mbs,
        "256 KiB writes, one sender and one receiver thread",
    ));
    report.latencies.push(b.fdatasync_4k.clone());
    Ok(b)
}

/// Writes back every dirty page on the machine (`sync(1)`), so that a measurement does not
/// pay for the writeback of what an earlier one wrote: the baselines it is compared with are
/// measured on a settled disk too.
pub fn settle_disk() -> Result<()> {
    let status = std::process::Command::new("sync").status()?;
    if status.success() { Ok(()) } else { Err(format!("sync: {status}").into()) }
}

fn mbs(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6
}

fn create(path: &Path) -> Result<File> {
    Ok(OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?)
}

/// Sequential 1 MiB `write(2)`s of `total` bytes to a new file at `path`, MB/s.
///
/// The same amount is written and deleted once, untimed, first. On a virtual machine, the first
/// write into memory the host has taken back costs a host fault per page, several times the
/// copy itself; the runs measured against this baseline write into pages freed just before
/// them, so the baseline must too, or every ratio to it flatters the run.
pub fn buffered_write(path: &Path, total: u64) -> Result<f64> {
    buffered_write_in(path, total, CHUNK_BYTES)
}

/// Like [`buffered_write`], in `write(2)`s of `chunk` bytes each: with `chunk` the size of a
/// batch, the write pattern a log appending such batches cannot do better than (each write
/// starts and ends inside a page, where the 1 MiB writes start and end on page boundaries).
pub fn buffered_write_in(path: &Path, total: u64, chunk: usize) -> Result<f64> {
    let chunk = pattern(chunk.max(1));
    let step = chunk.len() as u64;
    {
        let bar = progress::bar("baseline: buffered write (warming pages)", total / MIB, "MiB");
        let mut file = create(path)?;
        let mut written = 0;
        while written < total {
            file.write_all(&chunk)?;
            written += step;
            bar.set_position(written / MIB);
        }
        bar.finish_and_clear();
    }
    std::fs::remove_file(path)?;
    let bar = progress::bar("baseline: buffered write", total / MIB, "MiB");
    let mut file = create(path)?;
    let start = Instant::now();
    let mut written = 0;
    while written < total {
        file.write_all(&chunk)?;
        written += step;
        bar.set_position(written / MIB);
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    Ok(mbs(written, elapsed))
}

/// Like [`buffered_write_in`], but handing the kernel `chunk`-byte pieces [`GATHERED_PIECES`]
/// at a time in one `writev(2)`: the same bytes in the same places, in a sixty-fourth of the
/// calls. Set beside the one-write-per-batch pattern, it shows what a log that gathered several
/// appends into one write could reach.
pub fn gathered_write_in(path: &Path, total: u64, chunk: usize) -> Result<f64> {
    let piece = pattern(chunk.max(1));
    let step = (piece.len() * GATHERED_PIECES) as u64;
    let write_all = |file: &mut File| -> Result<u64> {
        let mut written = 0;
        while written < total {
            let mut slices = [std::io::IoSlice::new(&piece); GATHERED_PIECES];
            let mut rest = &mut slices[..];
            while !rest.is_empty() {
                let n = file.write_vectored(rest)?;
                if n == 0 {
                    return Err("writev wrote nothing".into());
                }
                std::io::IoSlice::advance_slices(&mut rest, n);
            }
            written += step;
        }
        Ok(written)
    };
    write_all(&mut create(path)?)?;
    std::fs::remove_file(path)?;
    let mut file = create(path)?;
    let start = Instant::now();
    let written = write_all(&mut file)?;
    Ok(mbs(written, start.elapsed()))
}

fn page_cache_read(path: &Path) -> Result<f64> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let bar = progress::bar("baseline: page-cache read", 2 * len / MIB, "MiB");
    // Twice: the first pass makes sure every page is resident; the second is timed.
    let mut best = 0.0f64;
    for pass in 0..2u64 {
        let start = Instant::now();
        let mut pos = 0;
        while pos < len {
            let n = file.read_at(&mut buf, pos)?;
            if n == 0 {
                break;
            }
            pos += n as u64;
            bar.set_position((pass * len + pos) / MIB);
        }
        best = best.max(mbs(pos, start.elapsed()));
    }
    bar.finish_and_clear();
    Ok(best)
}

/// 1 MiB writes each followed by `fsync`, up to `total` bytes or `max_secs`, MB/s.
pub fn fsync_per_mib(path: &Path, total: u64, max_secs: f64) -> Result<f64> {
    let bar = progress::bar("baseline: write+fsync per MiB", total / MIB, "MiB");
    let mut file = create(path)?;
    let chunk = pattern(CHUNK_BYTES);
    let start = Instant::now();
    let mut written = 0;
    while written < total && start.elapsed().as_secs_f64() < max_secs {
        file.write_all(&chunk)?;
        file.sync_all()?;
        written += CHUNK_BYTES as u64;
        bar.set_position(written / MIB);
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    Ok(mbs(written, elapsed))
}

fn fdatasync_loop(path: &Path, max_secs: f64) -> Result<Latency> {
    const ITERATIONS_MAX: u64 = 20_000;
    let bar = progress::bar("baseline: 4 KiB write+fdatasync", ITERATIONS_MAX, "syncs");
    let mut file = create(path)?;
    let block = pattern(SMALL_WRITE_BYTES);
    let mut hist = report::histogram();
    let start = Instant::now();
    let mut n = 0;
    while n < ITERATIONS_MAX && start.elapsed().as_secs_f64() < max_secs {
        let t = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        report::record_us(&mut hist, t.elapsed().as_micros() as u64);
        n += 1;
        if n % 64 == 0 {
            bar.set_position(n);
        }
    }
    bar.finish_and_clear();
    Ok(Latency::from_histogram("baseline: 4 KiB write+fdatasync", &hist))
}

fn tcp_copy(total: u64, max_secs: f64) -> Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let bar = progress::bar("baseline: loopback TCP copy", total / MIB, "MiB");
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let mut stream = TcpStream::connect(addr)?;
        let chunk = pattern(TCP_BUFFER_BYTES);
        let start = Instant::now();
        let mut sent = 0;
        while sent < total && start.elapsed().as_secs_f64() < max_secs {
            stream.write_all(&chunk)?;
            sent += TCP_BUFFER_BYTES as u64;
        }
        Ok(())
    });
    let (mut stream, _) = listener.accept()?;
    let mut buf = vec![0u8; TCP_BUFFER_BYTES];
    let mut received = 0u64;
    let mut start = None;
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        start.get_or_insert_with(Instant::now);
        received += n as u64;
        if received % (16 * MIB) < n as u64 {
            bar.set_position(received / MIB);
        }
    }
    let elapsed = start.map(|s| s.elapsed()).unwrap_or_default();
    bar.finish_and_clear();
    match sender.join() {
        Ok(result) => result?,
        Err(_) => return Err("loopback sender panicked".into()),
    }
    Ok(mbs(received, elapsed))
}

/// Bytes that no layer could compress away.
pub fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
