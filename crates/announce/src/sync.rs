//! One switch between `std` and `loom` for the registry's atomics, so the
//! loom models (`tests/loom.rs`) check the same code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;

/// Orders a SeqCst RMW before the SeqCst loads that follow it (the
/// store-buffering pattern between a reader and a releaser).
///
/// The SeqCst accesses alone forbid store buffering in the C++/Rust memory
/// model, and on x86-64 the `xchg` / `lock`-prefixed RMW is a full barrier
/// anyway, so the std build emits nothing. loom models SeqCst *accesses*
/// only as AcqRel (it would report false store-buffering races) but SeqCst
/// *fences* exactly, so under loom this is a real fence.
#[inline(always)]
pub(crate) fn sc_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}
