//! The entry reference protocol (the crate's custom synchronization, with
//! the index in `table.rs`).
//!
//! An entry is counted in [`REF_SHARDS`] separate counters (lanes). A
//! reference taken by a thread is counted in the lane picked by that
//! thread's index, and a clone of a reference counts in the *same* lane as
//! its source. The index's own claim on the entry is not a count but the
//! lifecycle state, one `u32` holding a generation and a phase:
//!
//! ```text
//!   LIVE(g) --removed from the index (kill)--> DYING(g) --all lanes 0, CAS--> FREED(g)
//!      ^ lookups may pin it                       ^ no new pins stick          |
//!      +-------------- reused for a new path or version: LIVE(g+1) ------------+
//! ```
//!
//! Entry memory is type-stable (`pool.rs`): a FREED entry goes back to its
//! cache's pool and is reused, never returned to the allocator while the
//! cache lives. So a reader may hold an entry's address from a table slot
//! after the entry was freed or even reused. A lookup therefore *pins*
//! first and checks after: `fetch_add` on its lane, then load the state;
//! only `LIVE` counts, and the caller then compares the entry's key with the
//! path it looks for (the entry may be live for another path). Anything
//! else undoes the pin through `drop_ref`, which may make the reader the
//! one to release the payload (see below). A pin that lands on a FREED
//! entry leaves a transient +1 on the lane, which its own `drop_ref` takes
//! back; nothing ever resets a lane with a store, so no pin is lost.
//!
//! Why the sum of the lanes can be read one lane at a time: once the state
//! is `DYING(g)`, a lane that reads 0 stays 0 for generation `g` except for
//! transient pins, which see a phase other than `LIVE` and undo themselves
//! (and then try to claim). So whoever makes the last decrement sees every
//! lane at 0, and exactly one thread wins the `DYING(g) -> FREED(g)` CAS.
//! The generation makes that CAS fail for a claimer that read `DYING(g)`
//! but was overtaken: by then the entry may be `DYING(g+1)` with users
//! that pinned it while it was `LIVE(g+1)`, after the claimer read the lanes.
//!
//! Why a lookup cannot race the kill: the reader does `fetch_add(SeqCst)` on
//! its lane and then loads the state (SeqCst); the killer CASes the state
//! (SeqCst) and then loads the lanes (SeqCst). In the single SeqCst order
//! either the reader sees `DYING` (it undoes its pin) or the killer sees the
//! reader's increment (and leaves the release to that reader's later
//! decrement). On x86-64 the SeqCst RMW is the same `lock xadd` a relaxed
//! one would be, and the SeqCst load is a plain `mov`.
//!
//! FREED releases the entry's *payload* (the handle `V`, the small-file
//! bytes, the path) at once, which is what lets `evict_unused` close
//! descriptors immediately, and returns the entry to the pool, unless a
//! scoped borrow covers the entry: `get_with` takes no count but announces
//! the entry's address in a word of the thread's own (one `xchg`, cleared
//! with a plain store; the `announce` crate), and the FREED winner, whose
//! CAS orders its loads after the kill as above, checks every word before
//! it releases; a borrow that announced after the kill sees a phase other
//! than LIVE and never reads the payload. A covered payload waits on the
//! cache's pending list until a later check (after the next `get_with`, before the next writer
//! operation, at the latest when the cache drops) finds no word holding
//! the address; the entry stays out of the pool until then.

use crate::sync::{sc_fence, AtomicU32, AtomicUsize, Ordering};

/// Reference lanes per entry. Each lane of an entry lives in a per-page
/// array of that lane only (`pool.rs`), so two threads on different lanes
/// never write one line, whichever entries they hit.
pub const REF_SHARDS: usize = 2;

/// The index holds the entry; lookups may take references.
pub(crate) const LIVE: u32 = 0;
/// Removed from the index; only clones of existing references may appear.
pub(crate) const DYING: u32 = 1;
/// The payload has been released (exactly one thread won this transition).
pub(crate) const FREED: u32 = 2;

const PHASE: u32 = 3;

/// The phase of a state word.
#[inline]
pub(crate) fn phase(state: u32) -> u32 {
    state & PHASE
}

/// The state word of the next life after `freed` (a FREED state), in `phase`.
pub(crate) fn next_life(freed: u32, phase: u32) -> u32 {
    debug_assert_eq!(freed & PHASE, FREED);
    (freed & !PHASE).wrapping_add(PHASE + 1) | phase
}

