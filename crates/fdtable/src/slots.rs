//! Slot storage: arrays that never move, and the per-slot state word.
//!
//! A shard's slots are three parallel arrays at fixed addresses, reserved
//! for the shard's maximum up front and made usable as it grows (in steps
//! that double: `initial` slots, then as many again, and so on). Readers on
//! other threads can therefore follow a descriptor while the owner grows
//! the shard, and slot `s` is the `s`th element of each array.
//!
//! The three arrays are the state words (written by every lookup), the
//! deferred-list links (written only on release), and the values (written
//! once per insert, read by lookups), so the reference counting traffic
//! never dirties the lines that hold the values.

#[cfg(not(loom))]
use std::alloc::Layout;
#[cfg(not(loom))]
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

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

/// A shard's slots: three arrays (state words, deferred-list links,
/// values) at addresses fixed for the life of the table, each long enough
/// for the shard's `max_slots`, so slot `s` is `base + s` in each: no page
/// directory, and nothing about the slot to load before its state word.
/// The reason is the owner's close: a directory entry chosen by the slot
/// (`bsr`, then a load of the page pointer) sat between the descriptor and
/// the close's CAS, and that chain, not the instruction count, was what
/// kept the pair at twice the floor's time.
///
/// The arrays are one reservation of address space, with no access and no
/// memory behind it ([`Reservation`]); `publish` makes the next range of
/// slots readable and writable before the Release store of `published`
/// that lets other threads reach them, so memory is committed as the shard
/// grows, as the doubling pages before it were, and a slot at or past
/// `published` is never touched. Whether a slot exists is one compare
/// against `published`, which also bounds the slot by the shard's maximum
/// (published never exceeds it).
pub(crate) struct Slots<T> {
    published: AtomicU32,
    states: NonNull<AtomicU64>,
    links: NonNull<AtomicU32>,
    values: NonNull<UnsafeCell<MaybeUninit<T>>>,
    memory: Memory<T>,
}

impl<T> Slots<T> {
    /// Reserves the arrays for `max_slots` slots and publishes the first
    /// `initial`. Fails only when the address space or, under a strict
    /// overcommit policy, memory for the initial slots runs out.
    pub(crate) fn new(max_slots: u32, initial: u32) -> std::io::Result<Self> {
        let (memory, states, links, values) = Memory::new(max_slots as usize)?;
        let slots = Slots {
            published: AtomicU32::new(0),
            states,
            links,
            values,
            memory,
        };
        slots.publish(0, initial)?;
        Ok(slots)
    }

    /// Makes slots `from..to` usable and publishes them (Release: a thread
    /// that sees the new count can use them). Slots start free with
    /// generation 0 (a zero state word).
    ///
    /// Only the shard's claim holder (or the constructor) calls this, with
    /// `from` the current count.
    pub(crate) fn publish(&self, from: u32, to: u32) -> std::io::Result<()> {
        debug_assert_eq!(from, self.published.load(Ordering::Relaxed));
        self.memory.commit(from as usize, to as usize)?;
        self.published.store(to, Ordering::Release);
        Ok(())
    }

    /// Whether `slot` is published, for a slot number that came from
    /// outside (a descriptor). One Acquire load and one compare.
    #[inline(always)]
    pub(crate) fn contains(&self, slot: u32) -> bool {
        slot < self.published.load(Ordering::Acquire)
    }

    /// The number of published slots, as the claim holder knows it.
    pub(crate) fn published(&self) -> u32 {
        self.published.load(Ordering::Acquire)
    }

    /// Slot `slot`'s state word.
    ///
    /// # Safety
    /// `slot` must be published, as seen by this thread: below a
    /// `published` value this thread loaded ([`Slots::contains`]), or this
    /// thread is the claim holder that published it.
    #[inline(always)]
    pub(crate) unsafe fn state(&self, slot: u32) -> &AtomicU64 {
        // SAFETY: a published slot is inside the array and its memory is
        // committed; it lives until the shard is dropped (`&self`).
        unsafe { self.states.add(slot as usize).as_ref() }
    }

