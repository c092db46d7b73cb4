//! Announcements of scoped lookups ([`FdTable::get_with`](crate::FdTable::get_with)):
//! the reader side with one locked instruction instead of a guard's two.
//!
//! ```text
//!  reader (get_with)                        releaser (close, drains)
//!  ---------------------------------------  -------------------------------------
//!  word = slot key (swap: xchg, the         the CAS that ends the entry, or the
//!         store-load fence)                   swap that takes the deferred list
//!  state load: OPEN, this generation?       load every taken word:
//!  f(value)                                   one == slot key: (re)queue the slot
//!  word = 0 (plain Release store)             on the shard's deferred list
//!                                           none: release the value now
//! ```
//!
//! A reader whose state load saw the entry open did that load before the
//! closing CAS in the single SeqCst order, so its `swap` came before every
//! releaser's loads (each release follows that CAS), which see the key or
//! a later value of the word; the clearing store is Release and the next
//! announcement an RMW, so reading either orders the reader's use of the
//! value before the release. The clearing store is plain, so a covered
//! value waits on the deferred list for the owner's next insert (or
//! `reap`), which checks the words again: `close` then returns `Ok(())`,
//! as when a guard is out, and the release error is counted in
//! `release_errors`.
//!
//! The key is the descriptor without its generation (tag, shard, slot), so
//! a reader with a stale descriptor of the same slot only delays a
//! release; bit 63 keeps it non-zero. [`WORDS`] words per process, one line
//! each, taken on a thread's first `get_with`, given back when it exits; a
//! thread without one, or inside a `get_with` (its word is in use), takes a
//! guard instead. Releasers load the words up to the highest ever taken.

#[cfg(not(loom))]
use std::cell::Cell;

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Orders a SeqCst RMW before the SeqCst loads after it; loom models SeqCst
/// accesses as AcqRel but SeqCst fences exactly (x86-64 needs nothing).
#[inline(always)]
fn sc_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// Announcement words per process.
#[cfg(not(loom))]
pub(crate) const WORDS: usize = 128;
/// Under loom: enough for the models' threads.
#[cfg(loom)]
pub(crate) const WORDS: usize = 4;

/// One thread's word, on a line of its own.
#[repr(align(64))]
struct Word {
    /// The key of the slot the thread reads, or 0.
    addr: AtomicU64,
    taken: AtomicU32,
}

pub(crate) struct Registry {
    words: [Word; WORDS],
    /// One past the highest word ever taken: claimers load the words below.
    high: AtomicU32,
}

impl Registry {
    #[cfg(not(loom))]
    const fn new() -> Registry {
        Registry {
            words: [const {
                Word {
                    addr: AtomicU64::new(0),
                    taken: AtomicU32::new(0),
                }
            }; WORDS],
            high: AtomicU32::new(0),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Registry {
        Registry {
            words: std::array::from_fn(|_| Word {
                addr: AtomicU64::new(0),
                taken: AtomicU32::new(0),
            }),
            high: AtomicU32::new(0),
        }
    }

    /// Takes a free word; its index, or `None` when all are taken.
    #[cfg(not(loom))]
    fn claim(&self) -> Option<usize> {
        let index = (0..WORDS).find(|&i| {
            let taken = &self.words[i].taken;
            taken.load(Ordering::Relaxed) == 0
                && taken
                    .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        })?;
        // SeqCst RMW: a claimer whose load of `high` misses this one loads
        // it before this thread's first announcement in the SeqCst order,
        // so that announcement's state load comes after the claimer's CAS
        // and sees the entry closed.
        self.high.fetch_max(index as u32 + 1, Ordering::SeqCst);
        Some(index)
    }

    #[cfg(not(loom))]
    fn release(&self, index: usize) {
        self.words[index].addr.store(0, Ordering::Release);
        self.words[index].taken.store(0, Ordering::Release);
    }
}

#[cfg(not(loom))]
static REGISTRY: Registry = Registry::new();

#[cfg(not(loom))]
pub(crate) fn registry() -> &'static Registry {
    &REGISTRY
}

/// A thread's word.
pub(crate) type Mine<'a> = &'a AtomicU64;

#[cfg(not(loom))]
const NO_WORD: usize = usize::MAX;

#[cfg(not(loom))]
std::thread_local! {
    // Const, without a destructor: reading it is one `%fs`-relative load.
    // Null: not looked up yet; NO_WORD: none (full, or exiting).
    static MINE: Cell<*const AtomicU64> = const { Cell::new(std::ptr::null()) };
    // Gives the word back when the thread exits.
    static LEASE: Lease = const { Lease(Cell::new(NO_WORD)) };
}

#[cfg(not(loom))]
struct Lease(Cell<usize>);

#[cfg(not(loom))]
impl Drop for Lease {
    fn drop(&mut self) {
        let index = self.0.get();
        // A `get_with` from a later destructor takes a counted reference.
        MINE.with(|m| m.set(NO_WORD as *const AtomicU64));
        if index != NO_WORD {
            registry().release(index);
        }
    }
}

/// The calling thread's announcement word, if it has one that is not in
/// use (a borrow inside a borrow gets `None`).
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn mine() -> Option<Mine<'static>> {
    let p = MINE.with(|m| m.get());
    if p.is_null() || p as usize == NO_WORD {
        return mine_slow(p);
    }
    // SAFETY: MINE points into the static registry, at the word this
    // thread holds until its `Lease` drops (which resets MINE first).
    let word = unsafe { &*p };
    (word.load(Ordering::Relaxed) == 0).then_some(word)
}

