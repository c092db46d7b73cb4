//! Fixed files: registering a file into a ring's sparse table and
//! clearing it with `IORING_OP_FILES_UPDATE` when the file is released.
//! Touches the rings' `registered` tables and unregister queues, and the
//! files' ring masks.
//!
//! A file is registered into a ring's sparse table (one synchronous
//! `IORING_REGISTER_FILES_UPDATE`) the first time that ring reads it, at
//! index `slot * shards + shard` of its fdtable descriptor, and the ring
//! records `(manager id, descriptor)` for that index. A later file that gets
//! the same descriptor slot has another generation, so it re-registers. When
//! a file is released, each ring that registered it (a bit in the file's
//! `rings` mask) is asked to clear the index; the clear is applied as a
//! `FILES_UPDATE(-1)` SQE only if the index still holds that very file, and
//! only after any registration made in the same locked section, so it can
//! never undo a newer file's registration. Files whose index does not fit
//! the table are read through their plain descriptor.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use io_uring::opcode;

use super::{lock, Inner, Ring, INTERNAL, REGISTRY};
use crate::backend::{Counters, Op};

/// The `-1` a fixed-file update writes to clear a slot. A static, so the
/// pointer in the SQE is valid forever.
static CLEAR_SLOT: [RawFd; 1] = [-1];

/// Identity of what a fixed slot holds: (manager id, fdtable descriptor).
/// `(0, 0)` is empty; manager ids start at 1.
pub(crate) type FixedKey = (u64, u64);

/// Where a file may sit in every ring's fixed-file table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FixedSlot {
    /// Slot index in each ring's sparse table.
    pub(crate) index: u32,
    /// What must be in the slot for a read to use it.
    pub(crate) key: FixedKey,
}

impl Ring {
    /// Queues the clearing of a fixed slot; applied by the next submitter or
    /// the reaper.
    fn queue_unregister(&self, slot: FixedSlot) {
        lock(&self.unregister).push(slot);
        self.unregister_pending.store(true, Ordering::Release);
    }

    /// Turns queued unregisters into FILES_UPDATE SQEs (not yet submitted).
    pub(super) fn apply_unregisters(&self, inner: &mut Inner) -> usize {
        if !self.unregister_pending.swap(false, Ordering::AcqRel) {
            return 0;
        }
        let list = std::mem::take(&mut *lock(&self.unregister));
        let mut n = 0;
        for slot in list {
            let i = slot.index as usize;
            if inner.registered.get(i) != Some(&slot.key) {
                continue; // already overwritten by a newer file
            }
            inner.registered[i] = (0, 0);
            let e = opcode::FilesUpdate::new(CLEAR_SLOT.as_ptr(), 1)
                .offset(slot.index as i32)
                .build()
                .user_data(INTERNAL);
            if Self::push(inner, &e).is_ok() {
                n += 1;
            }
        }
        if n > 0 {
            if let Some(c) = lock(&self.counters).upgrade() {
                for _ in 0..n {
                    c.op(Op::FixedUnregister);
                }
            }
        }
        n
    }

    /// The fixed slot to read `file` through, registering it if needed.
    pub(super) fn fixed_for(
        &self,
        inner: &mut Inner,
        slot: FixedSlot,
        raw: RawFd,
        mask: &AtomicU64,
        counters: &Counters,
    ) -> Option<u32> {
        let id = self.id?;
        let i = slot.index as usize;
        let cur = *inner.registered.get(i)?;
        if cur == slot.key {
            return Some(slot.index);
        }
        // Synchronous update: one syscall, once per (file, ring).
        inner
            .ring
            .submitter()
            .register_files_update(slot.index, &[raw])
            .ok()?;
        inner.registered[i] = slot.key;
        // Published before the release can run: the caller holds a reference
        // to the file for the whole read.
        mask.fetch_or(1 << id, Ordering::AcqRel);
        counters.op(Op::FixedRegister);
        Some(slot.index)
    }
}

/// Asks every ring in `mask` to clear `slot` (called when a file is released).
pub(crate) fn queue_unregister(mask: u64, slot: FixedSlot) {
    let reg = lock(&REGISTRY);
    for (i, w) in reg.iter().enumerate() {
        if mask & (1 << i) != 0 {
            if let Some(r) = w.upgrade() {
                r.queue_unregister(slot);
            }
        }
    }
}

/// Submits queued fixed-slot clears on every ring (the reaper's batch).
pub(crate) fn flush_unregisters() -> usize {
    let rings: Vec<Arc<Ring>> = lock(&REGISTRY).iter().filter_map(Weak::upgrade).collect();
    let mut n = 0;
    for r in rings {
        if !r.unregister_pending.load(Ordering::Acquire) {
            continue;
        }
        let mut inner = lock(&r.inner);
        let k = r.apply_unregisters(&mut inner);
        if k > 0 {
            let _ = inner.ring.submit();
            Ring::reap(&mut inner, &r.inflight);
            n += k;
        }
    }
    n
}
