//! The simulated disk keeps exactly the promises of `weir::io::disk` and breaks everything else
//! the way a real machine would: a process crash loses nothing, a power failure loses (or tears)
//! whatever was not synced, names need their folder synced, and injected faults surface as the
//! errors and corruptions the broker must survive. Each test drives a host through `Sim` and
//! reads back through a fresh `Env`, as a restarted broker would.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use weir::io::{Env, File};
use weir_sim::{DiskFaults, Host, Sim};

/// Simulated time any one step of a test may take.
const STEP_LIMIT: Duration = Duration::from_secs(10);

/// Seeds a test that depends on random fates runs over.
const SEEDS: u64 = 64;

/// Runs `f` on `host` to completion.
fn run<T, F, Fut>(sim: &Sim, host: Host, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce(Env) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    sim.block_on(host, STEP_LIMIT, f).expect("the step completes")
}

/// Distinct, non-zero bytes, so that a lost or shifted byte shows.
fn pattern(len: usize, salt: u8) -> Bytes {
    (0..len).map(|i| ((i + usize::from(salt) * 31) % 251 + 1) as u8).collect::<Vec<u8>>().into()
}

/// Creates `dir/name`, durable (name and empty contents), and returns its handle.
async fn durable_file(env: &Env, dir: &str, name: &str) -> io::Result<Arc<dyn File>> {
    env.disk.create_dir(Path::new(dir)).await?;
    env.disk.sync_dir(Path::new("")).await?;
    let file = env.disk.create(&Path::new(dir).join(name)).await?;
    file.sync_data().await?;
    env.disk.sync_dir(Path::new(dir)).await?;
    Ok(file)
}

/// Creates `dir/name` durable with `data` in it.
async fn durable_file_with(env: &Env, dir: &str, name: &str, data: Bytes) -> io::Result<()> {
    let file = durable_file(env, dir, name).await?;
    file.write_at(0, data).await?;
    file.sync_data().await
}

/// The whole contents of the file at `path`.
async fn read_all(env: &Env, path: &str) -> io::Result<Vec<u8>> {
    let file = env.disk.open(Path::new(path)).await?;
    let bytes = file.read_at(0, usize::try_from(file.len()).unwrap_or(usize::MAX)).await?;
    assert_eq!(bytes.len() as u64, file.len(), "a whole-file read returns the whole file");
    Ok(bytes.to_vec())
}

fn read_back(sim: &Sim, host: Host, path: &'static str) -> io::Result<Vec<u8>> {
    run(sim, host, move |env| async move { read_all(&env, path).await })
}

fn power_cycle(sim: &Sim, host: Host) {
    sim.power_fail(host);
    sim.start(host);
}

fn kill_and_start(sim: &Sim, host: Host) {
    sim.kill(host);
    sim.start(host);
}

fn kind<T>(result: io::Result<T>) -> Option<io::ErrorKind> {
    result.err().map(|e| e.kind())
}

