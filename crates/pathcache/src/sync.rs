//! The atomics of the entry reference protocol, switched to loom's model-checked
//! versions under `--cfg loom`.
//!
//! Only the protocol in [`crate::refcount`] (per-shard reference counts, the
//! entry lifecycle state and the memory owner count) goes through this module;
//! plain statistics counters use `std` atomics directly because their
//! interleavings cannot break memory safety.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU8, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::thread_local;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU8, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::thread_local;

pub(crate) use std::sync::atomic::Ordering;
