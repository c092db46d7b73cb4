//! Cache entries, their memory layout, and the reference types handed out.
//!
//! # Layout of `Entry<V>` (padded, the default; `V` up to 24 bytes)
//!
//! ```text
//!  offset  line  field                      written by
//!  ------  ----  -------------------------  -----------------------------------
//!    0      0    meta (size, mtime, ctime,   construction only
//!                dev, ino)            40 B
//!   40      0    validated_ms          8 B   revalidation (once per `valid`)
//!   48      0    state (LIVE/DYING/FREED)    removal from the map (once)
//!   49      0    referenced (CLOCK bit)      hit only when clear; eviction scan
//!   50      0    upgrade, has_handle         construction only
//!   52      0    etag: "\"<16 hex>\""  18 B  construction only
//!   72      1    mime: &'static str   16 B   construction only
//!   88      1    bytes: small-file copy 16 B construction / payload release
//!  104      1    handle: Option<V>  <=24 B   construction / payload release
//!  ------  ----  ------------------------------------------------------------
//!  128      2    refs[0]: AtomicUsize        counted hits (`get`) on lane 0
//!  136      2    owners (memory)             death only
//!  192      3    refs[1]: AtomicUsize        counted hits (`get`) on lane 1
//!  200      3    path, accounting, uses      construction; uses: min_uses phase
//!  256           end (size_of, align 64)
//! ```
//!
//! A lookup reads line 0 only (freshness, state, CLOCK bit); a response
//! reads lines 0-1. Nothing on lines 0-1 is written on a hit (the CLOCK bit
//! only when an eviction scan cleared it). A borrowing hit (`get_with`)
//! writes no line of the entry at all: its mark is in the borrowing thread's
//! own block (`hazard`), and line 3 (reached through `accounting`) is read
//! only by releasers of a dying entry. Each reference lane has its own
//! 64-byte line (the line size of this machine's
//! AMD Zen 3; Intel's adjacent-line prefetcher pairs lines into 128 bytes,
//! which would argue for 128-byte spacing at the cost of a 384-byte entry).
//! This is the lesson of the kernel's d_lockref patch (seed 03): the count
//! every user writes must not share a line with what every lookup reads.
//!
//! The `Unpadded` layout (benchmarks only) puts both counters at offset 0,
//! beside the metadata, to measure what the separation buys.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize as StdAtomicUsize};
use std::sync::Arc;

use crate::hazard::Hazards;
use crate::refcount::{self, Protocol, REF_SHARDS};
use crate::sync::{AtomicU8, AtomicUsize, Ordering};
use crate::FileMeta;

/// Byte accounting shared between a cache and its entries (entries can
/// outlive the cache through `EntryRef`s).
#[derive(Debug, Default)]
pub(crate) struct Accounting {
    pub(crate) open_handles: StdAtomicUsize,
    pub(crate) small_bytes: AtomicU64,
    /// Borrow slots of the cache's threads (`PathCache::get_with`).
    pub(crate) hazards: Hazards,
}

/// Fields read only on slow paths; they share the last reference line.
#[doc(hidden)]
#[derive(Debug)]
pub struct ColdFields {
    path: Box<str>,
    acct: Arc<Accounting>,
    /// Uses of a metadata-only entry (drives `min_uses`).
    uses: AtomicU32,
}

mod sealed {
    pub trait Sealed {}
}

/// Where an entry keeps its reference counters. Sealed: [`Padded`] is the
/// layout the cache uses; [`Unpadded`] exists to benchmark the difference.
pub trait RefLayout: sealed::Sealed + Send + Sync + 'static {
    #[doc(hidden)]
    type Hot: Send + Sync;
    #[doc(hidden)]
    type Cold: Send + Sync;
    #[doc(hidden)]
    fn build(cold: ColdFields, owners: u8) -> (Self::Hot, Self::Cold);
    #[doc(hidden)]
    fn counts<'a>(hot: &'a Self::Hot, cold: &'a Self::Cold) -> [&'a AtomicUsize; REF_SHARDS];
    #[doc(hidden)]
    fn owners<'a>(hot: &'a Self::Hot, cold: &'a Self::Cold) -> &'a AtomicU8;
    #[doc(hidden)]
    fn cold(cold: &Self::Cold) -> &ColdFields;
}

