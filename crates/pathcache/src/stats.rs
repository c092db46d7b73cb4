//! Per-thread event counters (and borrow slots), summed by `stats()`.
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

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use thread_local::ThreadLocal;

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
}

/// Everything a thread writes on a hit, on one padded line: its counters and
/// its borrow slot (`hazard`), so a borrowing hit does one thread-local lookup.
#[derive(Debug, Default)]
pub(crate) struct Block {
    pub(crate) counters: Counters,
    /// The thread's borrow slot (see `hazard`). Under loom the slots are a
    /// modeled array instead.
    #[cfg(not(loom))]
    pub(crate) borrow_slot: std::sync::atomic::AtomicUsize,
}

#[derive(Debug, Default)]
pub(crate) struct ThreadCounters {
    threads: ThreadLocal<CachePadded<Block>>,
}

impl ThreadCounters {
    /// The calling thread's block (allocated on its first use of this cache).
    /// Only the calling thread may write it.
    #[inline]
    pub(crate) fn block(&self) -> &Block {
        match self.threads.get() {
            Some(block) => block,
            None => self.register(),
        }
    }

    #[cold]
    fn register(&self) -> &Block {
        let block = self.threads.get_or_default();
        // `ThreadLocal` publishes a new block with a Release store of its
        // `present` flag, which a claimer's Acquire scan of the borrow slots
        // could miss. This fence, paired with the fence in
        // `Hazards::published`, makes a claimer that misses the block one
        // whose state change this thread sees before it borrows (the
        // fence-fence rule of the SeqCst order).
        std::sync::atomic::fence(Ordering::SeqCst);
        block
    }

    /// The calling thread's counters.
    #[inline]
    pub(crate) fn local(&self) -> &Counters {
        &self.block().counters
    }

    /// Every thread's block, including those of exited threads.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.threads.iter().map(|b| &**b)
    }

    pub(crate) fn sum(&self, pick: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.blocks()
            .map(|b| pick(&b.counters).load(Ordering::Relaxed))
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
    /// Entries in the map now (positive and negative).
    pub entries: u64,
    /// Handles held by entries now (including removed entries still in use).
    pub open_handles: u64,
    /// `Loader::load` calls.
    pub loads: u64,
    /// Small-file bytes held now.
    pub small_bytes: u64,
    /// Small-file reads discarded because the file changed during the read.
    pub torn_reads: u64,
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
}
