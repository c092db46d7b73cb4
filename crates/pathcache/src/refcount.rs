//! The entry reference protocol (the crate's only custom synchronization).
//!
//! An entry is counted in [`REF_SHARDS`] separate counters. A reference taken
//! by a thread is counted in the shard picked by that thread's index, and a
//! clone of a reference counts in the *same* shard as its source (never another
//! one). The map's own claim on the entry is not a count but the lifecycle
//! state `LIVE`.
//!
//! ```text
//!   LIVE --remove from map (kill)--> DYING --all shards read 0, one CAS--> FREED
//!    ^ readers may take references        ^ only clones of existing references
//! ```
//!
//! Why the sum of the shards can be read one shard at a time: once the state
//! is `DYING` a shard that reads 0 stays 0 forever, because a new reference
//! can appear on a shard only through a lookup (which backs off when it sees
//! `DYING`, see below) or through a clone of a reference that already counts
//! in that same shard. So the thread whose decrement is the last one in the
//! SeqCst order sees every shard at 0, and exactly one thread wins the
//! `DYING -> FREED` CAS.
//!
//! Why a lookup cannot race the kill: the reader does `fetch_add(SeqCst)` on
//! its shard and then loads the state (SeqCst); the killer stores `DYING`
//! (SeqCst) and then loads the shards (SeqCst). In the single SeqCst order
//! either the reader sees `DYING` (it undoes its increment and reports a miss)
//! or the killer sees the reader's increment (and leaves the release to that
//! reader's later decrement). On x86-64 the SeqCst RMW is the same `lock xadd`
//! a relaxed one would be, and the SeqCst load is a plain `mov`.
//!
//! FREED releases the entry's *payload* (the handle `V` and the small-file
//! bytes) at once, which is what lets `evict_unused` close descriptors
//! immediately. The entry's *memory* has a second, tiny owner count: the
//! payload release is one owner and the map node (dropped by papaya's
//! reclamation after every reader that could still see the entry is gone) is
//! the other, because a reader that found the entry in the map may still be
//! about to touch the counters after the payload is gone.

use crate::sync::{sc_fence, AtomicU8, AtomicUsize, Ordering};

/// Reference counters per entry, each on its own cache line in the padded layout.
///
/// Two because the entry must stay within 256 bytes and this machine (and the
/// benchmark) has two cores; with more threads, threads share shards
/// round-robin (still correct, just less spread).
pub const REF_SHARDS: usize = 2;

/// The map holds the entry; lookups may take references.
pub(crate) const LIVE: u8 = 0;
/// Removed from the map; only clones of existing references may appear.
pub(crate) const DYING: u8 = 1;
/// The payload has been released (exactly one thread won this transition).
pub(crate) const FREED: u8 = 2;

/// A reference taken by a lookup that can see the entry in the map.
///
/// `Ok(())`: the reference is held. `Err(must_release)`: the entry is dying,
/// nothing is held, and when `must_release` is true the caller won the right
/// (and duty) to release the payload.
#[inline]
pub(crate) fn try_acquire(
    counts: [&AtomicUsize; REF_SHARDS],
    shard: usize,
    state: &AtomicU8,
) -> Result<(), bool> {
    let old = counts[shard].fetch_add(1, Ordering::SeqCst);
    check_overflow(old);
    sc_fence();
    if state.load(Ordering::SeqCst) == LIVE {
        return Ok(());
    }
    // Back off: the killer either saw our increment (then this decrement may
    // be the last one and must try to claim) or did not (then it may have
    // claimed already and our claim attempt fails harmlessly).
    Err(release(counts, shard, state))
}

/// A clone of an existing reference that counts in the same shard.
#[inline]
pub(crate) fn acquire_clone(count: &AtomicUsize) {
    // Relaxed like `Arc::clone`: the source reference keeps this shard above
    // zero until after this increment, so no claimer can see it at zero.
    let old = count.fetch_add(1, Ordering::Relaxed);
    check_overflow(old);
}

#[inline]
fn check_overflow(old: usize) {
    if old > isize::MAX as usize {
        // Same policy as `Arc`: leaking 2^63 references is a bug we cannot
        // survive soundly.
        std::process::abort();
    }
}

/// Drops one reference. Returns true when the caller won the right (and
/// duty) to release the payload.
#[inline]
pub(crate) fn release(counts: [&AtomicUsize; REF_SHARDS], shard: usize, state: &AtomicU8) -> bool {
    counts[shard].fetch_sub(1, Ordering::SeqCst);
    sc_fence();
    if state.load(Ordering::SeqCst) == LIVE {
        return false;
    }
    try_claim(counts, state)
}

/// Marks the entry removed from the map. Returns true when the caller won
/// the right to release the payload (no references were held). Idempotent.
pub(crate) fn kill(counts: [&AtomicUsize; REF_SHARDS], state: &AtomicU8) -> bool {
    if state
        .compare_exchange(LIVE, DYING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    sc_fence();
    try_claim(counts, state)
}

#[cold]
fn try_claim(counts: [&AtomicUsize; REF_SHARDS], state: &AtomicU8) -> bool {
    for count in counts {
        if count.load(Ordering::SeqCst) != 0 {
            return false;
        }
    }
    // SeqCst loads above read the values written by every earlier release
    // (SeqCst RMWs), so everything those holders did with the payload
    // happens-before the release that follows a successful CAS.
    state
        .compare_exchange(DYING, FREED, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

/// Current number of references (a snapshot; exact only when quiescent).
pub(crate) fn users(counts: [&AtomicUsize; REF_SHARDS]) -> usize {
    counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
}

/// Two owners of an entry's memory: the payload release and the map node.
pub(crate) const MEMORY_OWNERS_MAPPED: u8 = 2;

/// Drops one owner of the memory; returns true when the caller must free it.
pub(crate) fn drop_memory_owner(owners: &AtomicU8) -> bool {
    // AcqRel: the freeing thread must see every write of the other owner.
    owners.fetch_sub(1, Ordering::AcqRel) == 1
}
