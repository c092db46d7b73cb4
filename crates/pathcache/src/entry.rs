//! Cache entries, their memory layout, and the reference type handed out.
//!
//! # Layout of `Entry<V>` (padded, the default; `V` up to 24 bytes)
//!
//! ```text
//!  offset  line  field                        written
//!  ------  ----  ---------------------------  ------------------------------
//!    0      0    hash                   8 B   when the entry is (re)used
//!    8      0    validated_ms           8 B   revalidation (once per `valid`)
//!   16      0    lanes (where its counters    once, when its page is made
//!                are)                   8 B
//!   24      0    state (generation|phase) 4 B removal, release, reuse
//!   28      0    referenced (CLOCK bit)       a hit, only when clear
//!   29      0    key: len, kind, upgrade,     when the entry is (re)used
//!                has_handle, path <= 31 B
//!   64      1    meta (size, mtime, ctime,    when the entry is (re)used
//!                dev, ino)             40 B
//!  104      1    label 16 B, bytes 16 B       (re)use / payload release
//!  136      2    handle Option<V> <= 24 B     (re)use / payload release
//!  160      2    path (Box<str>, empty when   (re)use / payload release
//!                the key holds it), cache
//!                (Arc), uses (min_uses)
//!  256           end (size_of, align 64)
//!
//!  reference lanes: outside the entry, one array per lane per page
//!  (pool.rs): lane k of entry i is `lanes[k][i]`, 8 entries per line
//! ```
//!
//! A lookup reads line 0 only (hash, freshness, state, key) plus its lane;
//! a response reads lines 1-2. Nothing on lines 0-2 is written on a hit
//! (the CLOCK bit only when an eviction scan cleared it). The counters every
//! hit writes live in per-lane arrays beside the page's entries: a thread
//! writes only lines of its own lane, which nobody reads on a lookup. This
//! is the lesson of the kernel's d_lockref patch (seed 03): the count every
//! user writes must not share a line with what every lookup reads. Putting
//! the lanes outside the entry is also what lets the path's first 31 bytes
//! sit on line 0 within 256 bytes per entry.
//!
//! The `Unpadded` layout (benchmarks only) puts both counters at offset 0,
//! beside the key, to measure what the separation buys.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use crate::copy::FileCopy;
use crate::pool::{Pool, Slot};
use crate::refcount::{self, REF_SHARDS};
use crate::sync::{AtomicU32, AtomicUsize, Ordering};
use crate::variant::{Slots, VariantRef};
use crate::{FileMeta, Negative};

mod sealed {
    pub trait Sealed {}
}

/// Where an entry keeps its reference counters. Sealed: [`Padded`] is the
/// layout the cache uses; [`Unpadded`] exists to benchmark the difference.
pub trait RefLayout: sealed::Sealed + Send + Sync + Sized + 'static {
    #[doc(hidden)]
    type Hot: Send + Sync;
    #[doc(hidden)]
    fn new_hot() -> Self::Hot;
    /// Distance between an entry's lanes, in counters.
    #[doc(hidden)]
    const STRIDE: usize;
    /// Whether the counters are in the entry (`hot`) rather than the page.
    #[doc(hidden)]
    const INLINE: bool;
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
    fn new_hot() {}
    const STRIDE: usize = crate::pool::PAGE;
    const INLINE: bool = false;
}

impl RefLayout for Unpadded {
    type Hot = [AtomicUsize; REF_SHARDS];
    fn new_hot() -> Self::Hot {
        std::array::from_fn(|_| AtomicUsize::new(0))
    }
    const STRIDE: usize = 1;
    const INLINE: bool = true;
}

/// What a later use of an entry should add to it: a handle (a
/// metadata-only entry reloaded) or a small file's copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Upgrade {
    /// Has a handle, or cannot use one (small-file bytes, loader gave none).
    No = 0,
    /// Waiting for `min_uses`.
    MinUses = 1,
    /// The open-handle budget was full when it was loaded.
    Denied = 2,
    /// Has a handle; a small file whose bytes a later use copies.
    Copy = 3,
}

/// Longest path compared on line 0; longer ones are compared with the
/// entry's owned copy (one more line and the heap).
pub(crate) const INLINE_KEY: usize = 31;

/// Marks a key longer than [`INLINE_KEY`].
const LONG_KEY: u8 = u8::MAX;

