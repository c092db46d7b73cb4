//! Runtime-level file management for async servers on tokio: open files
//! beneath a served root safely, read them without blocking worker threads
//! (io_uring or a portable fallback), share them through a path cache, and
//! release them with the close semantics of Linux 6.6 (`close()` releases in
//! the caller and returns the OS error; dropping a handle defers the release
//! to a batched reaper).
//!
//! This crate owns the I/O policy on top of two data structures:
//! [`fdtable`] (the sharded descriptor table) and [`pathcache`] (the
//! path → open file cache). It also owns the process descriptor budget
//! (raising `RLIMIT_NOFILE`, keeping headroom for sockets, recovering from
//! `EMFILE`) and the export of every counter to the `metrics` facade.
//!
//! # Example
//!
//! ```
//! use filemanager::{Config, FileManager, Opened};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("hello.txt"), b"hello, world").unwrap();
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! rt.block_on(async {
//!     let fm = FileManager::new(Config::new(dir.path())).unwrap();
//!     println!("backend: {:?} ({})", fm.backend().0, fm.backend().1);
//!
//!     // Cached open: the second open of the same path is a cache hit.
//!     let Opened::File(file) = fm.open("hello.txt").await.unwrap() else { panic!() };
//!     assert_eq!(file.meta().size, 12);
//!     assert_eq!(&fm.read_at(&file, 7, 100).await.unwrap()[..], b"world");
//!
//!     // Escapes are refused by the kernel, not by string checks.
//!     assert!(matches!(fm.open("../etc/passwd").await.unwrap(), Opened::Forbidden));
//!
//!     // Uncached handle: explicit close returns the OS error.
//!     let h = fm.open_uncached("hello.txt").await.unwrap();
//!     h.close().await.unwrap();
//! });
//! ```
//!
//! # Backends
//!
//! - `uring`: one io_uring per worker thread (per runtime on that thread),
//!   created on first use. Reads of files served by descriptor go through a
//!   fixed-file slot (registered once per file and ring, at
//!   `slot * shards + shard` of the descriptor); a small file's one read into
//!   the cache uses the plain descriptor. Opens that miss the dentry cache
//!   are `IORING_OP_OPENAT2` (see below for the others); the new descriptor
//!   is `statx`ed with a plain syscall, because the kernel always hands
//!   `IORING_OP_STATX` to an io-wq thread. The reaper closes
//!   dropped descriptors as one batch of `IORING_OP_CLOSE`. Completions that
//!   do not arrive inline wake the waiting task through an eventfd watched
//!   by tokio's `AsyncFd`: no blocking thread per operation.
//! - `blocking`: `preadv2(RWF_NOWAIT)` inline (page-cache hits never leave
//!   the task), tokio's blocking pool otherwise and for opens.
//!
//! On both, an open first tries `openat2` with `RESOLVE_CACHED` inline on
//! the calling thread ([`Config::inline_cached_opens`], on by default): it
//! succeeds only when every path component is in the dentry cache, so the
//! lookup never waits for I/O, and it spares the ring round trip or the
//! blocking-pool hand-off. `EAGAIN` (not cached, or a racing rename) sends
//! the open to the backend; the root-confinement flags are the same.
//! - `portable`: what every system but Linux runs, and Linux on request.
//!   No `openat2`: a path is confined by walking it one component at a
//!   time with `O_NOFOLLOW` from the root's descriptor, judging `..` and
//!   each symlink by the [`SymlinkPolicy`] (see `resolve.rs`); reads and
//!   opens on tokio's blocking pool; no inotify, so cached answers are
//!   revalidated every `cache.valid`.
//! - `auto` probes io_uring (setup, opcodes, sparse fixed files, a NOP) and
//!   falls back to `blocking` when it is disabled (`kernel.io_uring_disabled`,
//!   seccomp, containers) or too old; [`FileManager::backend`] says which
//!   runs and why, and `new` logs it.
//!
//! # Implementation
//!
//! ```text
//!  FileManager (Arc<Shared>)
//!   ├─ root: Arc<OwnedFd>           every open is openat2(root, path, BENEATH|IN_ROOT ...)  [resolve]
//!   ├─ backend: Blocking | Uring     preadv2(NOWAIT)+pool | ring per worker thread           [backend]
//!   ├─ cache: PathCache<Owned<FileValue>>  path -> entry {meta, mime label, Owned handle}
//!   ├─ table: Arc<FdTable<FileValue>>      slot -> FileValue {fd, fixed slot, ring mask}     [file]
//!   ├─ open_fds (padded atomic) vs budget   RLIMIT_NOFILE - open at start - headroom         [limits]
//!   └─ reaper thread (Weak<Shared>)  every tick: table.reap() + batched fixed-slot clears
//! ```
//!
//! A cache hit touches only the path cache (no syscall, no allocation); a
//! miss opens through the backend, inserts into the descriptor table, and
//! publishes the entry. `EMFILE`/`ENFILE` or a full budget evicts cold
//! cache entries, reaps deferred releases, and retries once before
//! [`OpenError::Exhausted`].
#![deny(missing_docs)]

mod backend;
mod bufpool;
mod census;
mod compress;
mod file;
pub mod limits;
mod listing;
mod query;
#[cfg(target_os = "linux")]
mod residency;
/// Page-cache residency where the system cannot say cheaply (see the
/// Linux version for what these answer there).
#[cfg(not(target_os = "linux"))]
mod residency {
    use std::os::fd::BorrowedFd;

    /// Whether `len` bytes at `offset` of `fd` are all in the page cache:
    /// not knowable here, so `true` (a send then waits as a read would).
    pub fn is_resident(_fd: BorrowedFd<'_>, _offset: u64, _len: u64) -> bool {
        true
    }

    /// Appends the range to `out` only if it can be read without waiting:
    /// not knowable here, so never (`false`, `out` unchanged).
    pub fn read_resident(
        _fd: BorrowedFd<'_>,
        _offset: u64,
        _len: usize,
        _out: &mut Vec<u8>,
    ) -> bool {
        false
    }
}
mod changes;
mod resolve;
#[cfg(target_os = "linux")]
mod watch;
#[cfg(not(target_os = "linux"))]
#[path = "watch_none.rs"]
mod watch;

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use crossbeam_utils::CachePadded;
use fdtable::{FdTable, Owned};
use pathcache::{Loaded, Lookup, Negative, PathCache};

pub use backend::BackendStats;
use backend::{Backend, Counters, Target};
pub use changes::WatchStats;
pub use compress::{Codec, Variant};
pub use file::FileValue;
use file::{BudgetToken, FdCount};
pub use listing::{DirEntry, EntryKind, ListOptions, Listing};
pub use pathcache::FileMeta;
pub use query::{Query, Resolved, ResolvedFile, Sibling};
pub use residency::{is_resident, read_resident};
pub use resolve::ForbiddenReason;
use resolve::{c_path, is_exhausted, map_open_error, Kind};
/// The crates whose types appear in this one's API (`Config::cache`,
/// `Stats`), so a user needs no matching versions of them.
pub use {fdtable, pathcache};

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

/// Configuration of a [`FileManager`].
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
    /// calls [`FileManager::reap`] now and then (a timer task); exhaustion
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

/// Why an open failed.
#[derive(Debug)]
pub enum OpenError {
    /// No such file (or a path component is not a directory).
    NotFound,
    /// Escape attempt, symlink policy, permissions, or not a regular file.
    Forbidden,
    /// The path is a directory.
    IsDir,
    /// Out of descriptors even after evicting and reaping: map to 503.
    Exhausted,
    /// Any other OS error.
    Io(io::Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::NotFound => f.write_str("not found"),
            OpenError::Forbidden => f.write_str("forbidden"),
            OpenError::IsDir => f.write_str("is a directory"),
            OpenError::Exhausted => f.write_str("out of file descriptors"),
            OpenError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// The outcome of a cached open.
#[derive(Debug)]
pub enum Opened {
    /// A regular file.
    File(CachedFile),
    /// Nothing at that path.
    NotFound,
    /// Refused (escape, symlink policy, permission, not a regular file).
    Forbidden,
    /// A directory (the server may redirect or serve an index).
    IsDir,
}

type Entry = pathcache::EntryRef<Owned<FileValue>>;

/// A file from the path cache. Holding it keeps the entry (and its
/// descriptor) alive; dropping it is one refcount decrement.
pub struct CachedFile {
    entry: Entry,
    /// Set when the cache entry holds metadata only (`min_uses`): the
    /// descriptor was opened for this request.
    own: Option<FileHandle>,
    /// The descriptor was checked against the metadata during this lookup
    /// (loaded, revalidated, or opened for it): no second `statx` is needed.
    checked: bool,
}

impl fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedFile")
            .field("path", &self.entry.path())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl CachedFile {
    /// Size, times and identity of the file.
    pub fn meta(&self) -> &FileMeta {
        self.entry.meta()
    }
    /// The media type guessed from the name (once, when it was loaded).
    pub fn mime(&self) -> &'static str {
        self.entry.label()
    }
    /// The whole file when it is small enough to be cached in memory.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.entry.bytes()
    }
    /// The path relative to the root (the cache key).
    pub fn path(&self) -> &str {
        self.entry.path()
    }
    /// Whether the file behind the descriptor still is the version the
    /// metadata describes (one `statx`; [`FileMeta::is_same_version`]). A
    /// file rewritten in place within the cache's `valid` window would
    /// otherwise be sent as new bytes under the old length and validators.
    /// An error reads as "unchanged": the send itself will report it.
    pub fn is_current(&self) -> bool {
        resolve::stat_fd(self.as_fd()).map_or(true, |s| s.meta.is_same_version(self.meta()))
    }
    fn value(&self) -> &FileValue {
        match &self.own {
            Some(h) => h.value(),
            None => self
                .entry
                .handle()
                .expect("CachedFile without a handle always owns one"),
        }
    }
}

impl AsFd for CachedFile {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.value().as_fd()
    }
}

impl AsRawFd for CachedFile {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

/// An uncached open file. `close().await` releases it now and returns the
/// OS error; dropping it defers the release to the reaper.
pub struct FileHandle {
    owned: Owned<FileValue>,
}

impl fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileHandle")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl FileHandle {
    fn value(&self) -> &FileValue {
        &self.owned
    }

    /// Size of the file when it was opened.
    pub fn size(&self) -> u64 {
        self.owned.size()
    }

    /// Closes now and returns the `close(2)` error, if any. If another
    /// reference is still reading, the release happens when it finishes.
    pub async fn close(self) -> io::Result<()> {
        match self.owned.close() {
            Ok(()) => Ok(()),
            Err(fdtable::CloseError::Release(e)) => Err(e),
            Err(e) => Err(io::Error::other(format!("descriptor table: {e:?}"))),
        }
    }
}

impl AsFd for FileHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.owned.as_fd()
    }
}