    /// Slot `slot`'s value cell. Safety: as for [`Slots::state`].
    #[inline(always)]
    pub(crate) unsafe fn value(&self, slot: u32) -> &UnsafeCell<MaybeUninit<T>> {
        // SAFETY: as in `state`.
        unsafe { self.values.add(slot as usize).as_ref() }
    }

    /// Slot `slot`'s deferred-list link. Safety: as for [`Slots::state`].
    #[inline(always)]
    pub(crate) unsafe fn link(&self, slot: u32) -> &AtomicU32 {
        // SAFETY: as in `state`.
        unsafe { self.links.add(slot as usize).as_ref() }
    }

    /// All three parts of slot `slot`. Safety: as for [`Slots::state`].
    #[inline(always)]
    pub(crate) unsafe fn slot(&self, slot: u32) -> SlotRef<'_, T> {
        // SAFETY: forwarded.
        unsafe {
            SlotRef {
                state: self.state(slot),
                link: self.link(slot),
                value: self.value(slot),
            }
        }
    }
}

/// The memory behind a shard's three arrays.
///
/// In a normal build, one private anonymous mapping with no access
/// (`PROT_NONE`): address space only, not counted as committed memory
/// under any overcommit policy. `commit` turns the byte ranges of a range
/// of slots readable and writable (`mprotect`), which is when the kernel
/// counts them, and they read as zeros until written: a zero state word
/// is a free slot of generation 0, and links and values are written
/// before they are read. Under Miri (no `mprotect`) it is one zeroed
/// allocation; under loom, whose atomics and cells carry model state and
/// cannot be zero bytes, three boxed slices built element by element (the
/// models use tables of two slots).
#[cfg(not(loom))]
struct Memory<T> {
    reservation: Reservation,
    links_offset: usize,
    values_offset: usize,
    _values: PhantomData<T>,
}

/// Bytes between a shard's slot arrays (see `Memory::new`): 17 cache
/// lines, so consecutive arrays also start in different L1 sets.
#[cfg(not(loom))]
const SLOT_ARRAY_GAP: usize = 17 * 64;

#[cfg(not(loom))]
type Parts<T> = (
    Memory<T>,
    NonNull<AtomicU64>,
    NonNull<AtomicU32>,
    NonNull<UnsafeCell<MaybeUninit<T>>>,
);

#[cfg(not(loom))]
impl<T> Memory<T> {
    fn new(slots: usize) -> std::io::Result<Parts<T>> {
        const {
            assert!(
                std::mem::align_of::<T>() <= 4096,
                "fdtable: values aligned to more than a page"
            )
        };
        let too_big = |_| std::io::Error::from(std::io::ErrorKind::OutOfMemory);
        // A gap before the links and another before the values, so that
        // the arrays do not all start at the same offset in a page. Slot
        // `s`'s state word and value would otherwise share their low 12
        // address bits whenever the arrays' element sizes are equal, and a
        // load that matches a pending store's low bits waits for it as if
        // it depended on it (4K aliasing): insert stores the value, then
        // loads the state word.
        let gap = Layout::from_size_align(SLOT_ARRAY_GAP, 1).map_err(too_big)?;
        let states = Layout::array::<AtomicU64>(slots).map_err(too_big)?;
        let (layout, links_offset) = states
            .extend(gap)
            .and_then(|(layout, _)| layout.extend(Layout::array::<AtomicU32>(slots)?))
            .map_err(too_big)?;
        let (layout, values_offset) = layout
            .extend(gap)
            .and_then(|(layout, _)| {
                layout.extend(Layout::array::<UnsafeCell<MaybeUninit<T>>>(slots)?)
            })
            .map_err(too_big)?;
        let reservation = Reservation::new(layout.size())?;
        let base = reservation.base;
        // SAFETY: the offsets come from the layout the reservation is as
        // large as, and each is aligned for its array (the base is
        // page-aligned, which no array's alignment exceeds: checked above).
        let (states, links, values) = unsafe {
            (
                base.cast::<AtomicU64>(),
                base.add(links_offset).cast::<AtomicU32>(),
                base.add(values_offset).cast::<UnsafeCell<MaybeUninit<T>>>(),
            )
        };
        let memory = Memory {
            reservation,
            links_offset,
            values_offset,
            _values: PhantomData,
        };
        Ok((memory, states, links, values))
    }

