//! The value stored in the descriptor table for every open file: owns the
//! kernel descriptor, the file's io_uring fixed-slot identity, and the
//! release rule (close the fd, ask rings to clear the slot, give the budget
//! back).
//!
//! ```text
//! FdTable<FileValue> slot ──▶ FileValue { fd: OwnedFd,
//!                                         fixed: Fixed {              (backend's)
//!                                           slot: OnceLock<FixedSlot> (set right after insert),
//!                                           rings: AtomicU64 },       (bit i = ring i registered it)
//!                                         _budget: BudgetToken }      (open-fd count; -1 on drop)
//! ```

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_utils::CachePadded;
use fdtable::Release;

use crate::backend::Fixed;
#[cfg(windows)]
use crate::sys::AsFd;
use crate::sys::OwnedFd;

thread_local! {
    /// Set while the reaper drains: releases hand their descriptors here so
    /// they can be closed in one io_uring submission instead of one
    /// `close(2)` each.
    static CLOSE_BATCH: RefCell<Option<Vec<OwnedFd>>> = const { RefCell::new(None) };
}

/// Runs `f` (a table reap) collecting the descriptors its releases would
/// close; the caller closes them as a batch.
#[cfg(target_os = "linux")]
pub(crate) fn collect_closes<R>(f: impl FnOnce() -> R) -> (R, Vec<OwnedFd>) {
    let prev = CLOSE_BATCH.with(|b| b.borrow_mut().replace(Vec::new()));
    let r = f();
    let batch = CLOSE_BATCH
        .with(|b| std::mem::replace(&mut *b.borrow_mut(), prev))
        .unwrap_or_default();
    (r, batch)
}

/// Hands `fd` to the active close batch, or gives it back when none is.
fn try_batch(fd: OwnedFd) -> Option<OwnedFd> {
    CLOSE_BATCH.with(|b| match b.try_borrow_mut() {
        Ok(mut b) => match b.as_mut() {
            Some(batch) => {
                batch.push(fd);
                None
            }
            None => Some(fd),
        },
        Err(_) => Some(fd),
    })
}

/// The count of descriptors this crate holds, shared with every value.
pub(crate) type FdCount = Arc<CachePadded<AtomicUsize>>;

/// One unit of the descriptor budget; gives it back when dropped.
#[derive(Debug)]
pub(crate) struct BudgetToken(FdCount);

impl BudgetToken {
    pub(crate) fn take(count: &FdCount) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        BudgetToken(Arc::clone(count))
    }
}

impl Drop for BudgetToken {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An open file as stored in the descriptor table (the `V` of the path
/// cache is `fdtable::Owned<FileValue>`).
///
/// Releasing it (explicit close, or the reaper after a drop) closes the
/// kernel descriptor and reports the `close(2)` error once.
#[derive(Debug)]
pub struct FileValue {
    fd: OwnedFd,
    fixed: Fixed,
    size: u64,
    /// The watcher's epoch when the descriptor was last checked against
    /// its metadata (0: never; see `watch.rs`).
    stamp: AtomicU64,
    /// Where the file really lies beneath the root, asked once
    /// (`FileManager::real_path`): a changed file or link is a new value.
    real_path: OnceLock<Option<Box<str>>>,
    _budget: BudgetToken,
}

impl FileValue {
    pub(crate) fn new(fd: OwnedFd, size: u64, budget: BudgetToken) -> Self {
        FileValue {
            fd,
            fixed: Fixed::default(),
            size,
            stamp: AtomicU64::new(0),
            real_path: OnceLock::new(),
            _budget: budget,
        }
    }

    /// The root-relative path the kernel names this descriptor by, made by
    /// `find` at the first ask and kept.
    pub(crate) fn real_path(&self, find: impl FnOnce() -> Option<String>) -> Option<&str> {
        self.real_path
            .get_or_init(|| find().map(String::into_boxed_str))
            .as_deref()
    }

    /// Size of the file when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Its io_uring fixed-file state.
    pub(crate) fn fixed(&self) -> &Fixed {
        &self.fixed
    }

    pub(crate) fn stamp(&self) -> u64 {
        self.stamp.load(Ordering::Relaxed)
    }

    pub(crate) fn set_stamp(&self, stamp: Option<u64>) {
        self.stamp.store(stamp.unwrap_or(0), Ordering::Relaxed);
    }
}

#[cfg(unix)]
impl std::os::fd::AsFd for FileValue {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(windows)]
impl std::os::windows::io::AsHandle for FileValue {
    fn as_handle(&self) -> std::os::windows::io::BorrowedHandle<'_> {
        self.fd.as_fd()
    }
}

impl Release for FileValue {
    type Error = io::Error;

    fn release(self) -> Result<(), io::Error> {
        let FileValue {
            fd,
            fixed,
            size: _,
            stamp: _,
            real_path: _,
            _budget,
        } = self;
        fixed.release();
        // Deferred releases drained by the reaper close as one batch; the
        // batch counts close errors itself (nobody awaits them).
        let Some(fd) = try_batch(fd) else {
            return Ok(());
        };
        // close(2) (CloseHandle) is called exactly once: the error is
        // reported, never retried (the descriptor is gone either way).
        fd.release()
    }
}
