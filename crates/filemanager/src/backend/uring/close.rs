//! `IORING_OP_CLOSE` for the reaper thread, on a ring it uses alone; no
//! other ring is touched here.
//!
//! The reaper closes dropped descriptors as one batch of `IORING_OP_CLOSE`
//! on a ring of its own ([`CloseRing`]), waiting for all completions.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use io_uring::{opcode, types, IoUring};

use super::RING_ENTRIES;
use crate::backend::{Counters, Op};

/// A ring the reaper closes deferred descriptors on, synchronously (no
/// tokio involved: the reaper is a plain thread).
pub(crate) struct CloseRing {
    ring: Option<IoUring>,
}

impl std::fmt::Debug for CloseRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloseRing")
            .field("ready", &self.ring.is_some())
            .finish()
    }
}

impl CloseRing {
    /// Creates the ring now (not lazily), so its descriptor exists from
    /// the start rather than appearing in the middle of a drain.
    pub(crate) fn new(enabled: bool) -> Self {
        CloseRing {
            ring: if enabled {
                IoUring::new(RING_ENTRIES).ok()
            } else {
                None
            },
        }
    }

    /// Closes every descriptor of `batch` with IORING_OP_CLOSE, one
    /// submission per up to `RING_ENTRIES`; returns how many closes failed.
    /// Falls back to `close(2)` if the ring cannot be used.
    pub(crate) fn close_all(&mut self, batch: Vec<OwnedFd>, counters: &Counters) -> u64 {
        let mut errors = 0;
        let mut rest = batch.into_iter().peekable();
        while rest.peek().is_some() {
            let Some(ring) = self.ring.as_mut() else {
                break;
            };
            let mut queued = 0;
            while queued < RING_ENTRIES as usize {
                let Some(fd) = rest.next() else { break };
                let raw = fd.as_raw_fd();
                let e = opcode::Close::new(types::Fd(raw))
                    .build()
                    .user_data(raw as u64);
                // SAFETY: a CLOSE carries no pointers. The descriptor is
                // owned by us and handed to the kernel to close.
                if unsafe { ring.submission().push(&e) }.is_err() {
                    drop(fd);
                    break;
                }
                std::mem::forget(fd);
                queued += 1;
            }
            if ring.submit_and_wait(queued).is_err() {
                // Nothing was consumed only if the ring itself failed; the
                // closes already queued complete on the next successful
                // submit. Stop using this ring.
                tracing::warn!("reaper io_uring submit failed; closing with close(2)");
                self.ring = None;
                break;
            }
            let mut seen = 0;
            while seen < queued {
                for cqe in ring.completion() {
                    seen += 1;
                    counters.op(Op::CloseBatched);
                    if cqe.result() < 0 {
                        errors += 1;
                        tracing::warn!(fd = cqe.user_data(), error = %io::Error::from_raw_os_error(-cqe.result()), "deferred close failed");
                    }
                }
                if seen < queued && ring.submit_and_wait(queued - seen).is_err() {
                    break;
                }
            }
        }
        for fd in rest {
            counters.op(Op::CloseBatched);
            let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
            // SAFETY: `raw` came out of an OwnedFd we own; closed once here.
            if unsafe { libc::close(raw) } != 0 {
                errors += 1;
            }
        }
        errors
    }
}
