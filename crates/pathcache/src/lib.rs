//! `pathcache` owns the mapping from a normalized, root-relative path to what a
//! file server needs to answer a request for it: the file's metadata, a label
//! its loader chose (a media type, say), optionally an open handle (`V`, e.g.
//! `fdtable::Owned<File>`), and optionally the bytes of a small file. It knows
//! nothing of HTTP: validators and types are derived by its users.
//!
//! It does no I/O of its own: a miss is loaded by the caller's [`Loader`]
//! (async, runtime-agnostic; concurrent misses on one path run one load and
//! share it), and a stale entry is re-checked with one [`Loader::stat`].
//!
//! # How a hit works, and why
//!
//! ```text
//!  get(path) -> EntryRef                          drop(EntryRef)
//!  ---------------------------------------------  --------------------------
//!  t = NOW_MS (one load; a ticker thread writes   lanes[k][i] -= 1 (lock xadd)
//!      it each ms, see `clock`)                   state load: LIVE -> done
//!  h = hash(path) (inline, seeded; `hash`)
//!  slot = table[h & mask] (8 B: 16-bit tag, never 0 | entry address;
//!      a matching tag is a live slot; `table`)
//!  entry line 0: hash check, then pin:
//!      lanes[k][i] += 1 (lock xadd, the thread's lane k, own line)
//!      state load: LIVE?  key == path? (two overlapping word loads, line 0)
//!  freshness: t - validated_ms < valid (line 0)
//!  hits += 1 (the thread's own counters, plain load+store)
//! ```
//!
//! * The index (`table.rs`) is an open-addressed table of entry addresses
//!   with lock-free reads; writers (loads, evictions, invalidations) take
//!   one lock. A lookup takes no guard and writes nothing shared but the
//!   reference count: entry memory is type-stable (`pool.rs`: pages of
//!   entries that are reused, never freed while the cache lives), so a
//!   reader may pin an address read from a slot whatever happened to the
//!   entry since, and then checks (state, generation, key) whether it
//!   pinned the live entry for its path (`refcount`). The map this crate
//!   used before (papaya) pinned an epoch collector per lookup (an `xchg` on
//!   leave) and reached the entry through a node: two more dependent misses.
//! * [`get`](PathCache::get) / [`get_or_load`](PathCache::get_or_load) return
//!   a counted [`EntryRef`] that may be held across awaits: one `fetch_add`
//!   on the calling thread's reference lane, [`REF_SHARDS`] lanes per entry
//!   kept in per-lane arrays beside the entries, so a thread writes only
//!   lines of its own lane, which no lookup reads (the kernel's d_lockref
//!   lesson, seed 03; layout in [`entry`]). Two workers hitting one hot
//!   file write different lines.
//! * [`get_with`](PathCache::get_with) lends the entry to a closure and
//!   takes no reference: the thread announces the entry's address in a
//!   word of its own (one `xchg`) and clears it with a plain store after
//!   the closure; whoever frees the entry checks the words and leaves a
//!   covered payload on a pending list until the borrow is over (the
//!   `announce` crate: a hazard pointer with one locked instruction per
//!   hit instead of two).
//! * Freshness is checked against a millisecond clock a ticker thread keeps
//!   in one atomic (`clock`): a vDSO read of the coarse clock cost 11 ns per
//!   hit here, a third of the hit.
//! * Hit/miss counters are per thread: each thread's counters sit on a
//!   padded block that only it writes, with a plain load and store, found
//!   through one thread-local (`Stats` sums all blocks, including those of
//!   exited threads).
//!
//! # Measurements
//!
//! About 190 instructions per hit (`scripts/callgrind-pathcache.sh`). On
//! the 2-core Intel VM of the benchmarks a counted hit (1.91-1.98x
//! dashmap) is bound by its two locked read-modify-writes, the pin and the
//! unpin, each worth 1.6-2 ns (measured by making them plain stores in a
//! throwaway build); on the AMD VM before, the dependent loads (the index
//! slot, then the entry's line 0) weighed more. A `get_with` borrow has
//! one, an `xchg` on a word whose address does not depend on the entry:
//! 2.89-2.95x dashmap. The measured ratios
//! against dashmap and quick_cache, with the commands that reproduce them,
//! are in the benches README (`benches/README.md`, "pathcache").
//!
//! # Lifecycle
//!
//! * Misses and stale entries go through one leader per path (single flight);
//!   other callers wait on an `event_listener` event and share the result. A
//!   cancelled or failed leader hands over to a waiter.
//! * An entry older than [`Config::valid`] is re-checked with one
//!   [`Loader::stat`]; a change of (dev, ino, size, mtime, ctime) loads a new
//!   entry that replaces the old one, whose users keep it until they drop it.
//! * Removing an entry from the index (replacement,
//!   [`PathCache::invalidate`], eviction) releases its payload (drops `V`,
//!   frees small-file bytes) at once when it has no users, else when the last
//!   [`EntryRef`] drops; the entry's memory then goes back to the pool.
//! * Bounds: `max_entries` (checked under the writer lock, exact) and
//!   `max_open` (reserved before an open); a full budget runs a CLOCK scan (second chance via a referenced bit
//!   that a hit sets only when clear) that takes only entries without users.
//!   If everything is in use, a load is served uncached (entries) or without a
//!   handle (handles) rather than exceeding the bound.
//! * Variants ([`variant`]): other forms of a file its user makes once
//!   ([`PathCache::variant_or_make`], single flight per slot) are kept in
//!   the entry under one byte budget, and leave with it or alone.
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
//!         Ok(Loaded::File { meta, label: "text/plain", handle: open.then_some(7), bytes: None })
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
//! assert_eq!(entry.label(), "text/plain");
//! // The second lookup is a hit that takes no lock.
//! assert!(matches!(cache.get("index.html"), Some(Lookup::Hit(_))));
//! assert_eq!(cache.stats().hits, 1);
//! // A response written without awaiting can borrow the entry instead.
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
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

