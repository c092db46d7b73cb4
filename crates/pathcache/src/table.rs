//! The index: an open-addressed hash table from a path's hash to entry
//! pointers, with lock-free reads and writes serialized by the cache.
//!
//! ```text
//!  Table (capacity a power of two, at most half full after a rebuild)
//!  +-----------------+-----------------+-----------------+-----
//!  | tag:16 | addr:48 | tag:16 | addr:48 | 0               | ...   8 B per slot,
//!  +-----------------+-----------------+-----------------+-----  8 per line
//!   tag = the hash's top 16 bits, never 0; addr = the entry's address.
//!   home = hash & mask; a lookup walks forward from home until an empty
//!   slot (word 0); a removal leaves a tombstone (word 1) that inserts
//!   reuse. Empty and tombstone words have tag 0, so a slot whose tag
//!   matches is a live one: one compare per slot.
//! ```
//!
//! The table never decides whether a slot is *the* entry for a path: a
//! reader takes a candidate (a slot whose hash matches), pins the entry with
//! a reference and checks the entry's own key and state (see `lookup.rs`). So a
//! reader racing a writer can at worst miss (a spurious miss costs a trip
//! through the single-flight load path, which re-probes); it can never
//! return a wrong entry. That is what lets the memory of old tables be
//! reused without an epoch scheme: tables are type-stable (atomics only,
//! never freed while the cache lives), and a reader still walking a table
//! that a rebuild is rewriting reads only atomics and verifies what it finds.
//!
//! Why not papaya (the map this crate used before): a papaya lookup pins its
//! epoch collector (an `xchg` on leave, ~6 ns), and reaches the entry through
//! a table slot, a node and the entry itself. Here a lookup reads one table
//! line and the entry's line 0; the entry's memory is type-stable (entries
//! are recycled, never freed while the cache lives, see `pool.rs`), which is
//! what makes reading a pointer from a slot and pinning it safe without a
//! guard (numbers: `benches/HISTORY.md`, "Measured ratios: pathcache").
//!
//! Writers (insert, remove, rebuild) hold the cache's writer lock
//! ([`Writer`]); all of them are on slow paths (a load, an eviction, an
//! invalidation).

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// An empty slot: lookups stop here.
const EMPTY: u64 = 0;
/// A removed slot: lookups walk past it, inserts reuse it. Its pointer
/// bits (1) are below any entry address (entries are 64-byte aligned).
const TOMBSTONE: u64 = 1;
/// The pointer bits of a slot word; the 16 bits above are the tag.
const PTR_BITS: u32 = 48;
const PTR_MASK: u64 = (1 << PTR_BITS) - 1;

/// The tag a slot stores for `hash` (its top 16 bits; the low bits pick
/// the home slot), never 0: the words of empty slots and tombstones have
/// tag 0, so a slot whose tag matches is live (one compare per slot on a
/// lookup, not a tag compare and an address check). Hashes with top bits
/// 0 share tag 1 with those with top bits 1.
#[inline]
fn tag(hash: u64) -> u64 {
    (hash >> PTR_BITS).max(1)
}

/// The slot word for entry `p` under `hash`.
fn word<T>(hash: u64, p: NonNull<T>) -> u64 {
    // Exposed: `entry_of` rebuilds the pointer from the bare address.
    let addr = p.as_ptr().expose_provenance() as u64;
    // User-space addresses on x86-64 and aarch64 Linux stay below 2^47
    // unless a program maps memory above on purpose; the pool's pages come
    // from the global allocator, which does not.
    assert!(
        addr >> PTR_BITS == 0 && addr >= 64,
        "entry address {addr:#x} does not fit a slot"
    );
    tag(hash) << PTR_BITS | addr
}

/// The entry of a live slot word (`None` for empty and tombstone words).
#[inline]
fn entry_of<T>(word: u64) -> Option<NonNull<T>> {
    let addr = word & PTR_MASK;
    if addr < 64 {
        return None;
    }
    NonNull::new(std::ptr::with_exposed_provenance_mut(addr as usize))
}

/// One table: `mask + 1` slot words (tag << 48 | entry address).
pub(crate) struct Table<T> {
    mask: usize,
    slots: Box<[AtomicU64]>,
    _entries: PhantomData<*mut T>,
}

