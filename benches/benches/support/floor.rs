//! The floor contender: the least a lowest-free descriptor table must do on
//! its owner's path, and nothing else. Allocation scans a bitmap word from a
//! `next_free` hint and publishes the slot with one Release store of
//! `generation | OPEN` into its state word (the word a concurrent lookup
//! checks); release retires it with one compare-and-swap to the next
//! generation and clears the bit. No thread-local claim, no deferred list,
//! no pages, no counters: what fdtable pays beyond this pair is its own
//! machinery (see `crates/fdtable/src/implementation.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

const OPEN: u64 = 1;
const GEN_ONE: u64 = 2;

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
