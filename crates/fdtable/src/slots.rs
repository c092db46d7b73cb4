//! Slot storage: pages that never move, and the per-slot state word.
//!
//! A shard's slots live in pages of doubling size (page 0 holds
//! `initial` slots, page `p >= 1` holds `initial << (p - 1)`), so slot `s`
//! maps to a fixed (page, offset) and a page, once published, stays at its
//! address until the table is dropped. Readers on other threads can therefore
//! follow a descriptor while the owner grows the shard.
//!
//! Each page keeps three parallel arrays: the state words (written by every
//! lookup), the deferred-list links (written only on release), and the values
//! (written once per insert, read by lookups), so the reference counting
//! traffic never dirties the lines that hold the values.

use std::mem::MaybeUninit;
use std::ptr;

use crate::sync::{AtomicU32, AtomicU64, Ordering, UnsafeCell};

/// Number of references (guards, owning handle, the table's own while open).
pub(crate) const REFS_MASK: u64 = 0xFFFF_FFFF;
/// The slot holds a value that has not been handed to its releaser yet.
pub(crate) const ALLOC: u64 = 1 << 32;
/// The entry is reachable through its descriptor (not closed).
pub(crate) const OPEN: u64 = 1 << 33;
/// The generation sits at the same bits in the state word and in an `Fd`.
pub(crate) const GEN_SHIFT: u32 = 40;
/// The generation field in place (bits 40..64, the top of the word).
pub(crate) const GEN_BITS: u64 = !((1 << GEN_SHIFT) - 1);
/// One generation step in place. The field is the top of the word, so
/// adding this wraps the 24-bit generation with no mask.
pub(crate) const GEN_ONE: u64 = 1 << GEN_SHIFT;

#[inline(always)]
pub(crate) fn generation_of(state: u64) -> u32 {
    (state >> GEN_SHIFT) as u32
}

#[inline(always)]
pub(crate) fn refs_of(state: u64) -> u64 {
    state & REFS_MASK
}

/// The state after the final transition: next generation, no value, no refs.
#[inline(always)]
pub(crate) fn dead_successor(state: u64) -> u64 {
    (state & GEN_BITS).wrapping_add(GEN_ONE)
}

/// Sentinel for "no slot" in the deferred lists.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// Entries of a shard's page directory: one per bit length of a slot
/// number, 0 to 20 (`MAX_SLOTS_PER_SHARD` is 2^20). Also the most pages a
/// shard can have (page 0 of one slot, then doubling).
pub(crate) const MAX_PAGES: usize = 21;

/// The page directory entry of `slot`: its bit length, `ilog2(2 slot + 1)`
/// (no zero case, so one `lea` and one `bsr`). It needs nothing from the
/// geometry: page 0 (slots below `initial`, bit lengths up to
/// `log2 initial`) fills every entry up to that one, page `p >= 1` (bit
/// length `log2 initial + p`) one entry each. `slot` must be below 2^20.
/// (Indexing by page number took a load of that size and a shift on every
/// access; this one took the pair from 115 to 109 instructions and from
/// 3.84-3.89x to 3.87-3.92x sharded-slab, through `local()` 3.82-3.88x to
/// 3.97-4.01x, interleaved, 3 alternated runs.)
#[inline(always)]
pub(crate) fn entry_of(slot: u32) -> usize {
    debug_assert!(slot < 1 << 20);
    ((slot << 1) | 1).ilog2() as usize
}

/// A shard's pages: the pointers inline in the shard, so reaching a slot's
/// state word is one load (the page pointer) plus an index, with no chain of
/// boxes in between (a profile showed the chained loads dominating lookup).
/// The pointers are indexed by [`entry_of`] (the slot's bit length), not by
/// page number, so finding them takes no shift by the geometry's page 0
/// size: page 0's pointers are repeated in entries `0..=log2 initial`.
///
/// Each page pointer is stored *biased* by the page's first slot
/// (`array.wrapping_sub(page_start)`), so slot `s` of page `p` is
/// `pointer[p].wrapping_add(s)`: no offset arithmetic, no page start to
/// look up. Whether a slot exists is one compare against `published`, the
/// number of slots in published pages, which also bounds the slot by the
/// shard's maximum (published never exceeds it).
///
/// Each page is published once, by the shard's claim holder, and freed only
/// when the table is dropped. The pointers are plain memory: written once,
/// before the Release store of `published` that makes their slots
/// reachable, and read only for slots below a `published` value the reader
/// loaded with Acquire (or by the claim holder that wrote them).
pub(crate) struct Pages<T> {
    published: AtomicU32,
    pages: PagePointers<T>,
}

