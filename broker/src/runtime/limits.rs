//! The process's limit of open files. A broker holds a descriptor per client connection and
//! per open segment file; the soft limit many systems start processes with (1,024) runs out
//! under a few hundred clients, and then accepts fail (see `server::accept`) and so may opening
//! a segment. So the broker raises its soft limit to the hard limit the operator allows, at
//! start, as Kafka's documentation asks operators to.
#![allow(unsafe_code)]

/// The highest soft limit asked for, whatever the hard limit (which may be unlimited): Linux
/// never lets a process hold more than its `nr_open` (1,048,576 by default).
pub const OPEN_FILES_WANTED: libc::rlim_t = 1 << 20;

/// The soft and hard limits of open files, as they were and as they are now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit before.
    pub was: libc::rlim_t,
    /// The soft limit now.
    pub now: libc::rlim_t,
    /// The hard limit.
    pub hard: libc::rlim_t,
}

/// Raises the soft limit of open files to the hard one (at most [`OPEN_FILES_WANTED`]).
/// Where the system refuses, the soft limit stays as it was, and so it says.
pub fn raise_open_files() -> std::io::Result<OpenFiles> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into the struct it is given, which lives here.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (was, hard) = (limit.rlim_cur, limit.rlim_max);
    let wanted = hard.min(OPEN_FILES_WANTED).max(was);
    if wanted == was {
        return Ok(OpenFiles { was, now: was, hard });
    }
    let raised = libc::rlimit { rlim_cur: wanted, rlim_max: hard };
    // SAFETY: setrlimit only reads the struct it is given, which lives here.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(OpenFiles { was, now: wanted, hard })
}
