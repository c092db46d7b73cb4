//! Variants: other forms of an entry's file (compressed ones, for
//! `filemanager`) that its user made once and the cache keeps beside the
//! entry, under one byte budget for all of them.
//!
//! ```text
//! Entry (cold fields) ── variants: Mutex<[Option<Arc<Variant>>; VARIANT_SLOTS]>
//!                                              │
//!                        Variant { bytes, source: FileMeta, used (CLOCK bit), budget }
//! ```
//!
//! * A variant lives in its entry: it leaves with the entry (eviction,
//!   replacement by a changed file, invalidation), so a new version of a
//!   file, which is always a new entry, never sees an old variant; and it
//!   records the version it was made from (`source`) for the one place two
//!   versions meet, a single-flight wait.
//! * The budget is exact: bytes are reserved before a variant is kept, and
//!   given back when its last reference drops (a response still sending an
//!   evicted variant keeps its bytes counted). A variant that does not fit
//!   after evicting others is handed to its requests and not kept.
//! * Eviction of variants alone (their entries stay) is a CLOCK scan over
//!   the index under the writer lock; a variant used since the last scan
//!   gets a second chance.
//! * The slots sit with the entry's cold fields, off the lines a hit reads:
//!   a request that does not ask for a variant never touches them. Reading
//!   a slot takes its mutex (uncontended: one CAS on that line) and clones
//!   an `Arc`; that is the cost of a variant hit, not of an identity one.
//!
//! Besides the slots, this module owns the cache's side of variants:
//! [`PathCache::variant_or_make`] (single flight per slot and path), the
//! byte budget and the CLOCK scan over variants. It takes the writer lock
//! only for that scan and never removes an entry from the index.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::evict::clock_laps;
use crate::flight::Role;
use crate::stats::{add, bump};
use crate::{EntryRef, FileMeta, PathCache, RefLayout};

/// Variant slots per entry (a user numbers its forms: `filemanager` one
/// per content coding).
pub const VARIANT_SLOTS: usize = 3;

/// One kept form of a file.
#[derive(Debug)]
pub struct Variant {
    bytes: Option<Box<[u8]>>,
    source: FileMeta,
    used: AtomicBool,
    /// The budget's counter while these bytes are counted in it.
    budget: Option<Arc<AtomicU64>>,
}

impl Drop for Variant {
    fn drop(&mut self) {
        if let (Some(budget), Some(b)) = (&self.budget, &self.bytes) {
            budget.fetch_sub(b.len() as u64, Ordering::Relaxed);
        }
    }
}

/// A shared reference to a [`Variant`]; cheap to clone, `Send + Sync`,
/// and usable as the owner of a zero-copy buffer (`AsRef<[u8]>`).
#[derive(Clone, Debug)]
pub struct VariantRef(Arc<Variant>);

impl VariantRef {
    /// The variant's bytes; `None` when its maker found it not worth
    /// keeping (a compressed form no smaller than the file), which the
    /// cache remembers so the work is not repeated.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.0.bytes.as_deref()
    }

    /// The version of the file it was made from.
    pub fn source(&self) -> &FileMeta {
        &self.0.source
    }

    /// Whether it is kept in the budget (else it lives only as long as the
    /// responses that hold it).
    pub fn is_kept(&self) -> bool {
        self.0.budget.is_some() || self.0.bytes.is_none()
    }
}

impl AsRef<[u8]> for VariantRef {
    fn as_ref(&self) -> &[u8] {
        self.bytes().unwrap_or_default()
    }
}

/// An entry's variant slots.
#[derive(Debug, Default)]
pub(crate) struct Slots(Mutex<[Option<Arc<Variant>>; VARIANT_SLOTS]>);

impl Slots {
    fn lock(&self) -> MutexGuard<'_, [Option<Arc<Variant>>; VARIANT_SLOTS]> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The variant in `slot`, marked used.
    pub(crate) fn get(&self, slot: usize) -> Option<VariantRef> {
        let v = self.lock().get(slot)?.clone()?;
        if !v.used.load(Ordering::Relaxed) {
            v.used.store(true, Ordering::Relaxed);
        }
        Some(VariantRef(v))
    }

    pub(crate) fn set(&self, slot: usize, v: &VariantRef) {
        if let Some(s) = self.lock().get_mut(slot) {
            *s = Some(v.0.clone());
        }
    }

    /// Drops variants not used since the last scan (on `second_chance`
    /// laps; every one with bytes otherwise) until `need` bytes are freed;
    /// returns (bytes, variants) taken.
    pub(crate) fn evict(&self, need: u64, second_chance: bool) -> (u64, u64) {
        let (mut freed, mut taken) = (0, 0);
        for s in self.lock().iter_mut() {
            if freed >= need {
                break;
            }
            let Some(v) = s else { continue };
            let Some(len) = v.bytes.as_ref().map(|b| b.len() as u64) else {
                continue;
            };
            if second_chance && v.used.swap(false, Ordering::Relaxed) {
                continue;
            }
            *s = None;
            freed += len;
            taken += 1;
        }
        (freed, taken)
    }
}

/// Makes a variant of `source` from `bytes`, counted in `budget` when given.
pub(crate) fn new_variant(
    bytes: Option<Vec<u8>>,
    source: FileMeta,
    budget: Option<Arc<AtomicU64>>,
) -> VariantRef {
    VariantRef(Arc::new(Variant {
        bytes: bytes.map(Vec::into_boxed_slice),
        source,
        used: AtomicBool::new(true),
        budget,
    }))
}

impl<V: Send + Sync + 'static, L: RefLayout> PathCache<V, L> {
    /// The variant of `entry` in `slot` ([`variant`](crate::variant)): the kept one, or
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
        let v = new_variant(bytes, *entry.meta(), budget);
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
    pub(crate) fn evict_variants(&self, need: u64) -> u64 {
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
}