impl AsRawFd for FileHandle {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// What [`FileManager::read_at`] can read: [`CachedFile`] and [`FileHandle`]
/// (which use io_uring fixed-file slots), or any plain descriptor.
pub trait ReadTarget: AsFd + sealed::Sealed {
    #[doc(hidden)]
    fn file_value(&self) -> Option<&FileValue>;
}

impl sealed::Sealed for CachedFile {}
impl ReadTarget for CachedFile {
    fn file_value(&self) -> Option<&FileValue> {
        Some(self.value())
    }
}
impl sealed::Sealed for FileHandle {}
impl ReadTarget for FileHandle {
    fn file_value(&self) -> Option<&FileValue> {
        Some(self.value())
    }
}
impl sealed::Sealed for std::fs::File {}
impl ReadTarget for std::fs::File {
    fn file_value(&self) -> Option<&FileValue> {
        None
    }
}
impl sealed::Sealed for OwnedFd {}
impl ReadTarget for OwnedFd {
    fn file_value(&self) -> Option<&FileValue> {
        None
    }
}
impl sealed::Sealed for BorrowedFd<'_> {}
impl ReadTarget for BorrowedFd<'_> {
    fn file_value(&self) -> Option<&FileValue> {
        None
    }
}

/// Everything a [`FileManager`] counts, summed at call time.
#[derive(Clone, Debug)]
pub struct Stats {
    /// The backend that runs.
    pub backend: BackendKind,
    /// Descriptor table counters.
    pub fdtable: fdtable::Stats,
    /// Path cache counters.
    pub cache: pathcache::Stats,
    /// Backend operations and bytes read.
    pub io: BackendStats,
    /// Descriptors held by this manager now.
    pub open_fds: u64,
    /// The descriptor budget.
    pub fd_budget: u64,
    /// The soft `RLIMIT_NOFILE` after raising.
    pub fd_limit: u64,
    /// Opens that hit `EMFILE`/`ENFILE` or the budget and were recovered by
    /// evicting and reaping.
    pub emfile_recoveries: u64,
    /// Opens refused with [`OpenError::Exhausted`].
    pub exhausted: u64,
    /// Reaper passes that released at least one descriptor.
    pub reaper_batches: u64,
    /// Descriptors released by the reaper.
    pub reaped: u64,
    /// `close` errors of descriptors the reaper closed as an io_uring batch
    /// (the table's `release_errors` counts the others).
    pub batched_close_errors: u64,
    /// The change watcher's counters, when it runs.
    pub watch: Option<WatchStats>,
    /// Times the root path, a symlink re-pointed, was followed to a new
    /// directory.
    pub root_switches: u64,
    /// Directories whose precompressed siblings are known (`census.rs`).
    pub census_dirs: u64,
    /// Directory listings taken for that census.
    pub census_scans: u64,
}

/// Cheaply cloneable handle to the manager (an `Arc` inside); `Send + Sync`.
#[derive(Clone)]
pub struct FileManager {
    shared: Arc<Shared>,
}

impl fmt::Debug for FileManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileManager")
            .field("root", &self.shared.root_path)
            .field("backend", &self.shared.kind)
            .field("fd_budget", &self.shared.budget)
            .finish()
    }
}

static NEXT_MANAGER_ID: AtomicU64 = AtomicU64::new(1);

/// How long the reaper sleeps after a pass that released something.
const REAP_TICK: Duration = Duration::from_millis(5);
/// The longest it sleeps while passes find nothing: an idle daemon should not
/// wake 200 times a second. Exhaustion never waits for it (`relieve` reaps
/// inline), so the back-off only delays the release of dropped descriptors.
const REAP_IDLE_MAX: Duration = Duration::from_millis(200);
/// Cache entries evicted per `EMFILE` recovery.
const EVICT_BATCH: usize = 64;