#[cfg(not(loom))]
#[cold]
fn mine_slow(p: *const AtomicU64) -> Option<Mine<'static>> {
    if !p.is_null() {
        return None;
    }
    let index = LEASE.try_with(|lease| {
        let index = registry().claim();
        lease.0.set(index.unwrap_or(NO_WORD));
        index
    });
    let word = index
        .ok()
        .flatten()
        .map(|index| &registry().words[index].addr);
    MINE.with(|m| m.set(word.map_or(NO_WORD as *const AtomicU64, |w| w as *const AtomicU64)));
    word
}

/// Under loom: the table's own registry (no statics or thread-locals,
/// which loom would carry from one execution into the next), the word of
/// the modeled thread's index.
#[cfg(loom)]
pub(crate) fn mine_in(registry: &Registry) -> Option<&AtomicU64> {
    let id = format!("{:?}", loom::thread::current().id());
    let index: usize = id
        .trim_start_matches("ThreadId(")
        .trim_end_matches(')')
        .parse()
        .expect("a loom thread id");
    let word = registry.words.get(index)?;
    if word.taken.load(Ordering::Relaxed) == 0 {
        word.taken.store(1, Ordering::Relaxed);
        registry.high.fetch_max(index as u32 + 1, Ordering::SeqCst);
    }
    (word.addr.load(Ordering::Relaxed) == 0).then_some(&word.addr)
}

/// The key a reader of `fd` announces: tag, shard and slot, bit 63 set.
#[inline(always)]
pub(crate) fn key(fd_raw: u64) -> u64 {
    (fd_raw & !crate::slots::GEN_BITS) | 1 << 63
}

/// Announces `addr` (a [`key`]) in `word`; the caller then checks the state.
#[inline(always)]
pub(crate) fn announce(word: Mine<'_>, addr: u64) {
    word.swap(addr, Ordering::SeqCst);
    // loom models the SeqCst swap as AcqRel; see `sync::sc_fence`.
    sc_fence();
}

/// Ends the thread's announcement (the borrow is over).
#[inline(always)]
pub(crate) fn clear(word: Mine<'_>) {
    word.store(0, Ordering::Release);
}

/// Whether a thread's announcement covers `addr` (a [`key`]). The caller
/// has just ended the entry or taken it off the deferred list (a SeqCst
/// RMW). One load and compare while no thread ever announced.
#[inline(always)]
pub(crate) fn covered(registry: &Registry, addr: u64) -> bool {
    sc_fence();
    let high = registry.high.load(Ordering::SeqCst) as usize;
    high != 0 && covered_slow(registry, high, addr)
}

#[cold]
fn covered_slow(registry: &Registry, high: usize, addr: u64) -> bool {
    registry.words[..high]
        .iter()
        .any(|w| w.addr.load(Ordering::SeqCst) == addr)
}
