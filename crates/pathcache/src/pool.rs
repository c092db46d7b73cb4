//! Entry memory: type-stable pages of entries and their reference lanes,
//! owned by the state a cache shares with its entries.
//!
//! ```text
//!  Page (allocated when the free list is empty, freed with the pool)
//!  entries: [Entry; 64]                       16 KiB (256 B each)
//!  lanes:   lane 0: [count; 64]  512 B        lane k of entry i: lanes[k][i]
//!           lane 1: [count; 64]  512 B        (8 entries' counts per line)
//! ```
//!
//! An entry whose payload was released goes back on the free list and is
//! reused for the next load, never returned to the allocator while the pool
//! lives (it is owned by the state a cache shares with its entries, so by
//! the cache and every entry in use).
//! That is what lets a lookup pin an entry found in the index without an
//! epoch guard: the address stays an `Entry` whatever happens to it, and the
//! pin protocol (`refcount`) tells a live entry from a dead or reused one.
//! The price is that memory of entries freed after a peak stays in the pool
//! (at most the peak number of entries alive at once: `max_entries` plus
//! removed entries still in use).

//!
//! The pool knows entries only through [`Slot`], so this module depends on
//! nothing of `entry` (which owns the pool through its shared state).

use std::ptr::NonNull;
use std::sync::Mutex;

use crate::refcount::REF_SHARDS;
use crate::sync::AtomicUsize;

/// What the pool needs of the objects it holds.
pub(crate) trait Slot: Sized {
    /// A vacant (FREED) object whose reference lane 0 is `lane0`; lane `k`
    /// is `lane0 + k * PAGE`.
    fn vacant(lane0: NonNull<AtomicUsize>) -> Self;

    /// Called once per object after its page is allocated, when its final
    /// address is known.
    ///
    /// # Safety
    /// `this` points to an object no one else references yet.
    unsafe fn placed(this: NonNull<Self>);
}

/// Entries per page. Small under loom, which models every counter.
pub(crate) const PAGE: usize = if cfg!(loom) { 2 } else { 64 };

/// The lane arrays of one page (lane-major, so a lane's counts are dense).
#[repr(C, align(64))]
struct Lanes([[AtomicUsize; PAGE]; REF_SHARDS]);

/// One page: leaked boxes, freed by the pool's `Drop`. Raw, not `Box`: the
/// free list and the entries' `lanes` hold pointers into them, and a `Box`
/// moved into the page list would assert uniqueness over its memory (found
/// by Miri, `tests/reuse.rs`).
struct Page<T> {
    entries: NonNull<[T]>,
    lanes: NonNull<Lanes>,
}

/// The free list and the pages behind it.
pub(crate) struct Pool<T> {
    free: Mutex<Vec<NonNull<T>>>,
    pages: Mutex<Vec<Page<T>>>,
}

// SAFETY: the pool owns its pages; the raw pointers on the free list point
// into them. Entries are shared between threads under the protocol in
// `refcount` (see `Entry`'s `Sync` impl), so the pool is as shareable as
// the objects it holds.
unsafe impl<T: Send + Sync> Send for Pool<T> {}
// SAFETY: as for `Send`; the lists are behind mutexes.
unsafe impl<T: Send + Sync> Sync for Pool<T> {}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            free: Mutex::new(Vec::new()),
            pages: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        let pages = self.pages.get_mut().unwrap_or_else(|p| p.into_inner());
        for page in pages.drain(..) {
            // SAFETY: leaked in `new_page`, freed once here. The pool drops
            // with the last owner of the state that holds it, when every
            // entry is FREED (its cells moved out): dropping an entry then
            // drops no payload, only plain fields.
            unsafe {
                drop(Box::from_raw(page.entries.as_ptr()));
                drop(Box::from_raw(page.lanes.as_ptr()));
            }
        }
    }
}

impl<T: Slot> Pool<T> {
    /// A FREED entry for the caller to occupy (allocating a page when the
    /// free list is empty).
    pub(crate) fn take(&self) -> NonNull<T> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = free.pop() {
            return p;
        }
        let page = Self::new_page();
        let first = page.entries.cast::<T>();
        // Handed out from the end of the list, so pages fill front to back.
        // SAFETY: `i < PAGE`, within the page's entry array.
        free.extend((0..PAGE).rev().map(|i| unsafe { first.add(i) }));
        self.pages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(page);
        free.pop().expect("a new page has entries")
    }

    fn new_page() -> Page<T> {
        let lanes = NonNull::from(Box::leak(Box::new(Lanes(std::array::from_fn(|_| {
            std::array::from_fn(|_| AtomicUsize::new(0))
        })))));
        // A pointer to the whole lane array, so `lane k = lane 0 + k * PAGE`
        // stays within the allocation it was derived from.
        let base = lanes.cast::<AtomicUsize>();
        let entries: Box<[T]> = (0..PAGE)
            // SAFETY: `i < PAGE`, within lane 0's array.
            .map(|i| T::vacant(unsafe { base.add(i) }))
            .collect();
        let entries = NonNull::from(Box::leak(entries));
        let first = entries.cast::<T>();
        for i in 0..PAGE {
            // SAFETY: within the array just leaked, which nothing else
            // references yet.
            unsafe { T::placed(first.add(i)) };
        }
        Page { entries, lanes }
    }

    /// Returns a released entry (FREED) for reuse.
    pub(crate) fn give_back(&self, entry: NonNull<T>) {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(entry);
    }
}
