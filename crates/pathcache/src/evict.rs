//! Entries leaving the index: [`invalidate`](PathCache::invalidate),
//! [`invalidate_under`](PathCache::invalidate_under) and the CLOCK
//! eviction that keeps the bounds. Every change here is made under the
//! writer lock; an entry removed is killed (its payload released by its
//! last user).

use crate::stats::{add, bump};
use crate::{clock, Entry, PathCache, RefLayout, WriterState};

/// What an eviction scan may take.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvictFor {
    /// Any unused entry (negative entries first are free to go).
    Entries,
    /// Only unused entries that hold a handle.
    Handles,
}

/// How many extra entries an eviction scan frees beyond the one needed, so the
/// O(n) scan is amortized over many inserts.
pub(crate) const EVICT_BATCH_DIVISOR: usize = 32;

impl<V: Send + Sync + 'static, L: RefLayout> PathCache<V, L> {
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
    pub(crate) fn evict(&self, what: EvictFor, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let mut w = self.lock_writer();
        self.evict_locked(&mut w, what, n)
    }

    /// CLOCK eviction: walks the index from the hand; an entry whose
    /// referenced bit is set gets a second chance (bit cleared) on the first
    /// lap; entries in use are never taken. At most two laps.
    pub(crate) fn evict_locked(
        &self,
        w: &mut WriterState<V, L>,
        what: EvictFor,
        n: usize,
    ) -> usize {
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
}

/// The slots a CLOCK scan visits from `start`: two laps of the table
/// (lap 0 gives second chances, lap 1 takes), as `(lap, slot)`.
pub(crate) fn clock_laps(start: usize, capacity: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..2).flat_map(move |lap| (0..capacity).map(move |step| (lap, (start + step) % capacity)))
}
