//! Facts about the machine a run measured, and this process's resident memory.

use std::path::Path;

use crate::report::Machine;

/// Describes the machine; `dir` is the data folder whose file system is reported.
pub fn describe(dir: &Path) -> Machine {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let memory_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| kib_field(&text, "MemTotal:"))
        .map_or(0, |kib| kib / 1024);
    let disk = std::process::Command::new("df")
        .arg("-h")
        .arg(dir)
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| {
            text.lines().last().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    Machine { cpus, memory_mib, disk, kernel, memory_cap: String::new() }
}

/// This process's resident set size in KiB (`VmRSS` of /proc/self/status), if readable.
pub fn rss_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    kib_field(&text, "VmRSS:")
}

fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}
