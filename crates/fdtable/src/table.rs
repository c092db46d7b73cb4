//! The table itself: shards, the allocation and release paths, handles.

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::bitmap::{Bitmap, Found};
use crate::local::{self, ClaimFlags};
use crate::slots::{
    dead_successor, generation_of, refs_of, Growth, SlotRef, Slots, ALLOC, GEN_BITS, NO_SLOT, OPEN,
    REFS_MASK,
};
use crate::sync::{self, AtomicU32, AtomicU64, Ordering, UnsafeCell};
use crate::{CloseError, Config, Error, Fd, InsertError, Release, Stats};

/// Table ids are never reused in a process, so a thread-local claim can
/// never be mistaken for a claim on a newer table.
static TABLE_IDS: StdAtomicU64 = StdAtomicU64::new(1);

/// Event counters of one shard. In `Shard::local` only the claim holder
/// writes (relaxed load + store, no read-modify-write); in
/// `Remote::counters` any thread adds (rare paths only).
///
/// The fast paths bump one counter each (an insert `fast_path_hits`, an
/// owner's close `sync_releases`); allocations and occupied slots are
/// derived in `stats()` rather than counted twice on every operation.
struct Counters {
    /// Inserts served by the summary scan or after growth.
    slow_path_allocations: AtomicU64,
    fast_path_hits: AtomicU64,
    slow_path_scans: AtomicU64,
    growths: AtomicU64,
    sync_releases: AtomicU64,
    deferred_releases: AtomicU64,
    release_errors: AtomicU64,
    stale_rejections: AtomicU64,
    contention_events: AtomicU64,
    /// Slots the owner freed after another thread released their value.
    remote_frees: AtomicU64,
}

impl Counters {
    fn new() -> Self {
        Counters {
            slow_path_allocations: AtomicU64::new(0),
            fast_path_hits: AtomicU64::new(0),
            slow_path_scans: AtomicU64::new(0),
            growths: AtomicU64::new(0),
            sync_releases: AtomicU64::new(0),
            deferred_releases: AtomicU64::new(0),
            release_errors: AtomicU64::new(0),
            stale_rejections: AtomicU64::new(0),
            contention_events: AtomicU64::new(0),
            remote_frees: AtomicU64::new(0),
        }
    }

    fn add_to(&self, stats: &mut Stats) {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        stats.allocations += get(&self.fast_path_hits) + get(&self.slow_path_allocations);
        stats.fast_path_hits += get(&self.fast_path_hits);
        stats.slow_path_scans += get(&self.slow_path_scans);
        stats.growths += get(&self.growths);
        stats.sync_releases += get(&self.sync_releases);
        stats.deferred_releases += get(&self.deferred_releases);
        stats.release_errors += get(&self.release_errors);
        stats.stale_rejections += get(&self.stale_rejections);
        stats.contention_events += get(&self.contention_events);
    }

    /// Slots taken minus slots freed, for the owner's (`Shard::local`)
    /// counters: every bitmap bit is set and cleared by the owner, each time
    /// with exactly one of these counters bumped.
    fn occupied(&self) -> u64 {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let taken = get(&self.fast_path_hits) + get(&self.slow_path_allocations);
        let freed =
            get(&self.sync_releases) + get(&self.deferred_releases) + get(&self.remote_frees);
        taken.wrapping_sub(freed)
    }
}

/// Adds `n` to a counter only the calling thread writes: no RMW needed.
#[inline(always)]
fn bump_local(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// What other threads hand to a shard's owner.
struct Remote {
    /// Slots whose value still has to be released (last reference dropped
    /// on a drop path). Treiber stack through the slots' links.
    deferred_head: AtomicU32,
    /// Slots whose value is already released; only the bitmap bit is left.
    freed_head: AtomicU32,
    deferred_pushed: AtomicU64,
    counters: Counters,
}

struct Shard<T> {
    /// Written only by the thread holding this shard's claim flag, on every
    /// operation (`next_free`), so padded away from the slot array
    /// pointers that lookups on other threads read.
    bitmap: CachePadded<UnsafeCell<Bitmap>>,
    /// `tag << TAG_SHIFT | shard << SHARD_SHIFT`: an insert's descriptor is
    /// this, or-ed with the slot and the generation bits of the state word
    /// (which sit where the descriptor has them).
    fd_base: u64,
    slots: Slots<T>,
    local: CachePadded<Counters>,
    remote: CachePadded<Remote>,
}

/// Which thread is doing an operation, for counting and freeing.
#[derive(Clone, Copy)]
struct Caller {
    owned: Option<usize>,
}

/// A sharded descriptor table. See the [crate docs](crate) for the model
/// and [`implementation`](crate::implementation) for the layout.
pub struct FdTable<T: Release> {
    id: u64,
    /// `local::cache_key(id)`, for the one-compare claim cache tests.
    cache_key: u64,
    tag: u64,
    /// `tag << 8`: a descriptor's bits 20..40 (tag and shard) minus this
    /// are its shard index when the tag matches, and >= 256 (or wrapped)
    /// when it does not, so one bound check covers both.
    tag_key: u64,
    growth: Growth,
    /// `owner_shards` owner shards, then one shared shard used under its lock.
    shards: Box<[Shard<T>]>,
    claims: Arc<ClaimFlags>,
    _values: PhantomData<T>,
}

// SAFETY: the table owns values of type T and may release (move out and
// drop) them on any thread, which needs `T: Send`. All interior mutability is
// either atomic or behind the claim protocol (bitmaps) or the reference
// protocol (values), both of which are thread-safe.
unsafe impl<T: Release> Send for FdTable<T> {}
// SAFETY: sharing the table lets several threads hold `&T` at once through
// guards (needs `T: Sync`) and insert/release values from any thread (needs
// `T: Send`, part of `Release`). Bitmaps are only written by the claim holder;
// slots are made usable only by the claim holder, before the Release store
// that publishes them, and touched by others only after seeing it.
unsafe impl<T: Release + Sync> Sync for FdTable<T> {}

impl<T: Release> fmt::Debug for FdTable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FdTable")
            .field("id", &self.id)
            .field("owner_shards", &(self.shards.len() - 1))
            .field("max_slots", &self.growth.max_slots())
            .field("stats", &self.stats())
            .finish()
    }
}

