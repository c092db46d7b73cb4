//! The clock of freshness checks, and the per-thread shard index.
//!
//! Every hit checks freshness, so reading the clock must cost next to
//! nothing. A vDSO read of `CLOCK_MONOTONIC_COARSE` costs about 11 ns on the
//! build VM (measured in a scratch program beside the hit path: 41 ns per
//! hit with it, 30 ns with an atomic load instead), a third of a hit. So a
//! ticker thread stores the coarse clock in [`NOW_MS`] each time it can
//! have moved (every tick of the coarse clock, 4 ms at `HZ=250`, and at
//! least every 10 ms) while lookups happen, and a lookup reads that with
//! one load:
//!
//! ```text
//!  ticker thread (one per process)        every lookup
//!  ------------------------------         ----------------------------------
//!  loop:                                  t = NOW_MS (load)
//!    NOW_MS = coarse clock (ms)           if t == 0: read the OS clock and
//!    sleep one coarse tick                           wake the ticker (cold)
//!    WANTED? clear it : idle += 1         if !WANTED: WANTED = true (rare)
//!    idle for 1 s: NOW_MS = 0, park
//! ```
//!
//! The ticker parks after a second without lookups, so an idle process does
//! not wake 1000 times a second; the first lookup after that reads the OS
//! clock itself and wakes it. `WANTED` is written at most once per tick by a
//! lookup (a store only when it reads false), so the hit path writes no
//! shared line in steady state.
//!
//! The value lags the OS clock by at most two coarse ticks (the sleep and
//! the coarse clock's own resolution: 8 ms at `HZ=250`), plus however long
//! the ticker thread waits for a CPU after its sleep. Sleeping 1 ms where
//! the coarse clock moves every 4 ms woke the ticker three times in four
//! for nothing (its wake-ups were 1.7% of the daemon's CPU at a fixed 30k
//! req/s); sleeping one coarse tick took the daemon's CPU per request at a
//! fixed 10k req/s from 30.6-32.8 us to 27.8-28.2 (1.13x, alternated
//! rounds; within the noise at 30k). Entries are trusted for `valid` (1 s by
//! default), so an entry may be served that much longer than `valid`; it is
//! never revalidated early. Under loom (no real threads), when no thread
//! can be spawned, and after `fork` until the child's first lookup starts
//! its own ticker (an `atfork` handler resets the clock), lookups read the
//! OS clock directly.

use std::sync::atomic::Ordering;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize};

use crate::refcount::REF_SHARDS;

/// The ticker's last reading of the coarse clock, in ms; 0 while no ticker
/// runs (lookups then read the OS clock).
#[cfg(not(loom))]
static NOW_MS: AtomicU64 = AtomicU64::new(0);
/// Set by lookups, cleared by the ticker at each tick: "someone still reads".
#[cfg(not(loom))]
static WANTED: AtomicBool = AtomicBool::new(false);
/// The ticker's state: not started, running, or parked.
#[cfg(not(loom))]
static TICKER: AtomicU8 = AtomicU8::new(NOT_STARTED);
#[cfg(not(loom))]
const NOT_STARTED: u8 = 0;
#[cfg(not(loom))]
const RUNNING: u8 = 1;
#[cfg(not(loom))]
const PARKED: u8 = 2;
/// The ticker thread could not be spawned: lookups read the OS clock.
#[cfg(not(loom))]
const NO_THREAD: u8 = 3;

