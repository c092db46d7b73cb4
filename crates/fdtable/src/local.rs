//! Which shard the calling thread owns, per table.
//!
//! A thread claims a shard of a table the first time it uses that table (an
//! atomic flag per shard, compare-and-swap 0 -> 1) and keeps it until the
//! thread exits, when the thread-local destructor clears the flag. The claim
//! is what makes the owner the only writer of the shard's bitmap. The
//! registry of (table id -> shard) is a thread-local `Vec` with a destructor;
//! in front of it sits `LAST`, one `u64` in a `const`-initialized
//! thread-local without a destructor (a plain `%fs`-relative load, no
//! lazy-init or liveness check), so the common case is one load and one
//! compare.

use std::cell::{Cell, RefCell};
#[cfg(not(loom))]
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::sync::{thread_local, AtomicU32, Ordering};

/// "This thread owns no shard of the table" in the cache.
pub(crate) const NO_SHARD: u32 = u32::MAX;

/// One flag per shard: 0 free, 1 claimed (by an owner for its lifetime, or
/// briefly by a thread using the locked path).
pub(crate) struct ClaimFlags(pub(crate) Box<[CachePadded<AtomicU32>]>);

impl ClaimFlags {
    pub(crate) fn new(shards: usize) -> Self {
        ClaimFlags(
            (0..shards)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
        )
    }

