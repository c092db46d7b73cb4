//! Which shard the calling thread owns, per table.
//!
//! A thread claims a shard of a table the first time it uses that table (an
//! atomic flag per shard, compare-and-swap 0 -> 1) and keeps it until the
//! thread exits, when the thread-local destructor clears the flag. The claim
//! is what makes the owner the only writer of the shard's bitmap. The cache
//! of (table id -> shard) is a thread-local `Vec`, fronted by the last table
//! used so the common case is one compare.

use std::cell::{Cell, RefCell};
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
    last_table: Cell<u64>,
    last_shard: Cell<u32>,
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
        for entry in self.entries.get_mut().drain(..) {
            if entry.shard != NO_SHARD {
                entry.flags.release(entry.shard as usize);
            }
        }
    }
}

static THREAD_NUMBERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static CLAIMS: LocalClaims = LocalClaims {
        last_table: Cell::new(0),
        last_shard: Cell::new(NO_SHARD),
        entries: RefCell::new(Vec::new()),
        thread_number: THREAD_NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        pins: Cell::new(0),
    };
}

/// The shard of table `table_id` this thread owns, claiming one on first use.
/// `None` if every owner shard is taken or the thread is exiting.
#[inline]
pub(crate) fn owned_shard(table_id: u64, flags: &Arc<ClaimFlags>) -> Option<usize> {
    CLAIMS
        .try_with(|claims| {
            if claims.last_table.get() == table_id {
                let shard = claims.last_shard.get();
                return (shard != NO_SHARD).then_some(shard as usize);
            }
            lookup_or_claim(claims, table_id, flags)
        })
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
    claims.last_table.set(table_id);
    claims.last_shard.set(shard);
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
            claims.last_table.set(table_id);
            claims.last_shard.set(shard);
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
