//! The run's memory cap: the benchmark moves itself (broker, clients and baselines alike) into a
//! memory cgroup of its own with a limit, so that the page cache it writes recycles its own
//! pages once the limit is reached.
//!
//! That is the steady state of a broker machine, whose memory is full of page cache, and it
//! takes out an artefact of virtual machines whose memory balloon reports free pages to the
//! host: there, the first write into a page that sat free for a few seconds costs a host fault,
//! and a run that writes gigabytes into fresh memory measures the hypervisor (see
//! docs/performance.md, "The machine"). Where no memory cgroup can be made (no controller, no
//! permission), the run goes on uncapped and says so.

use std::path::{Path, PathBuf};

/// A cgroup this process was moved into; dropping it moves the process back and removes it.
pub struct MemoryCap {
    dir: PathBuf,
    parent: PathBuf,
}

/// What the run's memory was: capped (how, where) or not (why not).
pub fn describe(cap: &Result<MemoryCap, String>, limit_mib: u64) -> String {
    match cap {
        Ok(cap) => format!("capped at {limit_mib} MiB (memory cgroup {})", cap.dir.display()),
        Err(why) => format!("not capped: {why}"),
    }
}

/// Moves this process into a new memory cgroup limited to `limit_mib` MiB. Call it before
/// any thread starts, so that every thread moves.
pub fn cap(limit_mib: u64) -> Result<MemoryCap, String> {
    if limit_mib == 0 {
        return Err("--memory-cap-mib 0".to_owned());
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let limit = (limit_mib << 20).to_string();
    // cgroup v1: a line `N:memory:/path`, mounted at /sys/fs/cgroup/memory.
    if let Some(path) = own.lines().find_map(|l| l.split_once(":memory:").map(|(_, p)| p)) {
        let parent = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
        return make(parent, "memory.limit_in_bytes", &limit);
    }
    // cgroup v2: the line `0::/path`, with the memory controller enabled below it.
    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let parent = Path::new(root).join(path.trim_start_matches('/'));
            let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
            if enabled {
                return make(parent, "memory.max", &limit);
            }
        }
    }
    Err("no memory cgroup controller this process may use".to_owned())
}

fn make(parent: PathBuf, limit_file: &str, limit: &str) -> Result<MemoryCap, String> {
    let dir = parent.join(format!("weir-bench-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let cap = MemoryCap { dir, parent };
    std::fs::write(cap.dir.join(limit_file), limit)
        .map_err(|e| format!("setting {limit_file}: {e}"))?;
    std::fs::write(cap.dir.join("cgroup.procs"), std::process::id().to_string())
        .map_err(|e| format!("joining {}: {e}", cap.dir.display()))?;
    Ok(cap)
}

/// Bytes per write while filling.
const FILL_CHUNK_BYTES: usize = 1 << 20;

impl MemoryCap {
    /// Fills the cgroup's memory with the clean page cache of a file of `limit_mib` MiB in
    /// `dir`, written and synced now and kept to the end of the run: from then on the run's
    /// writes take pages the kernel reclaims from it (or from the run's own older cache),
    /// instead of fresh memory until the cap is first reached. Returns the file, which goes
    /// with `dir`.
    pub fn fill(&self, dir: &Path, limit_mib: u64) -> std::io::Result<PathBuf> {
        use std::io::Write;
        let path = dir.join("memory-cap-fill");
        let mut file = std::fs::File::create(&path)?;
        let chunk = vec![0x5au8; FILL_CHUNK_BYTES];
        for _ in 0..(limit_mib << 20) / FILL_CHUNK_BYTES as u64 {
            file.write_all(&chunk)?;
        }
        file.sync_all()?;
        Ok(path)
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        // Best effort: a cgroup left behind is empty once this process ends, and harmless.
        let _ = std::fs::write(self.parent.join("cgroup.procs"), std::process::id().to_string());
        let _ = std::fs::remove_dir(&self.dir);
    }
}
