//! Announcements of scoped borrows ([`get_with`](crate::PathCache::get_with)):
//! the reader side of the entry protocol with one locked instruction.
//!
//! A counted reference (`EntryRef`) costs two locked read-modify-writes, the
//! pin and the unpin, because it may outlive the call and move to another
//! thread. A borrow that ends before `get_with` returns does not need a
//! count: the thread announces the entry's address in a word of its own,
//!
//! ```text
//!  reader (get_with)                        claimer (won FREED, see `refcount`)
//!  ---------------------------------------  -------------------------------------
//!  word = entry address (swap: xchg, the    CAS DYING(g) -> FREED(g) (lock cmpxchg)
//!         store-load fence)                 load every taken word:
//!  state load: LIVE? key == path?             one == entry address: defer the
//!  f(entry)                                   payload to the cache's pending list
//!  word = 0 (plain Release store)             none: release the payload now
//! ```
//!
//! and whoever wins the entry's FREED transition checks the words before it
//! releases the payload. A reader that saw the entry LIVE did its state load
//! before the kill (the LIVE -> DYING CAS) in the single SeqCst order, so its
//! `swap` came before the claimer's loads, which see the address (or a later
//! value of the word, which the reader wrote after it was done: the clearing
//! store is Release and the next announcement an RMW, so reading either
//! orders the reader's use of the payload before the release). A reader that
//! announced after the kill sees a phase other than LIVE and never reads
//! the payload. The other side of the store-buffering pattern is the same
//! as for a pin (`refcount`), with the announcement in place of the lane.
//!
//! The clearing store is plain, so a reader cannot learn that a claimer saw
//! its announcement: a deferred payload waits on the cache's pending list
//! until a later check finds no word holding its address. The cache checks
//! the list (one load when it is empty) after every `get_with` and before
//! every writer operation (load, replacement, invalidation, eviction), and
//! releases everything left when it is dropped; so a payload covered by a
//! borrow is released by the first of those that follows the end of the
//! borrow (`PathCache::reclaim` runs the check on demand).
//!
//! Words: [`WORDS`] per process, one cache line each (a reader writes its
//! own on every borrow), taken by a thread on its first `get_with` and given
//! back by a thread-local destructor when it exits. A thread that finds none
//! free, or borrows inside a borrow (its word is in use), or runs
//! `get_with` from a thread-local destructor, takes a counted reference
//! instead. A claimer loads the words up to the highest ever taken.
//!
//! Measured (`PATHCACHE_INTERLEAVED=300 cargo bench -p benches --bench
//! pathcache`, `benches/README.md`): a borrow is ~1.5x faster than the
//! counted hit, 2.9-3.0x dashmap against 1.95x.

#[cfg(not(loom))]
use std::cell::Cell;

use crate::sync::{sc_fence, AtomicBool, AtomicUsize, Ordering};

/// Announcement words per process.
#[cfg(not(loom))]
pub(crate) const WORDS: usize = 128;
/// Under loom: enough for the models' threads.
#[cfg(loom)]
pub(crate) const WORDS: usize = 4;

/// One thread's word, on a line of its own.
#[repr(align(64))]
struct Word {
    /// The address of the entry the thread borrows, or 0.
    addr: AtomicUsize,
    taken: AtomicBool,
}

struct Registry {
    words: [Word; WORDS],
    /// One past the highest word ever taken: claimers load the words below.
    high: AtomicUsize,
}

impl Registry {
    #[cfg(not(loom))]
    const fn new() -> Registry {
        Registry {
            words: [const {
                Word {
                    addr: AtomicUsize::new(0),
                    taken: AtomicBool::new(false),
                }
            }; WORDS],
            high: AtomicUsize::new(0),
        }
    }

    #[cfg(loom)]
    fn new() -> Registry {
        Registry {
            words: std::array::from_fn(|_| Word {
                addr: AtomicUsize::new(0),
                taken: AtomicBool::new(false),
            }),
            high: AtomicUsize::new(0),
        }
    }

