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

use std::sync::atomic::{AtomicU64, Ordering};

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

    /// Retires `(slot, generation)`: one CAS to the next generation, then
    /// the bit. False for a stale or foreign key.
    #[inline]
    pub(crate) fn remove(&mut self, (slot, generation): (usize, u64)) -> bool {
        let Some(state) = self.states.get(slot) else {
            return false;
        };
        if state
            .compare_exchange(
                generation | OPEN,
                generation + GEN_ONE,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return false;
        }
        self.bits[slot / 64] &= !(1 << (slot % 64));
        self.next_free = self.next_free.min(slot);
        true
    }
}