    #[inline]
    pub(crate) fn try_acquire(&self, shard: usize) -> bool {
        let flag = &self.0[shard];
        flag.load(Ordering::Relaxed) == 0
            && flag
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    #[inline]
    pub(crate) fn release(&self, shard: usize) {
        self.0[shard].store(0, Ordering::Release);
    }
}

struct ClaimEntry {
    table_id: u64,
    shard: u32,
    flags: Arc<ClaimFlags>,
}

struct LocalClaims {
    entries: RefCell<Vec<ClaimEntry>>,
    thread_number: usize,
    /// Live `LocalShard` tokens of this thread. A token skips the claim
    /// lookup, so its claims must outlive it: if one is still alive when
    /// this destructor runs (a token kept in another thread-local), the
    /// claims are leaked, never released, and the shards stay claimed.
    pins: Cell<usize>,
}

impl Drop for LocalClaims {
    fn drop(&mut self) {
        if self.pins.get() > 0 {
            return;
        }
        // Forget the fast cache before giving the claims up: `LAST` outlives
        // this destructor (it has none), and a table used from a later
        // thread-local destructor must not believe it still owns a shard
        // that another thread may claim from now on.
        set_last(0);
        for entry in self.entries.get_mut().drain(..) {
            if entry.shard != NO_SHARD {
                entry.flags.release(entry.shard as usize);
            }
        }
    }
}

#[cfg(not(loom))]
static THREAD_NUMBERS: AtomicUsize = AtomicUsize::new(0);

/// Shard bits of `LAST`: 9, so the "owns none" value `LAST_NONE` is
/// never equal to a descriptor's (8-bit) shard.
const LAST_SHARD_BITS: u32 = 9;
const LAST_NONE: u64 = (1 << LAST_SHARD_BITS) - 1;

/// The largest table id `LAST` can hold; `FdTable::new` refuses more.
pub(crate) const MAX_TABLE_ID: u64 = u64::MAX >> LAST_SHARD_BITS;

// `table_id << 9 | shard` of the last table this thread resolved its claim
// for (`shard` = `LAST_NONE` if it owns none), or 0 (no table has id 0).
// Set only while `CLAIMS` holds the claim it names, cleared by `CLAIMS`'s
// destructor before the claims are released. `const` and without a
// destructor, so reading it is a plain thread-local load. (Loom's macro has
// no `const` form; its emulated keys are lazy anyway.)
#[cfg(not(loom))]
std::thread_local! {
    static LAST: Cell<u64> = const { Cell::new(0) };
}
#[cfg(loom)]
loom::thread_local! {
    static LAST: Cell<u64> = Cell::new(0);
}

thread_local! {
    static CLAIMS: LocalClaims = LocalClaims {
        entries: RefCell::new(Vec::new()),
        thread_number: thread_number(),
        pins: Cell::new(0),
    };
}

/// A number per thread, for the shard it tries to claim first.
#[cfg(not(loom))]
fn thread_number() -> usize {
    THREAD_NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Under loom: the modeled thread's index, the same in every execution (a
/// process-wide counter would give a thread another first shard in each
/// execution, which loom reports as a nondeterministic model).
#[cfg(loom)]
fn thread_number() -> usize {
    let id = format!("{:?}", loom::thread::current().id());
    id.trim_start_matches("ThreadId(")
        .trim_end_matches(')')
        .parse()
        .expect("a loom thread id")
}

#[inline(always)]
fn last() -> u64 {
    // Never fails with std (no destructor); under loom the key is emulated
    // and may be gone during thread teardown: then nothing is cached.
    LAST.try_with(Cell::get).unwrap_or(0)
}

fn set_last(value: u64) {
    let _ = LAST.try_with(|last| last.set(value));
}

fn record_last(table_id: u64, shard: u32) {
    let shard = if shard == NO_SHARD {
        LAST_NONE
    } else {
        u64::from(shard)
    };
    set_last(cache_key(table_id) | shard);
}

/// What a table keeps to ask the fast cache about itself: its id in place.
#[inline]
pub(crate) fn cache_key(table_id: u64) -> u64 {
    table_id << LAST_SHARD_BITS
}

/// The shard of the table with `cache_key` this thread owns, if the fast
/// cache says so; `None` if it does not know (or the thread owns no shard
/// of it). One thread-local load and one compare.
#[inline(always)]
pub(crate) fn cached_shard(cache_key: u64) -> Option<usize> {
    let distance = last() ^ cache_key;
    (distance < LAST_NONE).then_some(distance as usize)
}

/// The shard of table `table_id` this thread owns, claiming one on first use.
/// `None` if every owner shard is taken or the thread is exiting.
#[inline]
pub(crate) fn owned_shard(table_id: u64, flags: &Arc<ClaimFlags>) -> Option<usize> {
    if let Some(shard) = cached_shard(cache_key(table_id)) {
        return Some(shard);
    }
    owned_shard_slow(table_id, flags)
}

/// The shard of table `table_id` this thread has claimed, if any. Never
/// claims (see `FdTable::caller`).
#[inline]
pub(crate) fn claimed_shard(table_id: u64) -> Option<usize> {
    if let Some(shard) = cached_shard(cache_key(table_id)) {
        return Some(shard);
    }
    claimed_shard_slow(table_id)
}

#[cold]
fn claimed_shard_slow(table_id: u64) -> Option<usize> {
    CLAIMS
        .try_with(|claims| {
            // A borrow already out (nothing calls back into a table while
            // the registry is borrowed today) answers "owns none", which
            // every caller handles: the remote path.
            let entries = claims.entries.try_borrow().ok()?;
            let entry = entries.iter().find(|entry| entry.table_id == table_id)?;
            record_last(table_id, entry.shard);
            (entry.shard != NO_SHARD).then_some(entry.shard as usize)
        })
        .ok()
        .flatten()
}

#[cold]
fn owned_shard_slow(table_id: u64, flags: &Arc<ClaimFlags>) -> Option<usize> {
    CLAIMS
        .try_with(|claims| lookup_or_claim(claims, table_id, flags))
        .ok()
        .flatten()
}

#[cold]
fn lookup_or_claim(claims: &LocalClaims, table_id: u64, flags: &Arc<ClaimFlags>) -> Option<usize> {
    let mut entries = claims.entries.borrow_mut();
    let shard = match entries.iter().find(|entry| entry.table_id == table_id) {
        Some(entry) => entry.shard,
        None => {
            // Forget tables that are gone (only our clone of the flags is left).
            entries.retain(|entry| Arc::strong_count(&entry.flags) > 1);
            let shard = claim_any(flags, claims.thread_number).unwrap_or(NO_SHARD);
            entries.push(ClaimEntry {
                table_id,
                shard,
                flags: Arc::clone(flags),
            });
            shard
        }
    };
    record_last(table_id, shard);
    (shard != NO_SHARD).then_some(shard as usize)
}

/// Retries the claim for a thread that found every shard taken earlier
/// (an owner may have exited since). Records the claim on success.
#[cold]
pub(crate) fn retry_claim(table_id: u64, flags: &Arc<ClaimFlags>) -> Option<usize> {
    CLAIMS
        .try_with(|claims| {
            let mut entries = claims.entries.borrow_mut();
            let entry = entries
                .iter_mut()
                .find(|entry| entry.table_id == table_id)?;
            if entry.shard != NO_SHARD {
                return Some(entry.shard as usize);
            }
            let shard = claim_any(flags, claims.thread_number)?;
            entry.shard = shard;
            record_last(table_id, shard);
            Some(shard as usize)
        })
        .ok()
        .flatten()
}

/// Records a live `LocalShard` token: this thread's claims are kept at
/// least until [`unpin`]. `false` if the thread is exiting (no token then).
pub(crate) fn pin() -> bool {
    CLAIMS
        .try_with(|claims| claims.pins.set(claims.pins.get() + 1))
        .is_ok()
}

/// Ends a [`pin`]. After the thread-local is gone there is nothing to do:
/// its destructor saw the pin and leaked the claims.
pub(crate) fn unpin() {
    let _ = CLAIMS.try_with(|claims| claims.pins.set(claims.pins.get() - 1));
}

fn claim_any(flags: &ClaimFlags, thread_number: usize) -> Option<u32> {
    // The last flag belongs to the shared shard, which nobody owns.
    let owners = flags.0.len() - 1;
    (0..owners)
        .map(|i| (thread_number + i) % owners)
        .find(|&shard| flags.try_acquire(shard))
        .map(|shard| shard as u32)
}