    /// Makes the memory of slots `from..to` of every array usable.
    fn commit(&self, from: usize, to: usize) -> std::io::Result<()> {
        use std::mem::size_of;
        let part = |offset: usize, size: usize| {
            self.reservation
                .commit(offset + from * size, offset + to * size)
        };
        part(0, size_of::<AtomicU64>())?;
        part(self.links_offset, size_of::<AtomicU32>())?;
        part(self.values_offset, size_of::<UnsafeCell<MaybeUninit<T>>>())
    }
}

/// Address space reserved with no access; see [`Memory`].
#[cfg(not(any(loom, miri)))]
struct Reservation {
    base: NonNull<u8>,
    len: usize,
}

#[cfg(not(any(loom, miri)))]
impl Reservation {
    fn new(len: usize) -> std::io::Result<Self> {
        if len == 0 {
            return Ok(Reservation {
                base: NonNull::dangling(),
                len,
            });
        }
        let base = os::reserve(len)?;
        Ok(Reservation { base, len })
    }

    /// Makes bytes `from..to` (widened to whole pages) readable and writable.
    fn commit(&self, from: usize, to: usize) -> std::io::Result<()> {
        if from >= to {
            return Ok(());
        }
        let page = os::page_size();
        let start = from / page * page;
        let end = to.div_ceil(page).saturating_mul(page).min(self.len);
        // SAFETY: `start..end` lies inside the reservation (`to <= len`, and
        // `end` is capped by it); it belongs to this shard alone.
        unsafe { os::commit(self.base.as_ptr().add(start), end - start) }
    }
}

#[cfg(not(any(loom, miri)))]
impl Drop for Reservation {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the reservation made in `new`, released once; nothing
            // points into it any more (the shard that used it is being dropped).
            unsafe { os::release(self.base, self.len) };
        }
    }
}

/// Address space reserved with no access, committed in place, released
/// whole: `mmap(PROT_NONE)` and `mprotect` on Unix.
#[cfg(all(unix, not(any(loom, miri))))]
mod os {
    use std::ptr::NonNull;

    pub(super) fn reserve(len: usize) -> std::io::Result<NonNull<u8>> {
        // SAFETY: a new private anonymous mapping; no existing memory is
        // affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(NonNull::new(base.cast::<u8>()).expect("mmap returned null"))
    }

    /// # Safety
    /// `at..at + len` lies inside one reservation and is page-aligned.
    pub(super) unsafe fn commit(at: *mut u8, len: usize) -> std::io::Result<()> {
        // SAFETY: the caller's range is ours; only its protection changes.
        let result = unsafe { libc::mprotect(at.cast(), len, libc::PROT_READ | libc::PROT_WRITE) };
        if result != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// # Safety
    /// `base, len` is a reservation from [`reserve`], released once.
    pub(super) unsafe fn release(base: NonNull<u8>, len: usize) {
        // SAFETY: per the caller, the whole mapping and nothing else.
        unsafe { libc::munmap(base.as_ptr().cast(), len) };
    }

    pub(super) fn page_size() -> usize {
        // SAFETY: sysconf has no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).unwrap_or(4096).max(1)
    }
}

/// The same on Windows: `VirtualAlloc(MEM_RESERVE, PAGE_NOACCESS)`, then
/// `MEM_COMMIT` of the pages a shard grows into.
#[cfg(all(windows, not(any(loom, miri))))]
mod os {
    use std::ptr::NonNull;