/// What a file entry is (0) or which negative answer it caches.
const KIND_FILE: u8 = 0;
const KIND_NOT_FOUND: u8 = 1;
const KIND_FORBIDDEN: u8 = 2;

/// Whether the first `b.len()` bytes of `a` are `b` (`b.len() <= INLINE_KEY`),
/// compared as two overlapping words of the largest size that fits: no
/// `memcmp` call, whose spills and call the hit paid between its pin and
/// its unpin.
#[inline(always)]
fn inline_eq(a: &[u8; INLINE_KEY], b: &[u8]) -> bool {
    #[inline(always)]
    fn words<const N: usize>(a: &[u8], b: &[u8]) -> bool {
        let n = b.len();
        let w = |s: &[u8], at: usize| -> [u8; N] { s[at..at + N].try_into().expect("N bytes") };
        (w(a, 0) == w(b, 0)) & (w(a, n - N) == w(b, n - N))
    }
    let n = b.len();
    debug_assert!(n <= INLINE_KEY);
    if n >= 16 {
        words::<16>(a, b)
    } else if n >= 8 {
        words::<8>(a, b)
    } else if n >= 4 {
        words::<4>(a, b)
    } else if n > 0 {
        (a[0] == b[0]) & (a[n / 2] == b[n / 2]) & (a[n - 1] == b[n - 1])
    } else {
        true
    }
}

/// The lookup-side fields written when the entry is (re)used (line 0).
#[repr(C)]
struct Key {
    len: u8,
    kind: u8,
    upgrade: Upgrade,
    /// Holds a handle counted in `Shared::open_handles`.
    has_handle: bool,
    bytes: [u8; INLINE_KEY],
}

/// The response-side fields (lines 1-2).
#[repr(C)]
struct Data<V> {
    meta: FileMeta,
    label: &'static str,
    bytes: FileCopy,
    handle: Option<V>,
}

/// Fields only slow paths (and variant requests) read.
struct Cold<V, L: RefLayout> {
    path: Box<str>,
    shared: Arc<Shared<V, L>>,
    variants: Slots,
}

/// A cached file (or a cached negative answer, inside the crate):
/// metadata, the loader's label, and optionally an open handle and the bytes of
/// a small file. Reached through an [`EntryRef`].
#[repr(C, align(64))]
pub struct Entry<V, L: RefLayout = Padded> {
    hot: L::Hot,
    hash: AtomicU64,
    validated_ms: AtomicU64,
    lanes: NonNull<AtomicUsize>,
    state: AtomicU32,
    referenced: AtomicBool,
    key: UnsafeCell<Key>,
    /// Initialized while the entry is not FREED.
    data: UnsafeCell<MaybeUninit<Data<V>>>,
    /// Initialized while the entry is not FREED.
    cold: UnsafeCell<MaybeUninit<Cold<V, L>>>,
    uses: std::sync::atomic::AtomicU32,
}

// SAFETY: the cells (`key`, `data`, `cold`) are written only by the writer
// that takes a FREED entry from the pool (before it publishes LIVE with a
// SeqCst store) and by the single thread that wins the FREED transition
// (after every reference is gone); they are read only by holders of a
// reference that saw the entry LIVE after pinning it (see `refcount`).
// `lanes` is written once, before the page is shared. So sharing an entry
// is as safe as sharing `V`, and moving one is as safe as moving `V`.
unsafe impl<V: Send + Sync, L: RefLayout> Sync for Entry<V, L> {}
// SAFETY: see the `Sync` impl; the entry owns a `V`, so it is `Send` when `V` is.
unsafe impl<V: Send + Sync, L: RefLayout> Send for Entry<V, L> {}

/// What a cache shares with its entries (entries can outlive the cache
/// through `EntryRef`s): byte accounting and the entry pool.
/// Every entry that is not FREED holds one `Arc` of it.
pub(crate) struct Shared<V, L: RefLayout> {
    pub(crate) open_handles: std::sync::atomic::AtomicUsize,
    pub(crate) small_bytes: AtomicU64,
    /// Bytes of variants counted in the variant budget (their own `Arc`:
    /// a variant can outlive its entry in a response).
    pub(crate) variant_bytes: Arc<AtomicU64>,
    pub(crate) pool: Pool<Entry<V, L>>,
    /// Entries whose FREED transition was won while a borrow's
    /// announcement covered them: their payload waits here (the
    /// `announce` crate).
    pending: std::sync::Mutex<Vec<Deferred<V, L>>>,
    /// `pending.len()`, read without the lock on every `get_with`.
    pending_len: std::sync::atomic::AtomicUsize,
}

