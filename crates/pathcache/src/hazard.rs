//! Borrow slots: the per-thread "I am reading this entry" marks of
//! [`PathCache::get_with`](crate::PathCache::get_with).
//!
//! A borrowing lookup takes no reference count. Instead the thread publishes
//! the entry's address in its own slot (a line no other thread writes), and a
//! thread about to release an entry's payload first checks that no slot holds
//! that entry (see `refcount::try_claim`). The slot is per cache and per
//! thread, and shares the thread's line with its statistics counters, so a
//! borrowing hit writes only that one line and finds it with one
//! thread-local lookup.
//!
//! ```text
//!  Hazards (one per cache, shared with its entries through `Accounting`)
//!  +------------------------+------------------------+-----
//!  | thread 0: counters,    | thread 1: counters,    | ...  one padded line
//!  |   borrow slot (addr|0) |   borrow slot (addr|0) |      (128 B) per thread
//!  +------------------------+------------------------+-----
//! ```

use crate::stats::{Counters, ThreadCounters};
use crate::sync::{AtomicUsize, Ordering};

/// The per-thread blocks of one cache: statistics counters and borrow slots.
#[derive(Debug, Default)]
pub(crate) struct Hazards {
    pub(crate) threads: ThreadCounters,
    #[cfg(loom)]
    slots: LoomSlots,
}

#[cfg(not(loom))]
impl Hazards {
    /// The calling thread's counters and borrow slot (one thread-local
    /// lookup). Only the calling thread writes either.
    #[inline]
    pub(crate) fn local(&self) -> (&Counters, &AtomicUsize) {
        let block = self.threads.block();
        (&block.counters, &block.borrow_slot)
    }

    /// Whether some thread has published `addr` (is borrowing that entry).
    pub(crate) fn published(&self, addr: usize) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.threads
            .blocks()
            .any(|b| b.borrow_slot.load(Ordering::SeqCst) == addr)
    }
}

/// Under loom: a fixed slot per modeled thread (loom threads share the OS
/// thread, so `thread_local` cannot tell them apart).
#[cfg(loom)]
#[derive(Debug)]
struct LoomSlots([AtomicUsize; LOOM_THREADS]);

#[cfg(loom)]
const LOOM_THREADS: usize = 4;

#[cfg(loom)]
impl Default for LoomSlots {
    fn default() -> Self {
        LoomSlots(std::array::from_fn(|_| AtomicUsize::new(0)))
    }
}

#[cfg(loom)]
impl Hazards {
    pub(crate) fn local(&self) -> (&Counters, &AtomicUsize) {
        let i = crate::clock::thread_index();
        assert!(
            i < LOOM_THREADS,
            "loom models use at most {LOOM_THREADS} threads"
        );
        (self.threads.local(), &self.slots.0[i])
    }

    pub(crate) fn published(&self, addr: usize) -> bool {
        crate::sync::sc_fence();
        self.slots
            .0
            .iter()
            .any(|s| s.load(Ordering::SeqCst) == addr)
    }
}