mod clock;
mod copy;
pub mod entry;
mod flight;
mod hash;
mod pool;
pub mod refcount;
mod stats;
mod sync;
mod table;
pub mod variant;

pub use entry::{Entry, EntryRef, Padded, RefLayout, Unpadded};
pub use refcount::REF_SHARDS;
pub use stats::Stats;
pub use variant::{VariantRef, VARIANT_SLOTS};

use entry::{NewEntry, Shared, Upgrade};
use flight::{Flights, Role};
use hash::PathHasher;
use stats::{add, bump, Counters, ThreadCounters};
use table::Index;

/// Sizes and times of a [`PathCache`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Shards of the in-flight load registry (statistics are per thread);
    /// default: available parallelism.
    pub shards: usize,
    /// Maximum entries in the cache (positive and negative); exact.
    pub max_entries: usize,
    /// Maximum handles held by entries (including removed entries in use).
    pub max_open: usize,
    /// How long an entry is trusted before one `stat` re-checks it (default 1 s).
    pub valid: Duration,
    /// How long a not-found / forbidden result is cached (default 1 s).
    pub negative_ttl: Duration,
    /// Files up to this size are kept in memory (0 disables). A file is
    /// copied on its second use (through [`Loader::read`]), not when it is
    /// first loaded: under a working set larger than the cache most entries
    /// are evicted unused, and the copy was wasted on them. A path used
    /// before (promoted from `min_uses`, or a changed file reloaded) is
    /// copied as it loads.
    pub small_file_max: u64,
    /// Total bytes of small files kept in memory.
    pub small_bytes_budget: u64,
    /// A path gets an open handle on its `min_uses`-th use (0 or 1: at once);
    /// before that only its metadata is cached.
    pub min_uses: u32,
    /// Total bytes of kept variants ([`variant`]); 0 keeps none.
    pub variant_budget: u64,
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
            variant_budget: 32 * 1024 * 1024,
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

impl FileMeta {
    /// Whether `other` describes the same version of the same file: the one
    /// identity rule of the stack (revalidation here, `filemanager`'s check of
    /// a freshly opened descriptor, its check of a cached one before a send).
    /// Every field counts: the inode catches a replacement by rename, size
    /// and mtime a rewrite, ctime a rewrite whose mtime was set back and a
    /// permission change.
    pub fn is_same_version(&self, other: &FileMeta) -> bool {
        self == other
    }
}

/// The metadata of an entry that has none (a negative answer).
const NO_META: FileMeta = FileMeta {
    size: 0,
    mtime_ns: 0,
    ctime_ns: 0,
    dev: 0,
    ino: 0,
};

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
        /// A static string the loader attaches to the file and the cache
        /// hands back with it (`filemanager`: the media type guessed from
        /// the name, so it is derived once per load).
        label: &'static str,
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
    /// Whether `path` still is the version `cached` describes: the
    /// revalidation of an entry older than `valid`. `handle` is the entry's,
    /// if it has one.
    ///
    /// The default stats `path` again ([`stat`](Self::stat)) and compares.
    /// A loader whose handle pins the file can answer with a cheaper check
    /// of the same path, as long as a "no" only costs a reload.
    fn is_unchanged(
        &self,
        path: &str,
        cached: &FileMeta,
        handle: Option<&V>,
    ) -> impl Future<Output = Result<bool, Self::Error>> {
        let _ = handle;
        async move {
            Ok(self
                .stat(path)
                .await?
                .is_some_and(|m| m.is_same_version(cached)))
        }
    }
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
    /// Reads the whole of a small file that is cached with `handle`, for
    /// the copy its second use takes (a file is not copied at its first
    /// load: see [`Config::small_file_max`]). `len` is the entry's size; the
    /// cache checks the length and [`recheck`](Self::recheck)s afterwards,
    /// as after a load's copy.
    ///
    /// The default loads `path` again with `read_small` and keeps only the
    /// bytes. A loader whose handle can be read (a descriptor) should read
    /// through it instead: no second open.
    fn read(
        &self,
        path: &str,
        handle: &V,
        len: u64,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, Self::Error>> {
        let _ = handle;
        async move {
            Ok(match self.load(path, true, Some(len)).await? {
                Loaded::File { bytes, .. } => bytes,
                Loaded::Negative(_) => None,
            })
        }
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

/// The outcome of probing the index, before counting.
enum Probe<V, L: RefLayout> {
    Fresh(EntryRef<V, L>),
    Stale(EntryRef<V, L>),
    Negative(Negative),
    Absent,
}

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
    variant_budget: AtomicU64,
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
            variant_budget: AtomicU64::new(0),
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
        self.variant_budget
            .store(config.variant_budget, Ordering::Relaxed);
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

    fn variant_budget(&self) -> u64 {
        self.variant_budget.load(Ordering::Relaxed)
    }
}

/// The concurrent path cache. `Send + Sync`; share it by reference or `Arc`.
pub struct PathCache<V, L: RefLayout = Padded> {
    /// What lookups walk (lock-free).
    index: Index<Entry<V, L>>,
    /// Serializes every change of the index: inserts, removals, eviction.
    writer: Mutex<WriterState<V, L>>,
    hasher: PathHasher,
    shards: usize,
    limits: Limits,
    shared: Arc<Shared<V, L>>,
    /// Per-thread statistics (here, not in `shared`: one pointer hop less
    /// on every hit, and entries never count anything).
    counters: ThreadCounters,
    flights: Flights<Lookup<V, L>>,
    /// Variants being made, keyed by slot and path (see
    /// [`variant_or_make`](Self::variant_or_make)).
    variant_flights: Flights<VariantRef>,
}

/// The writer's side of the index and the CLOCK hands.
struct WriterState<V, L: RefLayout> {
    table: table::Writer<Entry<V, L>>,
    hand: usize,
    variant_hand: usize,
}

impl<V, L: RefLayout> fmt::Debug for PathCache<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathCache")
            .field("limits", &self.limits)
            .field("entries", &self.index.len())
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

/// When a small file's bytes are copied into a new entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CopyAt {
    /// While loading (the path was used before).
    Load,
    /// On the entry's first hit ([`PathCache::copy_on_second_use`]).
    SecondUse,
}