    use windows_sys::Win32::System::Memory::{
        VirtualAlloc, VirtualFree, MEM_COMMIT, MEM_RELEASE, MEM_RESERVE, PAGE_NOACCESS,
        PAGE_READWRITE,
    };
    use windows_sys::Win32::System::SystemInformation::{GetSystemInfo, SYSTEM_INFO};

    pub(super) fn reserve(len: usize) -> std::io::Result<NonNull<u8>> {
        // SAFETY: a new reservation at an address the system picks; no
        // existing memory is affected.
        let base = unsafe { VirtualAlloc(std::ptr::null(), len, MEM_RESERVE, PAGE_NOACCESS) };
        NonNull::new(base.cast::<u8>()).ok_or_else(std::io::Error::last_os_error)
    }

    /// # Safety
    /// `at..at + len` lies inside one reservation and is page-aligned.
    pub(super) unsafe fn commit(at: *mut u8, len: usize) -> std::io::Result<()> {
        // SAFETY: the caller's range is reserved by us; committing it again
        // where it already is leaves its contents as they are.
        let done = unsafe { VirtualAlloc(at.cast(), len, MEM_COMMIT, PAGE_READWRITE) };
        if done.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// # Safety
    /// `base` is a reservation from [`reserve`], released once.
    pub(super) unsafe fn release(base: NonNull<u8>, _len: usize) {
        // SAFETY: per the caller; MEM_RELEASE frees the whole reservation
        // (the size must be 0).
        unsafe { VirtualFree(base.as_ptr().cast(), 0, MEM_RELEASE) };
    }

    pub(super) fn page_size() -> usize {
        // SAFETY: GetSystemInfo fills the struct it is given and cannot fail.
        let info: SYSTEM_INFO = unsafe {
            let mut info = std::mem::zeroed();
            GetSystemInfo(&mut info);
            info
        };
        usize::try_from(info.dwPageSize).unwrap_or(4096).max(1)
    }
}

/// Under Miri, which has no `mprotect`: one zeroed allocation, all usable.
#[cfg(all(miri, not(loom)))]
struct Reservation {
    base: NonNull<u8>,
    layout: Layout,
}

#[cfg(all(miri, not(loom)))]
impl Reservation {
    fn new(len: usize) -> std::io::Result<Self> {
        let layout = Layout::from_size_align(len.max(1), 4096)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        // SAFETY: the layout has a non-zero size.
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        Ok(Reservation { base, layout })
    }

    fn commit(&self, _from: usize, _to: usize) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(all(miri, not(loom)))]
impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), self.layout) };
    }
}

/// Under loom: three boxed slices of model atomics and cells.
#[cfg(loom)]
struct Memory<T> {
    states: NonNull<[AtomicU64]>,
    links: NonNull<[AtomicU32]>,
    values: NonNull<[UnsafeCell<MaybeUninit<T>>]>,
}

#[cfg(loom)]
type Parts<T> = (
    Memory<T>,
    NonNull<AtomicU64>,
    NonNull<AtomicU32>,
    NonNull<UnsafeCell<MaybeUninit<T>>>,
);

#[cfg(loom)]
impl<T> Memory<T> {
    fn new(slots: usize) -> std::io::Result<Parts<T>> {
        let states: Box<[AtomicU64]> = (0..slots).map(|_| AtomicU64::new(0)).collect();
        let links: Box<[AtomicU32]> = (0..slots).map(|_| AtomicU32::new(NO_SLOT)).collect();
        let values: Box<[UnsafeCell<MaybeUninit<T>>]> = (0..slots)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect();
        let memory = Memory {
            states: NonNull::from(Box::leak(states)),
            links: NonNull::from(Box::leak(links)),
            values: NonNull::from(Box::leak(values)),
        };
        let parts = (
            memory.states.cast(),
            memory.links.cast(),
            memory.values.cast(),
        );
        Ok((memory, parts.0, parts.1, parts.2))
    }