/// The three arrays of every directory entry, biased (see [`Pages`]), one
/// array of pointers per kind, so an entry's pointer is at `entry * 8`: an
/// index the address mode scales, with no multiply by a 24-byte stride on
/// the way to the state word. Under loom the cells are checked cells, so a
/// lookup that read a page pointer without seeing its publication would be
/// reported as a race. (Against one 24-byte struct of three pointers per
/// entry: pair 3.88-3.89x -> 4.03-4.07x sharded-slab, lookup 1.45-1.48x ->
/// 1.47-1.49x, interleaved, 3 alternated runs; 109 -> 107 instructions per
/// pair, 54 -> 52 per lookup.)
struct PagePointers<T> {
    states: [UnsafeCell<*mut AtomicU64>; MAX_PAGES],
    values: [UnsafeCell<*mut UnsafeCell<MaybeUninit<T>>>; MAX_PAGES],
    links: [UnsafeCell<*mut AtomicU32>; MAX_PAGES],
}

impl<T> Pages<T> {
    pub(crate) fn new() -> Self {
        Pages {
            published: AtomicU32::new(0),
            pages: PagePointers {
                states: std::array::from_fn(|_| UnsafeCell::new(ptr::null_mut())),
                values: std::array::from_fn(|_| UnsafeCell::new(ptr::null_mut())),
                links: std::array::from_fn(|_| UnsafeCell::new(ptr::null_mut())),
            },
        }
    }

    /// Allocates page `page` of `geometry` free and publishes it: its
    /// pointers go to every directory entry of its slots.
    ///
    /// # Safety
    /// Only the shard's claim holder may call this (or the constructor),
    /// once per page, in page order.
    pub(crate) unsafe fn publish(&self, geometry: &Geometry, page: usize) {
        let start = geometry.page_start(page);
        let len = geometry.page_len(page);
        let states: Box<[AtomicU64]> = (0..len).map(|_| AtomicU64::new(0)).collect();
        let links: Box<[AtomicU32]> = (0..len).map(|_| AtomicU32::new(NO_SLOT)).collect();
        let values: Box<[UnsafeCell<MaybeUninit<T>>]> = (0..len)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect();
        let start_index = start as usize;
        // Biased by the page start; `wrapping_*` keeps the provenance and
        // every pointer actually dereferenced lands back inside the array.
        let states = Box::into_raw(states)
            .cast::<AtomicU64>()
            .wrapping_sub(start_index);
        let links = Box::into_raw(links)
            .cast::<AtomicU32>()
            .wrapping_sub(start_index);
        let values = Box::into_raw(values)
            .cast::<UnsafeCell<MaybeUninit<T>>>()
            .wrapping_sub(start_index);
        for entry in geometry.entries(page) {
            let pointers = &self.pages;
            // SAFETY: nobody reads this page's cells before the store below
            // publishes the page, and only the claim holder writes them, once
            // (each entry belongs to one page).
            unsafe {
                pointers.states[entry].with_mut(|cell| *cell = states);
                pointers.links[entry].with_mut(|cell| *cell = links);
                pointers.values[entry].with_mut(|cell| *cell = values);
            }
        }
        // Last: a reader that sees the new count (Acquire) sees the pointers.
        self.published.store(start + len as u32, Ordering::Release);
    }

    /// Whether `slot` lies in a published page, for a slot number that came
    /// from outside (a descriptor). One Acquire load and one compare.
    #[inline(always)]
    pub(crate) fn contains(&self, slot: u32) -> bool {
        slot < self.published.load(Ordering::Acquire)
    }

    /// Slot `slot`'s state word; `entry` is [`entry_of`]`(slot)`.
    ///
    /// # Safety
    /// `slot` must lie in a published page, as seen by this thread: it is
    /// below a `published` value this thread loaded ([`Pages::contains`]),
    /// or this thread is the claim holder that published it.
    #[inline(always)]
    pub(crate) unsafe fn state(&self, entry: usize, slot: u32) -> &AtomicU64 {
        // SAFETY: `entry` < MAX_PAGES for every slot below 2^20, and the
        // published page's biased pointer plus `slot` is inside its array,
        // which lives until `free_all` (`&mut self`).
        unsafe {
            let base = self.pages.states.get_unchecked(entry).with(|cell| *cell);
            &*base.wrapping_add(slot as usize)
        }
    }

    /// Slot `slot`'s value cell. Safety: as for [`Pages::state`].
    #[inline(always)]
    pub(crate) unsafe fn value(&self, entry: usize, slot: u32) -> &UnsafeCell<MaybeUninit<T>> {
        // SAFETY: as in `state`.
        unsafe {
            let base = self.pages.values.get_unchecked(entry).with(|cell| *cell);
            &*base.wrapping_add(slot as usize)
        }
    }