struct Shared {
    // Field order is drop order: the cache releases its handles into the
    // table's deferred lists before the table itself goes.
    cache: PathCache<Owned<FileValue>>,
    table: Arc<FdTable<FileValue>>,
    backend: Backend,
    /// The root directory every open is confined beneath. Replaced when
    /// the root path is a symlink (or passes through one) and it is
    /// re-pointed: see [`Shared::follow_root`].
    root: RwLock<Arc<OwnedFd>>,
    root_path: PathBuf,
    /// Where the root path passes through symlinks: the directories
    /// holding them and their names (empty for a plain root path).
    root_links: Vec<(PathBuf, std::ffi::OsString)>,
    root_switches: AtomicU64,
    policy: SymlinkPolicy,
    /// The portable walk confines paths, not `openat2`.
    walk: bool,
    /// `Config::inline_cached_opens`.
    inline_cached_opens: bool,
    kind: BackendKind,
    why: String,
    // Both name io_uring fixed-file slots.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    id: u64,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    shards: usize,
    limit: u64,
    budget: usize,
    open_fds: FdCount,
    counters: Arc<Counters>,
    emfile_recoveries: CachePadded<AtomicU64>,
    exhausted: CachePadded<AtomicU64>,
    reaper_batches: AtomicU64,
    reaped: AtomicU64,
    described: Mutex<Option<String>>,
    reaper_stop: AtomicBool,
    #[cfg(target_os = "linux")]
    close_ring: Mutex<backend::uring::CloseRing>,
    batched_close_errors: AtomicU64,
    /// Change notification (`Config::watch_changes`).
    watcher: Option<Arc<watch::Watcher>>,
    /// Compressions running at once (`compress.rs`), at most one per CPU.
    compress_slots: tokio::sync::Semaphore,
    /// Which precompressed siblings each recent directory holds.
    census: PathCache<census::Census>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.reaper_stop.store(true, Ordering::Release);
    }
}

fn choose_backend(
    kind: BackendKind,
    counters: &Arc<Counters>,
) -> io::Result<(Backend, BackendKind, String)> {
    let blocking = || {
        Backend::Blocking(backend::blocking::Blocking {
            counters: Arc::clone(counters),
        })
    };
    #[cfg(target_os = "linux")]
    {
        let uring = || {
            Backend::Uring(backend::uring::Uring {
                counters: Arc::clone(counters),
            })
        };
        match kind {
            BackendKind::Blocking => Ok((blocking(), BackendKind::Blocking, "configured".into())),
            BackendKind::Portable => Ok((blocking(), BackendKind::Portable, "configured".into())),
            BackendKind::Uring => match backend::uring::probe() {
                Ok(()) => Ok((
                    uring(),
                    BackendKind::Uring,
                    "configured; probe passed".into(),
                )),
                Err(why) => Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("io_uring unavailable: {why}"),
                )),
            },
            BackendKind::Auto => match backend::uring::probe() {
                Ok(()) => Ok((
                    uring(),
                    BackendKind::Uring,
                    "auto: io_uring probe passed".into(),
                )),
                Err(why) => {
                    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                        .map(|s| format!(" (kernel.io_uring_disabled={})", s.trim()))
                        .unwrap_or_default();
                    Ok((
                        blocking(),
                        BackendKind::Blocking,
                        format!("auto: io_uring unavailable: {why}{disabled}"),
                    ))
                }
            },
        }
    }
    #[cfg(not(target_os = "linux"))]
    match kind {
        BackendKind::Uring | BackendKind::Blocking => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("the {kind} backend needs Linux (use auto or portable)"),
        )),
        BackendKind::Portable => Ok((blocking(), BackendKind::Portable, "configured".into())),
        BackendKind::Auto => Ok((
            blocking(),
            BackendKind::Portable,
            "auto: openat2 and io_uring need Linux".into(),
        )),
    }
}

/// The `Loader` the path cache calls on a miss or revalidation.
struct CacheLoader<'a> {
    shared: &'a Shared,
    /// This lookup loaded the entry it returns, or revalidated it (see
    /// `is_unchanged`).
    checked: AtomicBool,
    /// Before this lookup's load or revalidation looked at the file.
    epoch: LoadEpoch,
}

/// The watcher's epoch noted before a lookup's load or revalidation looked
/// at the disk (0: it did neither), checked once the lookup is over: an
/// event handled meanwhile may have found nothing indexed to drop yet
/// (`watch.rs`).
#[derive(Default)]
pub(crate) struct LoadEpoch(AtomicU64);

impl LoadEpoch {
    pub(crate) fn note(&self, shared: &Shared) {
        if let Some(w) = &shared.watcher {
            self.0.store(w.epoch(), Ordering::Relaxed);
        }
    }

    /// Whether an event about `path` was handled after the noted epoch;
    /// forgets the epoch. A plain load first: a hit noted nothing, and this
    /// runs after every lookup (a `swap` would be a locked instruction per
    /// hit).
    #[inline]
    pub(crate) fn raced(&self, shared: &Shared, path: &str) -> bool {
        let epoch = self.0.load(Ordering::Relaxed);
        if epoch == 0 {
            return false;
        }
        self.0.store(0, Ordering::Relaxed);
        (shared.watcher.as_ref()).is_some_and(|w| w.changed_since(path, epoch))
    }
}

impl<'a> CacheLoader<'a> {
    fn new(shared: &'a Shared) -> Self {
        CacheLoader {
            shared,
            checked: AtomicBool::new(false),
            epoch: LoadEpoch::default(),
        }
    }

    /// Puts watches on `path`'s directories and notes the epoch before
    /// the check that follows; the stamp for a descriptor it vouches for.
    fn prepare(&self, path: &str) -> Option<u64> {
        self.epoch.note(self.shared);
        self.shared.watcher.as_ref()?.prepare(path)
    }

    /// After the lookup: drops what this lookup's load indexed if an
    /// event about `path` was handled while it loaded, so the next
    /// request loads the new version (this one keeps what it has).
    #[inline]
    fn drop_if_raced(&self, path: &str) {
        if self.epoch.raced(self.shared, path) {
            self.shared.cache.invalidate(path);
        }
    }
}

