//! One switch between `std` and `loom` for every synchronization primitive
//! the table uses, so the loom tests check the same code that ships.
//!
//! `UnsafeCell` follows loom's closure API (`with` / `with_mut`) in both
//! builds; under loom every access is checked for data races.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::thread_local;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::thread_local;

/// Gives the CPU (or, under loom, the model scheduler) to another thread
/// while waiting for a shard lock.
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Busy-wait hint while spinning on a shard lock.
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::hint::spin_loop();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// `std::cell::UnsafeCell` with loom's closure-based API.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Stores `value` into a word that other threads may be changing with
/// read-modify-writes at the same time.
///
/// The memory model makes every RMW atomic against such a store: the store
/// lands entirely before or entirely after it. Loom 0.7 does not enforce
/// that for plain stores (it can let the store slip between an RMW's read
/// and its write, tokio-rs/loom#254), so under loom this is a `swap` whose
/// result is ignored: the same effect on every other operation, and loom
/// orders it correctly.
#[inline(always)]
pub(crate) fn store_against_rmw(atomic: &AtomicU64, value: u64, order: Ordering) {
    #[cfg(loom)]
    atomic.swap(value, order);
    #[cfg(not(loom))]
    atomic.store(value, order);
}