    /// Slot `slot`'s deferred-list link. Safety: as for [`Pages::state`].
    #[inline(always)]
    pub(crate) unsafe fn link(&self, entry: usize, slot: u32) -> &AtomicU32 {
        // SAFETY: as in `state`.
        unsafe {
            let base = self.pages.links.get_unchecked(entry).with(|cell| *cell);
            &*base.wrapping_add(slot as usize)
        }
    }

    /// All three parts of slot `slot`. Safety: as for [`Pages::state`].
    #[inline(always)]
    pub(crate) unsafe fn slot(&self, entry: usize, slot: u32) -> SlotRef<'_, T> {
        // SAFETY: forwarded.
        unsafe {
            SlotRef {
                state: self.state(entry, slot),
                link: self.link(entry, slot),
                value: self.value(entry, slot),
            }
        }
    }

    /// Frees every published page; `geometry` must be the one every page
    /// was published with.
    pub(crate) fn free_all(&mut self, geometry: &Geometry) {
        self.published.store(0, Ordering::Relaxed);
        for page in 0..geometry.pages() {
            let mut entries = geometry.entries(page);
            let first = *entries.start();
            let pointers = &mut self.pages;
            let states = take(&mut pointers.states[first]);
            if states.is_null() {
                continue;
            }
            let start = geometry.page_start(page) as usize;
            let len = geometry.page_len(page);
            let links = take(&mut pointers.links[first]);
            let values = take(&mut pointers.values[first]);
            // The repeats of page 0's pointers are not freed again.
            entries.next();
            for entry in entries {
                take(&mut pointers.states[entry]);
                take(&mut pointers.links[entry]);
                take(&mut pointers.values[entry]);
            }
            // SAFETY: unbiased, the pointers are the `Box::into_raw` results
            // of boxed slices of `len` elements from `publish`, taken out once.
            unsafe {
                drop(Box::from_raw(ptr::slice_from_raw_parts_mut(
                    states.wrapping_add(start),
                    len,
                )));
                drop(Box::from_raw(ptr::slice_from_raw_parts_mut(
                    links.wrapping_add(start),
                    len,
                )));
                drop(Box::from_raw(ptr::slice_from_raw_parts_mut(
                    values.wrapping_add(start),
                    len,
                )));
            }
        }
    }
}

/// Empties a page-pointer cell.
fn take<P>(cell: &mut UnsafeCell<*mut P>) -> *mut P {
    // SAFETY: `&mut`: no other access to the cell.
    cell.with_mut(|cell| unsafe { ptr::replace(cell, ptr::null_mut()) })
}

/// One slot's three parts, borrowed from its page.
pub(crate) struct SlotRef<'a, T> {
    pub(crate) state: &'a AtomicU64,
    pub(crate) link: &'a AtomicU32,
    pub(crate) value: &'a UnsafeCell<MaybeUninit<T>>,
}

impl<T> Clone for SlotRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SlotRef<'_, T> {}

/// Page layout of one shard, the same for every shard of a table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    /// log2 of the page 0 size.
    shift: u32,
    max_slots: u32,
    pages: usize,
}

impl Geometry {
    pub(crate) fn new(initial_slots: u32, max_slots: u32) -> Self {
        let max_slots = max_slots.max(1);
        let initial = initial_slots.clamp(1, max_slots).next_power_of_two();
        let mut geometry = Geometry {
            shift: initial.trailing_zeros(),
            max_slots,
            pages: 0,
        };
        geometry.pages = geometry.page_of(max_slots - 1) + 1;
        geometry
    }

    pub(crate) fn pages(&self) -> usize {
        self.pages
    }

    pub(crate) fn max_slots(&self) -> u32 {
        self.max_slots
    }

    /// The page of `slot`: the bit length of `slot >> shift` (page 0 is
    /// `0..initial`, page `p >= 1` is `initial << (p - 1) .. initial << p`).
    #[inline(always)]
    pub(crate) fn page_of(&self, slot: u32) -> usize {
        // bit_length(q) == ilog2(2q + 1): no zero case, so one `bsr`.
        (((slot >> self.shift) << 1) | 1).ilog2() as usize
    }

    #[inline(always)]
    pub(crate) fn page_start(&self, page: usize) -> u32 {
        if page == 0 {
            0
        } else {
            1 << (self.shift + page as u32 - 1)
        }
    }

    pub(crate) fn page_len(&self, page: usize) -> usize {
        (self.page_end(page) - self.page_start(page)) as usize
    }