impl pathcache::Loader<Owned<FileValue>> for CacheLoader<'_> {
    type Error = OpenError;

    async fn load(
        &self,
        path: &str,
        open: bool,
        read_small: Option<u64>,
    ) -> Result<Loaded<Owned<FileValue>>, OpenError> {
        let mime = mime_guess::from_path(path)
            .first_raw()
            .unwrap_or("application/octet-stream");
        let stamp = self.prepare(path);
        if !open {
            return match self.shared.stat_path(path).await {
                Ok(meta) => Ok(Loaded::File {
                    meta,
                    label: mime,
                    handle: None,
                    bytes: None,
                }),
                Err(OpenError::NotFound) => Ok(Loaded::Negative(Negative::NotFound)),
                Err(OpenError::Forbidden) => Ok(Loaded::Negative(Negative::Forbidden)),
                Err(e) => Err(e),
            };
        }
        let (owned, st) = match self.shared.open_owned(path).await {
            Ok(v) => v,
            Err(OpenError::NotFound) => return Ok(Loaded::Negative(Negative::NotFound)),
            Err(OpenError::Forbidden) => return Ok(Loaded::Negative(Negative::Forbidden)),
            Err(e) => return Err(e),
        };
        let meta = st.meta;
        let bytes = match read_small {
            Some(max) if meta.size <= max => self.read_whole(&owned, meta.size).await?,
            _ => None,
        };
        owned.set_stamp(stamp.filter(|_| st.nlink == 1));
        // Its metadata was taken from this descriptor just now: the request
        // that loaded it needs no other check.
        self.checked.store(true, Ordering::Relaxed);
        Ok(Loaded::File {
            meta,
            label: mime,
            handle: Some(owned),
            bytes,
        })
    }

    /// The copy a small file's second use takes: read through the entry's
    /// descriptor (no second open).
    async fn read(
        &self,
        _path: &str,
        handle: &Owned<FileValue>,
        len: u64,
    ) -> Result<Option<Vec<u8>>, OpenError> {
        self.read_whole(handle, len).await
    }

    async fn stat(&self, path: &str) -> Result<Option<FileMeta>, OpenError> {
        match self.shared.stat_path(path).await {
            Ok(meta) => Ok(Some(meta)),
            Err(OpenError::NotFound) | Err(OpenError::Forbidden) | Err(OpenError::IsDir) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Revalidation. An entry with a descriptor: one `statx` of the path
    /// from the root's descriptor, where a lookup's confined stat is an
    /// `O_PATH` open, a `statx` and a `close`. It never opens or serves
    /// anything: a "same version" (same device, inode, size and times as
    /// the descriptor that was opened beneath the root) keeps that
    /// descriptor, and any other answer (changed, gone, or a walk that left
    /// the root and found some other file) falls back to the confined stat,
    /// so a path that now leads elsewhere is judged as a new lookup would
    /// judge it. The descriptor pins its dentries, so the walk stays in the
    /// dentry cache. Either way a "same" also vouches for the descriptor
    /// for this request (the inode and its metadata match now), which
    /// spares the torn-response check.
    ///
    /// The walk follows symlinks in the directories on the way, so a path
    /// that now reaches the same file through a link is kept where a new
    /// lookup might refuse the link (an absolute one under `WithinRoot`):
    /// the bytes are those of the file that was opened beneath the root,
    /// and nothing else can be reached that way. Under `Deny`, whose point
    /// is that no link is ever followed, every revalidation is confined.
    async fn is_unchanged(
        &self,
        path: &str,
        cached: &FileMeta,
        handle: Option<&Owned<FileValue>>,
    ) -> Result<bool, OpenError> {
        let stamp = self.prepare(path);
        if let Some(handle) = handle.filter(|_| self.shared.policy != SymlinkPolicy::Deny) {
            self.shared.backend.counters().op(backend::Op::Stat);
            if let Ok(st) = resolve::stat_unconfined(&*self.shared.root(), path) {
                if st.kind == Kind::Regular && st.meta.is_same_version(cached) {
                    handle.set_stamp(stamp.filter(|_| st.nlink == 1));
                    self.checked.store(true, Ordering::Relaxed);
                    return Ok(true);
                }
            }
            handle.set_stamp(None);
        }
        let same = self
            .stat(path)
            .await?
            .is_some_and(|m| m.is_same_version(cached));
        self.checked.store(same, Ordering::Relaxed);
        Ok(same)
    }

    /// The torn-read check after a small file's copy: an `fstat` of the
    /// descriptor the copy was read through, not a second path walk. On the
    /// cache_pressure harness (80% misses) the path stat was an `O_PATH`
    /// open + `statx` + `close` per miss, a third of the daemon's syscalls.
    async fn recheck(
        &self,
        path: &str,
        handle: Option<&Owned<FileValue>>,
    ) -> Result<Option<FileMeta>, OpenError> {
        let Some(handle) = handle else {
            return self.stat(path).await;
        };
        self.shared.backend.counters().op(backend::Op::Stat);
        match resolve::stat_fd(handle.as_fd()) {
            Ok(stat) if stat.kind == Kind::Regular => Ok(Some(stat.meta)),
            Ok(_) => Ok(None),
            Err(e) => Err(OpenError::Io(e)),
        }
    }
}

impl CacheLoader<'_> {
    /// The whole of a small file of `size` bytes, read through `owned`.
    /// `None` when the file's length no longer is `size` (it is then
    /// served from the descriptor).
    async fn read_whole(
        &self,
        owned: &Owned<FileValue>,
        size: u64,
    ) -> Result<Option<Vec<u8>>, OpenError> {
        let len = usize::try_from(size).unwrap_or(usize::MAX);
        // Through the plain descriptor, not a fixed-file slot: the bytes
        // are read once and then served from the cache, so registering the
        // file in the ring (one FILES_UPDATE syscall now, one clear when it
        // is released) would buy nothing; on a miss-heavy load those were
        // ~1% of the daemon's CPU.
        let target = Target {
            fd: owned.as_fd(),
            file: None,
        };
        let b = self
            .shared
            .backend
            .read(target, 0, len)
            .await
            .map_err(OpenError::Io)?;
        // `Vec::from` takes the buffer back without copying when the
        // `Bytes` is the only owner of the `Vec` it came from.
        Ok((b.len() as u64 == size).then(|| Vec::from(b)))
    }
}

fn cache_key(rel_path: &str) -> &str {
    rel_path.trim_start_matches('/')
}

impl Shared {
    /// How paths are confined.
    fn rules(&self) -> resolve::Rules {
        resolve::Rules {
            policy: self.policy,
            walk: self.walk,
        }
    }

    /// The root directory now (one uncontended read lock: misses only).
    fn root(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.root.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Opens the root path again and, when it now leads to another
    /// directory (a release switch: `current -> releases/N` re-pointed),
    /// serves from that one: new lookups resolve beneath it and every
    /// cached answer is dropped, while responses already started finish
    /// from the descriptors they hold. True when the root changed.
    fn follow_root(&self) -> bool {
        let flags = rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::CLOEXEC;
        let new = match rustix::fs::open(&self.root_path, flags, rustix::fs::Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!(root = %self.root_path.display(), "root path not reachable ({e}); still serving the directory it led to");
                return false;
            }
        };
        let same = |a: &rustix::fs::Stat, b: &rustix::fs::Stat| {
            (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
        };
        match (rustix::fs::fstat(&new), rustix::fs::fstat(&*self.root())) {
            (Ok(a), Ok(b)) if !same(&a, &b) => {}
            _ => return false,
        }
        if let Err(e) = resolve::probe_openat2(&new, self.rules()) {
            tracing::warn!(root = %self.root_path.display(), "new root refused: {e}");
            return false;
        }
        let new = Arc::new(new);
        *self.root.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&new);
        if let Some(w) = &self.watcher {
            w.rebase(&new);
        }
        self.cache.invalidate_under("");
        self.census.invalidate_under("");
        self.root_switches.fetch_add(1, Ordering::Relaxed);
        let target = std::fs::canonicalize(&self.root_path).unwrap_or_default();
        tracing::info!(root = %self.root_path.display(), now = %target.display(), "root re-pointed: serving the new target");
        true
    }

