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
//! reused for the next load, never returned to the allocator while any
//! owner of the [`Shared`] state lives (the cache, and every entry in use).
//! That is what lets a lookup pin an entry found in the index without an
//! epoch guard: the address stays an `Entry` whatever happens to it, and the
//! pin protocol (`refcount`) tells a live entry from a dead or reused one.
//! The price is that memory of entries freed after a peak stays in the pool
//! (at most the peak number of entries alive at once: `max_entries` plus
//! removed entries still in use).

use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use crate::entry::{Entry, RefLayout};
use crate::refcount::REF_SHARDS;
use crate::sync::AtomicUsize;

/// Entries per page. Small under loom, which models every counter.
pub(crate) const PAGE: usize = if cfg!(loom) { 2 } else { 64 };

/// The lane arrays of one page (lane-major, so a lane's counts are dense).
#[repr(C, align(64))]
struct Lanes([[AtomicUsize; PAGE]; REF_SHARDS]);

/// One page: leaked boxes, freed by the pool's `Drop`. Raw, not `Box`: the
/// free list and the entries' `lanes` hold pointers into them, and a `Box`
/// moved into the page list would assert uniqueness over its memory (found
/// by Miri, `tests/reuse.rs`).
struct Page<V, L: RefLayout> {
    entries: NonNull<[Entry<V, L>]>,
    lanes: NonNull<Lanes>,
}

/// The free list and the pages behind it.
pub(crate) struct Pool<V, L: RefLayout> {
    free: Mutex<Vec<NonNull<Entry<V, L>>>>,
    pages: Mutex<Vec<Page<V, L>>>,
}

// SAFETY: the pool owns its pages; the raw pointers on the free list point
// into them. Entries are shared between threads under the protocol in
// `refcount` (see `Entry`'s `Sync` impl), which needs `V: Send + Sync`.
unsafe impl<V: Send + Sync, L: RefLayout> Send for Pool<V, L> {}
// SAFETY: as for `Send`; the lists are behind mutexes.
unsafe impl<V: Send + Sync, L: RefLayout> Sync for Pool<V, L> {}

impl<V, L: RefLayout> Default for Pool<V, L> {
    fn default() -> Self {
        Pool {
            free: Mutex::new(Vec::new()),
            pages: Mutex::new(Vec::new()),
        }
    }
}

impl<V, L: RefLayout> Drop for Pool<V, L> {
    fn drop(&mut self) {
        let pages = self.pages.get_mut().unwrap_or_else(|p| p.into_inner());
        for page in pages.drain(..) {
            // SAFETY: leaked in `new_page`, freed once here. The pool drops
            // with the last owner of its `Shared` state, when every entry is
            // FREED (its cells moved out): dropping an entry then drops no
            // `V`, only plain fields.
            unsafe {
                drop(Box::from_raw(page.entries.as_ptr()));
                drop(Box::from_raw(page.lanes.as_ptr()));
            }
        }
    }
}

impl<V, L: RefLayout> Pool<V, L> {
    /// A FREED entry for the caller to occupy (allocating a page when the
    /// free list is empty).
    pub(crate) fn take(&self) -> NonNull<Entry<V, L>> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = free.pop() {
            return p;
        }
        let page = Self::new_page();
        let first = page.entries.cast::<Entry<V, L>>();
        // Handed out from the end of the list, so pages fill front to back.
        // SAFETY: `i < PAGE`, within the page's entry array.
        free.extend((0..PAGE).rev().map(|i| unsafe { first.add(i) }));
        self.pages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(page);
        free.pop().expect("a new page has entries")
    }

    fn new_page() -> Page<V, L> {
        let lanes = NonNull::from(Box::leak(Box::new(Lanes(std::array::from_fn(|_| {
            std::array::from_fn(|_| AtomicUsize::new(0))
        })))));
        // A pointer to the whole lane array, so `lane k = lane 0 + k * PAGE`
        // stays within the allocation it was derived from.
        let base = lanes.cast::<AtomicUsize>();
        let entries: Box<[Entry<V, L>]> = (0..PAGE)
            // SAFETY: `i < PAGE`, within lane 0's array.
            .map(|i| Entry::vacant(unsafe { base.add(i) }))
            .collect();
        let entries = NonNull::from(Box::leak(entries));
        let first = entries.cast::<Entry<V, L>>();
        for i in 0..PAGE {
            // SAFETY: within the array just leaked, which nothing else
            // references yet.
            unsafe { Entry::fix_inline_lanes(first.add(i)) };
        }
        Page { entries, lanes }
    }

    /// Returns a released entry (FREED) for reuse.
    pub(crate) fn give_back(&self, entry: NonNull<Entry<V, L>>) {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(entry);
    }
}

/// What a cache shares with its entries (entries can outlive the cache
/// through `EntryRef`s): byte accounting and the entry pool.
/// Every entry that is not FREED holds one `Arc` of it.
pub(crate) struct Shared<V, L: RefLayout> {
    pub(crate) open_handles: std::sync::atomic::AtomicUsize,
    pub(crate) small_bytes: AtomicU64,
    pub(crate) pool: Pool<V, L>,
}

impl<V, L: RefLayout> Default for Shared<V, L> {
    fn default() -> Self {
        Shared {
            open_handles: Default::default(),
            small_bytes: AtomicU64::new(0),
            pool: Pool::default(),
        }
    }
}
