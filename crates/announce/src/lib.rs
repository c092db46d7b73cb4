//! Announcement words: the reader side of a scoped borrow with one locked
//! instruction instead of a counted reference's two.
//!
//! This crate owns a process-wide registry of [`WORDS`] words, one cache
//! line each; the lease of a word to a thread (taken on the thread's first
//! [`mine`], given back when the thread exits); and the three steps of the
//! protocol: [`Word::announce`], the clear when the [`Word`] drops, and
//! [`covered`]. It knows nothing of what a key names. Its users are
//! `fdtable` (`FdTable::get_with`: the key is a descriptor's tag, shard and
//! slot with bit 63 set) and `pathcache` (`PathCache::get_with`: the key is
//! an entry's address).
//!
//! A counted reference costs two locked read-modify-writes (the pin and
//! the unpin) because it may outlive the call and move to another thread.
//! A borrow that ends before the call returns needs no count: the thread
//! announces the key of what it reads in a word of its own, and whoever
//! ends the value checks the words before it releases it.
//!
//! ```text
//!  reader (get_with)                        releaser (close, free, drain)
//!  ---------------------------------------  -------------------------------------
//!  word = key (swap: xchg, the store-load   the SeqCst RMW that ends the value
//!         fence)                              (the closing CAS, or the swap that
//!  state load (SeqCst): still live?           takes a list of deferred values)
//!  f(value)                                 covered(key): load every taken word
//!  word = 0 (plain Release store)             one == key: defer the release
//!                                             none: release the value now
//! ```
//!
//! # Why a release never runs under a borrow
//!
//! The two sides are the store-buffering pattern: each writes its own
//! location with a SeqCst read-modify-write, then loads the other's. A
//! reader whose state load saw the value live did that load before the
//! releaser's ending RMW in the single SeqCst order, so its `swap` came
//! before the releaser's loads of the words, which see the key or a later
//! value of the word. A later value is the reader's own, written after it
//! was done: the clearing store is Release and the next announcement an
//! RMW (which continues the clear's release sequence), so reading either
//! orders the reader's use of the value before the release. A reader whose
//! state load came after the ending RMW sees the value ended and does not
//! use it.
//!
//! The releaser loads the words below `high`, one past the highest word
//! ever taken. A thread raises `high` with a SeqCst `fetch_max` when it
//! takes its word, before its first announcement; a releaser whose load of
//! `high` missed that raise loaded `high` first in the SeqCst order, so
//! the thread's first announcement, and the state load after it, come
//! after the releaser's RMW and see the value ended. While no thread ever
//! took a word, [`covered`] is that one load and a compare.
//!
//! The clearing store is plain, so a reader cannot learn that a releaser
//! saw its announcement: a covered value waits on a list of the user's
//! until a later [`covered`] finds no word holding its key (fdtable: the
//! shard's deferred list, checked again by the owner's next insert or
//! `reap`; pathcache: the cache's pending list, checked after every
//! `get_with` and before every writer operation).
//!
//! Keys are non-zero (0 is a word with no announcement). [`mine`] gives no
//! word to a thread whose word holds a key (a borrow inside a borrow), that
//! finds all [`WORDS`] taken, or that runs in a thread-local destructor
//! after its lease was given back: the user takes a counted reference then.
//!
//! # One registry for the process
//!
//! fdtable and pathcache share this one registry instead of each having
//! its own. It is the simplest: one static, one thread-local lease per
//! thread, one [`mine`]; a registry per user would need a macro or a
//! generic static (Rust has none) and a second lease per thread. And it is
//! correct whatever the keys: [`covered`] answers "does any word hold this
//! key", so a word holding another user's equal key only makes a releaser
//! defer a release to its next check (a delay, never a release under a
//! reader), and a reader's own announcement is always seen. Here the keys
//! do not even meet: fdtable's have bit 63 set, pathcache's are user-space
//! addresses, which have it clear. What sharing costs: a borrow of one
//! crate inside the other's (an fdtable `get_with` in the closure of a
//! pathcache `get_with`) finds the thread's word in use and takes the
//! counted path; a releaser loads the words of both crates' readers, which
//! in the daemon are the same worker threads anyway.
//!
//! # Cost
//!
//! On x86-64, all `#[inline(always)]`: [`mine`] is one `%fs`-relative load
//! of the thread's word pointer and one load and compare of the word (the
//! first call per thread takes the lease in a `#[cold]` path); [`Word::announce`]
//! one `xchg`; the clear one plain store; [`covered`] one load of `high`
//! and a compare while no thread ever announced, else one load per word
//! below `high` (`#[cold]`).
//!
//! # Under loom
//!
//! With `--cfg loom` the registry is a `loom::lazy_static` and the lease a
//! `loom::thread_local`, so every execution starts with a fresh registry
//! and each modeled thread takes a word on its first [`mine`], as threads
//! do in a process. [`WORDS`] is 4, and words are not given back (loom
//! runs thread-local destructors after the model's statics are gone, and a
//! model has fewer threads than words). `tests/loom.rs` models the registry
//! itself; fdtable's and pathcache's models check it inside their borrows.
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//!
//! // A value's state, and the key its readers announce (non-zero).
//! let live = AtomicBool::new(true);
//! let key = 0x1000;
//!
//! // Reader: announce, then check the state; the word clears on drop.
//! let word = announce::mine().expect("a free word");
//! word.announce(key);
//! assert!(announce::mine().is_none(), "a borrow inside a borrow gets none");
//! if live.load(Ordering::SeqCst) {
//!     // Use the value: no release can run until `word` drops.
//!     assert!(announce::covered(key));
//! }
//! drop(word);
//!
//! // Releaser: end the value with a SeqCst RMW, then check the words.
//! live.swap(false, Ordering::SeqCst);
//! assert!(!announce::covered(key), "release now");
//! ```