/// The ticker's shortest and longest period (it sleeps one tick of the
/// coarse clock, within these).
#[cfg(not(loom))]
const TICK_RANGE: [std::time::Duration; 2] = [
    std::time::Duration::from_millis(1),
    std::time::Duration::from_millis(10),
];
/// How long without a lookup before the ticker parks.
#[cfg(not(loom))]
const IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Milliseconds of the monotonic clock, as freshness checks see it (see the
/// module doc for how far it may lag).
#[inline]
pub(crate) fn now_ms() -> u64 {
    #[cfg(not(loom))]
    {
        let t = NOW_MS.load(Ordering::Relaxed);
        if t != 0 {
            if !WANTED.load(Ordering::Relaxed) {
                WANTED.store(true, Ordering::Relaxed);
            }
            return t;
        }
        now_ms_and_wake()
    }
    #[cfg(loom)]
    os_coarse_ms()
}

/// The OS clock, read directly (the ticker is not running), and a wake-up
/// for the ticker so the next lookups need not.
#[cold]
#[cfg(not(loom))]
fn now_ms_and_wake() -> u64 {
    let t = os_coarse_ms();
    // SeqCst pairs with the ticker's store of PARKED and its load of WANTED:
    // either the ticker sees WANTED and stays awake, or we see PARKED and
    // wake it.
    WANTED.store(true, Ordering::SeqCst);
    match TICKER.load(Ordering::SeqCst) {
        NOT_STARTED => start_ticker(),
        PARKED
            if TICKER
                .compare_exchange(PARKED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok() =>
        {
            if let Some(thread) = TICKER_THREAD.get() {
                thread.unpark();
            }
        }
        _ => {}
    }
    t
}

#[cfg(not(loom))]
static TICKER_THREAD: std::sync::OnceLock<std::thread::Thread> = std::sync::OnceLock::new();

#[cfg(not(loom))]
fn start_ticker() {
    if TICKER
        .compare_exchange(NOT_STARTED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    #[cfg(unix)]
    extern "C" fn reset_in_child() {
        // The child of a fork has no ticker thread: read the OS clock, and
        // start a ticker of its own on first use.
        NOW_MS.store(0, Ordering::SeqCst);
        TICKER.store(NOT_STARTED, Ordering::SeqCst);
    }
    // SAFETY: registers a plain function that only stores to atomics (async-
    // signal-safe), as `pthread_atfork` requires of a child handler.
    #[cfg(unix)]
    unsafe {
        libc::pthread_atfork(None, None, Some(reset_in_child))
    };
    let spawned = std::thread::Builder::new()
        .name("pathcache-clock".into())
        .spawn(run_ticker);
    match spawned {
        Ok(handle) => {
            let _ = TICKER_THREAD.set(handle.thread().clone());
        }
        // No thread (resource limit): lookups keep reading the OS clock
        // rather than trying to spawn one on every lookup.
        Err(_) => TICKER.store(NO_THREAD, Ordering::SeqCst),
    }
}

#[cfg(not(loom))]
fn run_ticker() {
    let tick = coarse_resolution().clamp(TICK_RANGE[0], TICK_RANGE[1]);
    let idle_ticks = IDLE.as_micros() / tick.as_micros();
    let mut idle = 0;
    loop {
        NOW_MS.store(os_coarse_ms(), Ordering::Relaxed);
        std::thread::sleep(tick);
        if WANTED.swap(false, Ordering::Relaxed) {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < idle_ticks {
            continue;
        }
        idle = 0;
        NOW_MS.store(0, Ordering::SeqCst);
        TICKER.store(PARKED, Ordering::SeqCst);
        // A lookup that read the old NOW_MS and set WANTED after our swap
        // keeps its answer (at most a tick old); one that read 0 set WANTED
        // before looking at TICKER, so we see it here or it sees PARKED.
        if WANTED.load(Ordering::SeqCst)
            && TICKER
                .compare_exchange(PARKED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            continue;
        }
        while TICKER.load(Ordering::SeqCst) != RUNNING {
            std::thread::park();
        }
    }
}

/// How often `CLOCK_MONOTONIC_COARSE` moves (the kernel's tick); the
/// shortest ticker period when the kernel does not say.
#[cfg(all(not(loom), not(target_os = "linux")))]
fn coarse_resolution() -> std::time::Duration {
    // Elsewhere the clock read is `Instant` (below): the shortest period.
    TICK_RANGE[0]
}

/// How often `CLOCK_MONOTONIC_COARSE` moves (see above), on Linux.
#[cfg(all(not(loom), target_os = "linux"))]
fn coarse_resolution() -> std::time::Duration {
    if cfg!(miri) {
        // Miri has no `clock_getres`.
        return TICK_RANGE[0];
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc != 0 {
        return TICK_RANGE[0];
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `CLOCK_MONOTONIC_COARSE` in milliseconds (never 0, which means "no
/// ticker" in [`NOW_MS`]).
#[cfg(target_os = "linux")]
fn os_coarse_ms() -> u64 {
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
    (ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000).max(1)
}

/// Other systems have no coarse clock under that name: `Instant`, whose
/// read is a vDSO call or `QueryPerformanceCounter`, is what the ticker
/// caches there.
#[cfg(not(target_os = "linux"))]
fn os_coarse_ms() -> u64 {
    fallback_ms()
}

#[cold]
fn fallback_ms() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
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
/// a reference shard. Consecutively started worker threads get different
/// shards.
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ticking_clock_follows_the_os_clock_and_parks_when_idle() {
        let first = now_ms();
        assert!(first > 0);
        // The first read started the ticker; it publishes within a tick or so.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while NOW_MS.load(Ordering::Relaxed) == 0 {
            assert!(std::time::Instant::now() < deadline, "ticker never ticked");
            std::thread::sleep(Duration::from_millis(1));
        }
        // It advances with the OS clock (waits, not fixed sleeps: a loaded
        // CI machine may keep the ticker off a CPU for a while).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let later = loop {
            std::thread::sleep(Duration::from_millis(5));
            let t = now_ms();
            let lag = os_coarse_ms().saturating_sub(t);
            if t >= first + 40 && lag < 50 {
                break t;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "clock stuck at {t} (started {first}, lag {lag} ms)"
            );
        };
        // Idle for over a second: the ticker parks and says so with 0.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while NOW_MS.load(Ordering::Relaxed) != 0 {
            assert!(std::time::Instant::now() < deadline, "ticker never parked");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(TICKER.load(Ordering::SeqCst), PARKED);
        // The next lookup reads the OS clock and wakes it.
        let woke = now_ms();
        assert!(woke >= later);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while NOW_MS.load(Ordering::Relaxed) == 0 {
            assert!(std::time::Instant::now() < deadline, "ticker never woke");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