/// One reference shard on its own 64-byte cache line.
#[doc(hidden)]
#[repr(C, align(64))]
#[derive(Debug)]
pub struct RefLine<T> {
    count: AtomicUsize,
    rest: T,
}

/// The cold part of a padded entry: two reference lines.
#[doc(hidden)]
#[repr(C)]
#[derive(Debug)]
pub struct PaddedRefs {
    line0: RefLine<AtomicU8>,
    line1: RefLine<ColdFields>,
}

/// Reference counters on their own cache lines, away from lookup data (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct Padded;

/// Reference counters beside the lookup data. For benchmarks only.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Unpadded;

impl sealed::Sealed for Padded {}
impl sealed::Sealed for Unpadded {}

impl RefLayout for Padded {
    type Hot = ();
    type Cold = PaddedRefs;
    fn build(cold: ColdFields, owners: u8) -> ((), PaddedRefs) {
        let refs = PaddedRefs {
            line0: RefLine {
                count: AtomicUsize::new(0),
                rest: AtomicU8::new(owners),
            },
            line1: RefLine {
                count: AtomicUsize::new(0),
                rest: cold,
            },
        };
        ((), refs)
    }
    #[inline]
    fn counts<'a>(_: &'a (), cold: &'a PaddedRefs) -> [&'a AtomicUsize; REF_SHARDS] {
        [&cold.line0.count, &cold.line1.count]
    }
    fn owners<'a>(_: &'a (), cold: &'a PaddedRefs) -> &'a AtomicU8 {
        &cold.line0.rest
    }
    fn cold(cold: &PaddedRefs) -> &ColdFields {
        &cold.line1.rest
    }
}

/// The hot part of an unpadded entry: the counters right before the metadata.
#[doc(hidden)]
#[repr(C)]
#[derive(Debug)]
pub struct UnpaddedHot {
    counts: [AtomicUsize; REF_SHARDS],
    owners: AtomicU8,
}

impl RefLayout for Unpadded {
    type Hot = UnpaddedHot;
    type Cold = ColdFields;
    fn build(cold: ColdFields, owners: u8) -> (UnpaddedHot, ColdFields) {
        let hot = UnpaddedHot {
            counts: [AtomicUsize::new(0), AtomicUsize::new(0)],
            owners: AtomicU8::new(owners),
        };
        (hot, cold)
    }
    #[inline]
    fn counts<'a>(hot: &'a UnpaddedHot, _: &'a ColdFields) -> [&'a AtomicUsize; REF_SHARDS] {
        [&hot.counts[0], &hot.counts[1]]
    }
    fn owners<'a>(hot: &'a UnpaddedHot, _: &'a ColdFields) -> &'a AtomicU8 {
        &hot.owners
    }
    fn cold(cold: &ColdFields) -> &ColdFields {
        cold
    }
}

/// Whether a metadata-only entry should later be reloaded with a handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Upgrade {
    /// Has a handle, or cannot use one (small-file bytes, loader gave none).
    No = 0,
    /// Waiting for `min_uses`.
    MinUses = 1,
    /// The open-handle budget was full when it was loaded.
    Denied = 2,
}

/// A cached file: metadata, ETag, MIME type, and optionally an open handle
/// and the bytes of a small file. Reached through an [`EntryRef`].
#[repr(C)]
pub struct Entry<V, L: RefLayout = Padded> {
    hot: L::Hot,
    meta: FileMeta,
    validated_ms: AtomicU64,
    state: AtomicU8,
    referenced: AtomicBool,
    upgrade: Upgrade,
    has_handle: bool,
    etag: [u8; ETAG_LEN],
    mime: &'static str,
    bytes: UnsafeCell<ManuallyDrop<Option<Box<[u8]>>>>,
    handle: UnsafeCell<ManuallyDrop<Option<V>>>,
    refs: L::Cold,
}