impl<V: Send + Sync + 'static, L: RefLayout> PathCache<V, L> {
    /// An empty cache.
    pub fn new(config: Config) -> Self {
        // Start small and grow: a table pre-sized for the bound spreads a
        // few hot entries over cold lines (measured with papaya: 1000
        // entries in a 65536-slot table made hits ~2x slower).
        let (index, table) = Index::new(config.max_entries.min(1024));
        PathCache {
            index,
            writer: Mutex::new(WriterState {
                table,
                hand: 0,
                variant_hand: 0,
            }),
            hasher: PathHasher::new(),
            shards: config.shards,
            limits: Limits::new(&config),
            shared: Arc::new(Shared::default()),
            counters: ThreadCounters::default(),
            flights: Flights::new(config.shards * 4),
            variant_flights: Flights::new(config.shards),
        }
    }

    /// The hash of a path (see `hash.rs`).
    #[inline]
    fn hash(&self, path: &str) -> u64 {
        self.hasher.hash(path.as_bytes())
    }

    /// The calling thread's statistics counters.
    #[inline]
    fn counters(&self) -> &Counters {
        self.counters.local()
    }

    /// The writer lock (waiting on it counts as contention). Also releases
    /// payloads that waited for borrows to end (the `announce` crate).
    fn lock_writer(&self) -> MutexGuard<'_, WriterState<V, L>> {
        if self.shared.has_pending() {
            self.reclaim();
        }
        match self.writer.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                bump(&self.counters().contention_events);
                self.writer.lock().unwrap_or_else(|p| p.into_inner())
            }
        }
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
            variant_budget: l.variant_budget(),
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
    /// next hit. A lower `variant_budget` drops unused variants down to it
    /// now. Returns the entries evicted now.
    pub fn set_limits(&self, config: &Config) -> usize {
        self.limits.store(config);
        // Variants first: a lower budget drops unused ones down to it now.
        let variants = self.shared.variant_bytes.load(Ordering::Relaxed);
        if variants > config.variant_budget {
            self.evict_variants(variants - config.variant_budget);
        }
        let mut evicted = 0;
        let entries = self.len();
        if entries > config.max_entries {
            evicted += self.evict(EvictFor::Entries, entries - config.max_entries);
        }
        let handles = self.shared.open_handles.load(Ordering::Relaxed);
        if handles > config.max_open {
            evicted += self.evict(EvictFor::Handles, handles - config.max_open);
        }
        evicted
    }

    /// Finds and pins the live entry for `path` (file or negative).
    // `inline(always)` here and in `probe`, `Entry::pin`, `Entry::key_is`
    // (and the probe as an iterator, not a callback): left to itself LLVM
    // kept `probe`, `key_is` and the callback out of line in the benchmark,
    // returning `Probe` through memory. Interleaved `pathcache_hit`:
    // 1.73-1.79x dashmap before, 1.93-2.03x after.
    #[inline(always)]
    fn find(&self, path: &str, hash: u64) -> Option<EntryRef<V, L>> {
        let lane = clock::ref_shard();
        for p in self.index.table().candidates(hash) {
            if let Some(entry) = self.pin_candidate(p, hash, path, lane) {
                return Some(entry);
            }
        }
        None
    }

    /// Pins the candidate `p` if it is the live entry for `path`.
    #[inline(always)]
    fn pin_candidate(
        &self,
        p: NonNull<Entry<V, L>>,
        hash: u64,
        path: &str,
        lane: usize,
    ) -> Option<EntryRef<V, L>> {
        // SAFETY: entries are type-stable while the cache lives (`pool`):
        // reading an atomic of one is sound whatever its state.
        if unsafe { p.as_ref() }.hash() != hash {
            return None;
        }
        match Entry::pin(p, lane) {
            // Live, but maybe reused for another path: the key decides.
            // A mismatch unpins as the reference drops.
            Some(entry) => entry.key_is(path).then_some(entry),
            None => {
                self.count_lost_race();
                None
            }
        }
    }

    /// A pin that lost a race with a removal: the entry is on its way out.
    #[cold]
    fn count_lost_race(&self) {
        bump(&self.counters().contention_events);
    }

    /// Looks `path` up without counting.
    #[inline(always)]
    fn probe(&self, path: &str, now_ms: u64) -> Probe<V, L> {
        let Some(entry) = self.find(path, self.hash(path)) else {
            return Probe::Absent;
        };
        // A clock that moved back (the ticker lags a direct read a little)
        // counts as no time passed.
        let age_ms = now_ms.saturating_sub(entry.validated_ms());
        if let Some(kind) = entry.negative() {
            return if age_ms < self.limits.negative_ttl_ms() {
                Probe::Negative(kind)
            } else {
                Probe::Absent
            };
        }
        entry.touch();
        if age_ms < self.limits.valid_ms() {
            Probe::Fresh(entry)
        } else {
            Probe::Stale(entry)
        }
    }

    /// The cached answer for `path` if it is fresh; never loads. A miss or a
    /// stale entry returns `None` (counted as a miss).
    // Forced inline: LLVM kept it out of line in the benchmark, returning
    // the lookup through memory; inlined, `pathcache_hit` went from
    // 1.77-1.88x to 2.04-2.13x dashmap (interleaved, 4 runs each).
    #[inline(always)]
    pub fn get(&self, path: &str) -> Option<Lookup<V, L>> {
        let probe = self.probe(path, clock::now_ms());
        let counters = self.counters();
        match probe {
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
    /// instead of returning a counted [`EntryRef`]. For a response that is
    /// written without awaiting. Returns `None` on a miss or a stale entry
    /// (counted as a miss). The entry's payload (handle, bytes) is not
    /// released while `f` runs, even if the entry is removed meanwhile.
    ///
    /// The borrow takes no reference: the thread announces the entry in a
    /// word of its own with one `xchg` and clears it with a plain store
    /// (the `announce` crate), so a hit has one locked instruction instead of
    /// the counted reference's two (interleaved: 2.89-2.95x dashmap against
    /// 1.91-1.92x for [`get`](Self::get) on an Intel Xeon VM, 2.56x against
    /// 2.28x on an AMD EPYC one; `benches/README.md`). A payload
    /// whose entry leaves the cache during the borrow is released after
    /// it: by the next `get_with` or writer operation of the cache, by
    /// [`reclaim`](Self::reclaim), or when the cache drops. A borrow
    /// inside `f` (or on a thread without a word: more than 128 at once)
    /// takes a counted reference instead.
    #[inline(always)]
    pub fn get_with<R>(&self, path: &str, f: impl FnOnce(Borrowed<'_, V, L>) -> R) -> Option<R> {
        // Clears the word when dropped, also when `f` unwinds.
        let Some(word) = announce::mine() else {
            return self.get_with_counted(path, f);
        };
        let now_ms = clock::now_ms();
        let hash = self.hash(path);
        let found = self
            .index
            .table()
            .candidates(hash)
            .find_map(|p| self.announce_candidate(p, hash, path, &word));
        let counters = self.counters();
        let result = match found {
            None => {
                bump(&counters.misses);
                None
            }
            Some(entry) => {
                let age_ms = now_ms.saturating_sub(entry.validated_ms());
                match entry.negative() {
                    Some(kind) if age_ms < self.limits.negative_ttl_ms() => {
                        bump(&counters.negative_hits);
                        Some(f(Borrowed::Negative(kind)))
                    }
                    Some(_) => {
                        bump(&counters.misses);
                        None
                    }
                    None => {
                        entry.touch();
                        if age_ms < self.limits.valid_ms() {
                            bump(&counters.hits);
                            Some(f(Borrowed::Hit(entry)))
                        } else {
                            bump(&counters.misses);
                            None
                        }
                    }
                }
            }
        };
        drop(word);
        if self.shared.has_pending() {
            self.reclaim();
        }
        result
    }

    /// `get_with` through a counted reference.
    #[cold]
    fn get_with_counted<R>(
        &self,
        path: &str,
        f: impl FnOnce(Borrowed<'_, V, L>) -> R,
    ) -> Option<R> {
        Some(match self.get(path)? {
            Lookup::Hit(entry) => f(Borrowed::Hit(&entry)),
            Lookup::Negative(kind) => f(Borrowed::Negative(kind)),
        })
    }

    /// Announces the candidate `p` in `word`; the entry if it is the live
    /// one for `path` (the announcement then covers it until cleared).
    #[inline(always)]
    fn announce_candidate<'a>(
        &'a self,
        p: NonNull<Entry<V, L>>,
        hash: u64,
        path: &str,
        word: &announce::Word,
    ) -> Option<&'a Entry<V, L>> {
        // SAFETY: entries are type-stable while the cache lives (`pool`).
        let entry = unsafe { p.as_ref() };
        if entry.hash() != hash {
            return None;
        }
        if !Entry::announce_live(p, word) {
            self.count_lost_race();
            return None;
        }
        entry.key_is(path).then_some(entry)
    }

    /// Releases the payloads of entries that left the cache while a
    /// [`get_with`](Self::get_with) borrowed them, once those borrows have
    /// ended; returns how many. The cache does this by itself after every
    /// `get_with` and before every writer operation when any wait.
    pub fn reclaim(&self) -> usize {
        self.shared.reclaim(false)
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
                    self.copy_on_second_use(&entry, loader).await;
                    bump(&self.counters().hits);
                    return Ok(Lookup::Hit(entry));
                }
                Some(entry)
            }
            Probe::Negative(kind) => {
                bump(&self.counters().negative_hits);
                return Ok(Lookup::Negative(kind));
            }
            Probe::Stale(_) | Probe::Absent => None,
        };
        let (lookup, hit) = match self.load_slow(path, loader, upgrade_from).await {
            Ok(done) => done,
            Err(e) => {
                bump(&self.counters().misses);
                return Err(e);
            }
        };
        if let (Lookup::Hit(entry), true) = (&lookup, hit) {
            // A revalidated entry's use, or another leader's load found.
            self.copy_on_second_use(entry, loader).await;
        }
        let counters = self.counters();
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
            Upgrade::No | Upgrade::Copy => return false,
            Upgrade::MinUses => self.limits.min_uses().max(1),
            Upgrade::Denied => DENIED_RETRY_PERIOD,
        };
        entry.count_use() % period == 0
    }

    /// Copies a small file cached with a handle into its entry, on the
    /// entry's first hit (the file's second use; while the byte budget is
    /// full, the first hit that finds room). One use copies; the others
    /// are served from the handle meanwhile. A failed or torn copy leaves
    /// the entry without bytes for the rest of its life.
    ///
    /// Why not at the first load: under a working set larger than the cache
    /// most entries are evicted before a second use, and the copy (a read
    /// of cold page-cache data, an `fstat`, the budget) was wasted on them.
    /// On a cache_pressure-like load (10000 x 4 KiB, 2000 entries) copying at
    /// the first load cost 1.08x (1.02-1.13, 5 rounds) the daemon's CPU per
    /// request of copying at the second, at a fixed 20k req/s. A file used
    /// twice costs one copy either way.
    #[inline]
    async fn copy_on_second_use<Ld: Loader<V>>(&self, entry: &EntryRef<V, L>, loader: &Ld) {
        if entry.upgrade() == Upgrade::Copy && entry.bytes().is_none() {
            self.copy_into(entry, loader).await;
        }
    }

    async fn copy_into<Ld: Loader<V>>(&self, entry: &EntryRef<V, L>, loader: &Ld) {
        let (Some(handle), size) = (entry.handle(), entry.meta().size) else {
            return;
        };
        // Reads only, before the claim: while the budget is full a hit of
        // an uncopied entry writes nothing (a use counter here cost every
        // such hit a locked add on the entry's line).
        let budget = self.limits.small_bytes_budget();
        if size > self.limits.small_file_max().min(copy::MAX_COPY)
            || self.shared.small_bytes.load(Ordering::Relaxed) + size > budget
            || !entry.copy_slot().claim()
        {
            return;
        }
        if !self.reserve_small_bytes(size) {
            // The budget was taken meanwhile: a later use may try again.
            entry.copy_slot().unclaim();
            return;
        }
        // Gives the budget back unless the copy lands, and the claim unless
        // the attempt finished: a request cancelled in the middle lets a
        // later use try again, while a failed or torn copy keeps the claim
        // (this version of the file is sent from its descriptor, and a
        // changed file's next entry copies as it loads).
        struct Attempt<'a> {
            slot: &'a copy::FileCopy,
            total: &'a AtomicU64,
            len: u64,
            finished: bool,
            published: bool,
        }
        impl Drop for Attempt<'_> {
            fn drop(&mut self) {
                if !self.published {
                    self.total.fetch_sub(self.len, Ordering::Relaxed);
                }
                if !self.finished {
                    self.slot.unclaim();
                }
            }
        }
        let mut attempt = Attempt {
            slot: entry.copy_slot(),
            total: &self.shared.small_bytes,
            len: size,
            finished: false,
            published: false,
        };
        let copied = match loader.read(entry.path(), handle, size).await {
            Ok(Some(bytes)) => {
                let same = bytes.len() as u64 == size
                    && matches!(loader.recheck(entry.path(), Some(handle)).await,
                                Ok(Some(m)) if m == *entry.meta());
                if !same {
                    bump(&self.counters().torn_reads);
                }
                same.then_some(bytes)
            }
            Ok(None) | Err(_) => None,
        };
        attempt.finished = true;
        if let Some(bytes) = copied {
            attempt.slot.publish(bytes.into_boxed_slice());
            attempt.published = true;
        }
    }

    /// Single-flight slow path. Returns the lookup and whether it counts as a hit.
    async fn load_slow<Ld: Loader<V>>(
        &self,
        path: &str,
        loader: &Ld,
        mut upgrade_from: Option<EntryRef<V, L>>,
    ) -> Result<(Lookup<V, L>, bool), Ld::Error> {
        loop {
            let token = match self.flights.join(path, &self.counters().contention_events) {
                Role::Wait(flight) => {
                    bump(&self.counters().contention_events);
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
        // A path used before (promoted, or a changed version replaced) has
        // earned its copy now; a first load leaves it to the second use.
        let copy = if upgrading || stale.is_some() {
            CopyAt::Load
        } else {
            CopyAt::SecondUse
        };
        if let Some(entry) = stale {
            bump(&self.counters().revalidations);
            let checked_at = clock::now_ms();
            if loader
                .is_unchanged(path, entry.meta(), entry.handle())
                .await?
            {
                entry.mark_validated(checked_at);
                return Ok((Lookup::Hit(entry), true));
            }
            // Changed: load a new version. A file that had a handle keeps
            // getting one (it earned it with its uses).
            open |= entry.has_handle();
        }
        self.load_and_insert(path, loader, open, copy)
            .await
            .map(|l| (l, false))
    }

    /// Loads `path` (retrying torn small-file reads) and inserts the result.
    async fn load_and_insert<Ld: Loader<V>>(
        &self,
        path: &str,
        loader: &Ld,
        open_wanted: bool,
        copy: CopyAt,
    ) -> Result<Lookup<V, L>, Ld::Error> {
        let started_ms = clock::now_ms();
        let open = open_wanted && self.reserve_handle();
        let mut reservation = HandleReservation {
            shared: &self.shared.open_handles,
            held: open,
        };
        let small_file_max = self.limits.small_file_max();
        // Without a handle there is nothing to copy from later.
        let copy_now = copy == CopyAt::Load || !open;
        let read_small = (small_file_max > 0
            && copy_now
            && self.shared.small_bytes.load(Ordering::Relaxed) < self.limits.small_bytes_budget())
        .then_some(small_file_max);
        let mut attempt = 0;
        loop {
            bump(&self.counters().loads);
            let (meta, label, handle, mut bytes) = match loader.load(path, open, read_small).await?
            {
                Loaded::Negative(kind) => {
                    self.insert_negative(path, kind, started_ms);
                    return Ok(Lookup::Negative(kind));
                }
                Loaded::File {
                    meta,
                    label,
                    handle,
                    bytes,
                } => (meta, label, handle, bytes),
            };
            if let Some(b) = &bytes {
                // A copy is trusted only if the file had the same version
                // before (meta) and after (this stat) the read, and the copy
                // has the size that version says.
                let consistent = b.len() as u64 == meta.size
                    && loader.recheck(path, handle.as_ref()).await? == Some(meta);
                if !consistent {
                    bump(&self.counters().torn_reads);
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
            let copy_later =
                !copy_now && small_file_max > 0 && meta.size <= small_file_max.min(copy::MAX_COPY);
            let upgrade = if handle.is_some() && bytes.is_none() && copy_later {
                Upgrade::Copy
            } else if handle.is_some() || bytes.is_some() {
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
                hash: self.hash(path),
                negative: None,
                meta,
                label,
                handle,
                bytes,
                validated_ms: started_ms,
                upgrade,
            };
            return Ok(Lookup::Hit(self.insert(new)));
        }
    }

    fn reserve_bytes(&self, bytes: Vec<u8>) -> Option<Box<[u8]>> {
        self.reserve_small_bytes(bytes.len() as u64)
            .then(|| bytes.into_boxed_slice())
    }

    /// Takes `len` bytes of the small-file budget.
    fn reserve_small_bytes(&self, len: u64) -> bool {
        let before = self.shared.small_bytes.fetch_add(len, Ordering::Relaxed);
        if before + len > self.limits.small_bytes_budget() {
            self.shared.small_bytes.fetch_sub(len, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Takes one unit of the open-handle budget, evicting unused handle
    /// holders if the budget is full.
    fn reserve_handle(&self) -> bool {
        for round in 0..2 {
            let mut n = self.shared.open_handles.load(Ordering::Relaxed);
            let max_open = self.limits.max_open();
            while n < max_open {
                match self.shared.open_handles.compare_exchange_weak(
                    n,
                    n + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => {
                        bump(&self.counters().contention_events);
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

    fn insert_negative(&self, path: &str, kind: Negative, now_ms: u64) {
        if self.limits.negative_ttl_ms() == 0 {
            return;
        }
        let new = NewEntry {
            path: path.into(),
            hash: self.hash(path),
            negative: Some(kind),
            meta: NO_META,
            label: "",
            handle: None,
            bytes: None,
            validated_ms: now_ms,
            upgrade: Upgrade::No,
        };
        drop(self.insert(new));
    }

    /// The entry for `path` in the index and its slot. Only under the
    /// writer lock, which keeps every indexed entry LIVE and unchanged (only
    /// the writer removes entries from the index).
    fn find_locked(
        w: &WriterState<V, L>,
        path: &str,
        hash: u64,
    ) -> Option<(usize, NonNull<Entry<V, L>>)> {
        w.table.candidates(hash).find(|&(_, p)| {
            // SAFETY: indexed entries are LIVE and stable under the writer
            // lock (see above), so their key may be read without a pin.
            let e = unsafe { p.as_ref() };
            e.hash() == hash && e.key_is(path)
        })
    }

    /// The full hash of an indexed entry (for index rebuilds).
    fn hash_of(p: NonNull<Entry<V, L>>) -> u64 {
        // SAFETY: called under the writer lock on indexed (LIVE) entries.
        unsafe { p.as_ref() }.hash()
    }

    /// Inserts (or replaces) the entry for `new.path`, evicting for room if
    /// the cache is full; when everything is in use the entry is served
    /// uncached (the caller's reference is its only one). Returns the
    /// caller's reference.
    fn insert(&self, new: NewEntry<V>) -> EntryRef<V, L> {
        let mut w = self.lock_writer();
        let hash = new.hash;
        let old = Self::find_locked(&w, &new.path, hash);
        let room = old.is_some() || self.len() < self.limits.max_entries() || {
            let max = self.limits.max_entries();
            self.evict_locked(&mut w, EvictFor::Entries, 1 + max / EVICT_BATCH_DIVISOR) > 0
                && self.len() < max
        };
        let slot = self.shared.pool.take();
        // SAFETY: `slot` comes from our pool's free list; `shared` owns it.
        let entry = unsafe { Entry::occupy(slot, new, self.shared.clone(), room) };
        match old {
            Some((at, old)) => {
                w.table.replace(at, hash, slot);
                Entry::kill(old);
            }
            None if room => {
                w.table.insert(&self.index, hash, slot, Self::hash_of);
            }
            None => {}
        }
        entry
    }

    /// Drops the entry for `path` now (e.g. on an inotify event). Current
    /// users keep their `EntryRef`s; the handle is released after the last.
    pub fn invalidate(&self, path: &str) -> bool {
        let hash = self.hash(path);
        let mut w = self.lock_writer();
        let Some((at, entry)) = Self::find_locked(&w, path, hash) else {
            return false;
        };
        w.table.remove(&self.index, at);
        Entry::kill(entry);
        bump(&self.counters().invalidations);
        true
    }

    /// Drops the entry for `prefix` and every entry below it (`prefix/...`);
    /// `""` drops everything. For a change that moves what a whole subtree
    /// of paths leads to: a directory renamed, a symlink re-pointed, an
    /// event queue overflow. Walks the whole index under the writer lock, so
    /// it is for rare events, not per request. Returns the entries dropped.
    pub fn invalidate_under(&self, prefix: &str) -> usize {
        let mut w = self.lock_writer();
        let mut dropped = 0;
        for at in 0..w.table.capacity() {
            let Some(p) = w.table.get(at) else {
                continue;
            };
            // SAFETY: indexed entries are LIVE and stable under the writer
            // lock (see `find_locked`).
            let path = unsafe { p.as_ref() }.path();
            let below = prefix.is_empty()
                || path
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
            if below {
                w.table.remove(&self.index, at);
                Entry::kill(p);
                dropped += 1;
            }
        }
        if dropped > 0 {
            w.table.maybe_shrink(&self.index, Self::hash_of);
            add(&self.counters().invalidations, dropped as u64);
        }
        dropped
    }

    /// Drops up to `n` entries that hold a handle and have no users, releasing
    /// their handles now (EMFILE recovery). Returns how many were dropped.
    pub fn evict_unused(&self, n: usize) -> usize {
        self.evict(EvictFor::Handles, n)
    }

    /// CLOCK eviction (see [`evict_locked`](Self::evict_locked)).
    fn evict(&self, what: EvictFor, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let mut w = self.lock_writer();
        self.evict_locked(&mut w, what, n)
    }

    /// CLOCK eviction: walks the index from the hand; an entry whose
    /// referenced bit is set gets a second chance (bit cleared) on the first
    /// lap; entries in use are never taken. At most two laps.
    fn evict_locked(&self, w: &mut WriterState<V, L>, what: EvictFor, n: usize) -> usize {
        let now_ms = clock::now_ms();
        let negative_ttl_ms = self.limits.negative_ttl_ms();
        let capacity = w.table.capacity();
        let start = w.hand % capacity;
        let mut evicted = 0;
        let mut stop = start;
        for (lap, at) in clock_laps(start, capacity) {
            let Some(p) = w.table.get(at) else {
                continue;
            };
            // SAFETY: indexed entries are LIVE and stable under the
            // writer lock (see `find_locked`).
            let e = unsafe { p.as_ref() };
            let take = match e.negative() {
                Some(_) => {
                    what == EvictFor::Entries
                        && (lap == 1 || now_ms.saturating_sub(e.validated_ms()) >= negative_ttl_ms)
                }
                None => {
                    (what == EvictFor::Entries || e.has_handle())
                        && e.users() == 0
                        && (lap == 1 || !e.take_referenced())
                }
            };
            if take {
                w.table.remove(&self.index, at);
                Entry::kill(p);
                evicted += 1;
                if evicted >= n {
                    stop = at + 1;
                    break;
                }
            }
        }
        w.hand = stop;
        if evicted > 0 {
            w.table.maybe_shrink(&self.index, Self::hash_of);
            add(&self.counters().evictions, evicted as u64);
        }
        evicted
    }

    /// The variant of `entry` in `slot` ([`variant`]): the kept one, or
    /// one `make` makes now. Concurrent callers for one slot of one path
    /// share one `make` (single flight: the others wait for it and take its
    /// result when it was made from their entry's version; a failed or
    /// cancelled maker hands over to one of them). `make` returns the
    /// variant's bytes, or `None` when it is not worth having (remembered
    /// like a variant, so the work is not repeated). The result is kept
    /// when the variant budget has room (after evicting unused variants of
    /// other entries); otherwise it is handed back unkept
    /// ([`VariantRef::is_kept`]). Returns the variant and whether this call
    /// made it. `make`'s errors are returned and not kept.
    ///
    /// ```
    /// # use pathcache::{Config, FileMeta, Loaded, Loader, Lookup, PathCache};
    /// # struct Disk;
    /// # impl Loader<u32> for Disk {
    /// #     type Error = std::convert::Infallible;
    /// #     async fn load(&self, _: &str, _: bool, _: Option<u64>) -> Result<Loaded<u32>, Self::Error> {
    /// #         Ok(Loaded::File { meta: FileMeta { size: 5, mtime_ns: 1, ctime_ns: 1, dev: 1, ino: 42 }, label: "", handle: None, bytes: None })
    /// #     }
    /// #     async fn stat(&self, _: &str) -> Result<Option<FileMeta>, Self::Error> { Ok(None) }
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let cache: PathCache<u32> = PathCache::new(Config::default());
    /// let Ok(Lookup::Hit(entry)) = cache.get_or_load("a.js", &Disk).await else { panic!() };
    /// let make = || async { Ok::<_, ()>(Some(b"short".to_vec())) };
    /// let (v, made) = cache.variant_or_make(&entry, 0, make).await.unwrap();
    /// assert_eq!((v.bytes(), made), (Some(&b"short"[..]), true));
    /// let (_, made) = cache.variant_or_make(&entry, 0, make).await.unwrap();
    /// assert!(!made);
    /// assert_eq!(cache.stats().variant_bytes, 5);
    /// # });
    /// ```
    pub async fn variant_or_make<F, Fut, E>(
        &self,
        entry: &EntryRef<V, L>,
        slot: usize,
        make: F,
    ) -> Result<(VariantRef, bool), E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<Vec<u8>>, E>>,
    {
        if let Some(v) = entry.variant(slot) {
            return Ok((v, false));
        }
        // Only on a variant miss: one key per slot and path (two versions
        // of a path meet here; `source` tells their results apart).
        let key = format!("{slot}/{}", entry.path());
        let mut make = Some(make);
        loop {
            let token = match self
                .variant_flights
                .join(&key, &self.counters().contention_events)
            {
                Role::Wait(flight) => {
                    if let Some(v) = flight.wait().await {
                        if v.source().is_same_version(entry.meta()) {
                            return Ok((v, false));
                        }
                    }
                    // Failed, cancelled, or another version's: try again.
                    if let Some(v) = entry.variant(slot) {
                        return Ok((v, false));
                    }
                    continue;
                }
                Role::Lead(token) => token,
            };
            if let Some(v) = entry.variant(slot) {
                token.finish(Some(v.clone()));
                return Ok((v, false));
            }
            let Some(make) = make.take() else {
                unreachable!("a leader returns: `make` is taken once")
            };
            bump(&self.counters().variants_made);
            // On error the token's drop releases the waiters (they retry).
            let bytes = make().await?;
            let v = self.keep_variant(entry, slot, bytes);
            token.finish(Some(v.clone()));
            return Ok((v, true));
        }
    }

    /// Counts a response served from a variant: `made` is whether this
    /// request made it (a miss, already counted), `saved` the file's size
    /// minus the variant's.
    pub fn count_variant_served(&self, made: bool, saved: u64) {
        let c = self.counters();
        if !made {
            bump(&c.variant_hits);
        }
        add(&c.variant_bytes_saved, saved);
    }

    /// Wraps `bytes` as a variant of `entry` and keeps it in `slot` if the
    /// budget has room.
    fn keep_variant(
        &self,
        entry: &EntryRef<V, L>,
        slot: usize,
        bytes: Option<Vec<u8>>,
    ) -> VariantRef {
        let len = bytes.as_ref().map_or(0, |b| b.len() as u64);
        let counted = len > 0 && self.reserve_variant(len);
        let budget = counted.then(|| self.shared.variant_bytes.clone());
        let v = variant::new_variant(bytes, *entry.meta(), budget);
        if v.is_kept() {
            entry.variants().set(slot, &v);
        }
        v
    }

    /// Reserves `len` bytes of the variant budget, evicting unused
    /// variants once if it is full.
    fn reserve_variant(&self, len: u64) -> bool {
        let used = &self.shared.variant_bytes;
        for round in 0..2 {
            let budget = self.limits.variant_budget();
            if len > budget {
                return false;
            }
            let mut n = used.load(Ordering::Relaxed);
            while n + len <= budget {
                match used.compare_exchange_weak(n, n + len, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return true,
                    Err(now) => n = now,
                }
            }
            // Evict a little more than needed, so the scan is amortized.
            if round == 0 && self.evict_variants(n + len - budget + budget / 32) == 0 {
                return false;
            }
        }
        false
    }

    /// CLOCK over the entries' variants (their entries stay): a variant
    /// used since the last pass gets a second chance on the first lap.
    /// Frees at least `need` bytes if it can; returns the bytes taken
    /// (counted as freed now; a response still holding one frees it when
    /// it finishes).
    fn evict_variants(&self, need: u64) -> u64 {
        let mut w = self.lock_writer();
        let capacity = w.table.capacity();
        let start = w.variant_hand % capacity;
        let (mut freed, mut taken) = (0, 0);
        let mut stop = start;
        for (lap, at) in clock_laps(start, capacity) {
            let Some(p) = w.table.get(at) else {
                continue;
            };
            // SAFETY: indexed entries are LIVE and stable under the writer
            // lock (see `find_locked`), and their cold fields are
            // initialized while LIVE.
            let e = unsafe { p.as_ref() };
            if e.negative().is_some() {
                continue;
            }
            let (f, t) = e.variants().evict(need - freed, lap == 0);
            freed += f;
            taken += t;
            if freed >= need {
                stop = at + 1;
                break;
            }
        }
        w.variant_hand = stop;
        add(&self.counters().variant_evictions, taken);
        freed
    }

    /// Entries in the cache (positive and negative).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Handles held by entries (including removed entries still in use).
    pub fn open_handles(&self) -> usize {
        self.shared.open_handles.load(Ordering::Relaxed)
    }

    /// Sums the per-thread counters.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
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
            small_bytes: self.shared.small_bytes.load(Ordering::Relaxed),
            torn_reads: c.sum(|s| &s.torn_reads),
            variant_bytes: self.shared.variant_bytes.load(Ordering::Relaxed),
            variant_budget: self.limits.variant_budget(),
            variant_hits: c.sum(|s| &s.variant_hits),
            variants_made: c.sum(|s| &s.variants_made),
            variant_bytes_saved: c.sum(|s| &s.variant_bytes_saved),
            variant_evictions: c.sum(|s| &s.variant_evictions),
        }
    }
}

/// The slots a CLOCK scan visits from `start`: two laps of the table
/// (lap 0 gives second chances, lap 1 takes), as `(lap, slot)`.
fn clock_laps(start: usize, capacity: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..2).flat_map(move |lap| (0..capacity).map(move |step| (lap, (start + step) % capacity)))
}

/// Gives an unused open-handle reservation back (error, cancellation, or the
/// loader returned no handle).
struct HandleReservation<'a> {
    shared: &'a AtomicUsize,
    held: bool,
}

impl Drop for HandleReservation<'_> {
    fn drop(&mut self) {
        if self.held {
            self.shared.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl<V, L: RefLayout> Drop for PathCache<V, L> {
    fn drop(&mut self) {
        // Every indexed entry leaves the cache: released now when unused,
        // else by its last user (whose reference keeps the pool alive).
        let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        for at in 0..w.table.capacity() {
            if let Some(p) = w.table.get(at) {
                Entry::kill(p);
            }
        }
        // No `get_with` borrow of this cache can be running (they borrow
        // it), so nothing on the pending list is covered any more.
        self.shared.reclaim(true);
    }
}

/// The entry protocol without the index, for the loom models in
/// `tests/loom.rs` (which cannot run the index's real threads and tables):
/// entries from a pool, pinned by address as a lookup pins what it found
/// in a slot, killed as the writer kills what it removed.
#[doc(hidden)]
pub mod testing {
    use super::*;

    /// A pool and the state its entries share.
    #[allow(missing_debug_implementations)]
    pub struct Harness<V: Send + Sync + 'static> {
        shared: Arc<Shared<V, Padded>>,
    }

    /// An entry's address, as an index slot holds it.
    #[allow(missing_debug_implementations)]
    pub struct Slot<V>(NonNull<Entry<V>>);

    impl<V> Clone for Slot<V> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<V> Copy for Slot<V> {}
    impl<V> PartialEq for Slot<V> {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }
    // SAFETY: an address only; every access goes through the protocol.
    unsafe impl<V> Send for Slot<V> {}

    impl<V: Send + Sync + 'static> Default for Harness<V> {
        fn default() -> Self {
            Harness {
                shared: Arc::new(Shared::default()),
            }
        }
    }

    impl<V: Send + Sync + 'static> Harness<V> {
        /// Takes an entry from the pool (the last one freed, if any) and
        /// makes it live for `path` with `handle`: its address and the
        /// loader's reference.
        pub fn insert(&self, path: &str, handle: V) -> (Slot<V>, EntryRef<V>) {
            let slot = self.shared.pool.take();
            let new = NewEntry {
                path: path.into(),
                hash: 1,
                negative: None,
                meta: NO_META,
                label: "application/octet-stream",
                handle: Some(handle),
                bytes: None,
                validated_ms: 0,
                upgrade: Upgrade::No,
            };
            // SAFETY: from our pool's free list, which `shared` owns.
            let first = unsafe { Entry::occupy(slot, new, self.shared.clone(), true) };
            (Slot(slot), first)
        }

        /// What a lookup does with a slot it read: pin, then check the key.
        pub fn lookup(&self, slot: Slot<V>, path: &str) -> Option<EntryRef<V>> {
            let entry = Entry::pin(slot.0, clock::ref_shard())?;
            entry.key_is(path).then_some(entry)
        }

        /// What the writer does after removing the slot from the index
        /// (once per insert, as the writer does under its lock).
        pub fn kill(&self, slot: Slot<V>) {
            Entry::kill(slot.0);
        }

        /// What `get_with` does with a slot it read: announce, check, run
        /// `f` on the entry if it is the live one for `path`, clear. False
        /// when `f` did not run. Panics if the thread has no free word.
        pub fn borrow(&self, slot: Slot<V>, path: &str, f: impl FnOnce(&Entry<V>)) -> bool {
            let word = announce::mine().expect("a free announcement word");
            // SAFETY: entries are type-stable while the pool lives.
            let entry = unsafe { slot.0.as_ref() };
            let live = Entry::announce_live(slot.0, &word) && entry.key_is(path);
            if live {
                f(entry);
            }
            drop(word);
            live
        }

        /// [`PathCache::reclaim`]: releases the payloads whose borrows ended.
        pub fn reclaim(&self) -> usize {
            self.shared.reclaim(false)
        }
    }
}
