//! The coarse clock of freshness checks and the per-thread shard index.

#[cfg(not(loom))]
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use crate::refcount::REF_SHARDS;

/// Milliseconds of `CLOCK_MONOTONIC_COARSE`.
///
/// Every hit checks freshness, so the clock must be cheap: the coarse clock is
/// a vDSO read of the last tick (resolution 1-4 ms, ample for a 1 s `valid`),
/// several times cheaper than `Instant::now()`.
#[inline]
pub(crate) fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC_COARSE
    // exists on every Linux since 2.6.32 and cannot fail with a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc != 0 {
        return fallback_ms();
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

#[cold]
fn fallback_ms() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

#[cfg(not(loom))]
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

// Under loom the counter is a modeled static, reset for every execution, so
// shard choice is deterministic per schedule.
#[cfg(loom)]
loom::lazy_static! {
    static ref NEXT_THREAD: loom::sync::atomic::AtomicUsize = loom::sync::atomic::AtomicUsize::new(0);
}

#[cfg(not(loom))]
std::thread_local! {
    // Const-initialized so the hot path is a plain TLS load, no lazy-init check.
    static THREAD_INDEX: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// A small per-thread number, assigned round-robin on first use, used to pick
/// a statistics shard and a reference shard. Consecutively started worker
/// threads get different shards.
#[cfg(not(loom))]
#[inline]
pub(crate) fn thread_index() -> usize {
    THREAD_INDEX.with(|i| {
        let v = i.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_THREAD.fetch_add(1, Ordering::Relaxed) % (usize::MAX - 1);
        i.set(v);
        v
    })
}

#[cfg(loom)]
loom::thread_local! {
    static THREAD_INDEX: usize = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// Under loom: the modeled counter (see above).
#[cfg(loom)]
pub(crate) fn thread_index() -> usize {
    THREAD_INDEX.with(|i| *i)
}

/// The reference shard of the calling thread.
#[inline]
pub(crate) fn ref_shard() -> usize {
    thread_index() % REF_SHARDS
}