impl<T> Table<T> {
    fn new(capacity: usize) -> Box<Self> {
        let capacity = capacity.next_power_of_two().max(MIN_CAPACITY);
        Box::new(Table {
            mask: capacity - 1,
            slots: (0..capacity).map(|_| AtomicU64::new(EMPTY)).collect(),
            _entries: PhantomData,
        })
    }

    fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// The entries of the live slots with `hash`'s tag, in probe order.
    /// Lock-free; may miss an entry a concurrent writer is moving (see the
    /// module doc).
    #[inline(always)]
    pub(crate) fn candidates(&self, hash: u64) -> Candidates<'_, T> {
        Candidates {
            table: self,
            tag: tag(hash),
            at: hash as usize & self.mask,
            left: self.mask + 1,
        }
    }
}

/// See [`Table::candidates`]. An iterator rather than a callback: LLVM kept
/// the callback of the lookup out of line in the benchmark.
pub(crate) struct Candidates<'a, T> {
    table: &'a Table<T>,
    tag: u64,
    at: usize,
    /// Bounded: a table being rebuilt under a reader could hold no EMPTY.
    left: usize,
}

impl<T> Iterator for Candidates<'_, T> {
    type Item = NonNull<T>;

    #[inline(always)]
    fn next(&mut self) -> Option<NonNull<T>> {
        while self.left > 0 {
            self.left -= 1;
            debug_assert!(self.at <= self.table.mask && self.table.mask < self.table.slots.len());
            // SAFETY: `at` is masked by `mask`, and a table has `mask + 1`
            // slots (`Table::new`).
            let w = unsafe { self.table.slots.get_unchecked(self.at) }.load(Ordering::Acquire);
            self.at = (self.at + 1) & self.table.mask;
            if w == EMPTY {
                self.left = 0;
                return None;
            }
            if w >> PTR_BITS == self.tag {
                // A live slot (see `tag`): an entry address of at least 64.
                let addr = (w & PTR_MASK) as usize;
                debug_assert!(addr >= 64);
                // SAFETY: not null, as above.
                return Some(unsafe {
                    NonNull::new_unchecked(std::ptr::with_exposed_provenance_mut(addr))
                });
            }
        }
        None
    }
}

const MIN_CAPACITY: usize = 16;

/// What lookups read: the current table, and how many entries it holds
/// (written only by the writer, read by anyone: the cache's `len`).
pub(crate) struct Index<T> {
    current: AtomicPtr<Table<T>>,
    live: AtomicUsize,
}

/// Writer state, held under the cache's writer lock.
pub(crate) struct Writer<T> {
    /// All tables allocated so far (leaked boxes, freed by `Drop`); `current`
    /// is one of them. Raw: the index points at a table, and a `Box` moved
    /// around in the `Vec` would assert uniqueness over it (found by Miri,
    /// `tests/reuse.rs`).
    tables: Vec<NonNull<Table<T>>>,
    /// Which of `tables` is current.
    current: usize,
    tombstones: usize,
}

// SAFETY: the tables hold entry addresses the cache owns (its pool), and
// no `T` by value; the table boxes are owned by the writer.
unsafe impl<T> Send for Writer<T> {}

impl<T> Drop for Writer<T> {
    fn drop(&mut self) {
        for table in self.tables.drain(..) {
            // SAFETY: leaked by `Box::leak` in this module, freed once here;
            // the cache drops its writer state only when no lookup runs.
            drop(unsafe { Box::from_raw(table.as_ptr()) });
        }
    }
}

impl<T> Index<T> {
    /// An index and its writer state, with room for `capacity` entries
    /// before the first rebuild.
    pub(crate) fn new(capacity: usize) -> (Self, Writer<T>) {
        let table = NonNull::from(Box::leak(Table::new(capacity * 2)));
        let current = AtomicPtr::new(table.as_ptr());
        (
            Index {
                current,
                live: AtomicUsize::new(0),
            },
            Writer {
                tables: vec![table],
                current: 0,
                tombstones: 0,
            },
        )
    }

    /// Live slots (entries in the index).
    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Only the writer (under the cache's writer lock) changes the count.
    fn set_len(&self, live: usize) {
        self.live.store(live, Ordering::Relaxed);
    }

    /// The table lookups walk now.
    #[inline]
    pub(crate) fn table(&self) -> &Table<T> {
        // SAFETY: `current` always points at a table owned by the writer
        // state, and tables are dropped only with the cache (which owns both
        // and outlives this borrow).
        unsafe { &*self.current.load(Ordering::Acquire) }
    }
}

impl<T> Writer<T> {
    fn table(&self) -> &Table<T> {
        self.table_at(self.current)
    }

