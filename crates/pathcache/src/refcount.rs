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
//! Borrows (`PathCache::get_with`) take no count. A borrowing thread
//! publishes the entry's address in its own slot of `Hazards` (a SeqCst
//! swap), then loads the state (SeqCst): the same store-then-load pattern as a
//! lookup's increment, so either it sees `DYING` and backs off, or every
//! claimer (which loads the state, or wrote `DYING`, before scanning the slots)
//! sees its slot. A claimer that sees a slot holding the entry does not claim;
//! the borrow ends with a plain Release store and does not claim either,
//! because the map node's drop claims: papaya drops the node only after every
//! guard that could have found the entry is gone, and a borrow clears its slot
//! before its guard ends. So a borrow that races a removal delays the payload
//! release until the node is reclaimed; nothing is released under a borrower.
//!
//! FREED releases the entry's *payload* (the handle `V` and the small-file
//! bytes) at once, which is what lets `evict_unused` close descriptors
//! immediately. The entry's *memory* has a second, tiny owner count: the
//! payload release is one owner and the map node (dropped by papaya's
//! reclamation after every reader that could still see the entry is gone) is
//! the other, because a reader that found the entry in the map may still be
//! about to touch the counters after the payload is gone.

use crate::hazard::Hazards;
use crate::sync::{full_fence, sc_fence, AtomicU8, AtomicUsize, Ordering};

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

/// What the claim of an entry's payload looks at: its reference counts, its
/// lifecycle state, and the borrow slots of its cache (where a borrower of
/// the entry shows as the entry's address `addr`).
#[derive(Clone, Copy)]
pub(crate) struct Protocol<'a> {
    pub(crate) counts: [&'a AtomicUsize; REF_SHARDS],
    pub(crate) state: &'a AtomicU8,
    pub(crate) hazards: &'a Hazards,
    pub(crate) addr: usize,
}

/// A reference taken by a lookup that can see the entry in the map.
///
/// True: the reference is held. False: the entry is dying; the count taken
/// must be given back with [`release`] (which may make the caller the one to
/// release the payload). Split so the hit path does not read the entry's cold
/// line (where the borrow slots are reached) unless the entry is dying.
#[inline]
pub(crate) fn try_acquire(
    counts: [&AtomicUsize; REF_SHARDS],
    shard: usize,
    state: &AtomicU8,
) -> bool {
    let old = counts[shard].fetch_add(1, Ordering::SeqCst);
    check_overflow(old);
    sc_fence();
    // Else back off: the killer either saw our increment (then our decrement
    // may be the last one and must try to claim) or did not (then it may have
    // claimed already and our claim attempt fails harmlessly).
    state.load(Ordering::SeqCst) == LIVE
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

/// Drops one reference. Returns true when the entry is dying and the caller
/// must [`try_claim`] (it may hold the last reference).
#[inline]
pub(crate) fn drop_ref(counts: [&AtomicUsize; REF_SHARDS], shard: usize, state: &AtomicU8) -> bool {
    counts[shard].fetch_sub(1, Ordering::SeqCst);
    sc_fence();
    state.load(Ordering::SeqCst) != LIVE
}

/// Drops one reference. Returns true when the caller won the right (and
/// duty) to release the payload.
pub(crate) fn release(p: Protocol<'_>, shard: usize) -> bool {
    drop_ref(p.counts, shard, p.state) && try_claim(p)
}

/// Marks the entry removed from the map. Returns true when the caller won
/// the right to release the payload (no references were held). Idempotent.
pub(crate) fn kill(p: Protocol<'_>) -> bool {
    if p.state
        .compare_exchange(LIVE, DYING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    sc_fence();
    try_claim(p)
}

/// The map node is being dropped (papaya reclaimed it, or the map itself is
/// dropped): no borrower can be reading the entry any more. Kills the entry
/// if nobody did, and claims the payload unless references remain. Returns
/// true when the caller must release the payload.
pub(crate) fn unmapped(p: Protocol<'_>) -> bool {
    kill(p) || (p.state.load(Ordering::SeqCst) == DYING && try_claim(p))
}

/// Publishes a borrow of a LIVE entry in the calling thread's `slot`.
/// Returns false (and unpublishes) when the entry is already dying.
#[inline]
pub(crate) fn borrow(p: Protocol<'_>, slot: &AtomicUsize) -> bool {
    slot.swap(p.addr, Ordering::SeqCst);
    sc_fence();
    if p.state.load(Ordering::SeqCst) == LIVE {
        return true;
    }
    end_borrow(slot);
    false
}

/// Ends a borrow. No claim: see the module doc (the map node's drop claims).
#[inline]
pub(crate) fn end_borrow(slot: &AtomicUsize) {
    slot.store(0, Ordering::Release);
}

/// Claims the payload of a dying entry if no reference and no borrow is
/// left. True: the caller won FREED and must release the payload.
#[cold]
pub(crate) fn try_claim(p: Protocol<'_>) -> bool {
    let (counts, state) = (p.counts, p.state);
    // The map node's drop claims after a borrow ended with a Release store
    // (which happens-before it). If a reference holder's claim declined
    // because it read that slot before the store, its SeqCst decrement
    // precedes this fence in the SeqCst order, so the loads below see it
    // (C++20 [atomics.order] 4.2). Without the fence both could decline and
    // the payload would leak (found by the loom model
    // `borrow_and_last_reference_race_removal`).
    full_fence();
    for count in counts {
        if count.load(Ordering::SeqCst) != 0 {
            return false;
        }
    }
    if p.hazards.published(p.addr) {
        // A borrower is reading it; the node's drop claims later.
        return false;
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