impl<T: Release> FdTable<T> {
    /// Creates a table. Out-of-range settings are clamped: `shards` to
    /// `1..=`[`MAX_SHARDS`](crate::MAX_SHARDS), `max_slots` to
    /// `1..=`[`MAX_SLOTS_PER_SHARD`](crate::MAX_SLOTS_PER_SHARD), and
    /// `initial_slots` to `1..=max_slots`, rounded up to a power of two.
    ///
    /// # Panics
    /// When the address space for `max_slots` slots per shard cannot be
    /// reserved, or the memory for `initial_slots` not committed (see
    /// [`Config::max_slots`]).
    pub fn new(config: Config) -> Self {
        let owner_shards = config.shards.clamp(1, crate::MAX_SHARDS);
        let max_slots = config.max_slots.clamp(1, crate::MAX_SLOTS_PER_SHARD) as u32;
        let initial = config.initial_slots.clamp(1, max_slots as usize) as u32;
        let growth = Growth::new(initial, max_slots);
        let id = TABLE_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(id <= local::MAX_TABLE_ID, "fdtable: table ids exhausted");
        let tag = id & crate::TAG_MASK;
        let shards = (0..=owner_shards)
            .map(|shard| {
                let slots = Slots::new(max_slots, growth.initial()).unwrap_or_else(|error| {
                    panic!("fdtable: cannot reserve {max_slots} slots for a shard: {error}")
                });
                Shard {
                    bitmap: CachePadded::new(UnsafeCell::new(Bitmap::with_capacity(
                        growth.initial(),
                    ))),
                    fd_base: Fd::pack(tag, shard, 0, 0).to_raw(),
                    slots,
                    local: CachePadded::new(Counters::new()),
                    remote: CachePadded::new(Remote {
                        deferred_head: AtomicU32::new(NO_SLOT),
                        freed_head: AtomicU32::new(NO_SLOT),
                        deferred_pushed: AtomicU64::new(0),
                        counters: Counters::new(),
                    }),
                }
            })
            .collect();
        FdTable {
            id,
            cache_key: local::cache_key(id),
            tag,
            tag_key: tag << 8,
            growth,
            shards,
            claims: Arc::new(ClaimFlags::new(owner_shards + 1)),
            _values: PhantomData,
        }
    }

    fn shared_shard(&self) -> usize {
        self.shards.len() - 1
    }

    /// The shard the calling thread owns, if it has claimed one. Never
    /// claims: only an insert does, so a thread that just closes, releases
    /// or reaps (a daemon's reaper) leaves the owner shards to the threads
    /// that insert. With one owner shard per worker, a reaper that took one
    /// left a worker inserting through the shared shard's lock, and through
    /// the claim lookup, on every open.
    #[inline]
    fn caller(&self) -> Caller {
        Caller {
            owned: local::claimed_shard(self.id),
        }
    }

    /// The shard the calling thread allocates from: its own (claimed on
    /// first use), or the shared, locked shard when every owner shard is
    /// taken by another live thread.
    pub fn local_shard(&self) -> usize {
        local::owned_shard(self.id, &self.claims)
            .or_else(|| local::retry_claim(self.id, &self.claims))
            .unwrap_or_else(|| self.shared_shard())
    }