    fn commit(&self, _from: usize, _to: usize) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(loom)]
impl<T> Drop for Memory<T> {
    fn drop(&mut self) {
        // SAFETY: leaked in `new`, freed once; the values are moved out (or
        // were never written) by the table's drop before the shard goes.
        unsafe {
            drop(Box::from_raw(self.states.as_ptr()));
            drop(Box::from_raw(self.links.as_ptr()));
            drop(Box::from_raw(self.values.as_ptr()));
        }
    }
}

/// One slot's three parts, borrowed from its shard.
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

/// How a shard grows (the same for every shard of a table): `initial`
/// slots (a power of two), then doubling, the last step cut at
/// `max_slots`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Growth {
    initial: u32,
    max_slots: u32,
}

impl Growth {
    pub(crate) fn new(initial_slots: u32, max_slots: u32) -> Self {
        let max_slots = max_slots.max(1);
        let initial = initial_slots.clamp(1, max_slots).next_power_of_two();
        Growth {
            initial: initial.min(max_slots),
            max_slots,
        }
    }

    /// The slots a shard starts with.
    pub(crate) fn initial(&self) -> u32 {
        self.initial
    }

    pub(crate) fn max_slots(&self) -> u32 {
        self.max_slots
    }

    /// The capacity the step from `capacity` grows to, or `None` at
    /// `max_slots`.
    pub(crate) fn next(&self, capacity: u32) -> Option<u32> {
        (capacity < self.max_slots).then(|| capacity.saturating_mul(2).min(self.max_slots))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot's state word, link and value never share their offset in a
    /// page (4K aliasing, see `Memory::new`), for values of the state
    /// word's size and for the maximum and a small shard. Without the gaps
    /// the three arrays of a 2^20-slot shard all start page-aligned.
    #[test]
    #[cfg(not(loom))]
    fn a_slots_three_parts_sit_at_different_page_offsets() {
        for max_slots in [1 << 20, 512, 64] {
            let slots = Slots::<u64>::new(max_slots, 64).unwrap();
            for slot in [0, 1, 63] {
                // SAFETY: slots below 64 are published.
                let part = unsafe { slots.slot(slot) };
                let offset = |p: *const u8| p.addr() % 4096;
                let state = offset((part.state as *const AtomicU64).cast());
                let link = offset((part.link as *const AtomicU32).cast());
                let value = offset((part.value as *const UnsafeCell<MaybeUninit<u64>>).cast());
                assert_ne!(state, value, "max {max_slots}, slot {slot}");
                assert_ne!(state, link, "max {max_slots}, slot {slot}");
                assert_ne!(link, value, "max {max_slots}, slot {slot}");
            }
        }
    }

    /// The capacities a shard passes through, from its first to the last.
    fn steps(growth: Growth) -> Vec<u32> {
        std::iter::successors(Some(growth.initial()), |&c| growth.next(c)).collect()
    }

    #[test]
    fn steps_double_from_the_initial_slots_to_the_maximum() {
        let steps = steps(Growth::new(64, 1 << 20));
        assert_eq!(steps.len(), 15);
        assert_eq!(&steps[..4], &[64, 128, 256, 512]);
        assert_eq!(steps.last(), Some(&(1 << 20)));
        assert!(steps.windows(2).all(|w| w[1] == 2 * w[0]));
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
            size_of::<MaybeUninit<std::fs::File>>(),
            size_of::<std::fs::File>()
        );
    }

    #[test]
    fn odd_maximum_truncates_the_last_step() {
        assert_eq!(steps(Growth::new(4, 10)), vec![4, 8, 10]);
        // An initial size past the maximum starts at the maximum.
        assert_eq!(steps(Growth::new(9, 10)), vec![10]);
    }
}
