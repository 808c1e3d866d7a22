//! The production disk syncs a folder even when the process has no descriptor left to open it
//! with: it falls back to `sync(2)`. Before, the folder sync failed with "too many open files",
//! and a log whose flusher met that (the first sync after a new segment's name) went offline
//! as if its disk had failed.
//!
//! One test in its own binary: it lowers this process's limit of open files and uses them all.
#![allow(clippy::unwrap_used, clippy::disallowed_methods, clippy::disallowed_types, unsafe_code)]

use std::path::Path;

use weir::runtime::production_env;

/// Descriptors left free under the lowered limit before the test takes them all.
const HEADROOM: u64 = 16;

fn open_now() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

fn set_soft_limit(soft: u64) -> libc::rlimit {
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut old), 0);
        let new = libc::rlimit { rlim_cur: soft, rlim_max: old.rlim_max };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &new), 0);
    }
    old
}

#[tokio::test]
async fn a_folder_is_synced_by_a_process_out_of_descriptors() {
    let root = std::env::temp_dir().join(format!("weir-sync-folder-{}", std::process::id()));
    let env = production_env(root.clone());
    env.disk.create_dir(Path::new("p-0")).await.unwrap();
    let file = env.disk.create(Path::new("p-0/00000000000000000000.log")).await.unwrap();
    drop(file);
    let old = set_soft_limit(open_now() + HEADROOM);
    let mut held = Vec::new();
    let exhausted = loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) => break e,
        }
    };
    let folder = std::fs::File::open(root.join("p-0")).map(|_| ());
    let synced = env.disk.sync_dir(Path::new("p-0")).await;
    drop(held);
    // SAFETY: as in `set_soft_limit`.
    unsafe { assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &old), 0) };
    assert_eq!(exhausted.raw_os_error(), Some(libc::EMFILE), "{exhausted}");
    assert!(folder.is_err(), "the folder could still be opened: nothing was tested");
    synced.unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}