    fn table_at(&self, t: usize) -> &Table<T> {
        // SAFETY: every pointer in `tables` is a leaked box that lives until
        // `Drop`, and tables are only ever shared (their slots are atomics).
        unsafe { self.tables[t].as_ref() }
    }

    /// Every live slot whose tag matches `hash`, with its entry (for the
    /// writer to check under its lock).
    pub(crate) fn candidates(&self, hash: u64) -> impl Iterator<Item = (usize, NonNull<T>)> + '_ {
        let table = self.table();
        let want = tag(hash);
        let mut i = hash as usize & table.mask;
        let mut steps = 0;
        std::iter::from_fn(move || {
            while steps <= table.mask {
                steps += 1;
                let at = i;
                i = (i + 1) & table.mask;
                let w = table.slots[at].load(Ordering::Relaxed);
                if w == EMPTY {
                    steps = usize::MAX;
                    return None;
                }
                if w >> PTR_BITS == want {
                    if let Some(p) = entry_of(w) {
                        return Some((at, p));
                    }
                }
            }
            None
        })
    }

    /// Points slot `at` (from [`candidates`](Self::candidates), so with the
    /// same tag) at `p` instead: a replacement of the entry for the same path.
    pub(crate) fn replace(&mut self, at: usize, hash: u64, p: NonNull<T>) {
        self.table().slots[at].store(word(hash, p), Ordering::Release);
    }

    /// Inserts `p` under `hash` (the caller checked the path is absent).
    /// Rebuilds into a larger or cleaner table first when needed, publishing
    /// it for lookups; `hash_of` gives the full hash of an indexed entry.
    pub(crate) fn insert(
        &mut self,
        index: &Index<T>,
        hash: u64,
        p: NonNull<T>,
        hash_of: impl Fn(NonNull<T>) -> u64,
    ) {
        let capacity = self.table().capacity();
        let live = index.len();
        if (live + self.tombstones + 1) * 4 > capacity * 3 {
            self.rebuild(index, live + 1, hash_of);
        }
        let table = self.table_at(self.current);
        let mut i = hash as usize & table.mask;
        let reused_tombstone = loop {
            let w = table.slots[i].load(Ordering::Relaxed);
            if w == EMPTY || w == TOMBSTONE {
                table.slots[i].store(word(hash, p), Ordering::Release);
                break w == TOMBSTONE;
            }
            i = (i + 1) & table.mask;
        };
        self.tombstones -= usize::from(reused_tombstone);
        index.set_len(live + 1);
    }

    /// Removes slot `at` (from [`candidates`](Self::candidates) or
    /// [`get`](Self::get)).
    pub(crate) fn remove(&mut self, index: &Index<T>, at: usize) {
        self.table().slots[at].store(TOMBSTONE, Ordering::Release);
        index.set_len(index.len() - 1);
        self.tombstones += 1;
    }

    /// Number of slots of the current table (for the CLOCK hand).
    pub(crate) fn capacity(&self) -> usize {
        self.table().capacity()
    }

    /// The entry in slot `at`, if the slot is live.
    pub(crate) fn get(&self, at: usize) -> Option<NonNull<T>> {
        entry_of(self.table().slots[at].load(Ordering::Relaxed))
    }

    /// Moves every live slot into a table with room for `want` entries at
    /// half load (a retired one of that size when there is one) and makes
    /// it current. Readers still walking the old table see it unchanged
    /// until a later rebuild reuses it.
    fn rebuild(&mut self, index: &Index<T>, want: usize, hash_of: impl Fn(NonNull<T>) -> u64) {
        let capacity = (want * 2).next_power_of_two().max(MIN_CAPACITY);
        let moved: Vec<NonNull<T>> = self
            .table()
            .slots
            .iter()
            .filter_map(|w| entry_of(w.load(Ordering::Relaxed)))
            .collect();
        let target = match (0..self.tables.len())
            .find(|&t| t != self.current && self.table_at(t).capacity() == capacity)
        {
            Some(t) => {
                for w in self.table_at(t).slots.iter() {
                    w.store(EMPTY, Ordering::Relaxed);
                }
                t
            }
            None => {
                self.tables
                    .push(NonNull::from(Box::leak(Table::new(capacity))));
                self.tables.len() - 1
            }
        };
        self.current = target;
        self.tombstones = 0;
        let table = self.table_at(target);
        for p in moved {
            let h = hash_of(p);
            let mut i = h as usize & table.mask;
            while table.slots[i].load(Ordering::Relaxed) != EMPTY {
                i = (i + 1) & table.mask;
            }
            table.slots[i].store(word(h, p), Ordering::Relaxed);
        }
        // Release: a reader that sees the new table sees its slots.
        index
            .current
            .store(self.tables[target].as_ptr(), Ordering::Release);
    }