    /// Drops what a change the watcher saw makes out of date: the path's
    /// entry (a negative one too, and the variants kept in it), a tree of
    /// entries, or a directory's sibling census.
    fn apply(&self, change: changes::Change<'_>) {
        match change {
            changes::Change::Path(path) => {
                self.cache.invalidate(path);
            }
            changes::Change::Tree(path) => {
                self.cache.invalidate_under(path);
                self.census.invalidate_under(path);
            }
            changes::Change::Root => {
                self.follow_root();
            }
            changes::Change::Names(dir) => {
                self.census
                    .invalidate(if dir.is_empty() { "." } else { dir });
            }
        }
    }

    /// Makes room: evicts cold cache entries, then reaps deferred releases
    /// and clears fixed slots. Returns descriptors released.
    fn relieve(&self) -> usize {
        self.cache.evict_unused(EVICT_BATCH);
        self.reap_now()
    }

    fn reap_now(&self) -> usize {
        let n = match &self.backend {
            // With io_uring, the descriptors released by this pass are
            // closed in one submission rather than one close(2) each.
            #[cfg(target_os = "linux")]
            Backend::Uring(_) => {
                let (n, batch) = file::collect_closes(|| self.table.reap());
                if !batch.is_empty() {
                    let errors = self
                        .close_ring
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .close_all(batch, &self.counters);
                    self.batched_close_errors
                        .fetch_add(errors, Ordering::Relaxed);
                }
                n
            }
            _ => self.table.reap(),
        };
        #[cfg(target_os = "linux")]
        backend::uring::flush_unregisters();
        if n > 0 {
            self.reaper_batches.fetch_add(1, Ordering::Relaxed);
            self.reaped.fetch_add(n as u64, Ordering::Relaxed);
        }
        n
    }

    fn over_budget(&self) -> bool {
        self.open_fds.load(Ordering::Relaxed) >= self.budget
    }

    /// Opens through the backend with budget and `EMFILE` recovery.
    async fn open_raw(
        &self,
        path: &str,
        oflags: rustix::fs::OFlags,
    ) -> Result<(OwnedFd, resolve::Stat), OpenError> {
        let c = c_path(path)?;
        let mut recovered = false;
        if self.over_budget() {
            self.relieve();
            if self.over_budget() {
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                return Err(OpenError::Exhausted);
            }
            recovered = true;
        }
        let res = match self
            .backend
            .open(
                &self.root(),
                c.clone(),
                oflags,
                self.rules(),
                self.inline_cached_opens,
            )
            .await
        {
            Err(e) if is_exhausted(&e) => {
                self.relieve();
                recovered = true;
                match self
                    .backend
                    .open(
                        &self.root(),
                        c,
                        oflags,
                        self.rules(),
                        self.inline_cached_opens,
                    )
                    .await
                {
                    Err(e) if is_exhausted(&e) => {
                        self.exhausted.fetch_add(1, Ordering::Relaxed);
                        return Err(OpenError::Exhausted);
                    }
                    other => other,
                }
            }
            other => other,
        };
        if recovered {
            self.emfile_recoveries.fetch_add(1, Ordering::Relaxed);
        }
        res.map_err(map_open_error)
    }

    async fn stat_path(&self, path: &str) -> Result<FileMeta, OpenError> {
        let (fd, st) = self.open_raw(path, resolve::path_oflags()).await?;
        drop(fd);
        match st.kind {
            Kind::Regular => Ok(st.meta),
            Kind::Dir => Err(OpenError::IsDir),
            Kind::Other => Err(OpenError::Forbidden),
        }
    }

    async fn open_owned(&self, path: &str) -> Result<(Owned<FileValue>, resolve::Stat), OpenError> {
        let (fd, st) = self.open_raw(path, resolve::read_oflags()).await?;
        match st.kind {
            Kind::Regular => {}
            Kind::Dir => return Err(OpenError::IsDir),
            Kind::Other => return Err(OpenError::Forbidden),
        }
        let value = FileValue::new(fd, st.meta.size, BudgetToken::take(&self.open_fds));
        let owned = match self.table.insert_owned(value) {
            Ok(o) => o,
            Err(fdtable::InsertError::Full(v)) => {
                drop(v);
                self.relieve();
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                return Err(OpenError::Exhausted);
            }
        };
        #[cfg(target_os = "linux")]
        {
            let fd = owned.fd();
            let index = u64::from(fd.slot()) * self.shards as u64 + fd.shard() as u64;
            if let Ok(index) = u32::try_from(index) {
                owned.set_fixed_slot(file::FixedSlot {
                    index,
                    key: (self.id, fd.to_raw()),
                });
            }
        }
        Ok((owned, st))
    }
}

/// The symlinks an absolute form of `root` passes through, as (directory
/// holding the link, link name): the places whose change re-points it.
fn links_on_the_way(root: &Path) -> Vec<(PathBuf, std::ffi::OsString)> {
    let Ok(abs) = std::path::absolute(root) else {
        return Vec::new();
    };
    let mut links = Vec::new();
    let mut at = PathBuf::new();
    for part in abs.components() {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            if let (Some(dir), Some(name)) = (at.parent(), at.file_name()) {
                links.push((dir.to_path_buf(), name.to_owned()));
            }
        }
    }
    links
}

/// The managers the process's one reaper thread serves, and whether it
/// runs. The thread ends when the last of them is dropped and starts
/// again with the next manager.
static REAPER: Mutex<(Vec<Weak<Shared>>, bool)> = Mutex::new((Vec::new(), false));

