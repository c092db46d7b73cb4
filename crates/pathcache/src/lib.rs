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
//! # What bounds a hit
//!
//! On the benchmarks' machine a counted hit is bound by its two locked
//! read-modify-writes (the pin and the unpin) rather than by its
//! dependent loads; a [`get_with`](PathCache::get_with) borrow has one
//! locked instruction, on a word whose address does not depend on the
//! entry, which makes it the faster lookup for a response written
//! without awaiting. Numbers, and the commands that reproduce them:
//! `benches/README.md` ("pathcache").
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
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};

mod admit;
mod clock;
mod config;
mod copy;
pub mod entry;
mod evict;
mod flight;
mod hash;
mod load;
mod loader;
mod lookup;
mod pool;
pub mod refcount;
mod stats;
mod sync;
mod table;
#[doc(hidden)]
pub mod testing;
pub mod variant;

pub use config::Config;
pub use entry::{Entry, EntryRef, Padded, RefLayout, Unpadded};
pub use loader::{FileMeta, Loaded, Loader, Negative};
pub use lookup::{Borrowed, Lookup};
pub use refcount::REF_SHARDS;
pub use stats::Stats;
pub use variant::{VariantRef, VARIANT_SLOTS};

use config::Limits;
use entry::Shared;
use flight::Flights;
use hash::PathHasher;
use stats::{bump, Counters, ThreadCounters};
use table::Index;

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
    /// Recent first misses while the cache was full (`admit.rs`); made
    /// when the cache first fills.
    doorkeeper: OnceLock<admit::Doorkeeper>,
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
            doorkeeper: OnceLock::new(),
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