    /// A token for the calling thread's own shard, or `None` if the thread
    /// owns none (every owner shard is taken by another live thread, or the
    /// thread is exiting).
    ///
    /// The token resolves the claim once; its `insert` and `close` then skip
    /// the thread-local lookup that [`FdTable::insert`] and
    /// [`FdTable::close`] do on every call. It is `!Send` (the claim belongs
    /// to this thread), so a worker keeps one for its lifetime:
    ///
    /// ```
    /// use fdtable::{Config, FdTable};
    ///
    /// let table: FdTable<std::fs::File> = FdTable::new(Config::default());
    /// let local = table.local().expect("a fresh table has a free shard");
    /// let fd = local.insert(std::fs::File::open("Cargo.toml").unwrap()).unwrap();
    /// assert_eq!(fd.shard(), local.shard());
    /// assert!(table.get(fd).is_ok());
    /// local.close(fd).unwrap();
    /// ```
    pub fn local(&self) -> Option<LocalShard<'_, T>> {
        let shard = local::owned_shard(self.id, &self.claims)
            .or_else(|| local::retry_claim(self.id, &self.claims))?;
        local::pin().then_some(LocalShard {
            table: self,
            shard,
            _not_send: PhantomData,
        })
    }

    /// Inserts `value` at the lowest free slot of the caller's shard.
    ///
    /// Also releases, in this thread, values whose last reference was
    /// dropped elsewhere since the shard's last operation (the deferred
    /// list). Fails with [`InsertError::Full`], giving `value` back, when the
    /// shard already holds `max_slots` entries.
    #[inline]
    pub fn insert(&self, value: T) -> Result<Fd, InsertError<T>> {
        self.insert_with_refs(value, 1).map(|(fd, _)| fd)
    }

    /// Inserts `value` and returns an owning handle: dropping it closes the
    /// descriptor with a deferred release, [`Owned::close`] releases now.
    pub fn insert_owned(self: &Arc<Self>, value: T) -> Result<Owned<T>, InsertError<T>> {
        // Two references: the table's (dropped when the entry is closed) and
        // the handle's (keeps the value alive even if someone closes the Fd).
        let (fd, value) = self.insert_with_refs(value, 2)?;
        Ok(Owned {
            table: Arc::clone(self),
            fd,
            value,
        })
    }

    #[inline(always)]
    fn insert_with_refs(&self, value: T, refs: u64) -> Result<(Fd, *const T), InsertError<T>> {
        match local::cached_shard(self.cache_key) {
            // SAFETY: the cache names a shard only while this thread holds
            // its claim, and the claim is held until the thread exits.
            Some(shard) => unsafe { self.insert_claimed(shard, value, refs) },
            None => self.insert_uncached(value, refs),
        }
    }

    /// Inserts for a thread whose fast claim cache does not name this
    /// table: the first use, another table used last, or no shard owned.
    #[cold]
    fn insert_uncached(&self, value: T, refs: u64) -> Result<(Fd, *const T), InsertError<T>> {
        let shard = local::owned_shard(self.id, &self.claims)
            .or_else(|| local::retry_claim(self.id, &self.claims));
        if let Some(shard) = shard {
            // SAFETY: this thread holds shard `shard`'s claim until it exits.
            return unsafe { self.insert_claimed(shard, value, refs) };
        }
        let shard = self.shared_shard();
        let lock = self.lock_shard(shard);
        // SAFETY: `lock` holds the shard's claim flag until it is dropped.
        let result = unsafe { self.insert_claimed(shard, value, refs) };
        drop(lock);
        result
    }

    /// # Safety
    /// The calling thread must hold `shard`'s claim flag (as its owner or
    /// through a [`ShardLock`]) for the whole call; `shard` is then a shard
    /// of this table.
    #[inline(always)]
    unsafe fn insert_claimed(
        &self,
        shard_index: usize,
        value: T,
        refs: u64,
    ) -> Result<(Fd, *const T), InsertError<T>> {
        debug_assert!(shard_index < self.shards.len());
        // SAFETY: claims exist only for shards of this table.
        let shard = unsafe { self.shards.get_unchecked(shard_index) };
        // SAFETY: forwarded from the caller.
        unsafe { self.drain_claimed(shard_index) };
        // SAFETY: the claim holder is the only thread touching the bitmap, and
        // no user code runs while this borrow is alive.
        let fast = shard
            .bitmap
            .with_mut(|bitmap| unsafe { (*bitmap).take_fast() });
        let slot = match fast {
            Some(slot) => {
                bump_local(&shard.local.fast_path_hits, 1);
                slot
            }
            // SAFETY: forwarded from the caller.
            None => match unsafe { self.take_slow(shard_index) } {
                Some(slot) => slot,
                None => return Err(InsertError::Full(value)),
            },
        };
        // SAFETY: the claim holder published every slot its bitmap covers
        // (growth publishes before it extends the bitmap).
        let (state, cell) = unsafe { (shard.slots.state(slot), shard.slots.value(slot)) };
        // SAFETY: the slot's bit was free, so no value is stored and no
        // reference can read the cell (ALLOC/OPEN are clear until the
        // store below publishes the value with Release ordering).
        let value_ptr = cell.with_mut(|cell| unsafe {
            (*cell).write(value);
            cell as *const T
        });
        // A plain store, not a read-modify-write: on a free slot (ALLOC
        // clear) the reference bits carry no meaning. A lookup with a stale
        // `Fd` that lands on a free slot keeps its +1 (it never undoes it,
        // see `get`), so overwriting those bits loses nothing, and the
        // generation bits only change on the final transition, which happened
        // before this thread saw the slot free. Linux's `file_ref_init` does
        // the same. (One RMW fewer; see `implementation` for what it is worth.)
        let free = state.load(Ordering::Relaxed);
        debug_assert_eq!(free & ALLOC, 0, "allocating an occupied slot");
        sync::store_against_rmw(
            state,
            (free & !REFS_MASK) | ALLOC | OPEN | refs,
            Ordering::Release,
        );
        // The generation sits at the same bits in the state word and the Fd.
        let fd = Fd::from_raw(shard.fd_base | (free & GEN_BITS) | u64::from(slot));
        Ok((fd, value_ptr))
    }

    /// The allocation slow path: the `full` summary scan, then growth.
    /// Returns the slot, marked taken, or `None` when the shard is full.
    ///
    /// # Safety
    /// The calling thread must hold `shard`'s claim flag.
    #[cold]
    unsafe fn take_slow(&self, shard_index: usize) -> Option<u32> {
        let shard = &self.shards[shard_index];
        bump_local(&shard.local.slow_path_scans, 1);
        // SAFETY: exclusive to the claim holder; no user code runs meanwhile.
        let found = shard
            .bitmap
            .with(|bitmap| unsafe { (*bitmap).find_lowest() });
        let slot = match found {
            Found::Fast(slot) | Found::Slow(slot) => slot,
            // SAFETY: forwarded from the caller.
            Found::None => unsafe { self.grow_claimed(shard_index) }?,
        };
        bump_local(&shard.local.slow_path_allocations, 1);
        // SAFETY: as above.
        shard
            .bitmap
            .with_mut(|bitmap| unsafe { (*bitmap).take_lowest(slot) });
        Some(slot)
    }

    /// Publishes the next range of `shard`'s slots and returns the new
    /// lowest free slot; `None` when the shard is at `max_slots` or the
    /// kernel will not commit the memory.
    ///
    /// # Safety
    /// The calling thread must hold `shard`'s claim flag.
    #[cold]
    unsafe fn grow_claimed(&self, shard_index: usize) -> Option<u32> {
        let shard = &self.shards[shard_index];
        // SAFETY: exclusive to the claim holder.
        let capacity = shard.bitmap.with(|bitmap| unsafe { (*bitmap).capacity() });
        let end = self.growth.next(capacity)?;
        // The claim holder publishes, in order: the bitmap's capacity is the
        // end of the last published range. Memory the kernel will not give
        // is a full shard, like `max_slots`.
        shard.slots.publish(capacity, end).ok()?;
        bump_local(&shard.local.growths, 1);
        // SAFETY: exclusive to the claim holder.
        shard.bitmap.with_mut(|bitmap| unsafe {
            (*bitmap).grow_to(end);
            match (*bitmap).find_lowest() {
                Found::Fast(slot) | Found::Slow(slot) => Some(slot),
                Found::None => None,
            }
        })
    }

    /// All three parts of slot `slot` of shard `shard`, or `None` if no
    /// such slot is published (for paths where speed does not matter).
    fn slot_ref(&self, shard: usize, slot: u32) -> Option<SlotRef<'_, T>> {
        let shard = self.shards.get(shard)?;
        if !shard.slots.contains(slot) {
            return None;
        }
        // SAFETY: `contains` just saw the slot published.
        Some(unsafe { shard.slots.slot(slot) })
    }

    /// Validates `fd` (table tag, shard, slot published) and returns its
    /// shard: a tag compare, a shard bound, one Acquire load and
    /// compare. Everything about the entry itself (open, generation) is the
    /// caller's one atomic operation on the state word.
    #[inline(always)]
    fn find(&self, fd: Fd) -> Result<&Shard<T>, Error> {
        // Tag and shard in one compare (see `tag_key`).
        let tag_and_shard = (fd.to_raw() >> crate::SHARD_SHIFT) & 0xF_FFFF;
        let index = tag_and_shard.wrapping_sub(self.tag_key) as usize;
        match self.shards.get(index) {
            Some(shard) if shard.slots.contains(fd.slot()) => Ok(shard),
            _ => Err(self.not_found(fd)),
        }
    }

    /// Why `find` failed: another table's descriptor, or no such slot.
    #[cold]
    fn not_found(&self, fd: Fd) -> Error {
        if fd.tag() != self.tag {
            return Error::WrongTable;
        }
        self.count_stale(fd.shard().min(self.shared_shard()));
        Error::Stale
    }

    #[cold]
    fn count_stale(&self, shard: usize) {
        self.shards[shard]
            .remote
            .counters
            .stale_rejections
            .fetch_add(1, Ordering::Relaxed);
    }

    fn count_contention(&self, shard: usize, caller: Caller) {
        let shard_ref = &self.shards[shard];
        if caller.owned == Some(shard) {
            bump_local(&shard_ref.local.contention_events, 1);
        } else {
            shard_ref
                .remote
                .counters
                .contention_events
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes a reference to the entry of `fd`: one atomic add, no lock.
    ///
    /// Fails with [`Error::Stale`] if `fd` was closed (its slot may have been
    /// reused since: the generation tells them apart) and with
    /// [`Error::WrongTable`] if `fd` came from another table.
    #[inline]
    pub fn get(&self, fd: Fd) -> Result<Guard<'_, T>, Error> {
        let shard = self.find(fd)?;
        // SAFETY: `find` saw the slot published.
        let state = unsafe { shard.slots.state(fd.slot()) };
        let old = state.fetch_add(1, Ordering::Acquire);
        // Open, and the generation the descriptor carries (same bits in both).
        if old & OPEN != 0 && (old ^ fd.to_raw()) & GEN_BITS == 0 {
            // SAFETY: as above. OPEN means the table's own reference is still
            // held, so the value is initialized and our reference keeps it so.
            let value = unsafe { shard.slots.value(fd.slot()) }.with(|cell| cell as *const T);
            return Ok(Guard {
                table: self,
                fd,
                state,
                value,
            });
        }
        Err(self.get_missed(fd, state, old))
    }

    /// Runs `f` on the value of `fd` and returns what it returns, without a
    /// guard: the thread announces the slot in a word of its own (one
    /// `xchg`), checks the state with a plain load and clears the word with
    /// a plain store after `f` (the `announce` crate). A close or last
    /// guard drop during `f` leaves the value on the shard's deferred list
    /// (released by the owner's next insert or [`reap`](Self::reap) after
    /// `f` returned), so `close` then returns `Ok(())` as when a guard is
    /// out.
    ///
    /// One locked instruction instead of a guard's two (interleaved,
    /// `benches/README.md`). Inside `f`, or on a thread without a word
    /// (more than 128 at once), it takes a guard instead. Fails like
    /// [`get`](Self::get).
    #[inline]
    pub fn get_with<R>(&self, fd: Fd, f: impl FnOnce(&T) -> R) -> Result<R, Error> {
        let shard = self.find(fd)?;
        // Clears the word when dropped, also when `f` unwinds.
        let Some(word) = announce::mine() else {
            return self.get(fd).map(|guard| f(&guard));
        };
        // SAFETY: `find` saw the slot published.
        let state = unsafe { shard.slots.state(fd.slot()) };
        word.announce(announce_key(fd.to_raw()));
        let current = state.load(Ordering::SeqCst);
        if current & OPEN != 0 && (current ^ fd.to_raw()) & GEN_BITS == 0 {
            // SAFETY: as above. OPEN after the announcement: every release
            // of this value follows the close's CAS and checks the words
            // first, so the value stays initialized until the word clears.
            let value = unsafe { shard.slots.value(fd.slot()) }.with(|cell| cell as *const T);
            // SAFETY: see above.
            return Ok(f(unsafe { &*value }));
        }
        drop(word);
        self.count_stale(fd.shard());
        Err(Error::Stale)
    }

    /// Whether a `get_with` announcement covers the slot of `fd_raw` (a
    /// descriptor, or a shard's `fd_base` with a slot number). The caller
    /// has just ended the entry or taken it off the deferred list (a SeqCst
    /// RMW). One load and compare while no thread ever announced.
    #[inline(always)]
    fn covered(&self, fd_raw: u64) -> bool {
        announce::covered(announce_key(fd_raw))
    }

    /// Puts a slot whose value a `get_with` announcement covers on its
    /// shard's deferred list (the caller ended the entry: the value is ours).
    #[cold]
    fn defer_covered(&self, fd: Fd) {
        let slot = self
            .slot_ref(fd.shard(), fd.slot())
            .expect("an ended slot is published");
        self.push_deferred(fd.shard(), fd.slot(), slot);
    }

    /// A lookup whose +1 landed on a closed entry or a reused slot.
    #[cold]
    fn get_missed(&self, fd: Fd, state: &AtomicU64, old: u64) -> Error {
        if old & ALLOC == 0 {
            // A free slot: its reference bits are junk that the next insert
            // overwrites, so the +1 stays (undoing it could race with that
            // insert and take a reference from the new entry). Only a slot
            // that collected 2^31 of them gets some back, so the bits never
            // carry into ALLOC.
            if refs_of(old) >= JUNK_REFS_LIMIT {
                shed_junk_ref(state);
            }
        } else {
            // An entry with a value: counts are exact, so this is an ordinary
            // reference drop. It can be the decrement that ends a closed
            // entry (it raced with that entry's last drop); then it queues
            // the slot for deferred release exactly like a guard drop. It
            // never releases inline and never touches a value it did not see
            // open.
            self.put_ref(fd, state);
        }
        self.count_stale(fd.shard());
        Error::Stale
    }

    /// Drops one reference; the drop that ends a closed entry defers its release.
    #[inline(always)]
    fn put_ref(&self, fd: Fd, state: &AtomicU64) {
        let old = state.fetch_sub(1, Ordering::AcqRel);
        // The last reference of a closed entry that still holds its value.
        if old & (REFS_MASK | ALLOC | OPEN) == ALLOC | 1 {
            self.finish_deferred(fd, state, old - 1);
        }
    }

    /// Tries the final transition (value present, closed, no refs) ->
    /// (next generation, empty). Only one thread can win it per generation;
    /// the winner queues the value on the shard's deferred list.
    #[cold]
    fn finish_deferred(&self, fd: Fd, state: &AtomicU64, zero: u64) {
        if state
            .compare_exchange(
                zero,
                dead_successor(zero),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            let slot = self
                .slot_ref(fd.shard(), fd.slot())
                .expect("a referenced slot is published");
            self.push_deferred(fd.shard(), fd.slot(), slot);
        }
        // Otherwise a failed lookup added a transient reference in between;
        // its undo will see the count reach zero and retry this transition.
    }

    fn push_deferred(&self, shard_index: usize, slot_number: u32, slot: SlotRef<'_, T>) {
        let remote = &self.shards[shard_index].remote;
        remote.deferred_pushed.fetch_add(1, Ordering::Relaxed);
        if push(&remote.deferred_head, slot.link, slot_number) {
            remote
                .counters
                .contention_events
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Closes `fd`: the descriptor is invalid from now on.
    ///
    /// If no guard or owning handle still references the entry, the value is
    /// released here, in the caller, and the release error (for an OS file:
    /// the `close(2)` error) is returned once. Otherwise the last guard's
    /// drop queues it for deferred release and this returns `Ok(())`.
    /// A second close of the same `fd` fails with [`CloseError::Stale`].
    #[inline]
    pub fn close(&self, fd: Fd) -> Result<(), CloseError<T::Error>> {
        self.close_as(fd, None)
    }

    /// `close`; `token` is the shard of the caller's `LocalShard`, if any
    /// (then ownership needs no thread-local lookup at all).
    ///
    /// The common close is the owner's, of a descriptor of its own shard,
    /// so the state word's address is computed from the shard the caller
    /// owns (known before the descriptor is looked at) and the descriptor
    /// is only compared with it: the CAS does not wait for a shard index
    /// decoded from the descriptor and a load through it. Every other close
    /// (another shard's descriptor, another table's, a thread that owns no
    /// shard) takes `close_found`, which decodes the descriptor.
    #[inline(always)]
    fn close_as(&self, fd: Fd, token: Option<usize>) -> Result<(), CloseError<T::Error>> {
        let mine = match token {
            Some(mine) => Some(mine),
            None => local::cached_shard(self.cache_key),
        };
        if let Some(mine) = mine {
            debug_assert!(mine < self.shards.len());
            // SAFETY: tokens and the claim cache name only shards of this table.
            let shard = unsafe { self.shards.get_unchecked(mine) };
            if fd.tag_and_shard_bits() == shard.fd_base && shard.slots.contains(fd.slot()) {
                // SAFETY: `contains` just saw the slot published.
                let state = unsafe { shard.slots.state(fd.slot()) };
                return self.close_in(shard, fd, state, Some(mine));
            }
        }
        self.close_found(fd, token)
    }

    /// `close` of a descriptor decoded from its own bits: another shard's,
    /// another table's, or by a thread the claim cache knows nothing about.
    #[cold]
    fn close_found(&self, fd: Fd, token: Option<usize>) -> Result<(), CloseError<T::Error>> {
        let shard = self.find(fd)?;
        // SAFETY: `find` saw the slot published.
        let state = unsafe { shard.slots.state(fd.slot()) };
        let owned = match token {
            Some(mine) => Some(mine),
            None => self.caller().owned,
        };
        self.close_in(shard, fd, state, owned)
    }

    /// The close itself, on `fd`'s validated `state`; `owned` is the shard
    /// the calling thread owns, if any.
    #[inline(always)]
    fn close_in(
        &self,
        shard: &Shard<T>,
        fd: Fd,
        state: &AtomicU64,
        owned: Option<usize>,
    ) -> Result<(), CloseError<T::Error>> {
        // Guess the usual state (open, only the table's reference) so the
        // common close is one CAS with no load before it; that CAS both
        // closes the entry and ends it (next generation, free).
        let expected = (fd.to_raw() & GEN_BITS) | ALLOC | OPEN | 1;
        // SeqCst: a `get_with` that saw the entry open did so before this
        // CAS in the SeqCst order, so the word check below sees it.
        match state.compare_exchange(
            expected,
            dead_successor(expected),
            Ordering::SeqCst,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                if self.covered(fd.to_raw()) {
                    self.defer_covered(fd);
                    return Ok(());
                }
                // SAFETY: the final transition succeeded in this thread, so no
                // reference exists and nobody else will read or take the value;
                // the caller saw the slot published.
                let value = unsafe { shard.slots.value(fd.slot()) }
                    .with_mut(|cell| unsafe { ptr::read(cell).assume_init() });
                self.free_released(shard, fd, owned == Some(fd.shard()), value.release())
            }
            Err(actual) => self.close_contended(fd, state, actual, owned),
        }
    }

    /// `close` when the guess was wrong: a guard is out, the descriptor is
    /// stale, or another thread changed the count in between.
    #[cold]
    fn close_contended(
        &self,
        fd: Fd,
        state: &AtomicU64,
        mut current: u64,
        token: Option<usize>,
    ) -> Result<(), CloseError<T::Error>> {
        let mut caller = token.map(|shard| Caller { owned: Some(shard) });
        // The first failure is a wrong guess, not contention.
        let mut guessed = true;
        loop {
            if current & OPEN == 0 || generation_of(current) != fd.generation() {
                self.count_stale(fd.shard());
                return Err(CloseError::Stale);
            }
            // With only the table's reference left, one CAS both closes the
            // entry and ends it; otherwise the last guard will end it.
            let (next, last) = if refs_of(current) == 1 {
                (dead_successor(current), true)
            } else {
                (current - OPEN - 1, false)
            };
            match state.compare_exchange(current, next, Ordering::SeqCst, Ordering::Acquire) {
                Ok(_) if last => {
                    let caller = caller.unwrap_or_else(|| self.caller());
                    let slot = self
                        .slot_ref(fd.shard(), fd.slot())
                        .expect("a referenced slot is published");
                    return self.release_now(fd, slot, caller);
                }
                Ok(_) => return Ok(()),
                Err(actual) => {
                    if !guessed {
                        let who = *caller.get_or_insert_with(|| self.caller());
                        self.count_contention(fd.shard(), who);
                    }
                    guessed = false;
                    current = actual;
                }
            }
        }
    }

    /// A value of shard `fd.shard()` was released by a thread that does not
    /// own the shard: count it there and hand the slot to the owner.
    #[cold]
    fn freed_elsewhere(&self, fd: Fd, failed: bool) {
        let shard = &self.shards[fd.shard()];
        let counters = &shard.remote.counters;
        counters.sync_releases.fetch_add(1, Ordering::Relaxed);
        if failed {
            counters.release_errors.fetch_add(1, Ordering::Relaxed);
        }
        let slot = self
            .slot_ref(fd.shard(), fd.slot())
            .expect("a released slot is published");
        if push(&shard.remote.freed_head, slot.link, fd.slot()) {
            counters.contention_events.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Releases the value of a slot this thread just ended, then frees the slot.
    fn release_now(
        &self,
        fd: Fd,
        slot: SlotRef<'_, T>,
        caller: Caller,
    ) -> Result<(), CloseError<T::Error>> {
        if self.covered(fd.to_raw()) {
            self.push_deferred(fd.shard(), fd.slot(), slot);
            return Ok(());
        }
        // SAFETY: the final transition succeeded in this thread, so no
        // reference exists and nobody else will read or take the value
        // (no `get_with` announcement covers it).
        let value = slot
            .value
            .with_mut(|cell| unsafe { ptr::read(cell).assume_init() });
        let shard = &self.shards[fd.shard()];
        let owner = caller.owned == Some(fd.shard());
        self.free_released(shard, fd, owner, value.release())
    }

    /// After `fd`'s value was released with `result`: counts it and frees
    /// the slot, in the bitmap when this thread owns `shard`, else through
    /// the owner's freed list. Inlined into both release paths, so the
    /// common close stays one straight line (120 instructions per pair).
    #[inline(always)]
    fn free_released(
        &self,
        shard: &Shard<T>,
        fd: Fd,
        owner: bool,
        result: Result<(), T::Error>,
    ) -> Result<(), CloseError<T::Error>> {
        if owner {
            bump_local(&shard.local.sync_releases, 1);
            if result.is_err() {
                bump_local(&shard.local.release_errors, 1);
            }
            // SAFETY: this thread owns the shard, so it alone writes the
            // bitmap, and no other borrow of it is alive in this thread. The
            // slot is below the shard's `published` (both callers checked),
            // which for the owner, who grows slots and bitmap together, is the
            // bitmap's capacity.
            shard
                .bitmap
                .with_mut(|bitmap| unsafe { (*bitmap).release(fd.slot()) });
        } else {
            self.freed_elsewhere(fd, result.is_err());
        }
        result.map_err(CloseError::Release)
    }

    /// Drains what other threads handed to `shard`: releases deferred values
    /// and frees their slots, and frees slots already released elsewhere.
    ///
    /// # Safety
    /// The calling thread must hold `shard`'s claim flag.
    #[inline]
    unsafe fn drain_claimed(&self, shard_index: usize) -> usize {
        let remote = &self.shards[shard_index].remote;
        let mut released = 0;
        if remote.deferred_head.load(Ordering::Relaxed) != NO_SLOT {
            // SAFETY: forwarded from the caller.
            released = unsafe { self.drain_deferred_claimed(shard_index) };
        }
        if remote.freed_head.load(Ordering::Relaxed) != NO_SLOT {
            // SAFETY: forwarded from the caller.
            unsafe { self.drain_freed_claimed(shard_index) };
        }
        released
    }

    /// # Safety
    /// The calling thread must hold `shard`'s claim flag.
    #[cold]
    unsafe fn drain_deferred_claimed(&self, shard_index: usize) -> usize {
        let shard = &self.shards[shard_index];
        // SeqCst: the word checks below come after every ending CAS of
        // the slots taken here (see the `announce` crate).
        let mut next = shard.remote.deferred_head.swap(NO_SLOT, Ordering::SeqCst);
        let mut released = 0;
        while next != NO_SLOT {
            let slot_number = next;
            let slot = self
                .slot_ref(shard_index, slot_number)
                .expect("deferred slots are published");
            next = slot.link.load(Ordering::Relaxed);
            if self.covered(shard.fd_base | u64::from(slot_number)) {
                // A `get_with` still reads it: back on the list (we hold
                // the rest of the popped chain in `next`).
                push(&shard.remote.deferred_head, slot.link, slot_number);
                continue;
            }
            // SAFETY: popping the slot from the deferred list makes this
            // thread the only one that may take its value.
            let value = slot
                .value
                .with_mut(|cell| unsafe { ptr::read(cell).assume_init() });
            if value.release().is_err() {
                bump_local(&shard.local.release_errors, 1);
            }
            bump_local(&shard.local.deferred_releases, 1);
            // SAFETY: exclusive to the claim holder; no user code runs while
            // the borrow is alive. The slot was handed out by this bitmap,
            // so it is below its capacity.
            shard
                .bitmap
                .with_mut(|bitmap| unsafe { (*bitmap).release(slot_number) });
            released += 1;
        }
        released
    }

    /// # Safety
    /// The calling thread must hold `shard`'s claim flag.
    #[cold]
    unsafe fn drain_freed_claimed(&self, shard_index: usize) {
        let shard = &self.shards[shard_index];
        let mut next = shard.remote.freed_head.swap(NO_SLOT, Ordering::Acquire);
        while next != NO_SLOT {
            let slot_number = next;
            let slot = self
                .slot_ref(shard_index, slot_number)
                .expect("freed slots are published");
            next = slot.link.load(Ordering::Relaxed);
            // SAFETY: exclusive to the claim holder; the slot was handed
            // out by this bitmap, so it is below its capacity.
            shard
                .bitmap
                .with_mut(|bitmap| unsafe { (*bitmap).release(slot_number) });
            bump_local(&shard.local.remote_frees, 1);
        }
    }

    /// Releases deferred values of a shard another live thread owns; their
    /// slots go back to that owner through the freed list.
    fn drain_deferred_unowned(&self, shard_index: usize) -> usize {
        let remote = &self.shards[shard_index].remote;
        if remote.deferred_head.load(Ordering::Relaxed) == NO_SLOT {
            return 0;
        }
        // SeqCst: see `drain_deferred_claimed`.
        let mut next = remote.deferred_head.swap(NO_SLOT, Ordering::SeqCst);
        let mut released = 0;
        let fd_base = self.shards[shard_index].fd_base;
        while next != NO_SLOT {
            let slot_number = next;
            let slot = self
                .slot_ref(shard_index, slot_number)
                .expect("deferred slots are published");
            next = slot.link.load(Ordering::Relaxed);
            if self.covered(fd_base | u64::from(slot_number)) {
                push(&remote.deferred_head, slot.link, slot_number);
                continue;
            }
            // SAFETY: popping the slot from the deferred list makes this
            // thread the only one that may take its value.
            let value = slot
                .value
                .with_mut(|cell| unsafe { ptr::read(cell).assume_init() });
            if value.release().is_err() {
                remote
                    .counters
                    .release_errors
                    .fetch_add(1, Ordering::Relaxed);
            }
            remote
                .counters
                .deferred_releases
                .fetch_add(1, Ordering::Relaxed);
            if push(&remote.freed_head, slot.link, slot_number) {
                remote
                    .counters
                    .contention_events
                    .fetch_add(1, Ordering::Relaxed);
            }
            released += 1;
        }
        released
    }

    /// Releases every deferred value now, in this thread, and returns how
    /// many. Shards nobody owns are drained completely; shards owned by a
    /// live thread get their values released here and their slots freed by
    /// the owner on its next operation. Meant for a periodic reaper tick.
    pub fn reap(&self) -> usize {
        let caller = self.caller();
        let mut released = 0;
        for shard in 0..self.shards.len() {
            if caller.owned == Some(shard) {
                // SAFETY: this thread owns the shard.
                released += unsafe { self.drain_claimed(shard) };
            } else if self.claims.try_acquire(shard) {
                let lock = ShardLock {
                    flags: &self.claims,
                    shard,
                };
                // SAFETY: `lock` holds the shard's claim flag.
                released += unsafe { self.drain_claimed(shard) };
                drop(lock);
            } else {
                released += self.drain_deferred_unowned(shard);
            }
        }
        released
    }

    /// Sums the per-shard counters. Cheap (a few loads per shard), meant for
    /// a metrics scrape; the figures are not a consistent snapshot.
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        let mut pushed = 0u64;
        for shard in self.shards.iter() {
            shard.local.add_to(&mut stats);
            stats.live += shard.local.occupied();
            shard.remote.counters.add_to(&mut stats);
            pushed += shard.remote.deferred_pushed.load(Ordering::Relaxed);
        }
        stats.deferred_queue_depth = pushed.saturating_sub(stats.deferred_releases);
        stats
    }

    /// Spins (then yields) until this thread holds `shard`'s claim flag.
    #[cold]
    fn lock_shard(&self, shard: usize) -> ShardLock<'_> {
        let mut waited = false;
        let mut spins = 0u32;
        while !self.claims.try_acquire(shard) {
            if !waited {
                waited = true;
                self.shards[shard]
                    .remote
                    .counters
                    .contention_events
                    .fetch_add(1, Ordering::Relaxed);
            }
            spins += 1;
            if spins < 64 {
                sync::spin_loop();
            } else {
                sync::yield_now();
            }
        }
        ShardLock {
            flags: &self.claims,
            shard,
        }
    }

    /// Ends an owning handle's hold on its entry (see `Owned`).
    fn drop_owned(&self, fd: Fd, release_now: bool) -> Result<(), CloseError<T::Error>> {
        let slot = self
            .slot_ref(fd.shard(), fd.slot())
            .expect("an owned entry's slot exists");
        let mut caller = None;
        loop {
            let current = slot.state.load(Ordering::Acquire);
            if current & OPEN == 0 {
                // Someone closed the descriptor; only our reference is left to drop.
                let old = slot.state.fetch_sub(1, Ordering::AcqRel);
                if refs_of(old) == 1 && old & ALLOC != 0 {
                    let zero = old - 1;
                    if slot
                        .state
                        .compare_exchange(
                            zero,
                            dead_successor(zero),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                    {
                        return self.finish_owned(fd, slot, release_now, caller);
                    }
                }
                return Ok(());
            }
            debug_assert_eq!(generation_of(current), fd.generation());
            // Drop the table's reference and ours together.
            let (next, last) = if refs_of(current) == 2 {
                (dead_successor(current), true)
            } else {
                (current - OPEN - 2, false)
            };
            if slot
                .state
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if last {
                    return self.finish_owned(fd, slot, release_now, caller);
                }
                return Ok(());
            }
            let who = *caller.get_or_insert_with(|| self.caller());
            self.count_contention(fd.shard(), who);
        }
    }

    fn finish_owned(
        &self,
        fd: Fd,
        slot: SlotRef<'_, T>,
        release_now: bool,
        caller: Option<Caller>,
    ) -> Result<(), CloseError<T::Error>> {
        if release_now {
            let caller = caller.unwrap_or_else(|| self.caller());
            self.release_now(fd, slot, caller)
        } else {
            self.push_deferred(fd.shard(), fd.slot(), slot);
            Ok(())
        }
    }
}

impl<T: Release> Drop for FdTable<T> {
    fn drop(&mut self) {
        // No guard or owning handle can exist any more (they borrow the table
        // or hold an Arc to it). Values still in the table are released here,
        // inline: there is nobody left to defer to. Errors have nowhere to go.
        for shard_index in 0..self.shards.len() {
            let remote = &self.shards[shard_index].remote;
            let mut next = remote.deferred_head.swap(NO_SLOT, Ordering::Acquire);
            while next != NO_SLOT {
                let slot = self
                    .slot_ref(shard_index, next)
                    .expect("deferred slot exists");
                next = slot.link.load(Ordering::Relaxed);
                // SAFETY: popped from the deferred list: the value is ours.
                let value = slot
                    .value
                    .with_mut(|cell| unsafe { ptr::read(cell).assume_init() });
                let _ = value.release();
            }
            for slot_number in 0..self.shards[shard_index].slots.published() {
                let slot = self
                    .slot_ref(shard_index, slot_number)
                    .expect("a slot below the count is published");
                if slot.state.load(Ordering::Acquire) & ALLOC != 0 {
                    // SAFETY: ALLOC with no handle left means an open
                    // entry whose value nobody else will take.
                    let value = slot
                        .value
                        .with_mut(|cell| unsafe { ptr::read(cell).assume_init() });
                    let _ = value.release();
                }
            }
        }
    }
}

/// Junk references a free slot may collect before failed lookups start
/// taking theirs back (half the reference field).
const JUNK_REFS_LIMIT: u64 = 1 << 31;

/// Takes one junk reference off a free slot, if it is still free and has
/// any. Which failed lookup's +1 it removes does not matter: on a free slot
/// they are all the same junk.
#[cold]
fn shed_junk_ref(state: &AtomicU64) {
    let mut current = state.load(Ordering::Relaxed);
    while current & ALLOC == 0 && refs_of(current) > 0 {
        match state.compare_exchange_weak(
            current,
            current - 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(actual) => current = actual,
        }
    }
}

/// Pushes `slot` onto a Treiber stack; returns whether the CAS had to retry.
/// Consumers only ever take the whole stack (`swap`), so there is no ABA.
fn push(head: &AtomicU32, link: &AtomicU32, slot: u32) -> bool {
    let mut current = head.load(Ordering::Relaxed);
    let mut retried = false;
    loop {
        link.store(current, Ordering::Relaxed);
        match head.compare_exchange_weak(current, slot, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return retried,
            Err(actual) => {
                current = actual;
                retried = true;
            }
        }
    }
}

/// The key a `get_with` of `fd_raw` announces: tag, shard and slot, not
/// the generation (a reader with a stale descriptor of the slot only delays
/// a release); bit 63 keeps it non-zero and apart from pathcache's keys
/// (entry addresses) in the shared registry of the `announce` crate.
#[inline(always)]
fn announce_key(fd_raw: u64) -> u64 {
    (fd_raw & !GEN_BITS) | 1 << 63
}

/// Holds a shard's claim flag for the locked path; clears it on drop.
struct ShardLock<'a> {
    flags: &'a ClaimFlags,
    shard: usize,
}