    /// Takes a free word; its index, or `None` when all are taken.
    fn claim(&self) -> Option<usize> {
        let index = (0..WORDS).find(|&i| {
            let taken = &self.words[i].taken;
            !taken.load(Ordering::Relaxed)
                && taken
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        })?;
        // SeqCst RMW: a claimer whose load of `high` misses this one loads
        // it before this thread's first announcement in the SeqCst order,
        // so that announcement's state load comes after the claimer's CAS
        // and sees the entry is not LIVE.
        self.high.fetch_max(index + 1, Ordering::SeqCst);
        Some(index)
    }

    #[cfg(not(loom))]
    fn release(&self, index: usize) {
        self.words[index].addr.store(0, Ordering::Release);
        self.words[index].taken.store(false, Ordering::Release);
    }
}

#[cfg(not(loom))]
static REGISTRY: Registry = Registry::new();

#[cfg(not(loom))]
fn registry() -> &'static Registry {
    &REGISTRY
}

#[cfg(loom)]
loom::lazy_static! {
    static ref REGISTRY: Registry = Registry::new();
}

#[cfg(loom)]
fn registry() -> &'static Registry {
    &REGISTRY
}

/// A thread's word: `None` on the fast path's "no word" outcomes.
pub(crate) type Mine = &'static AtomicUsize;

#[cfg(not(loom))]
const NO_WORD: usize = usize::MAX;

#[cfg(not(loom))]
std::thread_local! {
    // Const, without a destructor: reading it is one `%fs`-relative load.
    // Null: not looked up yet; NO_WORD: none (full, or exiting).
    static MINE: Cell<*const AtomicUsize> = const { Cell::new(std::ptr::null()) };
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
        MINE.with(|m| m.set(NO_WORD as *const AtomicUsize));
        if index != NO_WORD {
            registry().release(index);
        }
    }
}

/// The calling thread's announcement word, if it has one that is not in
/// use (a borrow inside a borrow gets `None`).
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn mine() -> Option<Mine> {
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
fn mine_slow(p: *const AtomicUsize) -> Option<Mine> {
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
    MINE.with(|m| m.set(word.map_or(NO_WORD as *const AtomicUsize, |w| w as *const AtomicUsize)));
    word
}

/// Under loom the word is not given back: loom runs thread-local
/// destructors after the model's statics are gone, and a model has fewer
/// threads than words.
#[cfg(loom)]
struct Lease(Option<usize>);

#[cfg(loom)]
loom::thread_local! {
    static LEASE: Lease = Lease(registry().claim());
}

/// Under loom: the modeled registry, claimed on first use per thread.
#[cfg(loom)]
pub(crate) fn mine() -> Option<Mine> {
    let index = LEASE.with(|lease| lease.0)?;
    let word = &registry().words[index].addr;
    (word.load(Ordering::Relaxed) == 0).then_some(word)
}

/// Announces `addr` in `word` (the caller then checks the entry's state).
#[inline(always)]
pub(crate) fn announce(word: Mine, addr: usize) {
    word.swap(addr, Ordering::SeqCst);
    // loom models the SeqCst swap as AcqRel; see `sync::sc_fence`.
    sc_fence();
}

/// Ends the thread's announcement (the borrow is over).
#[inline(always)]
pub(crate) fn clear(word: Mine) {
    word.store(0, Ordering::Release);
}

/// Whether a thread's announcement covers `addr`. The caller has just
/// won the entry's FREED transition (a SeqCst RMW), or re-checks an entry
/// it deferred.
pub(crate) fn covered(addr: usize) -> bool {
    sc_fence();
    let registry = registry();
    let high = registry.high.load(Ordering::SeqCst);
    registry.words[..high]
        .iter()
        .any(|w| w.addr.load(Ordering::SeqCst) == addr)
}