/// Hands a manager to the process's reaper thread, starting it if none
/// runs: two managers (two mounts) share one thread.
fn register_reaper(weak: Weak<Shared>) -> io::Result<()> {
    let mut reaper = REAPER.lock().unwrap_or_else(|p| p.into_inner());
    reaper.0.retain(|w| w.strong_count() > 0);
    reaper.0.push(weak);
    if reaper.1 {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("fd-reaper".into())
        .spawn(run_reaper)?;
    reaper.1 = true;
    Ok(())
}

fn run_reaper() {
    let mut tick = REAP_TICK;
    loop {
        std::thread::sleep(tick);
        let managers: Vec<Arc<Shared>> = {
            let mut reaper = REAPER.lock().unwrap_or_else(|p| p.into_inner());
            reaper.0.retain(|w| {
                w.upgrade()
                    .is_some_and(|s| !s.reaper_stop.load(Ordering::Acquire))
            });
            if reaper.0.is_empty() {
                reaper.1 = false;
                return;
            }
            reaper.0.iter().filter_map(Weak::upgrade).collect()
        };
        let mut released = 0;
        for shared in &managers {
            // Without events, a re-pointed root is found by looking.
            if shared.watcher.is_none() && !shared.root_links.is_empty() {
                shared.follow_root();
            }
            released += shared.reap_now();
        }
        tick = if released > 0 {
            REAP_TICK
        } else {
            (tick * 2).min(REAP_IDLE_MAX)
        };
    }
}

impl FileManager {
    /// Opens the root, raises the soft `RLIMIT_NOFILE` (only if
    /// [`Config::raise_nofile`] asks), derives the budget, picks (and
    /// logs) the backend, and hands the manager to the process's reaper
    /// thread (unless [`Config::reaper_thread`] is off) and its change
    /// watcher thread (unless [`Config::watch_changes`] is off; it sleeps
    /// in `poll` until something under a root changes). Both threads are
    /// one per process, whatever the number of managers, started by the
    /// first manager that needs them. Besides, the path cache runs one
    /// clock thread per process (a ticker at the coarse clock's resolution
    /// that parks after a second without lookups; see `pathcache`'s clock),
    /// and the io_uring backend creates one ring per thread that does I/O,
    /// on its first operation; the blocking backend uses tokio's blocking
    /// pool. Each manager holds the root's descriptor and, with the
    /// watcher, one inotify descriptor; servedir's README lists it all.
    pub fn new(config: Config) -> io::Result<FileManager> {
        let root = rustix::fs::open(
            &config.root,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| {
            io::Error::new(
                io::Error::from(e).kind(),
                format!("cannot open root {}: {e}", config.root.display()),
            )
        })?;
        let shards = config.shards.max(1);
        let counters = Arc::new(Counters::new(shards));
        let (backend, kind, why) = choose_backend(config.backend, &counters)?;
        let rules = resolve::Rules {
            policy: config.symlinks,
            walk: kind == BackendKind::Portable,
        };
        resolve::probe_openat2(&root, rules)?;
        let limit = if config.raise_nofile {
            limits::raise_nofile()
        } else {
            limits::soft_nofile()
        };
        let budget = limits::derive_budget(limit, config.fd_budget, config.fd_headroom);
        tracing::debug!(backend = %kind, reason = %why, fd_limit = limit, fd_budget = budget, root = %config.root.display(), "filemanager started");
        let table = Arc::new(FdTable::new(fdtable::Config {
            shards,
            initial_slots: 64,
            max_slots: budget.max(64),
        }));
        let mut cache_cfg = config.cache.clone();
        cache_cfg.max_open = cache_cfg.max_open.min(budget);
        let root_links = links_on_the_way(&config.root);
        let watcher = if config.watch_changes && !rules.walk {
            watch::Watcher::new(&root, &root_links)
                .inspect_err(|e| {
                    tracing::warn!(
                        "not watching for changes ({e}): changes are seen within cache.valid"
                    )
                })
                .ok()
        } else {
            None
        };
        let shared = Arc::new(Shared {
            census: PathCache::new(census::cache_config(&cache_cfg)),
            cache: PathCache::new(cache_cfg),
            table,
            backend,
            root: RwLock::new(Arc::new(root)),
            root_path: config.root.clone(),
            root_links,
            root_switches: AtomicU64::new(0),
            policy: config.symlinks,
            walk: rules.walk,
            inline_cached_opens: config.inline_cached_opens,
            kind,
            why,
            id: NEXT_MANAGER_ID.fetch_add(1, Ordering::Relaxed),
            shards,
            limit,
            budget,
            open_fds: Arc::new(CachePadded::new(AtomicUsize::new(0))),
            counters,
            emfile_recoveries: CachePadded::new(AtomicU64::new(0)),
            exhausted: CachePadded::new(AtomicU64::new(0)),
            reaper_batches: AtomicU64::new(0),
            reaped: AtomicU64::new(0),
            described: Mutex::new(None),
            reaper_stop: AtomicBool::new(false),
            #[cfg(target_os = "linux")]
            close_ring: Mutex::new(backend::uring::CloseRing::new(kind == BackendKind::Uring)),
            batched_close_errors: AtomicU64::new(0),
            watcher,
            compress_slots: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            ),
        });
        if config.reaper_thread {
            register_reaper(Arc::downgrade(&shared))?;
        }
        if let Some(w) = &shared.watcher {
            let weak = Arc::downgrade(&shared);
            watch::spawn(w, move |change| {
                if let Some(shared) = weak.upgrade() {
                    shared.apply(change);
                }
            })?;
        }
        Ok(FileManager { shared })
    }

    /// The backend that runs (`Uring` or `Blocking`) and why it was chosen.
    pub fn backend(&self) -> (BackendKind, &str) {
        (self.shared.kind, &self.shared.why)
    }

    /// The soft `RLIMIT_NOFILE` after raising it.
    pub fn fd_limit(&self) -> u64 {
        self.shared.limit
    }

    /// How many descriptors this manager may hold.
    pub fn fd_budget(&self) -> usize {
        self.shared.budget
    }

    /// The served root.
    pub fn root(&self) -> &Path {
        &self.shared.root_path
    }

    /// Opens `rel_path` through the path cache.
    pub async fn open(&self, rel_path: &str) -> Result<Opened, OpenError> {
        let key = cache_key(rel_path);
        let loader = CacheLoader::new(&self.shared);
        let mut attempts = 0;
        loop {
            attempts += 1;
            loader.checked.store(false, Ordering::Relaxed);
            let lookup = self.shared.cache.get_or_load(key, &loader).await;
            loader.drop_if_raced(key);
            let entry = match lookup {
                Ok(Lookup::Hit(e)) => e,
                Ok(Lookup::Negative(Negative::NotFound)) | Err(OpenError::NotFound) => {
                    return Ok(Opened::NotFound)
                }
                Ok(Lookup::Negative(Negative::Forbidden)) | Err(OpenError::Forbidden) => {
                    return Ok(Opened::Forbidden)
                }
                Err(OpenError::IsDir) => return Ok(Opened::IsDir),
                Err(e) => return Err(e),
            };
            if entry.handle().is_some() {
                return Ok(Opened::File(CachedFile {
                    entry,
                    own: None,
                    checked: loader.checked.load(Ordering::Relaxed),
                }));
            }
            // Metadata-only entry (not yet used often enough to keep an fd
            // cached): open for this request and check it is the same file.
            let (owned, meta) = match self.shared.open_owned(key).await {
                Ok((owned, st)) => (owned, st.meta),
                Err(OpenError::NotFound) => return Ok(Opened::NotFound),
                Err(OpenError::Forbidden) => return Ok(Opened::Forbidden),
                Err(OpenError::IsDir) => return Ok(Opened::IsDir),
                Err(e) => return Err(e),
            };
            let same = entry.meta().is_same_version(&meta);
            if same || attempts >= 2 {
                return Ok(Opened::File(CachedFile {
                    entry,
                    own: Some(FileHandle { owned }),
                    checked: same,
                }));
            }
            // Changed since it was cached: drop the stale entry and look up
            // again so metadata and descriptor agree.
            self.shared.cache.invalidate(key);
        }
    }

    /// Lists directory `rel_path` beneath the root (see [`Listing`]): the
    /// directory and every name in it are resolved with the same flags as
    /// [`open`](Self::open), so nothing outside the root is ever named and
    /// an entry shows what a request for it would get. Runs on tokio's
    /// blocking pool. A path that is a file is [`OpenError::NotFound`].
    pub async fn list_dir(&self, rel_path: &str, opts: ListOptions) -> Result<Listing, OpenError> {
        let root = self.shared.root();
        let rules = self.shared.rules();
        let rel = rel_path.to_owned();
        tokio::task::spawn_blocking(move || listing::read_dir(&root, &rel, rules, opts))
            .await
            .map_err(|e| OpenError::Io(io::Error::other(e)))?
    }

    /// Why `rel_path` is refused, found by resolving it again (once, on the
    /// blocking pool): for the 403 body and the log line, after
    /// [`resolve`](Self::resolve) answered `Forbidden`. It never looks at
    /// what a symlink points to beyond whether the kernel let it stay
    /// beneath the root, so nothing outside the root is named. A path that
    /// is no longer refused (it changed meanwhile) is
    /// [`ForbiddenReason::Other`].
    pub async fn why_forbidden(&self, rel_path: &str) -> ForbiddenReason {
        let root = self.shared.root();
        let rules = self.shared.rules();
        let rel = cache_key(rel_path).to_owned();
        tokio::task::spawn_blocking(move || resolve::why_forbidden(&root, &rel, rules))
            .await
            .unwrap_or(ForbiddenReason::Other)
    }

    /// Opens `rel_path` without the cache (regular files only).
    pub async fn open_uncached(&self, rel_path: &str) -> Result<FileHandle, OpenError> {
        let (owned, _) = self.shared.open_owned(cache_key(rel_path)).await?;
        Ok(FileHandle { owned })
    }

    /// Metadata of `rel_path` (from the cache when fresh).
    pub async fn stat(&self, rel_path: &str) -> Result<FileMeta, OpenError> {
        let key = cache_key(rel_path);
        match self.shared.cache.get(key) {
            Some(Lookup::Hit(e)) => return Ok(*e.meta()),
            Some(Lookup::Negative(Negative::NotFound)) => return Err(OpenError::NotFound),
            Some(Lookup::Negative(Negative::Forbidden)) => return Err(OpenError::Forbidden),
            None => {}
        }
        self.shared.stat_path(key).await
    }

    /// Reads up to `len` bytes at `offset` (fewer only at end of file).
    pub async fn read_at(
        &self,
        file: &impl ReadTarget,
        offset: u64,
        len: usize,
    ) -> io::Result<Bytes> {
        let target = Target {
            fd: file.as_fd(),
            file: file.file_value(),
        };
        self.shared.backend.read(target, offset, len).await
    }

    /// Reads into `buf` at `offset`; returns bytes read (fewer only at end of
    /// file). With io_uring the kernel writes an owned buffer that is then
    /// copied, because a borrowed buffer could be freed by a dropped future
    /// while the kernel still writes it.
    pub async fn read_into(
        &self,
        file: &impl ReadTarget,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let target = Target {
            fd: file.as_fd(),
            file: file.file_value(),
        };
        match &self.shared.backend {
            Backend::Blocking(b) => b.read_into(target, offset, buf).await,
            #[cfg(target_os = "linux")]
            Backend::Uring(_) => {
                let bytes = self.shared.backend.read(target, offset, buf.len()).await?;
                buf[..bytes.len()].copy_from_slice(&bytes);
                Ok(bytes.len())
            }
        }
    }

    /// Applies new path-cache bounds and times while serving (a config
    /// reload). `max_open` is capped by the descriptor budget, as at start;
    /// `shards` is ignored. Lower bounds evict unused entries now, and their
    /// descriptors are closed on the deferred path. Returns the entries
    /// evicted.
    pub fn set_cache_limits(&self, mut cache: pathcache::Config) -> usize {
        cache.max_open = cache.max_open.min(self.shared.budget);
        self.shared.census.set_limits(&census::cache_config(&cache));
        self.shared.cache.set_limits(&cache)
    }

    /// The path-cache settings in use (`max_open` as capped by the budget).
    pub fn cache_config(&self) -> pathcache::Config {
        self.shared.cache.config()
    }

    /// Sets up the calling thread's I/O state now: on the io_uring backend,
    /// its ring and the driver task that delivers completions; nothing on the
    /// blocking backend. Call it once inside each worker thread's tokio
    /// runtime at start, so the first request pays no ring setup and a
    /// worker's kernel descriptors are all open from the beginning (they are
    /// otherwise created lazily, on the first I/O a thread does).
    pub fn attach_worker(&self) -> io::Result<()> {
        match &self.shared.backend {
            #[cfg(target_os = "linux")]
            Backend::Uring(uring) => uring.attach_thread(),
            _ => Ok(()),
        }
    }

    /// Drains deferred releases now (the reaper does this every tick).
    pub fn reap(&self) -> usize {
        self.shared.reap_now()
    }

    /// Whether a file about to be sent from its descriptor is the version
    /// its metadata describes: the watcher vouches for a cached descriptor
    /// (no change under the root since it was checked: one `FIONREAD`),
    /// else [`CachedFile::is_current`] (one `statx`, counted as a stat).
    /// Asked only of responses sent from a descriptor: a copy in memory
    /// needs neither, and asking every hit was one ioctl per request.
    pub(crate) fn check_current(&self, f: &CachedFile) -> bool {
        let vouched = |w: &Arc<watch::Watcher>| f.own.is_none() && w.holds(f.value().stamp());
        if self.shared.watcher.as_ref().is_some_and(vouched) {
            return true;
        }
        self.shared.backend.counters().op(backend::Op::Stat);
        f.is_current()
    }

    /// Drops the cached entry for `rel_path` (its descriptor is released when
    /// the last user finishes).
    pub fn invalidate(&self, rel_path: &str) -> bool {
        self.shared.cache.invalidate(cache_key(rel_path))
    }

    /// Counters of the table, the cache, the backend and this manager.
    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        let census = s.census.stats();
        Stats {
            backend: s.kind,
            fdtable: s.table.stats(),
            cache: s.cache.stats(),
            io: s.counters.snapshot(),
            open_fds: s.open_fds.load(Ordering::Relaxed) as u64,
            fd_budget: s.budget as u64,
            fd_limit: s.limit,
            emfile_recoveries: s.emfile_recoveries.load(Ordering::Relaxed),
            exhausted: s.exhausted.load(Ordering::Relaxed),
            reaper_batches: s.reaper_batches.load(Ordering::Relaxed),
            reaped: s.reaped.load(Ordering::Relaxed),
            batched_close_errors: s.batched_close_errors.load(Ordering::Relaxed),
            watch: s.watcher.as_ref().map(|w| w.stats()),
            root_switches: s.root_switches.load(Ordering::Relaxed),
            census_dirs: census.entries,
            census_scans: census.loads,
        }
    }

    /// Sets every counter and gauge through the `metrics` facade from
    /// [`FileManager::stats`]; call it when `/metrics` is scraped.
    pub fn export_metrics(&self, prefix: &str) {
        let st = self.stats();
        self.describe(prefix);
        let n = |s: &str| format!("{prefix}_{s}");
        let c = &st.cache;
        metrics::counter!(n("cache_hits_total")).absolute(c.hits);
        metrics::counter!(n("cache_misses_total")).absolute(c.misses);
        metrics::counter!(n("cache_negative_hits_total")).absolute(c.negative_hits);
        metrics::counter!(n("cache_evictions_total")).absolute(c.evictions);
        metrics::counter!(n("cache_revalidations_total")).absolute(c.revalidations);
        metrics::counter!(n("cache_invalidations_total")).absolute(c.invalidations);
        metrics::gauge!(n("cache_entries")).set(c.entries as f64);
        metrics::counter!(n("variant_hits_total")).absolute(c.variant_hits);
        metrics::counter!(n("variant_compressions_total")).absolute(c.variants_made);
        metrics::counter!(n("variant_bytes_saved_total")).absolute(c.variant_bytes_saved);
        metrics::counter!(n("variant_evictions_total")).absolute(c.variant_evictions);
        metrics::gauge!(n("variant_bytes")).set(c.variant_bytes as f64);
        metrics::gauge!(n("variant_budget_bytes")).set(c.variant_budget as f64);
        metrics::counter!(n("contention_total"), "component" => "fdtable")
            .absolute(st.fdtable.contention_events);
        metrics::counter!(n("contention_total"), "component" => "pathcache")
            .absolute(c.contention_events);
        metrics::gauge!(n("fds_open")).set(st.open_fds as f64);
        metrics::gauge!(n("fd_budget")).set(st.fd_budget as f64);
        metrics::gauge!(n("fd_limit")).set(st.fd_limit as f64);
        metrics::counter!(n("fd_allocations_total")).absolute(st.fdtable.allocations);
        metrics::counter!(n("fd_releases_total"), "path" => "close")
            .absolute(st.fdtable.sync_releases);
        metrics::counter!(n("fd_releases_total"), "path" => "deferred")
            .absolute(st.fdtable.deferred_releases);
        metrics::counter!(n("fd_release_errors_total"))
            .absolute(st.fdtable.release_errors + st.batched_close_errors);
        metrics::counter!(n("fd_stale_total")).absolute(st.fdtable.stale_rejections);
        metrics::gauge!(n("deferred_release_queue_depth"))
            .set(st.fdtable.deferred_queue_depth as f64);
        metrics::counter!(n("emfile_recoveries_total")).absolute(st.emfile_recoveries);
        metrics::counter!(n("fd_exhausted_total")).absolute(st.exhausted);
        for (label, v) in BackendStats::ops_labels().into_iter().zip(st.io.ops) {
            metrics::counter!(n("backend_ops_total"), "op" => label).absolute(v);
        }
        metrics::counter!(n("read_bytes_total")).absolute(st.io.read_bytes);
        metrics::counter!(n("reaper_batches_total")).absolute(st.reaper_batches);
        metrics::gauge!(n("io_backend_info"), "backend" => st.backend.to_string()).set(1.0);
        let w = st.watch.unwrap_or_default();
        metrics::gauge!(n("watch_dirs")).set(w.dirs as f64);
        metrics::counter!(n("watch_events_total")).absolute(w.events);
        metrics::counter!(n("watch_resets_total")).absolute(w.resets);
        metrics::counter!(n("root_switches_total")).absolute(st.root_switches);
        for (cause, count) in [
            ("path", w.paths_dropped),
            ("tree", w.trees_dropped),
            ("load_race", w.races),
        ] {
            metrics::counter!(n("watch_invalidations_total"), "cause" => cause).absolute(count);
        }
        metrics::gauge!(n("census_dirs")).set(st.census_dirs as f64);
        metrics::counter!(n("census_scans_total")).absolute(st.census_scans);
    }

    fn describe(&self, prefix: &str) {
        let mut d = self
            .shared
            .described
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if d.as_deref() == Some(prefix) {
            return;
        }
        *d = Some(prefix.to_string());
        let n = |s: &str| format!("{prefix}_{s}");
        use metrics::{describe_counter, describe_gauge, Unit};
        describe_counter!(
            n("cache_hits_total"),
            "Path cache lookups answered from a fresh entry."
        );
        describe_gauge!(
            n("watch_dirs"),
            "Directories watched for changes (0 when the watcher is off)."
        );
        describe_counter!(
            n("watch_events_total"),
            "Change events seen under the root; each makes cached descriptors checked again."
        );
        describe_counter!(
            n("watch_resets_total"),
            "Times every watch and every cache entry was dropped (an event queue overflow)."
        );
        describe_counter!(
            n("root_switches_total"),
            "Times the root path (a symlink, re-pointed) was followed to a new directory; every cached answer was dropped."
        );
        describe_counter!(
            n("watch_invalidations_total"),
            "Cache invalidations by change events, by cause: path (one file changed), tree (a directory or a link to one moved, created or deleted; an overflow), load_race (an entry dropped right after its load, which an event overtook)."
        );
        describe_gauge!(
            n("census_dirs"),
            "Directories whose precompressed siblings are known from a listing."
        );
        describe_counter!(
            n("census_scans_total"),
            "Directory listings taken to learn which precompressed siblings a directory holds."
        );
        describe_counter!(
            n("cache_misses_total"),
            "Path cache lookups that had to load from the filesystem."
        );
        describe_counter!(
            n("cache_negative_hits_total"),
            "Lookups answered from a cached not-found/forbidden entry."
        );
        describe_counter!(
            n("cache_evictions_total"),
            "Path cache entries evicted (capacity, fd budget or EMFILE)."
        );
        describe_counter!(
            n("cache_revalidations_total"),
            "Entries re-stat'ed after their validity period."
        );
        describe_counter!(
            n("cache_invalidations_total"),
            "Entries dropped because the file changed or on request."
        );
        describe_gauge!(n("cache_entries"), "Entries in the path cache.");
        describe_counter!(
            n("variant_hits_total"),
            "Responses sent from a compressed variant an earlier request made."
        );
        describe_counter!(
            n("variant_compressions_total"),
            "Compressed variants made (variant misses: one per file version and coding, shared by concurrent requests)."
        );
        describe_counter!(
            n("variant_bytes_saved_total"),
            Unit::Bytes,
            "File size minus variant size, summed over responses sent from a compressed variant."
        );
        describe_counter!(
            n("variant_evictions_total"),
            "Compressed variants dropped to stay within the variant budget."
        );
        describe_gauge!(
            n("variant_bytes"),
            Unit::Bytes,
            "Bytes of compressed variants counted in the variant budget (kept, or evicted and still being sent)."
        );
        describe_gauge!(
            n("variant_budget_bytes"),
            Unit::Bytes,
            "The variant budget: variant_bytes never exceeds it."
        );
        describe_counter!(
            n("contention_total"),
            "Lock waits or CAS retries, by component."
        );
        describe_gauge!(n("fds_open"), "File descriptors held by the file manager.");
        describe_gauge!(
            n("fd_budget"),
            "File descriptors the file manager may hold (RLIMIT_NOFILE less headroom)."
        );
        describe_gauge!(
            n("fd_limit"),
            "Soft RLIMIT_NOFILE after raising it to the hard limit."
        );
        describe_counter!(
            n("fd_allocations_total"),
            "Descriptor table slots allocated."
        );
        describe_counter!(
            n("fd_releases_total"),
            "Descriptors released, by path: close (synchronous) or deferred (drop, reaper)."
        );
        describe_counter!(
            n("fd_release_errors_total"),
            "close(2) errors seen while releasing descriptors."
        );
        describe_counter!(
            n("fd_stale_total"),
            "Operations refused because the descriptor was stale."
        );
        describe_gauge!(
            n("deferred_release_queue_depth"),
            "Dropped descriptors waiting for the reaper."
        );
        describe_counter!(
            n("emfile_recoveries_total"),
            "Opens that hit EMFILE/ENFILE or the budget and recovered by evicting and reaping."
        );
        describe_counter!(
            n("fd_exhausted_total"),
            "Opens refused because descriptors stayed exhausted after recovery."
        );
        describe_counter!(n("backend_ops_total"), "I/O backend operations by kind.");
        describe_counter!(
            n("read_bytes_total"),
            Unit::Bytes,
            "Bytes read from files by the backend."
        );
        describe_counter!(
            n("reaper_batches_total"),
            "Reaper passes that released at least one descriptor."
        );
        describe_gauge!(
            n("io_backend_info"),
            "The I/O backend that runs (label backend), always 1."
        );
    }
}