    pub(crate) fn page_end(&self, page: usize) -> u32 {
        let end = 1u64 << (self.shift + page as u32);
        end.min(u64::from(self.max_slots)) as u32
    }

    /// (page, offset) of `slot`, or `None` past the configured maximum.
    #[cfg(test)]
    pub(crate) fn locate(&self, slot: u32) -> Option<(usize, usize)> {
        if slot >= self.max_slots {
            return None;
        }
        let page = self.page_of(slot);
        Some((page, (slot - self.page_start(page)) as usize))
    }

    /// The directory entries of page `page`: `0..=log2 initial` for page 0,
    /// the one `log2 initial + page` for the others (see [`entry_of`]).
    pub(crate) fn entries(&self, page: usize) -> std::ops::RangeInclusive<usize> {
        if page == 0 {
            0..=self.shift as usize
        } else {
            let entry = self.shift as usize + page;
            entry..=entry
        }
    }

    /// The page that starts at `capacity`, i.e. the one growth allocates next.
    pub(crate) fn next_page(&self, capacity: u32) -> usize {
        self.page_of(capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_double_and_cover_every_slot_once() {
        let geometry = Geometry::new(64, 1 << 20);
        assert_eq!(geometry.locate(0), Some((0, 0)));
        assert_eq!(geometry.locate(63), Some((0, 63)));
        assert_eq!(geometry.locate(64), Some((1, 0)));
        assert_eq!(geometry.locate(127), Some((1, 63)));
        assert_eq!(geometry.locate(128), Some((2, 0)));
        assert_eq!(geometry.locate(255), Some((2, 127)));
        assert_eq!(geometry.locate(256), Some((3, 0)));
        assert_eq!(geometry.locate((1 << 20) - 1), Some((14, (1 << 19) - 1)));
        assert_eq!(geometry.locate(1 << 20), None);
        assert_eq!(geometry.pages(), 15);
        let mut next = 0;
        for page in 0..geometry.pages() {
            assert_eq!(geometry.page_start(page), next);
            next = geometry.page_end(page);
        }
        assert_eq!(next, 1 << 20);
    }

    /// Table bytes per slot beyond the value, in 1/512 byte units: the state
    /// word, the deferred link, one `open` bit (64/512 B) and 1/64 of a
    /// `full` bit (1/512 B). Must stay within 16 bytes.
    #[test]
    fn per_slot_overhead_is_at_most_16_bytes() {
        use std::mem::size_of;
        let per_slot_512ths = (size_of::<AtomicU64>() + size_of::<AtomicU32>()) * 512 + 64 + 1;
        assert_eq!(per_slot_512ths, 6209, "12.13 bytes");
        assert!(per_slot_512ths <= 16 * 512);
        // The value cell adds nothing to the value.
        assert_eq!(size_of::<MaybeUninit<u64>>(), size_of::<u64>());
        assert_eq!(
            size_of::<MaybeUninit<std::os::fd::OwnedFd>>(),
            size_of::<std::os::fd::OwnedFd>()
        );
        assert_eq!(
            size_of::<MaybeUninit<std::fs::File>>(),
            size_of::<std::fs::File>()
        );
    }

    /// Every slot's directory entry belongs to its page, and the pages'
    /// entries tile `0..MAX_PAGES` from 0 without gaps, for every page 0 size.
    #[test]
    fn directory_entries_match_pages() {
        for shift in 0..=20 {
            let geometry = Geometry::new(1 << shift, 1 << 20);
            let mut next_entry = 0;
            for page in 0..geometry.pages() {
                let entries = geometry.entries(page);
                assert_eq!(*entries.start(), next_entry);
                next_entry = entries.end() + 1;
                let (start, end) = (geometry.page_start(page), geometry.page_end(page));
                for slot in [start, (start + end) / 2, end - 1] {
                    assert!(entries.contains(&entry_of(slot)), "slot {slot}");
                }
            }
            assert_eq!(next_entry, MAX_PAGES);
        }
        let geometry = Geometry::new(16, 10);
        assert_eq!(geometry.entries(0), 0..=4);
        assert_eq!(entry_of(9), 4);
    }

    #[test]
    fn odd_maximum_truncates_the_last_page() {
        let geometry = Geometry::new(4, 10);
        assert_eq!(geometry.pages(), 3);
        assert_eq!(geometry.page_end(0), 4);
        assert_eq!(geometry.page_end(1), 8);
        assert_eq!(geometry.page_end(2), 10);
        assert_eq!(geometry.locate(9), Some((2, 1)));
        assert_eq!(geometry.locate(10), None);
    }
}
