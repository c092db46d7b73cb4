//! The lookup paths: [`get`](PathCache::get),
//! [`get_with`](PathCache::get_with) and
//! [`get_or_load`](PathCache::get_or_load)'s fast path, and what they
//! return ([`Lookup`], [`Borrowed`]). Reads the index without a lock and
//! writes only reference lanes, announcement words and per-thread
//! counters; a miss or a stale entry goes on to `load.rs`.

use std::fmt;
use std::ptr::NonNull;

use crate::stats::bump;
use crate::{clock, Entry, EntryRef, Loader, Negative, Padded, PathCache, RefLayout};

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
pub(crate) enum Probe<V, L: RefLayout> {
    Fresh(EntryRef<V, L>),
    Stale(EntryRef<V, L>),
    Negative(Negative),
    Absent,
}

impl<V: Send + Sync + 'static, L: RefLayout> PathCache<V, L> {
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
    pub(crate) fn probe(&self, path: &str, now_ms: u64) -> Probe<V, L> {
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
            Probe::Absent if self.defers_admission(path) => {
                bump(&self.counters().misses);
                return Box::pin(self.load_unadmitted(path, loader)).await;
            }
            Probe::Stale(_) | Probe::Absent => None,
        };
        // Boxed, as are the load above and a copy's read below: a hit's
        // future then holds none of them, and every future that awaits a
        // lookup (a request's, a connection's) is that much smaller; a
        // miss's allocation is small beside its syscalls.
        let (lookup, hit) = match Box::pin(self.load_slow(path, loader, upgrade_from)).await {
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
}
