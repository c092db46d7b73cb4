//! Misses and stale entries: the single-flight slow path
//! (`load_slow`), revalidation, loading through the caller's [`Loader`],
//! the small-file copy (at load or at the second use) and the insertion
//! of the result. Takes the writer lock to insert, and the handle and
//! small-file budgets; evicts (`evict.rs`) when a budget is full.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::admit::Doorkeeper;
use crate::entry::{NewEntry, Upgrade};
use crate::evict::{EvictFor, EVICT_BATCH_DIVISOR};
use crate::flight::Role;
use crate::loader::NO_META;
use crate::lookup::Probe;
use crate::stats::bump;
use crate::{clock, copy, Entry, EntryRef, Loaded, Loader, Lookup, Negative, PathCache, RefLayout};

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
    /// Counts a use of a metadata-only entry; true when it is time to load
    /// it again with a handle.
    pub(crate) fn wants_upgrade(&self, entry: &Entry<V, L>) -> bool {
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
    pub(crate) async fn copy_on_second_use<Ld: Loader<V>>(
        &self,
        entry: &EntryRef<V, L>,
        loader: &Ld,
    ) {
        if entry.upgrade() == Upgrade::Copy && entry.bytes().is_none() && self.fits(entry) {
            Box::pin(self.copy_into(entry, loader)).await;
        }
    }

    /// Whether `entry`'s file is small enough to copy and the budget has
    /// room for it now: reads only, so that a hit of a file too large to
    /// copy, or one met while the budget is full, writes nothing (a use
    /// counter here cost every such hit a locked add on the entry's line)
    /// and allocates nothing (the boxed copy: one allocation per request
    /// for every file above `small_file_max`).
    fn fits(&self, entry: &EntryRef<V, L>) -> bool {
        let size = entry.meta().size;
        size <= self.limits.small_file_max().min(copy::MAX_COPY)
            && self.shared.small_bytes.load(Ordering::Relaxed) + size
                <= self.limits.small_bytes_budget()
    }

    async fn copy_into<Ld: Loader<V>>(&self, entry: &EntryRef<V, L>, loader: &Ld) {
        let (Some(handle), size) = (entry.handle(), entry.meta().size) else {
            return;
        };
        // Checked again: the budget may have filled since `fits`.
        if !self.fits(entry) || !entry.copy_slot().claim() {
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

    /// Whether a miss of `path`, which is not in the cache, is loaded for
    /// its caller only: the cache is full and the path was not missed
    /// recently (`admit.rs`). Full is within one eviction batch of
    /// `max_entries`, where an eviction leaves a cache that keeps missing
    /// (at exactly the bound, 8% of cache_pressure's misses were deferred
    /// instead of 80%). A full handle budget alone does not defer: such a
    /// load inserts the path's metadata without a handle.
    pub(crate) fn defers_admission(&self, path: &str) -> bool {
        let max_entries = self.limits.max_entries();
        self.len() + max_entries / EVICT_BATCH_DIVISOR >= max_entries
            && !self
                .doorkeeper
                .get_or_init(|| Doorkeeper::new(max_entries))
                .admit(self.hash(path))
    }

    /// Loads `path` for this caller only: the entry is never indexed and
    /// leaves with the caller's last reference, and a not-found or
    /// forbidden answer is not kept. No single flight (concurrent first
    /// misses each load; the second of them is admitted), and no copy of
    /// the bytes. Its handle is the caller's, not one of the cache's open
    /// handles: `max_open` bounds what the cache keeps, and the loader's
    /// own budget what a request opens.
    pub(crate) async fn load_unadmitted<Ld: Loader<V>>(
        &self,
        path: &str,
        loader: &Ld,
    ) -> Result<Lookup<V, L>, Ld::Error> {
        let counters = self.counters();
        bump(&counters.loads);
        bump(&counters.unadmitted);
        let started_ms = clock::now_ms();
        let (meta, label, handle) = match loader.load(path, true, None).await? {
            Loaded::Negative(kind) => return Ok(Lookup::Negative(kind)),
            Loaded::File {
                meta,
                label,
                handle,
                bytes: _,
            } => (meta, label, handle),
        };
        let new = NewEntry {
            path,
            hash: self.hash(path),
            negative: None,
            meta,
            label,
            handle,
            bytes: None,
            validated_ms: started_ms,
            upgrade: Upgrade::No,
            counted: false,
        };
        let slot = self.shared.pool.take();
        // SAFETY: `slot` comes from our pool's free list; `shared` owns it.
        let entry = unsafe { Entry::occupy(slot, new, self.shared.clone(), false) };
        Ok(Lookup::Hit(entry))
    }

    /// Single-flight slow path. Returns the lookup and whether it counts as a hit.
    pub(crate) async fn load_slow<Ld: Loader<V>>(
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
                path,
                hash: self.hash(path),
                negative: None,
                meta,
                label,
                handle,
                bytes,
                validated_ms: started_ms,
                upgrade,
                counted: true,
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
            path,
            hash: self.hash(path),
            negative: Some(kind),
            meta: NO_META,
            label: "",
            handle: None,
            bytes: None,
            validated_ms: now_ms,
            upgrade: Upgrade::No,
            counted: true,
        };
        drop(self.insert(new));
    }

    /// Inserts (or replaces) the entry for `new.path`, evicting for room if
    /// the cache is full; when everything is in use the entry is served
    /// uncached (the caller's reference is its only one). Returns the
    /// caller's reference.
    fn insert(&self, new: NewEntry<'_, V>) -> EntryRef<V, L> {
        let mut w = self.lock_writer();
        let hash = new.hash;
        let old = Self::find_locked(&w, new.path, hash);
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
