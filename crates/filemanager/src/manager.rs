//! Building a [`FileManager`]: choosing the backend, deriving the
//! descriptor budget, opening the root and starting the shared threads;
//! and the manager's remaining public calls (reads, listings, cache
//! settings, per-thread setup). Starts threads only in `new`.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use crossbeam_utils::CachePadded;
use fdtable::FdTable;
use pathcache::PathCache;

use crate::backend::{self, Backend, Counters, Target};
use crate::config::{BackendKind, Config, SymlinkPolicy};
use crate::file::FileValue;
use crate::handle::{CachedFile, ReadTarget};
use crate::listing::{ListOptions, Listing};
use crate::open::cache_key;
use crate::reaper::register_reaper;
use crate::root::links_on_the_way;
use crate::shared::{FileManager, Shared};
#[cfg(any(target_os = "linux", windows))]
use crate::sys::AsFd;
use crate::types::{ForbiddenReason, OpenError};
use crate::{census, limits, listing, resolve, watch};

static NEXT_MANAGER_ID: AtomicU64 = AtomicU64::new(1);

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
        let root = crate::sys::open_dir(&config.root).map_err(|e| {
            io::Error::new(
                e.kind(),
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
            digests: Default::default(),
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

    /// Where `file` really lies beneath the root, root-relative
    /// (`a/b.txt`), as the kernel names its open descriptor: not
    /// `file.path()` when a symlink led there. `None` where the system
    /// does not say (Linux's `/proc` does; other systems here do not) or
    /// the file is not beneath the root's current directory; `None` too
    /// under `SymlinkPolicy::Deny`, where no link is followed and the path
    /// is where the file is.
    ///
    /// Asked of the kernel once per cached descriptor (two `readlink`s of
    /// `/proc/self/fd`) and kept with it: a file changed, replaced or
    /// reached through a re-pointed link is a new cache entry.
    pub fn real_path<'f>(&self, file: &'f CachedFile) -> Option<&'f str> {
        if self.shared.policy == SymlinkPolicy::Deny {
            return None;
        }
        file.value().real_path(|| self.ask_real_path(file))
    }

    #[cfg(target_os = "linux")]
    fn ask_real_path(&self, file: &CachedFile) -> Option<String> {
        use std::os::fd::{AsRawFd, BorrowedFd};
        let link = |fd: BorrowedFd<'_>| {
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
        };
        let root = link(self.shared.root().as_fd())?;
        let real = link(file.as_fd())?;
        let rel = real.strip_prefix(&root).ok()?;
        rel.to_str().map(str::to_owned)
    }

    #[cfg(windows)]
    fn ask_real_path(&self, file: &CachedFile) -> Option<String> {
        crate::sys::windows::real_path(self.shared.root().as_fd(), file.as_fd())
    }

    #[cfg(not(any(target_os = "linux", windows)))]
    fn ask_real_path(&self, _file: &CachedFile) -> Option<String> {
        None
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
            fixed: file.file_value().map(FileValue::fixed),
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
            fixed: file.file_value().map(FileValue::fixed),
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
}
