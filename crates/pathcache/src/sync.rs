//! The atomics of the entry reference protocol, switched to loom's model-checked
//! versions under `--cfg loom`.
//!
//! Only the protocol in [`crate::refcount`] (per-lane reference counts and
//! the entry lifecycle state) and the publication of a small file's copy
//! ([`crate::copy`]) go through this module (the borrow announcements are
//! the `announce` crate's, which has the same switch);
//! plain statistics counters use `std` atomics directly because their
//! interleavings cannot break memory safety.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;

/// Orders a SeqCst RMW before the SeqCst load that follows it (the
/// store-buffering pattern of the refcount protocol).
///
/// In the C++/Rust memory model the protocol's SeqCst accesses alone forbid
/// store buffering, and on x86-64 the `lock`-prefixed RMW is a full barrier
/// anyway, so the std build emits nothing here. loom models SeqCst *accesses*
/// only as AcqRel (it reports false store-buffering races) but models SeqCst
/// *fences* exactly, so under loom this is a real fence.
#[inline(always)]
pub(crate) fn sc_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}