// SAFETY: the payload cells (`bytes`, `handle`) are read only through an
// `EntryRef` (a counted reference) or an `EntryBorrow` (a published borrow),
// and written only by the single thread that wins the FREED transition, which
// happens after every reference and every borrow is gone (see `refcount`).
// Everything else is immutable or atomic. So sharing an entry is as safe as
// sharing `V` and moving it is as safe as moving `V`.
unsafe impl<V: Send + Sync, L: RefLayout> Sync for Entry<V, L> {}
// SAFETY: see the `Sync` impl; the entry owns a `V`, so it is `Send` when `V` is.
unsafe impl<V: Send + Sync, L: RefLayout> Send for Entry<V, L> {}

const ETAG_LEN: usize = 18;

/// Strong ETag: a 64-bit mix of (dev, ino, size, mtime_ns), stable across
/// restarts (no random seed) so clients' validators survive a deploy.
pub(crate) fn etag_for(meta: &FileMeta) -> [u8; ETAG_LEN] {
    fn mix(mut z: u64) -> u64 {
        // splitmix64 finalizer
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let mut h = 0x9e37_79b9_7f4a_7c15_u64;
    for word in [meta.dev, meta.ino, meta.size, meta.mtime_ns as u64] {
        h = mix(h ^ word).wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
    let mut out = [b'"'; ETAG_LEN];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, slot) in out[1..17].iter_mut().enumerate() {
        *slot = HEX[((h >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

pub(crate) struct NewEntry<V> {
    pub(crate) path: Box<str>,
    pub(crate) meta: FileMeta,
    pub(crate) mime: &'static str,
    pub(crate) handle: Option<V>,
    pub(crate) bytes: Option<Box<[u8]>>,
    pub(crate) validated_ms: u64,
    pub(crate) upgrade: Upgrade,
    pub(crate) acct: Arc<Accounting>,
}

impl<V, L: RefLayout> Entry<V, L> {
    /// The normalized path this entry was loaded for.
    pub fn path(&self) -> &str {
        &L::cold(&self.refs).path
    }
    /// The metadata the loader reported when it opened/read the file.
    pub fn meta(&self) -> &FileMeta {
        &self.meta
    }
    /// Strong, quoted ETag derived from (dev, ino, size, mtime_ns).
    pub fn etag(&self) -> &str {
        // The bytes are a quote, 16 ASCII hex digits and a quote.
        std::str::from_utf8(&self.etag).unwrap_or("\"0\"")
    }
    /// The MIME type the loader chose.
    pub fn mime(&self) -> &'static str {
        self.mime
    }
    /// The open handle, if this entry holds one (see `min_uses`, `max_open`).
    pub fn handle(&self) -> Option<&V> {
        // SAFETY: outside the crate `&Entry` is only reachable through a
        // counted `EntryRef` or a published `EntryBorrow`, and the payload is
        // taken only after every reference and borrow is gone (`try_claim`).
        // Inside the crate, entries reached through the map (eviction scan)
        // never read the payload.
        unsafe { (*self.handle.get()).as_ref() }
    }
    /// The whole file's bytes when it was small enough and the budget allowed.
    pub fn bytes(&self) -> Option<&[u8]> {
        // SAFETY: as for `handle`.
        unsafe { (*self.bytes.get()).as_deref() }
    }

    pub(crate) fn new_boxed(new: NewEntry<V>, owners: u8) -> NonNull<Self> {
        let has_handle = new.handle.is_some();
        let cold = ColdFields {
            path: new.path,
            acct: new.acct,
            uses: AtomicU32::new(1),
        };
        let (hot, refs) = L::build(cold, owners);
        let entry = Box::new(Entry {
            hot,
            etag: etag_for(&new.meta),
            meta: new.meta,
            mime: new.mime,
            validated_ms: AtomicU64::new(new.validated_ms),
            bytes: UnsafeCell::new(ManuallyDrop::new(new.bytes)),
            state: AtomicU8::new(refcount::LIVE),
            referenced: AtomicBool::new(true),
            upgrade: new.upgrade,
            has_handle,
            handle: UnsafeCell::new(ManuallyDrop::new(new.handle)),
            refs,
        });
        NonNull::from(Box::leak(entry))
    }

    #[inline]
    fn counts(&self) -> [&AtomicUsize; REF_SHARDS] {
        L::counts(&self.hot, &self.refs)
    }

    /// The entry's side of the reference protocol. `hazards` must be the
    /// borrow slots of the cache the entry belongs to.
    #[inline]
    fn protocol<'a>(&'a self, hazards: &'a Hazards) -> Protocol<'a> {
        Protocol {
            counts: self.counts(),
            state: &self.state,
            hazards,
            addr: self as *const Self as usize,
        }
    }

    /// The protocol with the borrow slots reached through the cold line
    /// (release paths, which do not have the cache at hand).
    fn protocol_cold(&self) -> Protocol<'_> {
        self.protocol(&L::cold(&self.refs).acct.hazards)
    }

    pub(crate) fn users(&self) -> usize {
        refcount::users(self.counts())
    }
    pub(crate) fn has_handle(&self) -> bool {
        self.has_handle
    }
    pub(crate) fn validated_ms(&self) -> u64 {
        self.validated_ms.load(std::sync::atomic::Ordering::Relaxed)
    }
    pub(crate) fn mark_validated(&self, now_ms: u64) {
        self.validated_ms
            .store(now_ms, std::sync::atomic::Ordering::Relaxed);
    }
    /// CLOCK: set on a hit only if clear, so a hit does not dirty line 1.
    #[inline]
    pub(crate) fn touch(&self) {
        if !self.referenced.load(std::sync::atomic::Ordering::Relaxed) {
            self.referenced
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    /// CLOCK second chance: returns whether the bit was set, clearing it.
    pub(crate) fn take_referenced(&self) -> bool {
        self.referenced.load(std::sync::atomic::Ordering::Relaxed)
            && self
                .referenced
                .swap(false, std::sync::atomic::Ordering::Relaxed)
    }
    pub(crate) fn upgrade(&self) -> Upgrade {
        self.upgrade
    }
    /// Counts one use of a metadata-only entry; returns the new count.
    pub(crate) fn count_use(&self) -> u32 {
        L::cold(&self.refs)
            .uses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }
    pub(crate) fn is_live(&self) -> bool {
        self.state.load(Ordering::Acquire) == refcount::LIVE
    }
}

/// Releases the payload (handle and bytes) of an entry whose FREED transition
/// the caller won, then drops that owner of the memory.
///
/// # Safety
/// `ptr` points to a live entry allocation and the caller won FREED.
unsafe fn release_payload<V, L: RefLayout>(ptr: NonNull<Entry<V, L>>) {
    // SAFETY: the allocation is live (caller), and no reference exists any
    // more, so we are the only accessor of the payload cells.
    let entry = unsafe { ptr.as_ref() };
    // SAFETY: as above; each cell is taken exactly once (only the FREED winner gets here).
    let handle = unsafe { ManuallyDrop::take(&mut *entry.handle.get()) };
    // SAFETY: as above.
    let bytes = unsafe { ManuallyDrop::take(&mut *entry.bytes.get()) };
    let acct = &L::cold(&entry.refs).acct;
    if handle.is_some() {
        acct.open_handles
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(b) = &bytes {
        acct.small_bytes
            .fetch_sub(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
    // Drop `V` (for fdtable::Owned this queues the descriptor on the
    // deferred-release path; it never blocks).
    drop(handle);
    drop(bytes);
    // SAFETY: still live; the payload owner is released exactly once here.
    unsafe { drop_memory_owner(ptr) };
}

/// # Safety
/// `ptr` points to a live entry allocation and the caller holds one of its
/// memory owners, which it gives up here.
unsafe fn drop_memory_owner<V, L: RefLayout>(ptr: NonNull<Entry<V, L>>) {
    // SAFETY: live per the caller's contract.
    let entry = unsafe { ptr.as_ref() };
    if refcount::drop_memory_owner(L::owners(&entry.hot, &entry.refs)) {
        // SAFETY: both owners are gone: the payload was released (so no
        // reference exists) and the map node was reclaimed (so no reader can
        // reach the entry). The allocation came from `Box::leak` in `new_boxed`.
        // The payload cells are `ManuallyDrop` and already taken.
        drop(unsafe { Box::from_raw(ptr.as_ptr()) });
    }
}

/// A counted reference to a cache entry. `Clone` adds one count on the same
/// shard; `Drop` removes it (no lock, no syscall). The entry's handle is
/// released when the entry has left the cache and the last `EntryRef` drops.
pub struct EntryRef<V, L: RefLayout = Padded> {
    ptr: NonNull<Entry<V, L>>,
    shard: usize,
}

// SAFETY: an `EntryRef` gives `&Entry` access from any thread and may drop the
// `V` on whatever thread drops the last reference: needs `V: Send + Sync`.
unsafe impl<V: Send + Sync, L: RefLayout> Send for EntryRef<V, L> {}
// SAFETY: as for `Send`.
unsafe impl<V: Send + Sync, L: RefLayout> Sync for EntryRef<V, L> {}

impl<V, L: RefLayout> EntryRef<V, L> {
    /// Whether two references point at the same entry.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }
}

impl<V, L: RefLayout> Deref for EntryRef<V, L> {
    type Target = Entry<V, L>;
    #[inline]
    fn deref(&self) -> &Entry<V, L> {
        // SAFETY: our count keeps the payload (and hence the memory, whose
        // payload owner is released only after FREED) alive.
        unsafe { self.ptr.as_ref() }
    }
}

impl<V, L: RefLayout> Clone for EntryRef<V, L> {
    #[inline]
    fn clone(&self) -> Self {
        refcount::acquire_clone(self.counts()[self.shard]);
        EntryRef {
            ptr: self.ptr,
            shard: self.shard,
        }
    }
}

impl<V, L: RefLayout> Drop for EntryRef<V, L> {
    #[inline]
    fn drop(&mut self) {
        let entry = &**self;
        // The cold line (borrow slots) is read only when the entry is dying.
        if refcount::drop_ref(entry.counts(), self.shard, &entry.state)
            && refcount::try_claim(entry.protocol_cold())
        {
            // SAFETY: we won FREED; the memory is live until both owners drop.
            unsafe { release_payload(self.ptr) };
        }
    }
}

impl<V, L: RefLayout> fmt::Debug for EntryRef<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryRef")
            .field("path", &self.path())
            .field("meta", self.meta())
            .field("etag", &self.etag())
            .finish_non_exhaustive()
    }
}

impl<V, L: RefLayout> fmt::Debug for Entry<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// A borrowed entry: published in the borrowing thread's slot, so its payload
/// is not released while this lives; ending it is one Release store.
#[doc(hidden)]
pub struct EntryBorrow<'a, V, L: RefLayout = Padded> {
    entry: &'a Entry<V, L>,
    slot: &'a AtomicUsize,
}

impl<V, L: RefLayout> Deref for EntryBorrow<'_, V, L> {
    type Target = Entry<V, L>;
    #[inline]
    fn deref(&self) -> &Entry<V, L> {
        self.entry
    }
}

impl<V, L: RefLayout> Drop for EntryBorrow<'_, V, L> {
    #[inline]
    fn drop(&mut self) {
        refcount::end_borrow(self.slot);
    }
}

impl<V, L: RefLayout> fmt::Debug for EntryBorrow<'_, V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("EntryBorrow").field(self.entry).finish()
    }
}

/// The map's claim on an entry: one memory owner plus the LIVE state. Lives
/// in the map node; papaya drops it only after every reader that could have
/// seen the node is gone.
#[doc(hidden)]
pub struct MapRef<V, L: RefLayout = Padded> {
    ptr: NonNull<Entry<V, L>>,
}

// SAFETY: as for `EntryRef`.
unsafe impl<V: Send + Sync, L: RefLayout> Send for MapRef<V, L> {}
// SAFETY: as for `EntryRef`.
unsafe impl<V: Send + Sync, L: RefLayout> Sync for MapRef<V, L> {}

impl<V, L: RefLayout> MapRef<V, L> {
    /// A new entry held by the map, plus one reference for the loader's caller.
    pub(crate) fn new(new: NewEntry<V>) -> (Self, EntryRef<V, L>) {
        let ptr = Entry::<V, L>::new_boxed(new, refcount::MEMORY_OWNERS_MAPPED);
        let shard = crate::clock::ref_shard();
        // SAFETY: just allocated; the count is taken before anyone can see it.
        refcount::acquire_clone(unsafe { ptr.as_ref() }.counts()[shard]);
        (MapRef { ptr }, EntryRef { ptr, shard })
    }

    /// The entry (valid while the map node, hence this `MapRef`, is alive).
    #[inline]
    pub(crate) fn entry(&self) -> &Entry<V, L> {
        // SAFETY: the map-node owner of the memory is held by `self`.
        unsafe { self.ptr.as_ref() }
    }

    /// A lookup's reference; `None` when the entry was already removed.
    #[inline]
    pub fn try_acquire(&self) -> Option<EntryRef<V, L>> {
        let shard = crate::clock::ref_shard();
        let entry = self.entry();
        if refcount::try_acquire(entry.counts(), shard, &entry.state) {
            return Some(EntryRef {
                ptr: self.ptr,
                shard,
            });
        }
        if refcount::release(entry.protocol_cold(), shard) {
            // SAFETY: we won FREED; memory is held by `self`.
            unsafe { release_payload(self.ptr) };
        }
        None
    }

    /// A borrow of the entry for the calling thread, published in `slot`
    /// (the thread's own slot in the cache's [`Hazards`]); `None` when the
    /// entry was already removed. Valid while the caller's map guard (which
    /// keeps this `MapRef` alive) is held; the borrow must end first.
    #[inline]
    pub(crate) fn try_borrow<'a>(
        &'a self,
        hazards: &'a Hazards,
        slot: &'a AtomicUsize,
    ) -> Option<EntryBorrow<'a, V, L>> {
        let entry = self.entry();
        refcount::borrow(entry.protocol(hazards), slot).then_some(EntryBorrow { entry, slot })
    }

    /// Borrows the entry on the calling thread (the loom model's entry point;
    /// the cache passes its own slots).
    #[doc(hidden)]
    pub fn try_borrow_for_test(&self) -> Option<EntryBorrow<'_, V, L>> {
        let hazards = &L::cold(&self.entry().refs).acct.hazards;
        self.try_borrow(hazards, hazards.local().1)
    }

    /// Marks the entry removed from the map: its payload is released now if
    /// it has no users, else when the last `EntryRef` drops. Idempotent.
    pub fn kill(&self) {
        if refcount::kill(self.entry().protocol_cold()) {
            // SAFETY: we won FREED; memory is held by `self`.
            unsafe { release_payload(self.ptr) };
        }
    }

    pub(crate) fn same(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }

    /// Builds a mapped entry around `handle` for the loom model and unit tests.
    #[doc(hidden)]
    pub fn new_for_test(handle: V) -> (Self, EntryRef<V, L>) {
        Self::new(NewEntry {
            path: "test".into(),
            meta: FileMeta {
                size: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                dev: 0,
                ino: 0,
            },
            mime: "application/octet-stream",
            handle: Some(handle),
            bytes: None,
            validated_ms: 0,
            upgrade: Upgrade::No,
            acct: Arc::new(Accounting::default()),
        })
    }
}

