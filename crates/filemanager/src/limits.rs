//! The process descriptor limit: owns raising the soft `RLIMIT_NOFILE` to the
//! hard limit and deriving the budget of descriptors this crate may hold.
//!
//! ```text
//! 0 ............................................ soft RLIMIT_NOFILE
//! | fds open at start | file budget (cache + handles) | headroom (sockets) |
//! ```

use std::io;

#[cfg(unix)]
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The smallest budget ever derived, so a tiny limit still serves something.
const MIN_BUDGET: usize = 16;

/// Windows has no descriptor limit to raise: a process may hold about 16
/// million handles.
#[cfg(windows)]
const WINDOWS_HANDLES: u64 = 1 << 24;

/// Nothing to raise on Windows: the handle ceiling.
#[cfg(windows)]
pub(crate) fn raise_nofile() -> u64 {
    WINDOWS_HANDLES
}

/// The handle ceiling, Windows' stand-in for the soft `RLIMIT_NOFILE`.
#[cfg(windows)]
pub(crate) fn soft_nofile() -> u64 {
    WINDOWS_HANDLES
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the new soft
/// limit. Failure to raise is not fatal: the current soft limit is returned.
#[cfg(unix)]
pub(crate) fn raise_nofile() -> u64 {
    let cur = getrlimit(Resource::Nofile);
    let soft = cur.current.unwrap_or(u64::MAX);
    let Some(hard) = cur.maximum else {
        // Unlimited hard limit: the kernel still caps at fs.nr_open.
        let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(soft);
        return try_set(soft, nr_open);
    };
    try_set(soft, hard)
}

/// The soft `RLIMIT_NOFILE` as it is (unlimited reads as `u64::MAX`).
#[cfg(unix)]
pub(crate) fn soft_nofile() -> u64 {
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[cfg(unix)]
fn try_set(soft: u64, target: u64) -> u64 {
    if target <= soft {
        return soft;
    }
    match setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(target),
            maximum: getrlimit(Resource::Nofile).maximum,
        },
    ) {
        Ok(()) => target,
        Err(e) => {
            tracing::warn!(error = %e, soft, target, "could not raise RLIMIT_NOFILE; keeping the soft limit");
            soft
        }
    }
}

/// Number of handles open in this process right now.
#[cfg(windows)]
pub fn open_fd_count() -> io::Result<usize> {
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessHandleCount};
    let mut count = 0u32;
    // SAFETY: the pseudo handle of this process, and a live out-pointer.
    if unsafe { GetProcessHandleCount(GetCurrentProcess(), &mut count) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(count as usize)
}

/// Number of descriptors open in this process right now (`/proc/self/fd`;
/// `/dev/fd` elsewhere, which FreeBSD fills only with fdescfs mounted).
#[cfg(unix)]
pub fn open_fd_count() -> io::Result<usize> {
    let dir = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    // read_dir itself holds one descriptor while iterating.
    Ok(std::fs::read_dir(dir)?.count().saturating_sub(1))
}

/// The descriptor budget: what the caller asked for, or the limit less the
/// descriptors already open and less the socket headroom; never above that.
pub(crate) fn derive_budget(limit: u64, requested: Option<usize>, headroom: usize) -> usize {
    let already = open_fd_count().unwrap_or(0);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let ceiling = limit
        .saturating_sub(already)
        .saturating_sub(headroom)
        .max(MIN_BUDGET);
    match requested {
        Some(b) => b.clamp(1, ceiling),
        None => ceiling,
    }
}