/// Pins the entry for a lookup: true when it was LIVE after the pin (the
/// caller then checks the key). False: the pin must be undone with
/// [`drop_ref`] all the same (which may make the caller the releaser).
#[inline]
pub(crate) fn try_acquire(count: &AtomicUsize, state: &AtomicU32) -> bool {
    let old = count.fetch_add(1, Ordering::SeqCst);
    check_overflow(old);
    sc_fence();
    phase(state.load(Ordering::SeqCst)) == LIVE
}

/// A clone of an existing reference that counts in the same lane.
#[inline]
pub(crate) fn acquire_clone(count: &AtomicUsize) {
    // Relaxed like `Arc::clone`: the source reference keeps this lane above
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

/// Drops one reference (or undoes a pin). Returns the state seen after the
/// decrement when it is not LIVE: the caller must then [`try_claim`] with it
/// (it may have made the last decrement).
#[inline]
pub(crate) fn drop_ref(count: &AtomicUsize, state: &AtomicU32) -> Option<u32> {
    count.fetch_sub(1, Ordering::SeqCst);
    sc_fence();
    let s = state.load(Ordering::SeqCst);
    (phase(s) != LIVE).then_some(s)
}

/// Marks the entry removed from the index (the caller saw it `LIVE` in state
/// `live` under the writer lock). Returns true when the caller won the right
/// to release the payload (no references were held).
pub(crate) fn kill(counts: [&AtomicUsize; REF_SHARDS], state: &AtomicU32, live: u32) -> bool {
    let dying = live | DYING;
    if phase(live) != LIVE
        || state
            .compare_exchange(live, dying, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
    {
        return false;
    }
    sc_fence();
    try_claim(counts, state, dying)
}

/// Claims the payload of an entry seen in state `seen` if that is DYING and
/// no reference is left. True: the caller won FREED and must release.
#[cold]
pub(crate) fn try_claim(counts: [&AtomicUsize; REF_SHARDS], state: &AtomicU32, seen: u32) -> bool {
    if phase(seen) != DYING {
        return false;
    }
    // The loads below follow our own decrement or kill (a SeqCst RMW) and
    // the SeqCst load that saw DYING, so in the single SeqCst order they
    // come after every pin that saw LIVE before the kill, and see it.
    // loom models those accesses only as AcqRel, so it needs the fence
    // here as well (a no-op in the std build, see `sync::sc_fence`):
    // without it, LOOM_MAX_PREEMPTIONS=3 finds a claimer that read DYING,
    // then a lane as 0 under a pin the killer saw, and frees under it.
    sc_fence();
    for count in counts {
        if count.load(Ordering::SeqCst) != 0 {
            return false;
        }
    }
    // SeqCst loads above read the values written by every earlier release
    // (SeqCst RMWs), so everything those holders did with the payload
    // happens-before the release that follows a successful CAS.
    state
        .compare_exchange(
            seen,
            (seen & !PHASE) | FREED,
            Ordering::SeqCst,
            Ordering::SeqCst,
        )
        .is_ok()
}

/// Current number of references (a snapshot; exact only when quiescent).
pub(crate) fn users(counts: [&AtomicUsize; REF_SHARDS]) -> usize {
    counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn generations_advance_and_keep_the_phase_bits() {
        let freed = FREED;
        let live = next_life(freed, LIVE);
        assert_eq!(phase(live), LIVE);
        assert_ne!(live, LIVE, "a new generation");
        let dying = live | DYING;
        assert_eq!(phase(dying), DYING);
        let freed2 = (dying & !PHASE) | FREED;
        assert_eq!(next_life(freed2, DYING) & !PHASE, (live & !PHASE) + 4);
        // Wraps without touching the phase.
        assert_eq!(phase(next_life(!PHASE | FREED, LIVE)), LIVE);
    }

    #[test]
    fn a_stale_claimer_cannot_free_a_later_generation() {
        let lanes = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let counts = [&lanes[0], &lanes[1]];
        let state = AtomicU32::new(next_life(FREED, LIVE));
        let g1 = state.load(Ordering::SeqCst);
        assert!(kill(counts, &state, g1), "unused: the killer frees");
        let freed = state.load(Ordering::SeqCst);
        // A reader that pinned during DYING(g1) and read that state...
        let stale_seen = g1 | DYING;
        // ...while the entry was reused and killed again with a user.
        state.store(next_life(freed, LIVE), Ordering::SeqCst);
        let g2 = state.load(Ordering::SeqCst);
        lanes[1].fetch_add(1, Ordering::SeqCst);
        assert!(!kill(counts, &state, g2), "in use: no release yet");
        lanes[1].fetch_sub(1, Ordering::SeqCst);
        // The stale claim fails; the user's own claim succeeds.
        assert!(!try_claim(counts, &state, stale_seen));
        assert!(try_claim(counts, &state, g2 | DYING));
    }
}