/// An entry on the pending list (its payload not yet released).
struct Deferred<V, L: RefLayout>(NonNull<Entry<V, L>>);

// SAFETY: the pending list owns the entry's payload as the FREED winner
// would; sending it is sending that `V` (the entry's memory is the pool's).
unsafe impl<V: Send + Sync, L: RefLayout> Send for Deferred<V, L> {}

impl<V, L: RefLayout> Default for Shared<V, L> {
    fn default() -> Self {
        Shared {
            open_handles: Default::default(),
            small_bytes: AtomicU64::new(0),
            variant_bytes: Arc::default(),
            pool: Pool::default(),
            pending: Default::default(),
            pending_len: Default::default(),
        }
    }
}

impl<V, L: RefLayout> Shared<V, L> {
    /// Whether payloads wait on the pending list (one relaxed load).
    #[inline(always)]
    pub(crate) fn has_pending(&self) -> bool {
        self.pending_len.load(std::sync::atomic::Ordering::Relaxed) != 0
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<Deferred<V, L>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts an entry whose FREED transition the caller won, and whose
    /// address an announcement covered, on the pending list.
    fn defer(&self, ptr: NonNull<Entry<V, L>>) {
        let mut pending = self.pending();
        pending.push(Deferred(ptr));
        self.pending_len
            .store(pending.len(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Releases the pending payloads no announcement covers any more (all
    /// of them with `all`, when no borrow can exist); returns how many.
    /// The caller holds an `Arc` of `self` (a release may drop an entry's).
    pub(crate) fn reclaim(&self, all: bool) -> usize {
        let ready: Vec<Deferred<V, L>> = {
            let mut pending = self.pending();
            let mut ready = Vec::new();
            pending.retain(|d| {
                let keep = !all && announce::covered(announce_key(d.0));
                if !keep {
                    ready.push(Deferred(d.0));
                }
                keep
            });
            self.pending_len
                .store(pending.len(), std::sync::atomic::Ordering::Relaxed);
            ready
        };
        let released = ready.len();
        for d in ready {
            // SAFETY: on the pending list, the entry's FREED transition was
            // won and its payload is released by whoever takes it off the
            // list (we did, under the lock); no announcement covers it now
            // (or, with `all`, none can exist), and the loads that saw that
            // read the borrowers' Release clears (see the `announce` crate).
            unsafe { release_payload(d.0) };
        }
        released
    }
}

impl<V, L: RefLayout> Slot for Entry<V, L> {
    fn vacant(lane0: NonNull<AtomicUsize>) -> Self {
        Entry::vacant(lane0)
    }

    unsafe fn placed(this: NonNull<Self>) {
        // SAFETY: the pool's contract is `fix_inline_lanes`'s.
        unsafe { Entry::fix_inline_lanes(this) }
    }
}

/// What a new entry holds.
pub(crate) struct NewEntry<'a, V> {
    pub(crate) path: &'a str,
    pub(crate) hash: u64,
    pub(crate) negative: Option<Negative>,
    pub(crate) meta: FileMeta,
    pub(crate) label: &'static str,
    pub(crate) handle: Option<V>,
    pub(crate) bytes: Option<Box<[u8]>>,
    pub(crate) validated_ms: u64,
    pub(crate) upgrade: Upgrade,
    /// Whether `handle` counts among the cache's open handles (false for
    /// a load that was not admitted: `admit.rs`).
    pub(crate) counted: bool,
}

impl<V, L: RefLayout> Entry<V, L> {
    /// An unused (FREED, generation 0) entry whose lanes are at `lanes`
    /// (for the inline layout fixed up by
    /// [`fix_inline_lanes`](Self::fix_inline_lanes) once it has its address).
    pub(crate) fn vacant(lanes: NonNull<AtomicUsize>) -> Self {
        Entry {
            hot: L::new_hot(),
            hash: AtomicU64::new(0),
            validated_ms: AtomicU64::new(0),
            lanes,
            state: AtomicU32::new(refcount::FREED),
            referenced: AtomicBool::new(false),
            key: UnsafeCell::new(Key {
                len: 0,
                kind: KIND_FILE,
                upgrade: Upgrade::No,
                has_handle: false,
                bytes: [0; INLINE_KEY],
            }),
            data: UnsafeCell::new(MaybeUninit::uninit()),
            cold: UnsafeCell::new(MaybeUninit::uninit()),
            uses: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Points an inline-layout entry's lanes at its own `hot` counters (its
    /// final address is known only once its page is allocated).
    ///
    /// # Safety
    /// `this` points to an entry no one else references yet.
    pub(crate) unsafe fn fix_inline_lanes(this: NonNull<Self>) {
        if L::INLINE {
            // SAFETY: caller's contract; the pointer is derived from `this`,
            // so it covers the whole entry (both counters).
            unsafe {
                let hot = std::ptr::addr_of_mut!((*this.as_ptr()).hot);
                (*this.as_ptr()).lanes = NonNull::new_unchecked(hot.cast::<AtomicUsize>());
            }
        }
    }

    /// Lane `k`'s counter.
    #[inline]
    pub(crate) fn lane(&self, k: usize) -> &AtomicUsize {
        debug_assert!(k < REF_SHARDS);
        // SAFETY: `lanes` points at lane 0 of this entry inside its page's
        // lane arrays (or its own `hot` counters), which live as long as the
        // entry; lane k is `STRIDE * k` counters further (see `pool.rs`).
        unsafe { &*self.lanes.as_ptr().add(k * L::STRIDE) }
    }

    fn counts(&self) -> [&AtomicUsize; REF_SHARDS] {
        std::array::from_fn(|k| self.lane(k))
    }

    /// The stored hash (readable in any state: an atomic of type-stable memory).
    #[inline]
    pub(crate) fn hash(&self) -> u64 {
        self.hash.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Pins the entry for a lookup on `lane`: `Some` reference when it was
    /// LIVE (the caller must still check [`key_is`](Self::key_is)). `None`:
    /// the pin was undone (the caller may have released a dying entry).
    #[inline(always)]
    pub(crate) fn pin(this: NonNull<Self>, lane: usize) -> Option<EntryRef<V, L>> {
        // SAFETY: entries are type-stable (never freed while their cache,
        // which the caller borrows, lives), so the address stays valid.
        let entry = unsafe { this.as_ref() };
        let live = refcount::try_acquire(entry.lane(lane), &entry.state);
        let pinned = EntryRef {
            ptr: this,
            lane: lane as u8,
        };
        if live {
            Some(pinned)
        } else {
            // Undo through the reference's drop, which claims if it must.
            drop(pinned);
            None
        }
    }

    /// Announces `this` in the thread's `word` for a scoped borrow and
    /// checks it is LIVE (the caller must still check
    /// [`key_is`](Self::key_is)). The announcement stays until the caller
    /// clears the word, also when this returns false.
    #[inline(always)]
    pub(crate) fn announce_live(this: NonNull<Self>, word: &announce::Word) -> bool {
        word.announce(announce_key(this));
        // SAFETY: type-stable memory (see `pin`).
        let entry = unsafe { this.as_ref() };
        refcount::phase(entry.state.load(Ordering::SeqCst)) == refcount::LIVE
    }

    /// Whether this (pinned or announced, LIVE) entry is the one for `path`.
    #[inline(always)]
    pub(crate) fn key_is(&self, path: &str) -> bool {
        // SAFETY: called with a reference (or an announcement) that saw the
        // entry LIVE: the key was written before that state and is not
        // written until the entry is back in the pool.
        let key = unsafe { &*self.key.get() };
        if (key.len as usize) == path.len() {
            return inline_eq(&key.bytes, path.as_bytes());
        }
        key.len == LONG_KEY && self.path() == path
    }

    /// The negative answer this entry caches, if it is one.
    #[inline]
    pub(crate) fn negative(&self) -> Option<Negative> {
        // SAFETY: as for `key_is`.
        match unsafe { (*self.key.get()).kind } {
            KIND_NOT_FOUND => Some(Negative::NotFound),
            KIND_FORBIDDEN => Some(Negative::Forbidden),
            _ => None,
        }
    }

    fn data(&self) -> &Data<V> {
        // SAFETY: outside the crate `&Entry` is only reachable through a
        // counted `EntryRef`, and the data is initialized before the entry
        // turns LIVE and taken only after every reference is gone
        // (`try_claim`). Inside the crate, entries reached through the index
        // without a reference (eviction scan, under the writer lock) read
        // only atomics and the key.
        unsafe { (*self.data.get()).assume_init_ref() }
    }

    fn cold(&self) -> &Cold<V, L> {
        // SAFETY: as for `data`.
        unsafe { (*self.cold.get()).assume_init_ref() }
    }

    /// The normalized path this entry was loaded for: from the key on
    /// line 0 when it fits there (read by the lookup already; the cold
    /// copy was a miss of its own on every use, 5% of a not_modified
    /// request's user time), else the cold copy.
    #[inline]
    pub fn path(&self) -> &str {
        // SAFETY: as for `key_is`.
        let key = unsafe { &*self.key.get() };
        if key.len == LONG_KEY {
            return &self.cold().path;
        }
        let bytes = &key.bytes[..key.len as usize];
        // SAFETY: `occupy` copied these bytes whole from a `&str`.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
    /// The metadata the loader reported when it opened/read the file.
    pub fn meta(&self) -> &FileMeta {
        &self.data().meta
    }
    /// The label the loader attached ([`Loaded::File`](crate::Loaded)).
    pub fn label(&self) -> &'static str {
        self.data().label
    }
    /// The open handle, if this entry holds one (see `min_uses`, `max_open`).
    pub fn handle(&self) -> Option<&V> {
        self.data().handle.as_ref()
    }
    /// The whole file's bytes when it was small enough and the budget
    /// allowed (copied at load or on a later use, see
    /// [`Config::small_file_max`](crate::Config::small_file_max)).
    #[inline]
    pub fn bytes(&self) -> Option<&[u8]> {
        self.data().bytes.get()
    }
    /// The slot a later use copies the file's bytes into.
    pub(crate) fn copy_slot(&self) -> &FileCopy {
        &self.data().bytes
    }
    /// The variant kept in `slot` (see [`crate::variant`]), if any.
    pub fn variant(&self, slot: usize) -> Option<VariantRef> {
        self.variants().get(slot)
    }
    pub(crate) fn variants(&self) -> &Slots {
        &self.cold().variants
    }

    /// Fills a FREED entry taken from the pool for `new` and makes it LIVE
    /// (`mapped`) or DYING (served uncached, never in the index). Returns
    /// the caller's first reference.
    ///
    /// # Safety
    /// The caller took `this` from its pool's free list (so it is FREED and
    /// nobody else writes it) and `shared` is that pool's owner.
    pub(crate) unsafe fn occupy(
        this: NonNull<Self>,
        new: NewEntry<'_, V>,
        shared: Arc<Shared<V, L>>,
        mapped: bool,
    ) -> EntryRef<V, L> {
        // SAFETY: caller's contract: we are the only writer of the cells,
        // and no reader reads them before the state store below.
        let entry = unsafe { this.as_ref() };
        let freed = entry.state.load(Ordering::SeqCst);
        debug_assert_eq!(refcount::phase(freed), refcount::FREED);
        let len = new.path.len();
        let mut bytes = [0; INLINE_KEY];
        let inline = len <= INLINE_KEY;
        if inline {
            bytes[..len].copy_from_slice(new.path.as_bytes());
        }
        let kind = match new.negative {
            None => KIND_FILE,
            Some(Negative::NotFound) => KIND_NOT_FOUND,
            Some(Negative::Forbidden) => KIND_FORBIDDEN,
        };
        // SAFETY: exclusive (see above); the cells are uninitialized (the
        // release moved the last life's values out).
        unsafe {
            entry.key.get().write(Key {
                len: if inline { len as u8 } else { LONG_KEY },
                kind,
                upgrade: new.upgrade,
                has_handle: new.handle.is_some() && new.counted,
                bytes,
            });
            entry.data.get().write(MaybeUninit::new(Data {
                meta: new.meta,
                label: new.label,
                bytes: FileCopy::new(new.bytes),
                handle: new.handle,
            }));
            entry.cold.get().write(MaybeUninit::new(Cold {
                // A key that fits inline is the path (`path()`): no copy.
                path: if inline {
                    Box::default()
                } else {
                    new.path.into()
                },
                shared,
                variants: Slots::default(),
            }));
        }
        entry
            .hash
            .store(new.hash, std::sync::atomic::Ordering::Relaxed);
        entry
            .validated_ms
            .store(new.validated_ms, std::sync::atomic::Ordering::Relaxed);
        entry
            .referenced
            .store(true, std::sync::atomic::Ordering::Relaxed);
        entry.uses.store(1, std::sync::atomic::Ordering::Relaxed);
        let lane = crate::clock::ref_shard();
        refcount::acquire_clone(entry.lane(lane));
        // Publishes everything above to readers that pin and see this state.
        let phase = if mapped {
            refcount::LIVE
        } else {
            refcount::DYING
        };
        entry
            .state
            .store(refcount::next_life(freed, phase), Ordering::SeqCst);
        EntryRef {
            ptr: this,
            lane: lane as u8,
        }
    }

    /// Marks the entry removed from the index (the caller holds the writer
    /// lock and has just removed it; only the writer kills, so it is LIVE):
    /// its payload is released now if it has no users, else when the last
    /// `EntryRef` drops.
    pub(crate) fn kill(this: NonNull<Self>) {
        // SAFETY: type-stable memory (see `pin`).
        let entry = unsafe { this.as_ref() };
        let live = entry.state.load(Ordering::SeqCst);
        debug_assert_eq!(refcount::phase(live), refcount::LIVE, "killed twice");
        if refcount::kill(entry.counts(), &entry.state, live) {
            // SAFETY: we won FREED.
            unsafe { release_or_defer(this) };
        }
    }

    pub(crate) fn users(&self) -> usize {
        refcount::users(self.counts())
    }
    pub(crate) fn has_handle(&self) -> bool {
        // SAFETY: written only while the entry is FREED and unreachable
        // through the index; the writer lock (held by every caller that has
        // no reference) orders that write before this read.
        unsafe { (*self.key.get()).has_handle }
    }
    pub(crate) fn validated_ms(&self) -> u64 {
        self.validated_ms.load(std::sync::atomic::Ordering::Relaxed)
    }
    pub(crate) fn mark_validated(&self, now_ms: u64) {
        self.validated_ms
            .store(now_ms, std::sync::atomic::Ordering::Relaxed);
    }
    /// CLOCK: set on a hit only if clear, so a hit does not dirty line 0.
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
        // SAFETY: as for `key_is` (callers hold a reference).
        unsafe { (*self.key.get()).upgrade }
    }
    /// Counts one use of a metadata-only entry; returns the new count.
    pub(crate) fn count_use(&self) -> u32 {
        self.uses.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }
}

/// The key a borrow of `entry` announces: its address (non-zero; bit 63
/// clear in user space, apart from fdtable's keys in the shared registry
/// of the `announce` crate).
#[inline(always)]
fn announce_key<V, L: RefLayout>(entry: NonNull<Entry<V, L>>) -> u64 {
    entry.as_ptr() as usize as u64
}

/// After winning an entry's FREED transition: releases its payload now, or
/// puts it on the cache's pending list when a borrow's announcement covers
/// it (the `announce` crate).
///
/// # Safety
/// The caller won FREED for the entry's current generation.
unsafe fn release_or_defer<V, L: RefLayout>(ptr: NonNull<Entry<V, L>>) {
    // The FREED CAS the caller just won orders this scan after it.
    if announce::covered(announce_key(ptr)) {
        // SAFETY: type-stable memory; the payload (with `cold`) is ours
        // and still in place, so `shared` is initialized.
        let entry = unsafe { ptr.as_ref() };
        entry.cold().shared.defer(ptr);
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { release_payload(ptr) };
    }
}

/// Releases the payload (handle, bytes, path) of an entry whose FREED
/// transition the caller won, and returns the entry to its pool.
///
/// # Safety
/// The caller won FREED for the entry's current generation (or took it off
/// the pending list), and no announcement covers it.
unsafe fn release_payload<V, L: RefLayout>(ptr: NonNull<Entry<V, L>>) {
    // SAFETY: type-stable memory; no reference exists any more, so we are
    // the only accessor of the cells until the entry is back in the pool.
    let entry = unsafe { ptr.as_ref() };
    // SAFETY: as above; the cells were initialized by `occupy` and are
    // moved out exactly once per life (only the FREED winner gets here).
    let data = unsafe { (*entry.data.get()).assume_init_read() };
    // SAFETY: as above.
    let cold = unsafe { (*entry.cold.get()).assume_init_read() };
    let Cold {
        path,
        shared,
        variants,
    } = cold;
    // SAFETY: as above (the key is written only by `occupy`).
    if unsafe { (*entry.key.get()).has_handle } {
        shared
            .open_handles
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(b) = data.bytes.get() {
        shared
            .small_bytes
            .fetch_sub(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
    // From here the entry may be reused by another thread: touch only locals.
    shared.pool.give_back(ptr);
    // Drop `V` (for fdtable::Owned this queues the descriptor on the
    // deferred-release path; it never blocks), then the path, then our
    // share of the cache's shared state (the last one frees the pool).
    drop(data);
    drop(variants);
    drop(path);
    drop(shared);
}

/// A counted reference to a cache entry. `Clone` adds one count on the same
/// lane; `Drop` removes it (no lock, no syscall). The entry's handle is
/// released when the entry has left the cache and the last `EntryRef` drops.
pub struct EntryRef<V, L: RefLayout = Padded> {
    ptr: NonNull<Entry<V, L>>,
    lane: u8,
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
        // SAFETY: our count keeps the entry from being released or reused
        // (the pool, which owns the memory, lives while any entry is in use).
        unsafe { self.ptr.as_ref() }
    }
}

impl<V, L: RefLayout> Clone for EntryRef<V, L> {
    #[inline]
    fn clone(&self) -> Self {
        refcount::acquire_clone(self.lane(self.lane as usize));
        EntryRef {
            ptr: self.ptr,
            lane: self.lane,
        }
    }
}

impl<V, L: RefLayout> Drop for EntryRef<V, L> {
    #[inline]
    fn drop(&mut self) {
        let entry = &**self;
        if let Some(seen) = refcount::drop_ref(entry.lane(self.lane as usize), &entry.state) {
            if refcount::try_claim(entry.counts(), &entry.state, seen) {
                // SAFETY: we won FREED.
                unsafe { release_or_defer(self.ptr) };
            }
        }
    }
}

impl<V, L: RefLayout> fmt::Debug for EntryRef<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryRef")
            .field("path", &self.path())
            .field("meta", self.meta())
            .field("label", &self.label())
            .finish_non_exhaustive()
    }
}

impl<V, L: RefLayout> fmt::Debug for Entry<V, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("meta", self.meta())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    type E16 = Entry<[u64; 2], Padded>;

    #[test]
    fn padded_layout_keeps_counters_off_the_entry_and_lookup_data_on_line_0() {
        // Line 0: everything a lookup reads.
        assert_eq!(offset_of!(E16, hash), 0);
        assert_eq!(offset_of!(E16, validated_ms), 8);
        assert_eq!(offset_of!(E16, lanes), 16);
        assert_eq!(offset_of!(E16, state), 24);
        assert_eq!(offset_of!(E16, referenced), 28);
        assert_eq!(offset_of!(E16, key), 29);
        assert_eq!(offset_of!(E16, key) + size_of::<Key>(), 64);
        // Lines 1-2: what a response reads; then the cold fields.
        assert_eq!(offset_of!(E16, data), 64);
        assert!(offset_of!(E16, data) + size_of::<Data<[u64; 2]>>() <= offset_of!(E16, cold));
        assert_eq!(std::mem::align_of::<E16>(), 64);
        // The padded layout has no counter inside the entry at all.
        assert_eq!(size_of::<<Padded as RefLayout>::Hot>(), 0);
    }

    #[test]
    fn inline_eq_tells_every_length_and_every_differing_byte() {
        for n in 0..=INLINE_KEY {
            let path: Vec<u8> = (0..n as u8).map(|i| b'a' + i).collect();
            let mut key = [0; INLINE_KEY];
            key[..n].copy_from_slice(&path);
            assert!(inline_eq(&key, &path), "length {n}");
            for at in 0..n {
                let mut other = key;
                other[at] ^= 0x20;
                assert!(!inline_eq(&other, &path), "length {n}, byte {at}");
            }
        }
    }

    #[test]
    fn entry_overhead_is_at_most_256_bytes_plus_path() {
        // V = a 16-byte handle, the size of fdtable::Owned (Arc + Fd).
        assert!(size_of::<E16>() <= 256, "{}", size_of::<E16>());
        assert!(size_of::<Entry<std::os::fd::OwnedFd>>() <= 256);
        assert!(size_of::<Entry<std::fs::File>>() <= 256);
    }

    #[test]
    fn unpadded_layout_puts_counters_beside_the_key() {
        type U = Entry<[u64; 2], Unpadded>;
        assert_eq!(offset_of!(U, hot), 0);
        assert_eq!(offset_of!(U, hash), 16);
        assert!(offset_of!(U, key) < 64);
    }
}