impl Drop for ShardLock<'_> {
    fn drop(&mut self) {
        self.flags.release(self.shard);
    }
}

/// The calling thread's own shard of a table, from [`FdTable::local`].
///
/// Holds the shard number the thread claimed, so its operations do no
/// thread-local lookup. Not `Send`: the claim, and with it the right to
/// write the shard's bitmap without a lock, belongs to the creating thread.
///
/// ```compile_fail
/// fn is_send<S: Send>(_: S) {}
/// let table: fdtable::FdTable<std::fs::File> = fdtable::FdTable::new(Default::default());
/// is_send(table.local().unwrap());
/// ```
pub struct LocalShard<'a, T: Release> {
    table: &'a FdTable<T>,
    shard: usize,
    /// `!Send` and `!Sync`.
    _not_send: PhantomData<*const ()>,
}

impl<'a, T: Release> LocalShard<'a, T> {
    /// The shard this thread owns (the one every `insert` allocates from).
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// The table.
    pub fn table(&self) -> &'a FdTable<T> {
        self.table
    }

    /// [`FdTable::insert`] without the claim lookup.
    #[inline]
    pub fn insert(&self, value: T) -> Result<Fd, InsertError<T>> {
        // SAFETY: the token exists only on the thread that holds the claim
        // on `self.shard` (it is `!Send`), and the claim is kept while any
        // token of the thread lives (`local::pin`).
        unsafe { self.table.insert_claimed(self.shard, value, 1) }.map(|(fd, _)| fd)
    }

    /// [`FdTable::close`] without the claim lookup. Works for descriptors
    /// of any shard of the table, like `FdTable::close`.
    #[inline]
    pub fn close(&self, fd: Fd) -> Result<(), CloseError<T::Error>> {
        self.table.close_as(fd, Some(self.shard))
    }

    /// [`FdTable::get`] (which does no claim lookup anyway).
    #[inline]
    pub fn get(&self, fd: Fd) -> Result<Guard<'a, T>, Error> {
        self.table.get(fd)
    }
}

