//! Per-shard event counters on padded lines, summed by `stats()`.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// One shard's counters. A thread counts into the shard of its thread index,
/// so on a hit it writes only a line that (with shards >= threads) no other
/// thread writes.
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

#[derive(Debug)]
pub(crate) struct ShardedCounters {
    shards: Box<[CachePadded<Counters>]>,
}

impl ShardedCounters {
    pub(crate) fn new(shards: usize) -> Self {
        let shards = (0..shards.max(1))
            .map(|_| CachePadded::new(Counters::default()))
            .collect();
        ShardedCounters { shards }
    }

    /// The calling thread's shard.
    #[inline]
    pub(crate) fn local(&self) -> &Counters {
        &self.shards[crate::clock::thread_index() % self.shards.len()]
    }

    pub(crate) fn sum(&self, pick: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.shards
            .iter()
            .map(|c| pick(c).load(Ordering::Relaxed))
            .sum()
    }
}

/// Adds one to a counter of the local shard.
#[inline]
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
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
