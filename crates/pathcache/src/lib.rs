//! `pathcache` owns the mapping from a normalized, root-relative path to what a
//! file server needs to answer a request for it: the file's metadata, a strong
//! ETag, the MIME type, optionally an open handle (`V`, e.g.
//! `fdtable::Owned<File>`), and optionally the bytes of a small file.
//!
//! It does no I/O of its own: a miss is loaded by the caller's [`Loader`]
//! (async, runtime-agnostic; concurrent misses on one path run one load and
//! share it), and a stale entry is re-checked with one [`Loader::stat`].
//!
//! # How a hit works, and why
//!
//! Two hit paths share everything but the reference:
//!
//! ```text
//!  get(path) -> EntryRef                    get_with(path, |Borrowed| ..) -> R
//!  -------------------------------------    -------------------------------------
//!  thread block (thread_local lookup)       thread block (thread_local lookup)
//!  coarse clock (vDSO)                      coarse clock (vDSO)
//!  papaya guard enter (own line)            papaya guard enter (own line)
//!  hash + probe + key compare               hash + probe + key compare
//!  refs[lane].fetch_add   (entry line 2/3)  slot.swap(entry)      (own line)
//!  state load, freshness  (entry line 0)    state load, freshness (entry line 0)
//!  hits += 1              (own line)        hits += 1             (own line)
//!  guard leave                              f(&entry); slot = 0; guard leave
//!  ... later: drop(EntryRef):
//!  refs[lane].fetch_sub, state load
//! ```
//!
//! * The map is [papaya](https://docs.rs/papaya) (lock-free reads; removed
//!   nodes are reclaimed by its `seize` collector only after every reader that
//!   could see them has left). A lookup pins the collector (thread-local
//!   writes only), hashes the path (foldhash), and compares the key.
//! * [`get`](PathCache::get) / [`get_or_load`](PathCache::get_or_load) return
//!   a counted [`EntryRef`] that may be held across awaits: one `fetch_add`
//!   on a reference counter picked by the calling thread out of
//!   [`REF_SHARDS`] lanes, each on its own cache line, apart from everything a
//!   lookup reads (the kernel's d_lockref lesson, seed 03; layout in
//!   [`entry`]). Two workers hitting one hot file write different lanes.
//!   Dropping the `EntryRef` is one `fetch_sub` on the same line plus one
//!   load of the entry state (read-shared).
//! * [`get_with`](PathCache::get_with) lends the entry to a closure instead
//!   (for a response written without awaiting): no refcount is touched; the
//!   thread publishes the entry in its own borrow slot, which payload
//!   releasers check (hazard-pointer style, see [`refcount`]). Its only writes
//!   are to the thread's own block and the collector's per-thread state.
//! * Freshness is checked against `CLOCK_MONOTONIC_COARSE` (a vDSO read).
//! * Hit/miss counters are per thread: each thread's counters and borrow slot
//!   share one padded block that only that thread writes, with a plain load
//!   and store (`Stats` sums all blocks, including those of exited threads).
//!   The previous layout (shards chosen by thread index modulo a shard count)
//!   needed a `lock xadd` per hit, because two threads could share a shard.
//!
//! Nothing else shared is written on a hit. The reference protocol (per-lane
//! counts summed only once the entry left the map, borrow slots,
//! `LIVE -> DYING -> FREED`) is in [`refcount`] and model-checked with loom
//! (`tests/loom.rs`); `tests/concurrency.rs` stresses borrows against
//! removals with handles that record their own release.
//!
//! Measured (criterion `--quick`, `benches/benches/pathcache.rs`, 2-core
//! shared VM, 30 Nov 05:38-06:06 UTC; everything's speed flips between two
//! levels about 1.6x apart from one second to the next there, so only ratios
//! taken close together mean much; ranges are over runs):
//!
//! | figure (1000 cached paths, 1 thread) | vs dashmap get+clone |
//! |---|---|
//! | `pathcache_hit/pathcache` (counted `get`), 13 runs, wall | 0.72-0.90x (median 0.80x) |
//! | same, thread CPU time (`pathcache_hit_cpu`) | 0.58-1.24x (median 0.84x) |
//! | `pathcache_hit/pathcache_borrow` (`get_with`), wall | 1.01-1.29x (median 1.11x) |
//! | same, CPU time | 0.91-1.30x (median 1.08x) |
//! | `quick_cache` (for scale), wall | 1.41-1.60x |
//! | interleaved batches (`PATHCACHE_INTERLEAVED=300`, 7 runs): counted / borrow / quick_cache | 0.98-1.14x / 1.03-1.26x / 1.56-1.65x |
//!
//! `kernel_open_close` (open+close on tmpfs) is 38-62x slower than a counted
//! hit and 51-84x slower than a borrow. One key from two threads (5 runs
//! with the machine otherwise idle, wall clock): counted hits scale
//! 1.74-2.00x over one thread (dashmap: 0.20-0.56x), borrows 2.15-2.55x, and
//! the padded layout is 1.59-2.36x faster than `pathcache_unpadded`
//! (CPU-time group: 1.91-2.03x, 2.32-2.46x, 1.45-2.41x). With other jobs on
//! the cores the wall-clock ratios fall to about 1.0x, because the two
//! threads no longer run at once.
//!
//! What this session's changes bought, interleaved in one process against
//! the code before them: counted hits 0.76x -> 0.85x dashmap (per-thread
//! statistics: no `lock xadd` on a shared shard; paths up to 46 bytes stored
//! inline in papaya's node (`key.rs`): one fewer dependent
//! miss), and `get_with` on top. The 2x-dashmap target is missed: per hit
//! the papaya guard (enter + an `xchg` on leave, ~6 ns), the coarse clock
//! (vDSO, ~6.5 ns), hashing (~4.5 ns) and the probe's two dependent misses
//! (table slot, node) remain, and a counted hit adds two `lock` RMWs on the
//! entry's lane. Levers not taken: a caller-supplied clock or a ticking
//! cached clock, a guard held across a batch of lookups, and publishing a
//! borrow with a plain store plus `membarrier` on the (cold) claim side.
//!
//! # Lifecycle
//!
//! * Misses and stale entries go through one leader per path (single flight);
//!   other callers wait on an `event_listener` event and share the result. A
//!   cancelled or failed leader hands over to a waiter.
//! * An entry older than [`Config::valid`] is re-checked with one
//!   [`Loader::stat`]; a change of (dev, ino, size, mtime, ctime) loads a new
//!   entry that replaces the old one, whose users keep it until they drop it.
//! * Removing an entry from the map (replacement, [`PathCache::invalidate`],
//!   eviction) releases its payload (drops `V`, frees small-file bytes) at once
//!   when it has no users, else when the last [`EntryRef`] drops.
//! * Bounds: `max_entries` and `max_open` are reserved before an insert or an
//!   open; a full budget runs a CLOCK scan (second chance via a referenced bit
//!   that a hit sets only when clear) that takes only entries without users.
//!   If everything is in use, a load is served uncached (entries) or without a
//!   handle (handles) rather than exceeding the bound.
//! * Small files: the copy is cached only if the loader's `meta` (taken before
//!   the read) equals a `stat` taken after it and the length matches; else the
//!   read is retried (3 times) and finally cached without bytes. Like any
//!   stat-based check, an in-place rewrite that keeps size and mtime (same
//!   timestamp tick) is not detectable.
//!
//! ```
//! use pathcache::{Borrowed, Config, FileMeta, Loaded, Loader, Lookup, PathCache};
//! use std::convert::Infallible;
//!
//! struct Disk; // a stand-in loader: every path is a 5-byte file
//! impl Loader<u32> for Disk {
//!     type Error = Infallible;
//!     async fn load(&self, _path: &str, open: bool, _small: Option<u64>) -> Result<Loaded<u32>, Infallible> {
//!         let meta = FileMeta { size: 5, mtime_ns: 1, ctime_ns: 1, dev: 1, ino: 42 };
//!         Ok(Loaded::File { meta, mime: "text/plain", handle: open.then_some(7), bytes: None })
//!     }
//!     async fn stat(&self, _path: &str) -> Result<Option<FileMeta>, Infallible> {
//!         Ok(Some(FileMeta { size: 5, mtime_ns: 1, ctime_ns: 1, dev: 1, ino: 42 }))
//!     }
//! }
//!
//! let cache: PathCache<u32> = PathCache::new(Config::default());
//! let first = block_on(cache.get_or_load("index.html", &Disk)).unwrap();
//! let Lookup::Hit(entry) = first else { panic!("a file") };
//! assert_eq!(entry.handle(), Some(&7));
//! assert!(entry.etag().starts_with('"'));
//! // The second lookup is a hit that takes no lock.
//! assert!(matches!(cache.get("index.html"), Some(Lookup::Hit(_))));
//! assert_eq!(cache.stats().hits, 1);
//! // A response written without awaiting can borrow the entry instead:
//! // no reference count is touched.
//! let size = cache.get_with("index.html", |b| match b {
//!     Borrowed::Hit(e) => e.meta().size,
//!     Borrowed::Negative(_) => 0,
//! });
//! assert_eq!(size, Some(5));
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```
#![deny(missing_docs)]

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

mod clock;
pub mod entry;
mod flight;
mod hazard;
mod key;
pub mod refcount;
mod stats;
mod sync;

pub use entry::{Entry, EntryRef, Padded, RefLayout, Unpadded};
#[doc(hidden)]
pub use entry::{EntryBorrow, MapRef};
pub use refcount::REF_SHARDS;
pub use stats::Stats;

use entry::{Accounting, NewEntry, Upgrade};
use flight::{Flights, Role};
use key::PathKey;
use stats::{add, bump, ThreadCounters};

/// Sizes and times of a [`PathCache`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Shards of the in-flight load registry (statistics are per thread);
    /// default: available parallelism.
    pub shards: usize,
    /// Maximum entries in the map (positive and negative). Exact, except that an
    /// insert racing a removal of the same key may exceed it by one until the
    /// next insert evicts.
    pub max_entries: usize,
    /// Maximum handles held by entries (including removed entries in use).
    pub max_open: usize,
    /// How long an entry is trusted before one `stat` re-checks it (default 1 s).
    pub valid: Duration,
    /// How long a not-found / forbidden result is cached (default 1 s).
    pub negative_ttl: Duration,
    /// Files up to this size are kept in memory (0 disables).
    pub small_file_max: u64,
    /// Total bytes of small files kept in memory.
    pub small_bytes_budget: u64,
    /// A path gets an open handle on its `min_uses`-th use (0 or 1: at once);
    /// before that only its metadata is cached.
    pub min_uses: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            shards: std::thread::available_parallelism().map_or(4, |n| n.get()),
            max_entries: 65_536,
            max_open: 4_096,
            valid: Duration::from_secs(1),
            negative_ttl: Duration::from_secs(1),
            small_file_max: 16 * 1024,
            small_bytes_budget: 64 * 1024 * 1024,
            min_uses: 1,
        }
    }
}

/// What the cache needs to know about a file's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileMeta {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
    /// Device of the inode.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// Why a path has no file to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Negative {
    /// The path does not exist.
    NotFound,
    /// The path exists but may not be served.
    Forbidden,
}

/// The result of a [`Loader::load`].
#[derive(Debug)]
pub enum Loaded<V> {
    /// A servable file.
    File {
        /// Metadata taken BEFORE reading `bytes` (e.g. `fstat` on the opened
        /// handle); the cache stats again after the read to detect a torn copy.
        meta: FileMeta,
        /// MIME type.
        mime: &'static str,
        /// The open handle, when `open` was true (or `None` if the loader
        /// could not or would not open it).
        handle: Option<V>,
        /// The whole file when `read_small` allowed it and the file fit.
        bytes: Option<Vec<u8>>,
    },
    /// Not servable; cached for `negative_ttl`.
    Negative(Negative),
}

/// The caller's I/O: how to load a path and how to stat it again.
///
/// `open == false` means metadata only (the `min_uses` phase, or the
/// open-handle budget is full): the loader must not return a handle then (one
/// returned anyway is dropped). `read_small == Some(max)`: return the file's
/// bytes if its size is at most `max`.
pub trait Loader<V> {
    /// The loader's error, passed through to the caller (never cached).
    type Error;
    /// Opens (if `open`) and stats `path`, optionally reading a small file.
    fn load(
        &self,
        path: &str,
        open: bool,
        read_small: Option<u64>,
    ) -> impl Future<Output = Result<Loaded<V>, Self::Error>>;
    /// Stats `path` again; `Ok(None)` when it no longer exists.
    fn stat(&self, path: &str) -> impl Future<Output = Result<Option<FileMeta>, Self::Error>>;
    /// Reads the metadata again right after `load` returned a file's bytes,
    /// so the cache can tell whether the copy is one version of the file
    /// (the same metadata before and after the read). `handle` is what
    /// `load` returned with the bytes, if anything.
    ///
    /// The default stats `path` again. A loader that returned a handle can
    /// answer from it instead (an `fstat`: no path walk, no extra open): an
    /// in-place write changes the handle's metadata all the same, and a
    /// rename over the path leaves the copy a consistent old version, which
    /// revalidation replaces like any other outdated entry.
    fn recheck(
        &self,
        path: &str,
        handle: Option<&V>,
    ) -> impl Future<Output = Result<Option<FileMeta>, Self::Error>> {
        let _ = handle;
        self.stat(path)
    }
}

/// The answer of a lookup.
pub enum Lookup<V, L: RefLayout = Padded> {
    /// A cached file (hold it as long as the response needs it).
    Hit(EntryRef<V, L>),
    /// A cached negative answer.
    Negative(Negative),
}

impl<V, L: RefLayout> Clone for Lookup<V, L> {
    fn clone(&self) -> Self {
        match self {
            Lookup::Hit(e) => Lookup::Hit(e.clone()),
            Lookup::Negative(n) => Lookup::Negative(*n),
        }
    }
}

impl<V, L: RefLayout> fmt::Debug for Lookup<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lookup::Hit(e) => f.debug_tuple("Hit").field(e).finish(),
            Lookup::Negative(n) => f.debug_tuple("Negative").field(n).finish(),
        }
    }
}

/// What [`PathCache::get_with`] lends its closure.
pub enum Borrowed<'a, V, L: RefLayout = Padded> {
    /// A cached file, readable for the duration of the closure.
    Hit(&'a Entry<V, L>),
    /// A cached negative answer.
    Negative(Negative),
}

impl<V, L: RefLayout> fmt::Debug for Borrowed<'_, V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Borrowed::Hit(e) => f.debug_tuple("Hit").field(e).finish(),
            Borrowed::Negative(n) => f.debug_tuple("Negative").field(n).finish(),
        }
    }
}

/// A map value: a file entry or a negative answer with its deadline.
enum Slot<V, L: RefLayout> {
    File(MapRef<V, L>),
    Negative { kind: Negative, expires_ms: u64 },
}

impl<V, L: RefLayout> Slot<V, L> {
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Slot::File(a), Slot::File(b)) => a.same(b),
            (Slot::Negative { .. }, Slot::Negative { .. }) => std::ptr::eq(self, other),
            _ => false,
        }
    }
    /// Called on every slot that leaves the map through us.
    fn on_removed(&self) {
        if let Slot::File(m) = self {
            m.kill();
        }
    }
}

/// The outcome of probing the map, before counting.
enum Probe<V, L: RefLayout> {
    Fresh(EntryRef<V, L>),
    Stale(EntryRef<V, L>),
    Negative(Negative),
    Absent,
}

type Map<V, L> = papaya::HashMap<PathKey, Slot<V, L>, foldhash::fast::RandomState>;

/// The settings [`PathCache::set_limits`] can change while the cache runs,
/// each in its own atomic (read with `Relaxed` loads: a reader may act on
/// the old or the new value of one setting for a moment, never on a torn
/// one). `shards` is fixed at construction.
#[derive(Debug)]
struct Limits {
    max_entries: AtomicUsize,
    max_open: AtomicUsize,
    valid_ms: AtomicU64,
    negative_ttl_ms: AtomicU64,
    small_file_max: AtomicU64,
    small_bytes_budget: AtomicU64,
    min_uses: AtomicU32,
}

impl Limits {
    fn new(config: &Config) -> Self {
        let limits = Limits {
            max_entries: AtomicUsize::new(0),
            max_open: AtomicUsize::new(0),
            valid_ms: AtomicU64::new(0),
            negative_ttl_ms: AtomicU64::new(0),
            small_file_max: AtomicU64::new(0),
            small_bytes_budget: AtomicU64::new(0),
            min_uses: AtomicU32::new(0),
        };
        limits.store(config);
        limits
    }

    fn store(&self, config: &Config) {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.max_entries
            .store(config.max_entries, Ordering::Relaxed);
        self.max_open.store(config.max_open, Ordering::Relaxed);
        self.valid_ms.store(millis(config.valid), Ordering::Relaxed);
        self.negative_ttl_ms
            .store(millis(config.negative_ttl), Ordering::Relaxed);
        self.small_file_max
            .store(config.small_file_max, Ordering::Relaxed);
        self.small_bytes_budget
            .store(config.small_bytes_budget, Ordering::Relaxed);
        self.min_uses.store(config.min_uses, Ordering::Relaxed);
    }

    fn max_entries(&self) -> usize {
        self.max_entries.load(Ordering::Relaxed)
    }

    fn max_open(&self) -> usize {
        self.max_open.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn valid_ms(&self) -> u64 {
        self.valid_ms.load(Ordering::Relaxed)
    }

    fn negative_ttl_ms(&self) -> u64 {
        self.negative_ttl_ms.load(Ordering::Relaxed)
    }

    fn small_file_max(&self) -> u64 {
        self.small_file_max.load(Ordering::Relaxed)
    }

    fn small_bytes_budget(&self) -> u64 {
        self.small_bytes_budget.load(Ordering::Relaxed)
    }

    fn min_uses(&self) -> u32 {
        self.min_uses.load(Ordering::Relaxed)
    }
}

/// The concurrent path cache. `Send + Sync`; share it by reference or `Arc`.
pub struct PathCache<V, L: RefLayout = Padded> {
    map: Map<V, L>,
    shards: usize,
    limits: Limits,
    acct: Arc<Accounting>,
    /// Map entries (strict: reserved before insertion).
    entries: AtomicUsize,
    flights: Flights<Lookup<V, L>>,
    /// Serializes eviction scans and holds the CLOCK hand.
    evictor: Mutex<usize>,
}

impl<V, L: RefLayout> fmt::Debug for PathCache<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathCache")
            .field("limits", &self.limits)
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

/// What an eviction scan may take.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EvictFor {
    /// Any unused entry (negative entries first are free to go).
    Entries,
    /// Only unused entries that hold a handle.
    Handles,
}

/// How many extra entries an eviction scan frees beyond the one needed, so the
/// O(n) scan is amortized over many inserts.
const EVICT_BATCH_DIVISOR: usize = 32;

/// Torn small-file reads retried before caching without the bytes.
const TORN_READ_RETRIES: u32 = 3;

/// Uses of a budget-denied metadata entry between attempts to get a handle.
const DENIED_RETRY_PERIOD: u32 = 64;

impl<V: Send + Sync + 'static, L: RefLayout> PathCache<V, L> {
    /// An empty cache.
    pub fn new(config: Config) -> Self {
        let map = papaya::HashMap::builder()
            .hasher(foldhash::fast::RandomState::default())
            // Start small and let papaya grow: a table pre-sized for the
            // bound spreads a few hot entries over cold lines (measured: 1000
            // entries in a 65536-slot table made hits ~2x slower than dashmap).
            .capacity(config.max_entries.min(1024))
            .build();
        PathCache {
            map,
            shards: config.shards,
            limits: Limits::new(&config),
            acct: Arc::new(Accounting::default()),
            entries: AtomicUsize::new(0),
            flights: Flights::new(config.shards * 4),
            evictor: Mutex::new(0),
        }
    }

    /// The per-thread statistics counters.
    #[inline]
    fn counters(&self) -> &ThreadCounters {
        &self.acct.hazards.threads
    }

    /// The configuration in use (a snapshot: [`set_limits`](Self::set_limits)
    /// may change it).
    pub fn config(&self) -> Config {
        let l = &self.limits;
        Config {
            shards: self.shards,
            max_entries: l.max_entries(),
            max_open: l.max_open(),
            valid: Duration::from_millis(l.valid_ms()),
            negative_ttl: Duration::from_millis(l.negative_ttl_ms()),
            small_file_max: l.small_file_max(),
            small_bytes_budget: l.small_bytes_budget(),
            min_uses: l.min_uses(),
        }
    }

    /// Changes the bounds and times while the cache runs (a config reload);
    /// `config.shards` is ignored (fixed at construction).
    ///
    /// New values apply to the next lookup or load. Lowering `max_entries` or
    /// `max_open` evicts unused entries down to the new bound now (entries in
    /// use leave as their users drop them, at later inserts); lowering
    /// `small_bytes_budget` stops new copies until evictions bring the bytes
    /// under it. A shorter `valid` makes older entries revalidate at their
    /// next hit. Returns the entries evicted now.
    pub fn set_limits(&self, config: &Config) -> usize {
        self.limits.store(config);
        let mut evicted = 0;
        let entries = self.entries.load(Ordering::Relaxed);
        if entries > config.max_entries {
            evicted += self.evict(EvictFor::Entries, entries - config.max_entries);
        }
        let handles = self.acct.open_handles.load(Ordering::Relaxed);
        if handles > config.max_open {
            evicted += self.evict(EvictFor::Handles, handles - config.max_open);
        }
        evicted
    }

    /// Looks `path` up without counting.
    #[inline]
    fn probe(&self, path: &str, now_ms: u64) -> Probe<V, L> {
        let guard = self.map.guard();
        match self.map.get(path, &guard) {
            None => Probe::Absent,
            Some(Slot::Negative { kind, expires_ms }) => {
                if now_ms < *expires_ms {
                    Probe::Negative(*kind)
                } else {
                    Probe::Absent
                }
            }
            Some(Slot::File(m)) => {
                let Some(entry) = m.try_acquire() else {
                    // Lost a race with a removal: the entry is on its way out.
                    bump(&self.counters().local().contention_events);
                    return Probe::Absent;
                };
                entry.touch();
                if now_ms.wrapping_sub(entry.validated_ms()) < self.limits.valid_ms() {
                    Probe::Fresh(entry)
                } else {
                    Probe::Stale(entry)
                }
            }
        }
    }

    /// The cached answer for `path` if it is fresh; never loads. A miss or a
    /// stale entry returns `None` (counted as a miss).
    #[inline]
    pub fn get(&self, path: &str) -> Option<Lookup<V, L>> {
        let counters = self.counters().local();
        match self.probe(path, clock::now_ms()) {
            Probe::Fresh(entry) => {
                bump(&counters.hits);
                Some(Lookup::Hit(entry))
            }
            Probe::Negative(kind) => {
                bump(&counters.negative_hits);
                Some(Lookup::Negative(kind))
            }
            Probe::Stale(_) | Probe::Absent => {
                bump(&counters.misses);
                None
            }
        }
    }

    /// Like [`get`](Self::get), but lends the fresh cached answer to `f`
    /// instead of returning a counted [`EntryRef`]: no reference count is
    /// touched, so a hit writes only the calling thread's own lines. For a
    /// response that is written without awaiting (headers plus a small body
    /// from [`Entry::bytes`], or a synchronous `sendfile` from the handle).
    /// Returns `None` on a miss or a stale entry (counted as a miss).
    ///
    /// The entry's payload (handle, bytes) is not released while `f` runs,
    /// even if the entry is removed meanwhile: the release then waits until
    /// the map has reclaimed the entry's node (after `f` and every other
    /// reader that could see it are done). `f` should be short: it runs
    /// inside the map's read-side critical section, which holds back the
    /// reclamation of everything removed meanwhile. A `get_with` nested in
    /// another on the same thread takes a counted reference instead.
    #[inline]
    pub fn get_with<R>(&self, path: &str, f: impl FnOnce(Borrowed<'_, V, L>) -> R) -> Option<R> {
        let hazards = &self.acct.hazards;
        let (counters, slot) = hazards.local();
        if slot.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            return self.get_with_nested(path, f);
        }
        let now_ms = clock::now_ms();
        let guard = self.map.guard();
        match self.map.get(path, &guard) {
            Some(Slot::File(m)) => match m.try_borrow(hazards, slot) {
                Some(entry)
                    if now_ms.wrapping_sub(entry.validated_ms()) < self.limits.valid_ms() =>
                {
                    entry.touch();
                    bump(&counters.hits);
                    Some(f(Borrowed::Hit(&entry)))
                }
                Some(_stale) => {
                    bump(&counters.misses);
                    None
                }
                None => {
                    bump(&counters.contention_events);
                    bump(&counters.misses);
                    None
                }
            },
            Some(Slot::Negative { kind, expires_ms }) if now_ms < *expires_ms => {
                bump(&counters.negative_hits);
                Some(f(Borrowed::Negative(*kind)))
            }
            _ => {
                bump(&counters.misses);
                None
            }
        }
    }

    /// `get_with` while this thread's borrow slot is taken by an outer one.
    #[cold]
    fn get_with_nested<R>(&self, path: &str, f: impl FnOnce(Borrowed<'_, V, L>) -> R) -> Option<R> {
        Some(match self.get(path)? {
            Lookup::Hit(entry) => f(Borrowed::Hit(&entry)),
            Lookup::Negative(kind) => f(Borrowed::Negative(kind)),
        })
    }

    /// The answer for `path`: from the cache when fresh, else loaded (or
    /// revalidated) through `loader`. Concurrent callers missing on one path
    /// share one load. Loader errors are returned and not cached.
    ///
    /// Cancel-safe: dropping the future releases any reserved handle budget
    /// and, if it was the leader, wakes the waiters (one of them loads).
    /// Needs no particular runtime; the future is `Send` when the loader's
    /// futures are.
    pub async fn get_or_load<Ld: Loader<V>>(
        &self,
        path: &str,
        loader: &Ld,
    ) -> Result<Lookup<V, L>, Ld::Error> {
        let upgrade_from = match self.probe(path, clock::now_ms()) {
            Probe::Fresh(entry) => {
                if !self.wants_upgrade(&entry) {
                    bump(&self.counters().local().hits);
                    return Ok(Lookup::Hit(entry));
                }
                Some(entry)
            }
            Probe::Negative(kind) => {
                bump(&self.counters().local().negative_hits);
                return Ok(Lookup::Negative(kind));
            }
            Probe::Stale(_) | Probe::Absent => None,
        };
        let (lookup, hit) = match self.load_slow(path, loader, upgrade_from).await {
            Ok(done) => done,
            Err(e) => {
                bump(&self.counters().local().misses);
                return Err(e);
            }
        };
        let counters = self.counters().local();
        match (&lookup, hit) {
            (Lookup::Negative(_), true) => bump(&counters.negative_hits),
            (_, true) => bump(&counters.hits),
            (_, false) => bump(&counters.misses),
        }
        Ok(lookup)
    }

    /// Counts a use of a metadata-only entry; true when it is time to load
    /// it again with a handle.
    fn wants_upgrade(&self, entry: &Entry<V, L>) -> bool {
        let period = match entry.upgrade() {
            Upgrade::No => return false,
            Upgrade::MinUses => self.limits.min_uses().max(1),
            Upgrade::Denied => DENIED_RETRY_PERIOD,
        };
        entry.count_use() % period == 0
    }

    /// Single-flight slow path. Returns the lookup and whether it counts as a hit.
    async fn load_slow<Ld: Loader<V>>(
        &self,
        path: &str,
        loader: &Ld,
        mut upgrade_from: Option<EntryRef<V, L>>,
    ) -> Result<(Lookup<V, L>, bool), Ld::Error> {
        loop {
            let token = match self
                .flights
                .join(path, &self.counters().local().contention_events)
            {
                Role::Wait(flight) => {
                    bump(&self.counters().local().contention_events);
                    match flight.wait().await {
                        Some(lookup) => return Ok((lookup, false)),
                        // The leader failed or was cancelled: try again (maybe as leader).
                        None => continue,
                    }
                }
                Role::Lead(token) => token,
            };
            // Re-probe: a previous leader may have finished between our probe
            // and our registration.
            let stale = match self.probe(path, clock::now_ms()) {
                Probe::Fresh(entry) => {
                    let same = upgrade_from
                        .as_ref()
                        .is_some_and(|u| EntryRef::ptr_eq(u, &entry));
                    if !same {
                        let lookup = Lookup::Hit(entry);
                        token.finish(Some(lookup.clone()));
                        return Ok((lookup, true));
                    }
                    None
                }
                Probe::Negative(kind) => {
                    token.finish(Some(Lookup::Negative(kind)));
                    return Ok((Lookup::Negative(kind), true));
                }
                Probe::Stale(entry) => Some(entry),
                Probe::Absent => None,
            };
            let upgrading = upgrade_from.take().is_some() && stale.is_none();
            // On error the token's drop releases the waiters (they retry).
            let result = self.lead(path, loader, stale, upgrading).await?;
            token.finish(Some(result.0.clone()));
            return Ok(result);
        }
    }

    /// The leader's work: revalidate a stale entry or load a fresh one.
    async fn lead<Ld: Loader<V>>(
        &self,
        path: &str,
        loader: &Ld,
        stale: Option<EntryRef<V, L>>,
        upgrading: bool,
    ) -> Result<(Lookup<V, L>, bool), Ld::Error> {
        let mut open = upgrading || self.limits.min_uses() <= 1;
        if let Some(entry) = stale {
            bump(&self.counters().local().revalidations);
            let checked_at = clock::now_ms();
            if loader.stat(path).await? == Some(*entry.meta()) {
                entry.mark_validated(checked_at);
                return Ok((Lookup::Hit(entry), true));
            }
            // Changed: load a new version. A file that had a handle keeps
            // getting one (it earned it with its uses).
            open |= entry.has_handle();
        }
        self.load_and_insert(path, loader, open)
            .await
            .map(|l| (l, false))
    }

    /// Loads `path` (retrying torn small-file reads) and inserts the result.
    async fn load_and_insert<Ld: Loader<V>>(
        &self,
        path: &str,
        loader: &Ld,
        open_wanted: bool,
    ) -> Result<Lookup<V, L>, Ld::Error> {
        let started_ms = clock::now_ms();
        let open = open_wanted && self.reserve_handle();
        let mut reservation = HandleReservation {
            acct: &self.acct,
            held: open,
        };
        let small_file_max = self.limits.small_file_max();
        let read_small = (small_file_max > 0
            && self.acct.small_bytes.load(Ordering::Relaxed) < self.limits.small_bytes_budget())
        .then_some(small_file_max);
        let mut attempt = 0;
        loop {
            bump(&self.counters().local().loads);
            let (meta, mime, handle, mut bytes) = match loader.load(path, open, read_small).await? {
                Loaded::Negative(kind) => {
                    self.insert_negative(path, kind, started_ms);
                    return Ok(Lookup::Negative(kind));
                }
                Loaded::File {
                    meta,
                    mime,
                    handle,
                    bytes,
                } => (meta, mime, handle, bytes),
            };
            if let Some(b) = &bytes {
                // A copy is trusted only if the file had the same version
                // before (meta) and after (this stat) the read, and the copy
                // has the size that version says.
                let consistent = b.len() as u64 == meta.size
                    && loader.recheck(path, handle.as_ref()).await? == Some(meta);
                if !consistent {
                    bump(&self.counters().local().torn_reads);
                    if attempt < TORN_READ_RETRIES {
                        attempt += 1;
                        drop(handle);
                        continue;
                    }
                    bytes = None;
                }
            }
            let bytes = bytes.and_then(|b| self.reserve_bytes(b));
            let handle = if reservation.held { handle } else { None };
            let upgrade = if handle.is_some() || bytes.is_some() {
                Upgrade::No
            } else if open_wanted && !open {
                Upgrade::Denied
            } else if !open_wanted {
                Upgrade::MinUses
            } else {
                Upgrade::No
            };
            // The reservation is consumed by the entry if it got a handle.
            reservation.held &= handle.is_none();
            let new = NewEntry {
                path: path.into(),
                meta,
                mime,
                handle,
                bytes,
                validated_ms: started_ms,
                upgrade,
                acct: self.acct.clone(),
            };
            return Ok(Lookup::Hit(self.insert_file(path, new)));
        }
    }

    fn reserve_bytes(&self, bytes: Vec<u8>) -> Option<Box<[u8]>> {
        let len = bytes.len() as u64;
        let before = self.acct.small_bytes.fetch_add(len, Ordering::Relaxed);
        if before + len > self.limits.small_bytes_budget() {
            self.acct.small_bytes.fetch_sub(len, Ordering::Relaxed);
            return None;
        }
        Some(bytes.into_boxed_slice())
    }

    /// Takes one unit of the open-handle budget, evicting unused handle
    /// holders if the budget is full.
    fn reserve_handle(&self) -> bool {
        for round in 0..2 {
            let mut n = self.acct.open_handles.load(Ordering::Relaxed);
            let max_open = self.limits.max_open();
            while n < max_open {
                match self.acct.open_handles.compare_exchange_weak(
                    n,
                    n + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => {
                        bump(&self.counters().local().contention_events);
                        n = now;
                    }
                }
            }
            if round == 0 && self.evict(EvictFor::Handles, 1 + max_open / EVICT_BATCH_DIVISOR) == 0
            {
                return false;
            }
        }
        false
    }

    /// Takes one map slot, evicting unused entries if the map is full.
    fn reserve_entry(&self) -> bool {
        self.try_reserve_entry()
            || (self.evict(
                EvictFor::Entries,
                1 + self.limits.max_entries() / EVICT_BATCH_DIVISOR,
            ) > 0
                && self.try_reserve_entry())
    }

    /// Takes one map slot if the map is below `max_entries`.
    fn try_reserve_entry(&self) -> bool {
        let mut n = self.entries.load(Ordering::Relaxed);
        let max_entries = self.limits.max_entries();
        while n < max_entries {
            match self
                .entries
                .compare_exchange_weak(n, n + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => {
                    bump(&self.counters().local().contention_events);
                    n = now;
                }
            }
        }
        false
    }

    fn insert_file(&self, path: &str, new: NewEntry<V>) -> EntryRef<V, L> {
        let (map_ref, entry) = MapRef::new(new);
        // If the map is full of entries in use, the slot is dropped unmapped:
        // the caller's reference is then the only one and releases it.
        self.insert_slot(path, Slot::File(map_ref));
        entry
    }

    fn insert_negative(&self, path: &str, kind: Negative, now_ms: u64) {
        let ttl_ms = self.limits.negative_ttl_ms();
        if ttl_ms == 0 {
            return;
        }
        self.insert_slot(
            path,
            Slot::Negative {
                kind,
                expires_ms: now_ms + ttl_ms,
            },
        );
    }

    /// Inserts `slot`, taking a map slot (and evicting for it) only when the
    /// key is new. Returns false when the map is full of entries in use; the
    /// slot is then dropped (a file entry lives on in its users only).
    fn insert_slot(&self, path: &str, slot: Slot<V, L>) -> bool {
        let guard = self.map.guard();
        let present = self.map.contains_key(path, &guard);
        if !present && !self.reserve_entry() {
            return false;
        }
        match self.map.insert(PathKey::new(path), slot, &guard) {
            Some(old) => {
                old.on_removed();
                if !present {
                    // Someone inserted the key meanwhile: our reservation is spare.
                    self.entries.fetch_sub(1, Ordering::Relaxed);
                }
            }
            None if present => {
                // The key was removed between the check and the insert, so
                // this insert holds a slot after all. Count it without
                // evicting: the bound may be exceeded by one per inserter
                // racing a removal of its own key, and the next
                // reservation evicts it back.
                self.entries.fetch_add(1, Ordering::Relaxed);
            }
            None => {}
        }
        true
    }

    /// Drops the entry for `path` now (e.g. on an inotify event). Current
    /// users keep their `EntryRef`s; the handle is released after the last.
    pub fn invalidate(&self, path: &str) -> bool {
        let guard = self.map.guard();
        match self.map.remove(path, &guard) {
            Some(old) => {
                old.on_removed();
                self.entries.fetch_sub(1, Ordering::Relaxed);
                bump(&self.counters().local().invalidations);
                true
            }
            None => false,
        }
    }

    /// Drops up to `n` entries that hold a handle and have no users, releasing
    /// their handles now (EMFILE recovery). Returns how many were dropped.
    pub fn evict_unused(&self, n: usize) -> usize {
        self.evict(EvictFor::Handles, n)
    }

    /// CLOCK eviction: walks the map from the hand; an entry whose referenced
    /// bit is set gets a second chance (bit cleared) on the first lap; entries
    /// in use are never taken. At most two laps.
    fn evict(&self, what: EvictFor, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let mut hand = match self.evictor.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                bump(&self.counters().local().contention_events);
                self.evictor.lock().unwrap_or_else(|p| p.into_inner())
            }
        };
        let guard = self.map.guard();
        let now_ms = clock::now_ms();
        let mut evicted = 0;
        let mut visited = 0usize;
        let start = *hand;
        'laps: for lap in 0..2 {
            let tail = self.map.iter(&guard).skip(start);
            let head = self.map.iter(&guard).take(start);
            for (key, slot) in tail.chain(head) {
                visited += 1;
                let take = match slot {
                    Slot::Negative { expires_ms, .. } => {
                        what == EvictFor::Entries && (lap == 1 || *expires_ms <= now_ms)
                    }
                    Slot::File(m) => {
                        let e = m.entry();
                        (what == EvictFor::Entries || e.has_handle())
                            && e.is_live()
                            && e.users() == 0
                            && (lap == 1 || !e.take_referenced())
                    }
                };
                if take {
                    if let Ok(Some((_, old))) = self.map.remove_if(key, |_, v| v.same(slot), &guard)
                    {
                        old.on_removed();
                        self.entries.fetch_sub(1, Ordering::Relaxed);
                        evicted += 1;
                        if evicted >= n {
                            break 'laps;
                        }
                    }
                }
            }
        }
        *hand = (start + visited) % self.map.len().max(1);
        if evicted > 0 {
            add(&self.counters().local().evictions, evicted as u64);
        }
        evicted
    }

    /// Entries in the map (positive and negative).
    pub fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Handles held by entries (including removed entries still in use).
    pub fn open_handles(&self) -> usize {
        self.acct.open_handles.load(Ordering::Relaxed)
    }

    /// Sums the per-thread counters.
    pub fn stats(&self) -> Stats {
        let c = self.counters();
        let hits = c.sum(|s| &s.hits);
        let misses = c.sum(|s| &s.misses);
        let negative_hits = c.sum(|s| &s.negative_hits);
        Stats {
            lookups: hits + misses + negative_hits,
            hits,
            misses,
            negative_hits,
            revalidations: c.sum(|s| &s.revalidations),
            invalidations: c.sum(|s| &s.invalidations),
            evictions: c.sum(|s| &s.evictions),
            contention_events: c.sum(|s| &s.contention_events),
            entries: self.len() as u64,
            open_handles: self.open_handles() as u64,
            loads: c.sum(|s| &s.loads),
            small_bytes: self.acct.small_bytes.load(Ordering::Relaxed),
            torn_reads: c.sum(|s| &s.torn_reads),
        }
    }
}

/// Gives an unused open-handle reservation back (error, cancellation, or the
/// loader returned no handle).
struct HandleReservation<'a> {
    acct: &'a Accounting,
    held: bool,
}

impl Drop for HandleReservation<'_> {
    fn drop(&mut self) {
        if self.held {
            self.acct.open_handles.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
