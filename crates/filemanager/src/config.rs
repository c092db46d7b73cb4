//! How a [`FileManager`](crate::FileManager) is configured: the
//! [`Config`] an embedder fills in and the backend and symlink choices it
//! names. Plain data; touches nothing at run time.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Which I/O backend to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// io_uring when the kernel allows it, else blocking (the reason is logged).
    #[default]
    Auto,
    /// io_uring; `FileManager::new` fails if it is unavailable.
    Uring,
    /// `preadv2(RWF_NOWAIT)` inline plus tokio's blocking pool.
    Blocking,
    /// What every system but Linux runs, and Linux on request: paths
    /// confined by a component-by-component walk with `O_NOFOLLOW` (no
    /// `openat2`; see `resolve.rs`), reads on tokio's blocking pool, and
    /// no change notification (cached answers are revalidated every
    /// `cache.valid`, whatever [`Config::watch_changes`] says).
    Portable,
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendKind::Auto),
            "uring" => Ok(BackendKind::Uring),
            "blocking" => Ok(BackendKind::Blocking),
            "portable" => Ok(BackendKind::Portable),
            _ => Err(format!(
                "unknown io backend {s:?} (expected auto|uring|blocking|portable)"
            )),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Auto => "auto",
            BackendKind::Uring => "uring",
            BackendKind::Blocking => "blocking",
            BackendKind::Portable => "portable",
        })
    }
}

/// How symlinks inside the root are treated. No policy ever serves a file
/// outside the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SymlinkPolicy {
    /// No symlink is followed (`RESOLVE_NO_SYMLINKS`): any symlink is Forbidden.
    Deny,
    /// Symlinks are followed while they stay beneath the root
    /// (`RESOLVE_BENEATH`); an absolute or escaping target is Forbidden.
    #[default]
    WithinRoot,
    /// Symlinks are followed with the root as `/` (`RESOLVE_IN_ROOT`, like a
    /// chroot): `a -> /x` means `<root>/x`, and `..` stops at the root.
    Follow,
}

impl FromStr for SymlinkPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "deny" => Ok(SymlinkPolicy::Deny),
            "within_root" => Ok(SymlinkPolicy::WithinRoot),
            "follow" => Ok(SymlinkPolicy::Follow),
            _ => Err(format!(
                "unknown symlink policy {s:?} (expected deny|within_root|follow)"
            )),
        }
    }
}

/// Configuration of a [`FileManager`](crate::FileManager).
#[derive(Clone, Debug)]
pub struct Config {
    /// The served root directory.
    pub root: PathBuf,
    /// Shards of the descriptor table and counters (usually the worker count).
    pub shards: usize,
    /// The I/O backend.
    pub backend: BackendKind,
    /// Symlink policy.
    pub symlinks: SymlinkPolicy,
    /// Path cache bounds; `max_open` is further capped by the fd budget.
    pub cache: pathcache::Config,
    /// Descriptors this manager may hold; `None` derives it from `RLIMIT_NOFILE`.
    pub fd_budget: Option<usize>,
    /// Descriptors kept free for sockets and everything else.
    pub fd_headroom: usize,
    /// Try each open inline first with `RESOLVE_CACHED` (the lookup never
    /// waits for I/O; see [the backends](crate#backends)), falling back to
    /// the backend when the path is not in the dentry cache. On by default;
    /// turn it off when the root is on a filesystem whose `open` itself may
    /// block (NFS, FUSE), so every open goes through the backend.
    pub inline_cached_opens: bool,
    /// Raise the soft `RLIMIT_NOFILE` to the hard limit at start (off by
    /// default: a process-wide change, which the daemon asks for). Off,
    /// the budget is derived from the soft limit as it is found.
    pub raise_nofile: bool,
    /// Have the reaper thread release descriptors dropped on other threads
    /// (on by default). One thread serves every manager of the process: it
    /// starts with the first manager that asks, sleeps up to 200 ms while
    /// idle, and ends when the last is dropped. Turned off, the embedder
    /// calls [`FileManager::reap`](crate::FileManager::reap) now and then (a timer task); exhaustion
    /// still reaps inline before it refuses an open.
    pub reaper_thread: bool,
    /// Watch the directories of cached paths with inotify (on by default;
    /// see `watch.rs`): a change seen drops exactly the cached answers it
    /// affects (a file's entry, its small-file copy and variants, a
    /// negative answer, every path below a directory or link that moved,
    /// a directory's sibling census), so the next request gets the new
    /// answer; and while nothing under the root changed since a
    /// descriptor was checked, a request sends from it without a `statx`.
    /// A root path that is (or passes through) a symlink is followed when
    /// the link is re-pointed. Off, or where inotify or `/proc` is not
    /// available, entries are revalidated every `cache.valid` (negative
    /// answers every `negative_ttl`), a re-pointed root is found by the
    /// reaper thread's next tick, and every request sent from a
    /// descriptor checks it.
    pub watch_changes: bool,
}

impl Config {
    /// Defaults for serving `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Config {
            root: root.into(),
            shards: std::thread::available_parallelism().map_or(1, |n| n.get()),
            backend: BackendKind::Auto,
            symlinks: SymlinkPolicy::WithinRoot,
            cache: pathcache::Config::default(),
            fd_budget: None,
            fd_headroom: 1024,
            inline_cached_opens: true,
            raise_nofile: false,
            reaper_thread: true,
            watch_changes: true,
        }
    }
}
