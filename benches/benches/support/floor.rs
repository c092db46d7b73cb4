//! The floor contender: the least a lowest-free descriptor table must do on
//! its owner's path, and nothing else. Allocation scans a bitmap word from a
//! `next_free` hint and publishes the slot with one Release store of
//! `generation | OPEN` into its state word (the word a concurrent lookup
//! checks); release retires it with one compare-and-swap to the next
//! generation and clears the bit. No thread-local claim, no deferred list,
//! no pages, no counters: what fdtable pays beyond this pair is its own
//! machinery (see `crates/fdtable/src/implementation.rs`). A lookup
//! ([`Floor::get`]) pins the slot with one `fetch_add` of a reference,
//! checks the generation, reads the value and unpins with one `fetch_sub`:
//! the floor of a reference-counted guard.
//!
//! The announcement variants are the floors of a scoped lookup protected
//! by a per-thread announcement word (a hazard) instead of a count:
//! [`Floor::get_announced`] announces the slot with one `swap` (`xchg`, the
//! store-load fence), checks the state with a plain load and clears the
//! announcement with a plain Release store; [`Floor::get_announced_asym`]
//! announces with a plain store and only a compiler fence (sound only with
//! a process-wide barrier, `membarrier(2)`, on the reclaiming side before it
//! reads the announcements). [`Floor::remove_scanning`] is the reclaiming
//! side's floor: the retiring CAS, then a load of every announcement word.

use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

const OPEN: u64 = 1;
const GEN_ONE: u64 = 2;
/// One reference of a lookup, above the generations (which a benchmark
/// never runs up to 2^40).
const REF_ONE: u64 = 1 << 40;

/// A fixed-capacity single-owner table of `u64` values.
#[derive(Debug)]
pub(crate) struct Floor {
    bits: Vec<u64>,
    next_free: usize,
    states: Vec<AtomicU64>,
    values: Vec<u64>,
}

impl Floor {
    pub(crate) fn new(capacity: usize) -> Floor {
        let words = capacity.div_ceil(64);
        Floor {
            bits: vec![0; words],
            next_free: 0,
            states: (0..words * 64).map(|_| AtomicU64::new(0)).collect(),
            values: vec![0; words * 64],
        }
    }

    /// The lowest free slot, published; `(slot, generation)` or None when full.
    #[inline]
    pub(crate) fn insert(&mut self, value: u64) -> Option<(usize, u64)> {
        let mut w = self.next_free / 64;
        while w < self.bits.len() && self.bits[w] == u64::MAX {
            w += 1;
        }
        let word = *self.bits.get(w)?;
        let slot = w * 64 + (!word).trailing_zeros() as usize;
        self.bits[w] = word | 1 << (slot % 64);
        self.next_free = slot + 1;
        self.values[slot] = value;
        let generation = self.states[slot].load(Ordering::Relaxed) & !OPEN;
        self.states[slot].store(generation | OPEN, Ordering::Release);
        Some((slot, generation))
    }

    /// Looks `(slot, generation)` up: one `fetch_add` pins it, one
    /// `fetch_sub` unpins it after the value is read. None if stale.
    #[inline]
    pub(crate) fn get(&self, (slot, generation): (usize, u64)) -> Option<u64> {
        let state = self.states.get(slot)?;
        let old = state.fetch_add(REF_ONE, Ordering::Acquire);
        let value = (old & (REF_ONE - 1) == generation | OPEN).then(|| self.values[slot]);
        state.fetch_sub(REF_ONE, Ordering::Release);
        value
    }

    /// A scoped lookup under an announcement: one `swap` announces the
    /// slot in `me`, a plain load checks it, a plain store clears `me`.
    #[inline]
    pub(crate) fn get_announced(
        &self,
        (slot, generation): (usize, u64),
        me: &Announce,
    ) -> Option<u64> {
        let state = self.states.get(slot)?;
        me.0.swap(slot as u64 + 1, Ordering::SeqCst);
        let value = (state.load(Ordering::SeqCst) == generation | OPEN).then(|| self.values[slot]);
        me.0.store(0, Ordering::Release);
        value
    }

    /// [`get_announced`](Self::get_announced) with a plain store for the
    /// announcement and a compiler fence: no locked instruction at all.
    #[inline]
    pub(crate) fn get_announced_asym(
        &self,
        (slot, generation): (usize, u64),
        me: &Announce,
    ) -> Option<u64> {
        let state = self.states.get(slot)?;
        me.0.store(slot as u64 + 1, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
        let value = (state.load(Ordering::Relaxed) == generation | OPEN).then(|| self.values[slot]);
        me.0.store(0, Ordering::Release);
        value
    }

    /// [`remove`](Self::remove), then a load of every word of `announced`
    /// (the CAS is the store-load fence). A covered slot would have to wait
    /// for a later scan; here nothing ever covers it, so this is the cost
    /// of the check alone.
    #[inline]
    pub(crate) fn remove_scanning(
        &mut self,
        (slot, generation): (usize, u64),
        announced: &[Announce],
    ) -> bool {
        if !self.retire(slot, generation) {
            return false;
        }
        let tag = slot as u64 + 1;
        if !announced.iter().any(|a| a.0.load(Ordering::SeqCst) == tag) {
            self.free(slot);
        }
        true
    }

    /// Retires `(slot, generation)`: one CAS to the next generation, then
    /// the bit. False for a stale or foreign key.
    #[inline]
    pub(crate) fn remove(&mut self, (slot, generation): (usize, u64)) -> bool {
        if !self.retire(slot, generation) {
            return false;
        }
        self.free(slot);
        true
    }

    /// The CAS that ends `(slot, generation)`; false for a stale or foreign key.
    #[inline(always)]
    fn retire(&self, slot: usize, generation: u64) -> bool {
        self.states.get(slot).is_some_and(|state| {
            state
                .compare_exchange(
                    generation | OPEN,
                    generation + GEN_ONE,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        })
    }

    /// Clears the slot's bit and lowers the hint.
    #[inline(always)]
    fn free(&mut self, slot: usize) {
        self.bits[slot / 64] &= !(1 << (slot % 64));
        self.next_free = self.next_free.min(slot);
    }
}

/// The floor behind `&self` and reached through a `&'static` (leaked), as
/// a table that several threads can reach is: the compiler then cannot
/// keep `next_free` or the bitmap word in a register from one call to the
/// next across the CAS, and loads them back from memory, as fdtable's
/// owner does. Only the owning thread calls it (`!Sync`).
#[derive(Debug)]
pub(crate) struct SharedFloor(std::cell::UnsafeCell<Floor>);

impl SharedFloor {
    pub(crate) fn new(capacity: usize) -> SharedFloor {
        SharedFloor(std::cell::UnsafeCell::new(Floor::new(capacity)))
    }

    #[inline]
    pub(crate) fn insert(&self, value: u64) -> Option<(usize, u64)> {
        // SAFETY: `!Sync` and no borrow of the floor outlives a call.
        unsafe { (*self.0.get()).insert(value) }
    }

    #[inline]
    pub(crate) fn remove(&self, key: (usize, u64)) -> bool {
        // SAFETY: as in `insert`.
        unsafe { (*self.0.get()).remove(key) }
    }
}

/// One thread's announcement word, on a cache line of its own (readers
/// write theirs on every lookup).
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Announce(pub(crate) AtomicU64);
