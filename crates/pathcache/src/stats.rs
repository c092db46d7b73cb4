//! Per-thread event counters, summed by `stats()`.
//!
//! Every thread that touches a cache gets its own counter block (a
//! [`thread_local::ThreadLocal`] slot, padded to its own cache line), and only
//! that thread ever writes it. A hit therefore counts with a plain load and
//! store (no read-modify-write, no line shared with another writer): the design
//! rule "hits write nothing shared but the refcount". The earlier layout (shards
//! picked by thread index modulo the shard count) needed a `lock xadd` per hit,
//! because two threads could map to one shard.
//!
//! A thread's block outlives the thread: `ThreadLocal` keeps it and hands it to
//! the next thread that gets the exited thread's id (after the exit, ordered by
//! the id allocator's mutex), so counts of exited threads stay in the sums and
//! each block still has one writer at a time.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use thread_local::ThreadLocal;

use crate::{PathCache, RefLayout};

/// One thread's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) negative_hits: AtomicU64,
    pub(crate) revalidations: AtomicU64,
    pub(crate) invalidations: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) contention_events: AtomicU64,
    pub(crate) loads: AtomicU64,
    pub(crate) torn_reads: AtomicU64,
    pub(crate) unadmitted: AtomicU64,
    pub(crate) variant_hits: AtomicU64,
    pub(crate) variants_made: AtomicU64,
    pub(crate) variant_bytes_saved: AtomicU64,
    pub(crate) variant_evictions: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct ThreadCounters {
    /// Unique per instance (never reused), for the per-thread shortcut.
    id: u64,
    threads: ThreadLocal<CachePadded<Counters>>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Ways of [`LAST`]: one per instance a thread alternates between.
const LAST_WAYS: usize = 4;

std::thread_local! {
    /// The counters this thread used last in each instance (the slot of id
    /// `i` is `i % LAST_WAYS`), and whose they are: a hit reads one
    /// thread-local instead of `ThreadLocal`'s thread-id lookup and bucket
    /// walk. Measured with `ThreadLocal::get_or_default` on every hit:
    /// 1.83-1.88x dashmap, with this shortcut 1.90-2.02x (scratch program,
    /// batches interleaved with dashmap, builds run alternately). One
    /// entry for all instances missed on every lookup of a request that
    /// asks two caches in turn (a file's and its directory's census): 54
    /// of the daemon's 11 600 instructions per request on arena_h1_64
    /// (`scripts/callgrind-daemon.sh`), gone with a way each.
    static LAST: [Cell<(u64, *const Counters)>; LAST_WAYS] =
        const { [const { Cell::new((0, std::ptr::null())) }; LAST_WAYS] };
}

impl Default for ThreadCounters {
    fn default() -> Self {
        ThreadCounters {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            threads: ThreadLocal::new(),
        }
    }
}

impl ThreadCounters {
    /// The calling thread's counters (allocated on its first use of this
    /// cache). Only the calling thread may write them.
    #[inline]
    pub(crate) fn local(&self) -> &Counters {
        let (id, counters) = LAST.with(|last| last[self.way()].get());
        if id == self.id {
            // SAFETY: `LAST` holds this thread's block of the instance with
            // this id, which is `self` (ids are never reused), and blocks
            // stay in place as long as their `ThreadLocal` lives.
            return unsafe { &*counters };
        }
        self.local_slow()
    }

    #[cold]
    fn local_slow(&self) -> &Counters {
        let counters: &Counters = self.threads.get_or_default();
        LAST.with(|last| last[self.way()].set((self.id, counters)));
        counters
    }

    /// This instance's slot in [`LAST`].
    fn way(&self) -> usize {
        (self.id % LAST_WAYS as u64) as usize
    }

    pub(crate) fn sum(&self, pick: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.threads
            .iter()
            .map(|c| pick(c).load(Ordering::Relaxed))
            .sum()
    }
}

/// Adds one to a counter of the calling thread's own block.
#[inline]
pub(crate) fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

/// Adds `n` to a counter of the calling thread's own block. A load and a
/// store, not an RMW: the block has a single writer (see the module doc), and
/// readers (`stats()`) only need each value to be one the writer stored.
#[inline]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// A snapshot of the cache's counters and gauges.
///
/// Invariant (when no lookup is in progress): `lookups == hits + misses +
/// negative_hits`. A revalidated-and-unchanged lookup counts as a hit (and a
/// revalidation); a lookup that waited for another caller's load counts as a
/// miss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// `hits + misses + negative_hits`.
    pub lookups: u64,
    /// Lookups answered by a fresh positive entry.
    pub hits: u64,
    /// Lookups that needed (or waited for) a load, or found nothing (`get`).
    pub misses: u64,
    /// Lookups answered by a fresh negative entry.
    pub negative_hits: u64,
    /// Stale entries re-checked with one `Loader::stat`.
    pub revalidations: u64,
    /// Entries dropped by `invalidate`.
    pub invalidations: u64,
    /// Entries removed by the bounds (entries, open handles) or `evict_unused`.
    pub evictions: u64,
    /// Waits for another caller's in-flight load, lock waits on slow paths,
    /// and lookups that lost a race with a removal.
    pub contention_events: u64,
    /// Entries in the cache now (positive and negative).
    pub entries: u64,
    /// Handles held by entries now (including removed entries still in use).
    pub open_handles: u64,
    /// `Loader::load` calls.
    pub loads: u64,
    /// Small-file bytes held now.
    pub small_bytes: u64,
    /// Small-file reads discarded because the file changed during the read.
    pub torn_reads: u64,
    /// Misses loaded for their caller and not inserted: first misses of a
    /// path while the cache was full (counted in `misses` and `loads`).
    pub unadmitted: u64,
    /// Variant bytes counted in the budget now (kept, or evicted and still
    /// being sent).
    pub variant_bytes: u64,
    /// The variant budget in force.
    pub variant_budget: u64,
    /// Responses served from a variant an earlier request made.
    pub variant_hits: u64,
    /// Variants made (`make` calls: for compression, the compressions run).
    pub variants_made: u64,
    /// Sum over responses served from a variant of the file's size minus
    /// the variant's.
    pub variant_bytes_saved: u64,
    /// Variants dropped by the budget (their entries stay).
    pub variant_evictions: u64,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Two waves of threads count concurrently; the second wave reuses the
    /// exited threads' ids (and so their blocks). Nothing may be lost: the
    /// single-writer load+store is sound only if a block never has two
    /// writers at once and the next owner sees the previous owner's count.
    #[test]
    fn counts_of_exited_threads_are_kept_and_blocks_are_reused_soundly() {
        const THREADS: u64 = 6;
        const BUMPS: u64 = 10_000;
        let counters = ThreadCounters::default();
        for wave in 1..=2 {
            std::thread::scope(|s| {
                for _ in 0..THREADS {
                    s.spawn(|| {
                        for _ in 0..BUMPS {
                            bump(&counters.local().hits);
                        }
                        add(&counters.local().evictions, 3);
                    });
                }
            });
            assert_eq!(counters.sum(|c| &c.hits), wave * THREADS * BUMPS);
            assert_eq!(counters.sum(|c| &c.evictions), wave * THREADS * 3);
        }
        // Ids were recycled, so fewer blocks than threads ever started.
        assert!(counters.threads.iter().count() < 2 * THREADS as usize);
    }

    /// Instances asked in turn on one thread, more of them than the
    /// shortcut has ways (so two share one), each count only their own.
    #[test]
    fn instances_asked_in_turn_keep_their_own_counts() {
        let all: Vec<ThreadCounters> = (0..LAST_WAYS + 2).map(|_| Default::default()).collect();
        for round in 0..100u64 {
            for (i, c) in all.iter().enumerate() {
                add(&c.local().hits, i as u64 + 1);
                assert_eq!(c.sum(|c| &c.hits), (round + 1) * (i as u64 + 1));
            }
        }
        for c in &all {
            assert_eq!(c.threads.iter().count(), 1);
        }
    }
}

impl<V: Send + Sync + 'static, L: RefLayout> PathCache<V, L> {
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
            unadmitted: c.sum(|s| &s.unadmitted),
            variant_bytes: self.shared.variant_bytes.load(Ordering::Relaxed),
            variant_budget: self.limits.variant_budget(),
            variant_hits: c.sum(|s| &s.variant_hits),
            variants_made: c.sum(|s| &s.variants_made),
            variant_bytes_saved: c.sum(|s| &s.variant_bytes_saved),
            variant_evictions: c.sum(|s| &s.variant_evictions),
        }
    }
}
