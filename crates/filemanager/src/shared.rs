//! The manager's handle and the state it shares: [`FileManager`] is an
//! `Arc<Shared>`. Holds the types only: each module that serves a call
//! adds its methods to them (`open.rs`, `query.rs`, `reaper.rs`,
//! `root.rs`, ...), and `manager.rs` builds one. It uses only the modules
//! whose types its fields hold, so every one of those may use it.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crossbeam_utils::CachePadded;
use fdtable::{FdTable, Owned};
use pathcache::PathCache;

use crate::backend::{Backend, Counters};
use crate::census;
use crate::config::{BackendKind, SymlinkPolicy};
use crate::file::{FdCount, FileValue};
use crate::sys::OwnedFd;
use crate::watch;

/// Cheaply cloneable handle to the manager (an `Arc` inside); `Send + Sync`.
#[derive(Clone)]
pub struct FileManager {
    pub(crate) shared: Arc<Shared>,
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

/// What every clone of a [`FileManager`] shares.
pub(crate) struct Shared {
    // Field order is drop order: the cache releases its handles into the
    // table's deferred lists before the table itself goes.
    pub(crate) cache: PathCache<Owned<FileValue>>,
    pub(crate) table: Arc<FdTable<FileValue>>,
    pub(crate) backend: Backend,
    /// The root directory every open is confined beneath. Replaced when
    /// the root path is a symlink (or passes through one) and it is
    /// re-pointed: see [`Shared::follow_root`].
    pub(crate) root: RwLock<Arc<OwnedFd>>,
    pub(crate) root_path: PathBuf,
    /// Where the root path passes through symlinks: the directories
    /// holding them and their names (empty for a plain root path).
    pub(crate) root_links: Vec<(PathBuf, std::ffi::OsString)>,
    pub(crate) root_switches: AtomicU64,
    pub(crate) policy: SymlinkPolicy,
    /// The portable walk confines paths, not `openat2`.
    pub(crate) walk: bool,
    /// `Config::inline_cached_opens`.
    pub(crate) inline_cached_opens: bool,
    pub(crate) kind: BackendKind,
    pub(crate) why: String,
    // Both name io_uring fixed-file slots.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) id: u64,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) shards: usize,
    pub(crate) limit: u64,
    pub(crate) budget: usize,
    pub(crate) open_fds: FdCount,
    pub(crate) counters: Arc<Counters>,
    pub(crate) emfile_recoveries: CachePadded<AtomicU64>,
    pub(crate) exhausted: CachePadded<AtomicU64>,
    pub(crate) reaper_batches: AtomicU64,
    pub(crate) reaped: AtomicU64,
    pub(crate) described: Mutex<Option<String>>,
    pub(crate) reaper_stop: AtomicBool,
    #[cfg(target_os = "linux")]
    pub(crate) close_ring: Mutex<crate::backend::uring::CloseRing>,
    pub(crate) batched_close_errors: AtomicU64,
    /// Change notification (`Config::watch_changes`).
    pub(crate) watcher: Option<Arc<watch::Watcher>>,
    /// Compressions running at once (`compress.rs`), at most one per CPU.
    pub(crate) compress_slots: tokio::sync::Semaphore,
    /// Which precompressed siblings each recent directory holds.
    pub(crate) census: PathCache<census::Census>,
    /// The SHA-256 of each file version hashed (content entity-tags).
    pub(crate) digests: crate::digest::Digests,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.reaper_stop.store(true, Ordering::Release);
    }
}