impl<V, L: RefLayout> Drop for MapRef<V, L> {
    fn drop(&mut self) {
        // Killed already (removal) or not (the map itself is dropped): either
        // way no borrower can see the entry any more, so claim if unused.
        if refcount::unmapped(self.entry().protocol_cold()) {
            // SAFETY: we won FREED; memory is held by `self`.
            unsafe { release_payload(self.ptr) };
        }
        // SAFETY: this is the map node's memory owner, given up exactly once.
        unsafe { drop_memory_owner(self.ptr) };
    }
}

impl<V, L: RefLayout> fmt::Debug for MapRef<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapRef")
            .field("path", &self.entry().path())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    type E16 = Entry<[u64; 2], Padded>;

    #[test]
    fn padded_layout_keeps_refcounts_off_lookup_lines() {
        assert_eq!(offset_of!(E16, meta), 0);
        assert_eq!(offset_of!(E16, validated_ms), 40);
        assert_eq!(offset_of!(E16, state), 48);
        assert_eq!(offset_of!(E16, referenced), 49);
        assert_eq!(offset_of!(E16, etag), 52);
        assert!(offset_of!(E16, etag) + ETAG_LEN <= 72);
        assert_eq!(offset_of!(E16, mime), 72);
        assert_eq!(offset_of!(E16, bytes), 88);
        assert_eq!(offset_of!(E16, handle), 104);
        let refs = offset_of!(E16, refs);
        assert_eq!(refs, 128);
        assert_eq!(
            refs + offset_of!(PaddedRefs, line0) + offset_of!(RefLine<AtomicU8>, count),
            128
        );
        assert_eq!(
            refs + offset_of!(PaddedRefs, line1) + offset_of!(RefLine<ColdFields>, count),
            192
        );
        assert_eq!(std::mem::align_of::<E16>(), 64);
        // Every lookup-read field ends before the first counter's line.
        assert!(offset_of!(E16, handle) + size_of::<Option<[u64; 2]>>() <= 128);
    }

    #[test]
    fn entry_overhead_is_at_most_256_bytes_plus_path() {
        // V = a 16-byte handle, the size of fdtable::Owned (Arc + Fd).
        assert!(size_of::<E16>() <= 256, "{}", size_of::<E16>());
        assert!(size_of::<Entry<std::os::fd::OwnedFd>>() <= 256);
        assert!(size_of::<Entry<std::fs::File>>() <= 256);
    }

    #[test]
    fn unpadded_layout_puts_counters_beside_metadata() {
        type U = Entry<[u64; 2], Unpadded>;
        assert_eq!(offset_of!(U, hot), 0);
        assert_eq!(offset_of!(U, meta), 24);
    }

    #[test]
    fn etag_is_quoted_hex_and_changes_with_identity() {
        let m = FileMeta {
            size: 1,
            mtime_ns: 2,
            ctime_ns: 3,
            dev: 4,
            ino: 5,
        };
        let a = etag_for(&m);
        assert_eq!(a[0], b'"');
        assert_eq!(a[17], b'"');
        assert!(a[1..17].iter().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, etag_for(&FileMeta { size: 2, ..m }));
        assert_ne!(a, etag_for(&FileMeta { mtime_ns: 3, ..m }));
        assert_ne!(a, etag_for(&FileMeta { ino: 6, ..m }));
        assert_ne!(a, etag_for(&FileMeta { dev: 7, ..m }));
        // ctime is not part of the validator (a chmod keeps the ETag).
        assert_eq!(a, etag_for(&FileMeta { ctime_ns: 9, ..m }));
    }
}