impl<T: Release> Drop for LocalShard<'_, T> {
    fn drop(&mut self) {
        local::unpin();
    }
}

impl<T: Release> fmt::Debug for LocalShard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalShard")
            .field("shard", &self.shard)
            .finish()
    }
}

/// A reference to a table entry, from [`FdTable::get`].
///
/// While it lives the value stays valid, even if the descriptor is closed.
/// Dropping the last guard of a closed entry queues the value for deferred
/// release (no syscall, no lock).
pub struct Guard<'a, T: Release> {
    table: &'a FdTable<T>,
    fd: Fd,
    /// The slot's state word: the drop is one `fetch_sub` on it, with no
    /// page lookup (the deferred-list link is found again only by the drop
    /// that ends a closed entry).
    state: &'a AtomicU64,
    value: *const T,
}

impl<T: Release> Guard<'_, T> {
    /// The descriptor this guard was taken through.
    pub fn fd(&self) -> Fd {
        self.fd
    }
}

// SAFETY: a guard is a shared borrow of `T` plus a reference count; moving it
// to another thread is sound when `&T` may be sent, i.e. `T: Sync`.
unsafe impl<T: Release + Sync> Send for Guard<'_, T> {}
// SAFETY: sharing a guard only hands out `&T`.
unsafe impl<T: Release + Sync> Sync for Guard<'_, T> {}

