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

use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering, UnsafeCell};

/// Number of references (guards, owning handle, the table's own while open).
pub(crate) const REFS_MASK: u64 = 0xFFFF_FFFF;
/// The slot holds a value that has not been handed to its releaser yet.
pub(crate) const ALLOC: u64 = 1 << 32;
/// The entry is reachable through its descriptor (not closed).
pub(crate) const OPEN: u64 = 1 << 33;
/// The generation sits at the same bits in the state word and in an `Fd`.
pub(crate) const GEN_SHIFT: u32 = 40;
pub(crate) const GEN_MASK: u64 = (1 << 24) - 1;

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
    ((u64::from(generation_of(state)) + 1) & GEN_MASK) << GEN_SHIFT
}

/// Sentinel for "no slot" in the deferred lists.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// Most pages a shard can have: page 0 of one slot, then doubling to
/// `MAX_SLOTS_PER_SHARD` (2^20) is 21 pages.
pub(crate) const MAX_PAGES: usize = 21;

/// A shard's pages: the pointers inline in the shard, so reaching a slot's
/// state word is one load (the page pointer) plus an index, with no chain of
/// boxes in between (a profile showed the chained loads dominating lookup).
/// Each page is published once, by the shard's claim holder, and freed only
/// when the table is dropped.
pub(crate) struct Pages<T> {
    pages: [PagePointers<T>; MAX_PAGES],
}

/// One page's three arrays. Kept together (24 bytes) so a slot's pointers
/// come from one cache line rather than three.
struct PagePointers<T> {
    states: AtomicPtr<AtomicU64>,
    links: AtomicPtr<AtomicU32>,
    values: AtomicPtr<UnsafeCell<MaybeUninit<T>>>,
}

impl<T> Pages<T> {
    pub(crate) fn new() -> Self {
        Pages {
            pages: std::array::from_fn(|_| PagePointers {
                states: AtomicPtr::new(ptr::null_mut()),
                links: AtomicPtr::new(ptr::null_mut()),
                values: AtomicPtr::new(ptr::null_mut()),
            }),
        }
    }

    /// Allocates page `page` with `len` free slots and publishes it.
    /// Only the shard's claim holder calls this, once per page.
    pub(crate) fn publish(&self, page: usize, len: usize) {
        let states: Box<[AtomicU64]> = (0..len).map(|_| AtomicU64::new(0)).collect();
        let links: Box<[AtomicU32]> = (0..len).map(|_| AtomicU32::new(NO_SLOT)).collect();
        let values: Box<[UnsafeCell<MaybeUninit<T>>]> = (0..len)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect();
        let pointers = &self.pages[page];
        pointers
            .links
            .store(Box::into_raw(links).cast(), Ordering::Release);
        pointers
            .values
            .store(Box::into_raw(values).cast(), Ordering::Release);
        // Published last: a reader that sees `states` non-null (Acquire) also
        // sees the other two arrays.
        pointers
            .states
            .store(Box::into_raw(states).cast(), Ordering::Release);
    }

    /// The slot at `offset` of `page`, or `None` if the page was never
    /// published. `offset` must be below the page's length (the geometry
    /// guarantees it for every slot it locates).
    #[inline(always)]
    pub(crate) fn slot(&self, page: usize, offset: usize) -> Option<SlotRef<'_, T>> {
        let pointers = self.pages.get(page)?;
        let states = pointers.states.load(Ordering::Acquire);
        if states.is_null() {
            return None;
        }
        let links = pointers.links.load(Ordering::Acquire);
        let values = pointers.values.load(Ordering::Acquire);
        // SAFETY: the three arrays of a published page have the page's length,
        // `offset` is below it, and they stay allocated until `free_all`,
        // which needs `&mut self`.
        unsafe {
            Some(SlotRef {
                state: &*states.add(offset),
                link: &*links.add(offset),
                value: &*values.add(offset),
            })
        }
    }

    /// Frees every published page; `len_of(page)` must return the length
    /// each page was published with.
    pub(crate) fn free_all(&mut self, len_of: impl Fn(usize) -> usize) {
        for (page, pointers) in self.pages.iter().enumerate() {
            let states = pointers.states.swap(ptr::null_mut(), Ordering::Acquire);
            if states.is_null() {
                continue;
            }
            let links = pointers.links.swap(ptr::null_mut(), Ordering::Acquire);
            let values = pointers.values.swap(ptr::null_mut(), Ordering::Acquire);
            let len = len_of(page);
            // SAFETY: the pointers came from `Box::into_raw` of boxed slices
            // of `len` elements in `publish`, and were swapped out once.
            unsafe {
                drop(Box::from_raw(ptr::slice_from_raw_parts_mut(states, len)));
                drop(Box::from_raw(ptr::slice_from_raw_parts_mut(links, len)));
                drop(Box::from_raw(ptr::slice_from_raw_parts_mut(values, len)));
            }
        }
    }
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

    #[inline(always)]
    fn page_of(&self, slot: u32) -> usize {
        let quotient = slot >> self.shift;
        (u32::BITS - quotient.leading_zeros()) as usize
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
    #[inline(always)]
    pub(crate) fn locate(&self, slot: u32) -> Option<(usize, usize)> {
        if slot >= self.max_slots {
            return None;
        }
        let page = self.page_of(slot);
        Some((page, (slot - self.page_start(page)) as usize))
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