    /// Rebuilds into the smallest table that holds the live slots at half
    /// load when the current one is mostly empty or mostly tombstones.
    pub(crate) fn maybe_shrink(&mut self, index: &Index<T>, hash_of: impl Fn(NonNull<T>) -> u64) {
        let capacity = self.table().capacity();
        let live = index.len();
        if (capacity > MIN_CAPACITY && live * 8 < capacity) || self.tombstones * 4 > capacity {
            self.rebuild(index, live.max(1), hash_of);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn find(index: &Index<u64>, h: u64, want: u64) -> bool {
        index
            .table()
            .candidates(h)
            // SAFETY: the test's boxes outlive the index.
            .any(|p| unsafe { *p.as_ptr() } == want)
    }

    // The test's values are their own hash (spread over the tag bits too).
    fn hash_of(p: NonNull<u64>) -> u64 {
        // SAFETY: the test's boxes outlive the index.
        spread(unsafe { *p.as_ptr() })
    }

    fn spread(v: u64) -> u64 {
        v.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn hashes_with_zero_top_bits_are_found_and_never_match_dead_slots() {
        let (index, mut w) = Index::<u64>::new(4);
        // Top 16 bits 0 (the first and last) and 1 share tag 1; all share
        // home slot 3.
        let hashes = [3u64, 1 << PTR_BITS | 3, 2 << PTR_BITS | 3, 0x40 << 8 | 3];
        let mut values: Vec<Box<u64>> = (0..hashes.len() as u64).map(Box::new).collect();
        // SAFETY: the test's boxes outlive the index.
        let by_value = |p: NonNull<u64>| hashes[unsafe { *p.as_ptr() } as usize];
        for (v, &h) in values.iter_mut().zip(&hashes) {
            w.insert(&index, h, NonNull::from(&mut **v), by_value);
        }
        for (v, &h) in values.iter().zip(&hashes) {
            assert!(find(&index, h, **v), "{h:#x} lost");
        }
        // A tombstone and the empty slots after the run: no candidate.
        let at = w.candidates(hashes[0]).next().unwrap().0;
        w.remove(&index, at);
        assert!(!find(&index, hashes[0], 0));
        assert!(find(&index, hashes[1], 1));
        let live: Vec<u64> = index
            .table()
            .candidates(hashes[1])
            // SAFETY: the test's boxes outlive the index.
            .map(|p| unsafe { *p.as_ptr() })
            .collect();
        assert_eq!(live, [1, 3], "tag 1 matches only the live slots with it");
        assert!(index
            .table()
            .candidates(0x7 << PTR_BITS | 9)
            .next()
            .is_none());
    }

    #[test]
    fn insert_find_remove_and_rebuild_keep_every_live_entry_findable() {
        let (index, mut w) = Index::<u64>::new(4);
        // Values double as their own hash; many collide on the home slot.
        let mut values: Vec<Box<u64>> = (0..500u64).map(|v| Box::new(v % 7 * 1024 + v)).collect();
        for v in values.iter_mut() {
            let h = spread(**v);
            w.insert(&index, h, NonNull::from(&mut **v), hash_of);
        }
        assert_eq!(index.len(), 500);
        for v in &values {
            assert!(find(&index, spread(**v), **v), "{} lost", **v);
        }
        // Remove the even ones.
        for v in values.iter().step_by(2) {
            let at = w
                .candidates(spread(**v))
                // SAFETY: as in `find`.
                .find(|&(_, p)| unsafe { *p.as_ptr() } == **v)
                .unwrap()
                .0;
            w.remove(&index, at);
        }
        w.maybe_shrink(&index, hash_of);
        for (n, v) in values.iter().enumerate() {
            assert_eq!(find(&index, spread(**v), **v), n % 2 == 1, "{}", **v);
        }
        assert_eq!(index.len(), 250);
        // Tables are reused, not piled up: growth and a shrink or two.
        assert!(w.tables.len() <= 10, "{} tables", w.tables.len());
    }
}