impl<T: Release> Deref for Guard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard's reference keeps the value initialized and
        // un-taken until the guard is dropped.
        unsafe { &*self.value }
    }
}

impl<T: Release> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.table.put_ref(self.fd, self.state);
    }
}

impl<T: Release + fmt::Debug> fmt::Debug for Guard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("fd", &self.fd)
            .field("value", &**self)
            .finish()
    }
}

/// An owning handle to a table entry, from [`FdTable::insert_owned`].
///
/// Dropping it closes the descriptor and defers the release to the shard's
/// owner (never blocks, never a syscall); [`Owned::close`] releases in the
/// caller and returns the error.
pub struct Owned<T: Release> {
    table: Arc<FdTable<T>>,
    fd: Fd,
    value: *const T,
}

// SAFETY: the handle shares the table (needs `FdTable<T>: Send + Sync`) and
// hands out `&T`; the value may be released on the receiving thread.
unsafe impl<T: Release + Sync> Send for Owned<T> {}
// SAFETY: sharing the handle only hands out `&T` and `Fd`.
unsafe impl<T: Release + Sync> Sync for Owned<T> {}

impl<T: Release> Owned<T> {
    /// The entry's descriptor (valid until this handle is closed or dropped,
    /// or someone closes it through the table).
    pub fn fd(&self) -> Fd {
        self.fd
    }

