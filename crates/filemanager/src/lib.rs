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
//!
//! The modules, each using only those on the lines above it (lib.rs
//! declares them and re-exports the public types, nothing more):
//!
//! ```text
//! config changes limits bufpool types  plain types and settings: no I/O
//! sys                                  the system: descriptors, open flags, stat, read_dir
//! resolve watch residency              confinement beneath the root; change events; page-cache residency
//! backend census listing               the I/O backends; a directory's census; listings
//! file                                 the descriptor table's value (fd, fixed slot, budget)
//! handle shared                        the public handles; FileManager and the state it shares
//! loader reaper root compress stats    the cache loaders, releases, the root, variants, metrics
//! open query                           the open paths; a request's resolve
//! manager                              building a FileManager; its remaining calls
//! ```
//!
//! From `loader` down, each module adds methods to [`FileManager`] or
//! its shared state; `manager.rs` builds one.
#![deny(missing_docs)]

mod backend;
mod bufpool;
mod census;
mod changes;
mod compress;
mod config;
mod content;
mod digest;
mod file;
mod handle;
pub mod limits;
mod listing;
mod loader;
mod manager;
mod open;
mod query;
mod reaper;
#[cfg(target_os = "linux")]
mod residency;
#[cfg(not(target_os = "linux"))]
#[path = "residency_none.rs"]
mod residency;
mod resolve;
mod root;
mod shared;
mod stats;
mod sys;
mod types;
#[cfg(target_os = "linux")]
mod watch;
#[cfg(not(target_os = "linux"))]
#[path = "watch_none.rs"]
mod watch;

pub use backend::BackendStats;
pub use changes::WatchStats;
pub use compress::{Codec, Variant};
pub use config::{BackendKind, Config, SymlinkPolicy};
pub use file::FileValue;
pub use handle::{CachedFile, FileHandle, Opened, ReadTarget};
pub use listing::{DirEntry, EntryKind, ListOptions, Listing};
pub use pathcache::FileMeta;
pub use query::{Query, Resolved, ResolvedFile};
pub use residency::{is_resident, is_resident_before_read, read_resident};
pub use shared::FileManager;
pub use stats::Stats;
pub use types::{ForbiddenReason, OpenError, Sibling};
/// The crates whose types appear in this one's API (`Config::cache`,
/// `Stats`), so a user needs no matching versions of them.
pub use {fdtable, pathcache};