#![deny(missing_docs)]

#[cfg(not(loom))]
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

mod sync;

use sync::{sc_fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Announcement words per process: as many threads at once can borrow
/// without a count.
#[cfg(not(loom))]
pub const WORDS: usize = 128;
/// Under loom: enough for the models' threads.
#[cfg(loom)]
pub const WORDS: usize = 4;

/// One thread's word, on a cache line of its own (its reader writes it on
/// every borrow).
#[repr(align(64))]
struct Line {
    /// The key the thread reads under, or 0.
    key: AtomicU64,
    taken: AtomicBool,
}

struct Registry {
    lines: [Line; WORDS],
    /// One past the highest word ever taken: releasers load the words below.
    high: AtomicUsize,
}

impl Registry {
    #[cfg(not(loom))]
    const fn new() -> Registry {
        Registry {
            lines: [const {
                Line {
                    key: AtomicU64::new(0),
                    taken: AtomicBool::new(false),
                }
            }; WORDS],
            high: AtomicUsize::new(0),
        }
    }

    #[cfg(loom)]
    fn new() -> Registry {
        Registry {
            lines: std::array::from_fn(|_| Line {
                key: AtomicU64::new(0),
                taken: AtomicBool::new(false),
            }),
            high: AtomicUsize::new(0),
        }
    }

    /// Takes a free word; its index, or `None` when all are taken.
    fn claim(&self) -> Option<usize> {
        let index = (0..WORDS).find(|&i| {
            let taken = &self.lines[i].taken;
            !taken.load(Ordering::Relaxed)
                && taken
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        })?;
        // SeqCst RMW before this thread's first announcement: see the crate
        // doc (a releaser that misses it sees the value ended).
        self.high.fetch_max(index + 1, Ordering::SeqCst);
        Some(index)
    }

    #[cfg(not(loom))]
    fn release(&self, index: usize) {
        self.lines[index].key.store(0, Ordering::Release);
        self.lines[index].taken.store(false, Ordering::Release);
    }
}

#[cfg(not(loom))]
static REGISTRY: Registry = Registry::new();

#[cfg(not(loom))]
#[inline(always)]
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

/// The calling thread's announcement word, lent for one borrow: announce
/// with [`announce`](Self::announce); dropping it ends the borrow (a plain
/// Release store of 0).
///
/// Neither `Send` nor `Sync`: the word is the thread's. Announce before
/// running anything that may borrow again (the word is "in use", and
/// [`mine`] gives it to no one else, only while it holds a key).
pub struct Word {
    key: &'static AtomicU64,
    _thread: PhantomData<*const ()>,
}

impl Word {
    /// Announces `key` (non-zero); the caller then loads the value's state
    /// with a SeqCst load and uses the value only if it is still live.
    /// Announcing again replaces the key (a lookup that moves on to the
    /// next candidate).
    #[inline(always)]
    pub fn announce(&self, key: u64) {
        debug_assert_ne!(key, 0, "0 is the word with no announcement");
        self.key.swap(key, Ordering::SeqCst);
        // loom models the SeqCst swap as AcqRel; see `sync::sc_fence`.
        sc_fence();
    }
}

impl Drop for Word {
    /// Ends the borrow (also when the reader unwinds).
    #[inline(always)]
    fn drop(&mut self) {
        self.key.store(0, Ordering::Release);
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Word")
            .field("key", &self.key.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(not(loom))]
const NO_WORD: usize = usize::MAX;

#[cfg(not(loom))]
std::thread_local! {
    // Const, without a destructor: reading it is one `%fs`-relative load.
    // Null: not looked up yet; NO_WORD: none (all taken, or exiting).
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
        // A borrow from a later destructor takes a counted reference.
        MINE.with(|m| m.set(NO_WORD as *const AtomicU64));
        if index != NO_WORD {
            registry().release(index);
        }
    }
}

/// The calling thread's word, if it has one that holds no key; `None`
/// inside a borrow, when all [`WORDS`] are taken, or in a thread-local
/// destructor at thread exit (the caller takes a counted reference then).
#[cfg(not(loom))]
#[inline(always)]
pub fn mine() -> Option<Word> {
    let p = MINE.with(|m| m.get());
    if p.is_null() || p as usize == NO_WORD {
        return mine_slow(p);
    }
    // SAFETY: MINE points into the static registry, at the word this
    // thread holds until its `Lease` drops (which resets MINE first).
    let key = unsafe { &*p };
    // `then`, not `then_some`: a `Word` made and dropped would clear the
    // word in use.
    (key.load(Ordering::Relaxed) == 0).then(|| Word {
        key,
        _thread: PhantomData,
    })
}

/// The thread's first call (takes a word), or one that has none.
#[cfg(not(loom))]
#[cold]
fn mine_slow(p: *const AtomicU64) -> Option<Word> {
    if !p.is_null() {
        return None;
    }
    let index = LEASE.try_with(|lease| {
        let index = registry().claim();
        lease.0.set(index.unwrap_or(NO_WORD));
        index
    });
    let key = index
        .ok()
        .flatten()
        .map(|index| &registry().lines[index].key);
    MINE.with(|m| m.set(key.map_or(NO_WORD as *const AtomicU64, |k| k as *const AtomicU64)));
    key.map(|key| Word {
        key,
        _thread: PhantomData,
    })
}

/// Under loom the word is not given back (see the crate doc).
#[cfg(loom)]
struct Lease(Option<usize>);

#[cfg(loom)]
loom::thread_local! {
    static LEASE: Lease = Lease(registry().claim());
}

/// Under loom: the modeled registry, a word taken on first use per thread.
#[cfg(loom)]
pub fn mine() -> Option<Word> {
    let index = LEASE.with(|lease| lease.0)?;
    let key = &registry().lines[index].key;
    // `then`, not `then_some`: a `Word` made and dropped would clear the
    // word in use.
    (key.load(Ordering::Relaxed) == 0).then(|| Word {
        key,
        _thread: PhantomData,
    })
}

/// Whether a thread's announcement covers `key`. The caller has just ended
/// the value with a SeqCst RMW (or takes it off its list of deferred
/// values after one); a covered value waits for a later check. One load
/// and compare while no thread ever announced.
#[inline(always)]
pub fn covered(key: u64) -> bool {
    sc_fence();
    let registry = registry();
    let high = registry.high.load(Ordering::SeqCst);
    high != 0 && covered_slow(registry, high, key)
}

#[cold]
fn covered_slow(registry: &Registry, high: usize, key: u64) -> bool {
    registry.lines[..high]
        .iter()
        .any(|line| line.key.load(Ordering::SeqCst) == key)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex, MutexGuard};

    /// The tests of one process share the registry, and one takes every
    /// word: they run one at a time.
    fn serial() -> MutexGuard<'static, ()> {
        static SERIAL: Mutex<()> = Mutex::new(());
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[test]
    fn a_borrow_inside_a_borrow_gets_no_word() {
        let _serial = serial();
        let word = mine().expect("a word");
        word.announce(11);
        assert!(mine().is_none());
        assert!(covered(11));
        drop(word);
        assert!(!covered(11));
        let again = mine().expect("the word again after the clear");
        again.announce(12);
        assert!(covered(12) && !covered(11));
    }

    #[test]
    fn another_threads_announcement_is_covered_until_it_ends() {
        let _serial = serial();
        let announced = Arc::new(Barrier::new(2));
        let checked = Arc::new(Barrier::new(2));
        let reader = {
            let (announced, checked) = (announced.clone(), checked.clone());
            std::thread::spawn(move || {
                let word = mine().expect("a word");
                word.announce(21);
                announced.wait();
                checked.wait();
            })
        };
        announced.wait();
        assert!(covered(21));
        assert!(!covered(22));
        checked.wait();
        reader.join().unwrap();
        assert!(!covered(21), "the reader's word cleared");
    }

    #[test]
    fn words_are_leased_per_thread_and_given_back() {
        let _serial = serial();
        // More threads at once than words: some get none.
        let threads = WORDS + 1;
        let all_asked = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let all_asked = all_asked.clone();
                std::thread::spawn(move || {
                    let word = mine();
                    all_asked.wait();
                    word.is_some()
                })
            })
            .collect();
        let with_word = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&with_word| with_word)
            .count();
        assert!(with_word > 0 && with_word < threads);
        // Those threads have exited: their words are free again.
        for i in 0..WORDS as u64 + 1 {
            std::thread::spawn(move || {
                let word = mine().expect("a word given back by an exited thread");
                word.announce(1000 + i);
            })
            .join()
            .unwrap();
        }
    }
}