    /// The table the entry lives in.
    pub fn table(&self) -> &Arc<FdTable<T>> {
        &self.table
    }

    /// Closes the descriptor and, if no guard still references the entry,
    /// releases the value here and returns the release error. If guards are
    /// outstanding the last one defers the release and this returns `Ok(())`;
    /// the same if the descriptor was already closed through the table and a
    /// guard is still out.
    pub fn close(self) -> Result<(), CloseError<T::Error>> {
        let this = ManuallyDrop::new(self);
        let result = this.table.drop_owned(this.fd, true);
        // SAFETY: `this` is never used again and its Drop does not run.
        drop(unsafe { ptr::read(&this.table) });
        result
    }
}

impl<T: Release> Deref for Owned<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the handle's own reference keeps the value alive.
        unsafe { &*self.value }
    }
}

impl<T: Release> Drop for Owned<T> {
    fn drop(&mut self) {
        // A deferred drop never releases inline, so it cannot fail.
        let _ = self.table.drop_owned(self.fd, false);
    }
}

impl<T: Release + fmt::Debug> fmt::Debug for Owned<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owned")
            .field("fd", &self.fd)
            .field("value", &**self)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Release};
    use std::convert::Infallible;

    struct Noop;

    impl Release for Noop {
        type Error = Infallible;

        fn release(self) -> Result<(), Infallible> {
            Ok(())
        }
    }

    fn state_of(table: &FdTable<Noop>, fd: Fd) -> u64 {
        table
            .slot_ref(fd.shard(), fd.slot())
            .unwrap()
            .state
            .load(Ordering::Relaxed)
    }

    /// Failed lookups on a free slot keep their +1 (junk the next insert
    /// overwrites), and a slot that collected `JUNK_REFS_LIMIT` of them gets
    /// them shed one by one, so the reference bits never carry into ALLOC.
    #[test]
    fn junk_references_on_a_free_slot_stay_bounded_and_are_overwritten() {
        let table: FdTable<Noop> = FdTable::new(Config::default());
        let old = table.insert(Noop).unwrap();
        table.close(old).unwrap();
        let free = state_of(&table, old);
        assert_eq!(free & ALLOC, 0);
        assert_eq!(refs_of(free), 0);

        assert_eq!(table.get(old).err(), Some(Error::Stale));
        assert_eq!(refs_of(state_of(&table, old)), 1, "the junk +1 stays");

        // Jump to the limit instead of doing 2^31 lookups.
        let slot = table.slot_ref(old.shard(), old.slot()).unwrap();
        slot.state.store(free | JUNK_REFS_LIMIT, Ordering::Relaxed);
        for _ in 0..3 {
            assert_eq!(table.get(old).err(), Some(Error::Stale));
            assert_eq!(
                state_of(&table, old),
                free | JUNK_REFS_LIMIT,
                "each lookup at the limit sheds what it added"
            );
        }

        let new = table.insert(Noop).unwrap();
        assert_eq!(new.slot(), old.slot());
        assert_eq!(new.generation(), old.generation() + 1);
        let state = state_of(&table, new);
        assert_eq!(refs_of(state), 1, "insert overwrote the junk");
        assert_eq!(state & (ALLOC | OPEN), ALLOC | OPEN);
        let guard = table.get(new).unwrap();
        drop(guard);
        table.close(new).unwrap();
        assert_eq!(table.stats().live, 0);
        assert_eq!(table.stats().sync_releases, 2);
    }
}
