//! Borrow slots: the per-thread "I am reading this entry" marks of
//! [`PathCache::get_with`](crate::PathCache::get_with).
//!
//! A borrowing lookup takes no reference count. Instead the thread publishes
//! the entry's address in its own slot (a line no other thread writes), and a
//! thread about to release an entry's payload first checks that no slot holds
//! that entry (see `refcount::try_claim`). The slot is per cache and per
//! thread, so the hit path writes only the thread's own line.
//!
//! ```text
//!  Hazards (one per cache, shared with its entries through `Accounting`)
//!  +--------------------+--------------------+-----
//!  | thread 0: addr | 0 | thread 1: addr | 0 | ...   each slot padded to its own line
//!  +--------------------+--------------------+-----
//! ```

use crate::sync::{AtomicUsize, Ordering};

/// The borrow slots of one cache.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct Hazards {
    slots: thread_local::ThreadLocal<crossbeam_utils::CachePadded<AtomicUsize>>,
}

#[cfg(not(loom))]
impl Hazards {
    /// The calling thread's slot. Only the calling thread stores to it.
    #[inline]
    pub(crate) fn local(&self) -> &AtomicUsize {
        match self.slots.get() {
            Some(slot) => slot,
            None => self.register(),
        }
    }

    #[cold]
    fn register(&self) -> &AtomicUsize {
        let slot = self.slots.get_or_default();
        // `ThreadLocal` publishes a new slot with a Release store of its
        // `present` flag, which a claimer's Acquire scan could miss. This
        // fence, paired with the fence in `published`, makes a claimer that
        // misses the slot one whose state change this thread will see before
        // it borrows (the fence-fence rule of the SeqCst order).
        std::sync::atomic::fence(Ordering::SeqCst);
        slot
    }

    /// Whether some thread has published `addr` (is borrowing that entry).
    pub(crate) fn published(&self, addr: usize) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.slots.iter().any(|s| s.load(Ordering::SeqCst) == addr)
    }
}

/// Under loom: a fixed slot per modeled thread (loom threads share the OS
/// thread, so `thread_local` cannot tell them apart).
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Hazards {
    slots: [AtomicUsize; LOOM_THREADS],
}

#[cfg(loom)]
const LOOM_THREADS: usize = 4;

#[cfg(loom)]
impl Default for Hazards {
    fn default() -> Self {
        Hazards {
            slots: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }
}

#[cfg(loom)]
impl Hazards {
    pub(crate) fn local(&self) -> &AtomicUsize {
        let i = crate::clock::thread_index();
        assert!(
            i < LOOM_THREADS,
            "loom models use at most {LOOM_THREADS} threads"
        );
        &self.slots[i]
    }

    pub(crate) fn published(&self, addr: usize) -> bool {
        crate::sync::sc_fence();
        self.slots.iter().any(|s| s.load(Ordering::SeqCst) == addr)
    }
}