/// Polls two futures together; both are created (called) before either is polled.
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut out_a, mut out_b) = (None, None);
    std::future::poll_fn(|cx| {
        if out_a.is_none()
            && let Poll::Ready(v) = a.as_mut().poll(cx)
        {
            out_a = Some(v);
        }
        if out_b.is_none()
            && let Poll::Ready(v) = b.as_mut().poll(cx)
        {
            out_b = Some(v);
        }
        if out_a.is_some() && out_b.is_some() { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    (out_a.expect("a finished"), out_b.expect("b finished"))
}

#[test]
fn unsynced_write_is_kept_by_a_kill_but_lost_in_some_power_failure() {
    let mut lost = 0;
    for seed in 0..SEEDS {
        let sim = Sim::new(seed);
        let h = sim.add_client("h");
        let data = pattern(3000, 7);
        let written = data.clone();
        run(&sim, h, move |env| async move {
            let file = durable_file(&env, "d", "f").await?;
            file.write_at(0, written).await
        })
        .expect("written");
        kill_and_start(&sim, h);
        assert_eq!(read_back(&sim, h, "d/f").ok(), Some(data.to_vec()), "seed {seed}: kill");
        kill_and_start(&sim, h);
        power_cycle(&sim, h);
        let after = read_back(&sim, h, "d/f").expect("the durable name survives");
        assert!(data.starts_with(&after), "seed {seed}: power failure leaves a prefix");
        lost += usize::from(after.is_empty());
    }
    assert!(lost > 0, "no power failure lost the unsynced write");
}

#[test]
fn synced_data_survives_kill_and_power_failure() {
    for seed in 0..8 {
        let sim = Sim::new(seed);
        let h = sim.add_client("h");
        let data = pattern(5000, 3);
        let written = data.clone();
        run(&sim, h, move |env| async move { durable_file_with(&env, "d", "f", written).await })
            .expect("written");
        kill_and_start(&sim, h);
        assert_eq!(read_back(&sim, h, "d/f").ok(), Some(data.to_vec()), "seed {seed}: kill");
        power_cycle(&sim, h);
        assert_eq!(read_back(&sim, h, "d/f").ok(), Some(data.to_vec()), "seed {seed}: power");
        power_cycle(&sim, h);
        assert_eq!(read_back(&sim, h, "d/f").ok(), Some(data.to_vec()), "seed {seed}: twice");
    }
}

#[test]
fn torn_write_leaves_a_sector_aligned_prefix() {
    const SECTOR: usize = weir_sim::disk::SECTOR_BYTES as usize;
    let (mut nothing, mut partial, mut whole) = (0, 0, 0);
    for seed in 0..SEEDS {
        let sim = Sim::new(seed);
        let h = sim.add_client("h");
        let (aligned, old, appended) = (pattern(8 * SECTOR, 1), pattern(300, 2), pattern(2000, 3));
        let (a, o, p) = (aligned.clone(), old.clone(), appended.clone());
        run(&sim, h, move |env| async move {
            let f = durable_file(&env, "d", "f").await?;
            durable_file_with(&env, "d", "g", o).await?;
            let g = env.disk.open(Path::new("d/g")).await?;
            f.write_at(0, a).await?;
            assert_eq!(g.append(p).await?, 300);
            io::Result::Ok(())
        })
        .expect("written");
        power_cycle(&sim, h);

        let f = read_back(&sim, h, "d/f").expect("f survives");
        assert!(f.len().is_multiple_of(SECTOR), "seed {seed}: f cut mid-sector at {}", f.len());
        assert!(aligned.starts_with(&f), "seed {seed}: f is not a prefix of the write");
        match f.len() {
            0 => nothing += 1,
            n if n == aligned.len() => whole += 1,
            _ => partial += 1,
        }

        // g's append began mid-sector: cuts fall on absolute sector boundaries.
        let g = read_back(&sim, h, "d/g").expect("g survives");
        let expected: Vec<u8> = [&old[..], &appended[..]].concat();
        assert!(
            [300, 2300].contains(&g.len()) || g.len().is_multiple_of(SECTOR),
            "seed {seed}: g cut at {}",
            g.len()
        );
        assert!(g.len() >= 300 && expected.starts_with(&g), "seed {seed}: g damaged");
    }
    assert!(nothing > 0 && partial > 0 && whole > 0, "fates {nothing}/{partial}/{whole}");
}

#[test]
fn new_file_in_an_unsynced_folder_vanishes_on_power_failure() {
    let sim = Sim::new(1);
    let h = sim.add_client("h");
    run(&sim, h, |env| async move {
        env.disk.create_dir(Path::new("d")).await?;
        env.disk.sync_dir(Path::new("")).await?;
        let f = env.disk.create(Path::new("d/f")).await?;
        f.write_at(0, pattern(100, 1)).await?;
        f.sync_data().await?;
        // A folder whose own name is not durable loses even a synced listing.
        env.disk.create_dir(Path::new("e")).await?;
        let g = env.disk.create(Path::new("e/g")).await?;
        g.sync_data().await?;
        env.disk.sync_dir(Path::new("e")).await
    })
    .expect("written");
    kill_and_start(&sim, h);
    assert!(read_back(&sim, h, "d/f").is_ok(), "a kill keeps unsynced names");
    power_cycle(&sim, h);
    assert_eq!(kind(read_back(&sim, h, "d/f")), Some(io::ErrorKind::NotFound));
    let listed = run(&sim, h, |env| async move {
        (env.disk.list(Path::new("")).await, env.disk.list(Path::new("d")).await)
    });
    assert_eq!(listed.0.ok(), Some(vec!["d".to_owned()]));
    assert_eq!(listed.1.ok(), Some(Vec::new()));
}

#[test]
fn new_file_in_a_synced_folder_survives_power_failure() {
    let sim = Sim::new(2);
    let h = sim.add_client("h");
    run(&sim, h, |env| async move { durable_file_with(&env, "a/b", "f", pattern(10, 9)).await })
        .expect("written");
    power_cycle(&sim, h);
    // `durable_file` synced the root and a/b but not a: a/b is not reachable.
    assert_eq!(kind(read_back(&sim, h, "a/b/f")), Some(io::ErrorKind::NotFound));

    run(&sim, h, |env| async move {
        durable_file_with(&env, "a/b", "f", pattern(10, 9)).await?;
        env.disk.sync_dir(Path::new("a")).await
    })
    .expect("written");
    power_cycle(&sim, h);
    assert_eq!(read_back(&sim, h, "a/b/f").ok(), Some(pattern(10, 9).to_vec()));
}

#[test]
fn unsynced_rename_reverts_and_synced_rename_sticks() {
    let sim = Sim::new(3);
    let h = sim.add_client("h");
    let (a, b) = (pattern(700, 1), pattern(900, 2));
    let (wa, wb) = (a.clone(), b.clone());
    run(&sim, h, move |env| async move {
        durable_file_with(&env, "d", "a", wa).await?;
        durable_file_with(&env, "d", "b", wb).await?;
        env.disk.rename(Path::new("d/a"), Path::new("d/b")).await
    })
    .expect("renamed");
    kill_and_start(&sim, h);
    assert_eq!(kind(read_back(&sim, h, "d/a")), Some(io::ErrorKind::NotFound), "kill keeps it");
    assert_eq!(read_back(&sim, h, "d/b").ok(), Some(a.to_vec()));
    power_cycle(&sim, h);
    assert_eq!(read_back(&sim, h, "d/a").ok(), Some(a.to_vec()), "the rename reverted");
    assert_eq!(read_back(&sim, h, "d/b").ok(), Some(b.to_vec()), "the replaced file is back");

    run(&sim, h, |env| async move {
        env.disk.rename(Path::new("d/a"), Path::new("d/b")).await?;
        env.disk.sync_dir(Path::new("d")).await
    })
    .expect("renamed");
    power_cycle(&sim, h);
    assert_eq!(kind(read_back(&sim, h, "d/a")), Some(io::ErrorKind::NotFound));
    assert_eq!(read_back(&sim, h, "d/b").ok(), Some(a.to_vec()));
}

#[test]
fn unsynced_remove_reverts_and_synced_remove_sticks() {
    let sim = Sim::new(4);
    let h = sim.add_client("h");
    let data = pattern(64, 5);
    let written = data.clone();
    run(&sim, h, move |env| async move {
        durable_file_with(&env, "d", "f", written).await?;
        env.disk.remove(Path::new("d/f")).await
    })
    .expect("removed");
    kill_and_start(&sim, h);
    assert_eq!(kind(read_back(&sim, h, "d/f")), Some(io::ErrorKind::NotFound), "kill keeps it");
    power_cycle(&sim, h);
    assert_eq!(read_back(&sim, h, "d/f").ok(), Some(data.to_vec()), "the remove reverted");

    run(&sim, h, |env| async move {
        env.disk.remove(Path::new("d/f")).await?;
        env.disk.sync_dir(Path::new("d")).await
    })
    .expect("removed");
    power_cycle(&sim, h);
    assert_eq!(kind(read_back(&sim, h, "d/f")), Some(io::ErrorKind::NotFound));
}

#[test]
fn failed_fsync_loses_the_data_even_after_a_later_successful_sync() {
    for seed in 0..8 {
        let sim = Sim::new(seed);
        let h = sim.add_client("h");
        let (x, y) = (pattern(100, 1), pattern(100, 2));
        let f = run(&sim, h, |env| async move {
            let f = durable_file(&env, "d", "f").await.expect("created");
            f.write_at(0, pattern(100, 1)).await.expect("written");
            f
        });
        sim.set_disk_faults(h, DiskFaults { sync_error: 1.0, ..DiskFaults::default() });
        let failed = run(&sim, h, {
            let f = Arc::clone(&f);
            move |_| async move { f.sync_data().await }
        });
        assert!(failed.is_err(), "the injected sync failure surfaces");
        sim.set_disk_faults(h, DiskFaults::default());
        let (still, later) = run(&sim, h, move |_| async move {
            let still = f.read_at(0, 100).await;
            f.write_at(100, pattern(100, 2)).await?;
            io::Result::Ok((still?, f.sync_data().await))
        })
        .expect("read and written");
        assert_eq!(still, x, "seed {seed}: still readable from the page cache");
        assert!(later.is_ok(), "a later sync succeeds");
        assert_eq!(read_back(&sim, h, "d/f").ok(), Some([&x[..], &y[..]].concat()));
        power_cycle(&sim, h);
        let after = read_back(&sim, h, "d/f").expect("the file survives");
        assert_eq!(after, [&[0u8; 100][..], &y[..]].concat(), "seed {seed}: x never reached disk");
    }
}

#[test]
fn full_disk_refuses_growth_and_changes_nothing() {
    let sim = Sim::new(5);
    let h = sim.add_client("h");
    let f = run(&sim, h, |env| async move {
        let f = durable_file(&env, "d", "f").await.expect("created");
        f.write_at(0, pattern(600, 1)).await.expect("written");
        f
    });
    sim.set_disk_faults(h, DiskFaults { capacity_bytes: Some(1000), ..DiskFaults::default() });
    let results = run(&sim, h, move |env| async move {
        let over = [
            kind(f.write_at(600, pattern(500, 2)).await),
            kind(f.write_at(2000, pattern(1, 2)).await),
            kind(f.append(pattern(401, 3)).await),
            kind(f.truncate(1001).await),
        ];
        let g = env.disk.create(Path::new("d/g")).await.expect("an empty file fits");
        let other = kind(g.append(pattern(401, 4)).await);
        let within = (f.write_at(0, pattern(600, 5)).await, f.append(pattern(400, 6)).await);
        (over, other, within, f.len())
    });
    let full = Some(io::ErrorKind::StorageFull);
    assert_eq!(results.0, [full; 4]);
    assert_eq!(results.1, full, "capacity counts every file");
    assert!(results.2.0.is_ok(), "overwriting in place needs no space");
    assert_eq!(results.2.1.ok(), Some(600), "the refused append reserved nothing");
    assert_eq!(results.3, 1000);
    assert_eq!(sim.disk_usage(h), 1000);
    let contents = read_back(&sim, h, "d/f").expect("read");
    assert_eq!(contents, [&pattern(600, 5)[..], &pattern(400, 6)[..]].concat());
}

#[test]
fn read_corruption_flips_exactly_one_bit_of_the_returned_bytes() {
    for seed in 0..16 {
        let sim = Sim::new(seed);
        let h = sim.add_client("h");
        let data = pattern(1000, 1);
        let written = data.clone();
        run(&sim, h, move |env| async move { durable_file_with(&env, "d", "f", written).await })
            .expect("written");
        sim.set_disk_faults(h, DiskFaults { read_corruption: 1.0, ..DiskFaults::default() });
        let corrupt = read_back(&sim, h, "d/f").expect("a corrupt read still succeeds");
        let flipped: u32 = corrupt.iter().zip(&data[..]).map(|(a, b)| (a ^ b).count_ones()).sum();
        assert_eq!(flipped, 1, "seed {seed}");
        sim.set_disk_faults(h, DiskFaults::default());
        assert_eq!(read_back(&sim, h, "d/f").ok(), Some(data.to_vec()), "storage is unharmed");
    }
}

#[test]
fn latent_corruption_persists_across_power_failure() {
    let sim = Sim::new(6);
    let h = sim.add_client("h");
    let data = pattern(100, 1);
    let written = data.clone();
    run(&sim, h, move |env| async move { durable_file_with(&env, "d", "f", written).await })
        .expect("written");
    sim.corrupt_file(h, "d/f", 42).expect("corrupted");
    assert_eq!(kind(sim.corrupt_file(h, "d/f", 100)), Some(io::ErrorKind::InvalidInput));
    assert_eq!(kind(sim.corrupt_file(h, "d/nope", 0)), Some(io::ErrorKind::NotFound));
    for _ in 0..2 {
        let got = read_back(&sim, h, "d/f").expect("read");
        let diff: Vec<usize> = (0..100).filter(|&i| got[i] != data[i]).collect();
        assert_eq!(diff, vec![42]);
        assert_eq!((got[42] ^ data[42]).count_ones(), 1);
        power_cycle(&sim, h);
    }
}

#[test]
fn injected_read_and_write_errors_surface() {
    let mut prefixes = Vec::new();
    for seed in 0..16 {
        let sim = Sim::new(seed);
        let h = sim.add_client("h");
        let f =
            run(&sim, h, |env| async move { durable_file(&env, "d", "f").await }).expect("created");
        let faults = DiskFaults { read_error: 1.0, write_error: 1.0, ..DiskFaults::default() };
        sim.set_disk_faults(h, faults);
        let data = pattern(1000, 1);
        let written = data.clone();
        let (read, write, create, list) = run(&sim, h, move |env| async move {
            (
                kind(f.read_at(0, 10).await),
                f.write_at(0, written).await.is_err(),
                env.disk.create(Path::new("d/g")).await.is_err(),
                env.disk.list(Path::new("d")).await.is_err(),
            )
        });
        assert_eq!(read, Some(io::ErrorKind::Other), "seed {seed}");
        assert!(write && create && list, "seed {seed}");
        sim.set_disk_faults(h, DiskFaults::default());
        let after = read_back(&sim, h, "d/f").expect("read");
        assert!(data.starts_with(&after), "seed {seed}: a failed write leaves a prefix");
        assert_eq!(kind(read_back(&sim, h, "d/g")), Some(io::ErrorKind::NotFound));
        prefixes.push(after.len());
    }
    assert!(prefixes.iter().any(|&n| n > 0), "some failed write left a prefix: {prefixes:?}");
}

#[test]
fn handles_from_before_a_restart_fail() {
    for power in [false, true] {
        let sim = Sim::new(7);
        let h = sim.add_client("h");
        let (disk, f) = run(&sim, h, |env| async move {
            let f = durable_file(&env, "d", "f").await.expect("created");
            (Arc::clone(&env.disk), f)
        });
        let stale_env = sim.env(h);
        if power {
            sim.power_fail(h)
        } else {
            sim.kill(h)
        }
        let stale_while_down = sim.env(h);
        sim.start(h);
        let errors = run(&sim, h, move |_| async move {
            [
                f.read_at(0, 1).await.err(),
                f.write_at(0, pattern(1, 1)).await.err(),
                f.append(pattern(1, 1)).await.err(),
                f.sync_data().await.err(),
                disk.open(Path::new("d/f")).await.err(),
                disk.list(Path::new("")).await.err(),
                stale_env.disk.sync_dir(Path::new("d")).await.err(),
                stale_while_down.disk.create_dir(Path::new("x")).await.err(),
            ]
        });
        for (i, error) in errors.iter().enumerate() {
            assert_eq!(error.as_ref().map(io::Error::kind), Some(io::ErrorKind::Other), "op {i}");
        }
        assert_eq!(read_back(&sim, h, "d/f").ok(), Some(Vec::new()), "the new life works");
    }
}

#[test]
fn appends_land_in_call_order_despite_latency() {
    for seed in 0..16 {
        let sim = Sim::new(seed);
        let h = sim.add_client("h");
        let faults = DiskFaults { latency_max: Duration::from_millis(5), ..DiskFaults::default() };
        sim.set_disk_faults(h, faults);
        let positions = run(&sim, h, |env| async move {
            let f = env.disk.create(Path::new("f")).await?;
            let (first, second) = (f.append(pattern(10, 1)), f.append(pattern(20, 2)));
            let (a, b) = join(first, second).await;
            let c = f.append(pattern(5, 3)).await?;
            io::Result::Ok((a?, b?, c))
        })
        .expect("appended");
        assert_eq!(positions, (0, 10, 30), "seed {seed}");
        let expected = [&pattern(10, 1)[..], &pattern(20, 2)[..], &pattern(5, 3)[..]].concat();
        assert_eq!(read_back(&sim, h, "f").ok(), Some(expected));
    }
}

#[test]
fn syncs_take_their_latency_and_are_counted_writes_do_not() {
    let sim = Sim::new(3);
    let h = sim.add_client("h");
    let sync = Duration::from_millis(7);
    sim.set_disk_faults(h, DiskFaults { sync_latency: sync, ..DiskFaults::default() });
    let f =
        run(&sim, h, |env| async move { env.disk.create(Path::new("f")).await }).expect("created");
    let (began, syncs) = (sim.now(), sim.file_syncs(h));
    let file = Arc::clone(&f);
    run(&sim, h, move |_| async move { file.write_at(0, pattern(100, 1)).await }).expect("written");
    assert_eq!(sim.now(), began, "a write waits for no sync latency");
    let file = Arc::clone(&f);
    run(&sim, h, move |_| async move { file.sync_data().await }).expect("synced");
    assert!(sim.now() - began >= sync, "a sync took {:?}", sim.now() - began);
    let file = Arc::clone(&f);
    run(&sim, h, move |_| async move { file.sync_data().await }).expect("synced");
    assert_eq!(sim.file_syncs(h) - syncs, 2);
}

#[test]
fn names_behave_like_linux() {
    let sim = Sim::new(8);
    let h = sim.add_client("h");
    run(&sim, h, |env| async move {
        let disk = &env.disk;
        assert_eq!(kind(disk.create(Path::new("missing/f")).await), Some(io::ErrorKind::NotFound));
        assert_eq!(kind(disk.open(Path::new("f")).await), Some(io::ErrorKind::NotFound));
        assert_eq!(kind(disk.create(Path::new("../f")).await), Some(io::ErrorKind::InvalidInput));
        assert_eq!(kind(disk.list(Path::new("/")).await), Some(io::ErrorKind::InvalidInput));
        disk.create_dir(Path::new("a/b/c")).await.expect("create_dir is create_dir_all");
        disk.create_dir(Path::new("a/b")).await.expect("an existing folder is fine");
        let f = disk.create(Path::new("a/z")).await.expect("create");
        f.write_at(3, pattern(2, 1)).await.expect("write past the end");
        let gap = [&[0, 0, 0][..], &pattern(2, 1)[..]].concat();
        assert_eq!(f.read_at(0, 100).await.ok().map(|b| b.to_vec()), Some(gap));
        let again = disk.create(Path::new("a/z")).await.expect("create again");
        assert_eq!((again.len(), f.len()), (0, 0), "create truncates the same file");
        disk.create(Path::new("a/m")).await.expect("create");
        let listed = disk.list(Path::new("a")).await.expect("list");
        assert_eq!(listed, ["b", "m", "z"]);
        disk.rename(Path::new("a/m"), Path::new("a/z")).await.expect("rename replaces");
        assert_eq!(disk.list(Path::new("a")).await.ok(), Some(vec!["b".into(), "z".into()]));
        f.write_at(0, pattern(1, 1)).await.expect("the replaced file's handle still works");
        disk.remove_dir_all(Path::new("a/b")).await.expect("rm -r");
        assert_eq!(kind(disk.list(Path::new("a/b/c")).await), Some(io::ErrorKind::NotFound));
        assert_eq!(disk.list(Path::new("")).await.ok(), Some(vec!["a".into()]));
    });
}

/// Every fault the disk can inject, at rates that make each happen in a short run.
fn noisy() -> DiskFaults {
    DiskFaults {
        read_error: 0.05,
        write_error: 0.05,
        sync_error: 0.05,
        read_corruption: 0.05,
        capacity_bytes: Some(40_000),
        latency_min: Duration::from_micros(10),
        latency_max: Duration::from_millis(2),
        sync_latency: Duration::from_millis(1),
    }
}

/// A concurrent workload under `faults`, then a power failure; returns the trace hash and every
/// file.
fn faulty_run(seed: u64, faults: DiskFaults) -> (u64, Vec<(String, Vec<u8>)>) {
    let sim = Sim::new(seed);
    let h = sim.add_client("h");
    run(&sim, h, |env| async move {
        env.disk.create_dir(Path::new("w")).await?;
        env.disk.sync_dir(Path::new("")).await
    })
    .expect("folder");
    sim.set_disk_faults(h, faults);
    for task in 0..3u8 {
        sim.spawn(h, "writer", move |env| async move {
            let path = format!("w/f{task}");
            let Ok(f) = env.disk.create(Path::new(&path)).await else {
                return;
            };
            for i in 0..30u8 {
                let _ = f.append(pattern(100 + 37 * usize::from(i), task ^ i)).await;
                if i % 3 == 0 {
                    let _ = f.sync_data().await;
                    let _ = env.disk.sync_dir(Path::new("w")).await;
                }
                let _ = f.read_at(0, 50).await;
            }
        });
    }
    sim.run_for(Duration::from_secs(5));
    power_cycle(&sim, h);
    sim.set_disk_faults(h, DiskFaults::default());
    let files = run(&sim, h, |env| async move {
        let mut files = Vec::new();
        for name in env.disk.list(Path::new("w")).await.unwrap_or_default() {
            let contents = read_all(&env, &format!("w/{name}")).await.unwrap_or_default();
            files.push((name, contents));
        }
        files
    });
    (sim.trace_hash(), files)
}

#[test]
fn same_seed_same_trace_and_bytes() {
    let first = faulty_run(0x5eed, noisy());
    assert_eq!(first, faulty_run(0x5eed, noisy()));
    assert!(first.1.iter().any(|(_, bytes)| !bytes.is_empty()), "something survived");
    assert_ne!(first.0, faulty_run(0x5eee, noisy()).0);
}

#[test]
fn disabled_faults_draw_nothing() {
    let quiet = DiskFaults { capacity_bytes: Some(u64::MAX), ..DiskFaults::default() };
    assert_eq!(faulty_run(9, DiskFaults::default()), faulty_run(9, quiet));
}
