//! A small file's in-memory copy, held by its entry: set when the entry is
//! filled, or later, once, by the use that copies it (a file's bytes are
//! copied on its second use, see `PathCache::get_or_load`).
//!
//! ```text
//!   empty ──claim (one winner)──▶ claimed ──publish──▶ copied (until FREED)
//!     ▲                              │
//!     └──── unclaim (the budget was full, or the copier was cancelled);
//!           a failed or torn copy keeps the claim for the entry's life
//! ```
//!
//! A reader sees either no copy or all of one: the copier stores the length,
//! then the pointer with `Release`; a reader loads the pointer with
//! `Acquire` and only then the length. Only the claimant writes, so the two
//! stores never race with another writer. The copy is freed with the rest of
//! the payload, by the one thread that wins the entry's FREED transition
//! (after every reference, the copier's included, is gone).

use crate::sync::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

/// The copy slot of an entry (16 bytes, like the `Option<Box<[u8]>>` it
/// replaced, so the entry keeps its layout).
pub(crate) struct FileCopy {
    ptr: AtomicPtr<u8>,
    len: AtomicU32,
    claimed: AtomicBool,
}

/// Largest copy a slot can hold (its length is a `u32`).
pub(crate) const MAX_COPY: u64 = u32::MAX as u64;

impl FileCopy {
    /// A slot holding `bytes` from the start (copied when the entry was
    /// loaded), or an empty one.
    pub(crate) fn new(bytes: Option<Box<[u8]>>) -> Self {
        let slot = FileCopy {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            len: AtomicU32::new(0),
            claimed: AtomicBool::new(false),
        };
        if let Some(b) = bytes {
            assert!(slot.claim(), "a new slot is unclaimed");
            slot.publish(b);
        }
        slot
    }

    /// The copy, if one was published.
    #[inline]
    pub(crate) fn get(&self) -> Option<&[u8]> {
        let p = self.ptr.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        let len = self.len.load(Ordering::Relaxed) as usize;
        // SAFETY: `p` and `len` describe the boxed slice `publish` leaked
        // (the Acquire load above orders the length store before it); it is
        // freed only by `drop`, which needs `&mut self`.
        Some(unsafe { std::slice::from_raw_parts(p, len) })
    }

    /// Makes the caller the only copier of this slot; false when a copy
    /// exists or another caller is taking one.
    pub(crate) fn claim(&self) -> bool {
        !self.claimed.load(Ordering::Relaxed) && !self.claimed.swap(true, Ordering::Acquire)
    }

    /// Gives a claim back without a copy (a later use may try again).
    pub(crate) fn unclaim(&self) {
        debug_assert!(self.ptr.load(Ordering::Relaxed).is_null());
        self.claimed.store(false, Ordering::Release);
    }

    /// Publishes the claimant's copy (at most [`MAX_COPY`] bytes).
    pub(crate) fn publish(&self, bytes: Box<[u8]>) {
        debug_assert!(self.claimed.load(Ordering::Relaxed));
        debug_assert!(self.ptr.load(Ordering::Relaxed).is_null());
        let len = u32::try_from(bytes.len()).expect("copies are at most MAX_COPY bytes");
        self.len.store(len, Ordering::Relaxed);
        let p = Box::into_raw(bytes).cast::<u8>();
        self.ptr.store(p, Ordering::Release);
    }
}

impl Drop for FileCopy {
    fn drop(&mut self) {
        // Loads, not `get_mut` (which loom's atomics lack): nothing races
        // with a drop.
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            let len = self.len.load(Ordering::Relaxed) as usize;
            // SAFETY: `p` and `len` are the slice `publish` leaked with
            // `Box::into_raw`; `&mut self` means no reader is left.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_published_once_and_freed_with_the_slot() {
        let slot = FileCopy::new(None);
        assert!(slot.get().is_none());
        assert!(slot.claim());
        assert!(!slot.claim(), "a second copier while the first is copying");
        slot.unclaim();
        assert!(slot.claim(), "a failed copy lets a later use try again");
        slot.publish(b"hello".to_vec().into_boxed_slice());
        assert_eq!(slot.get(), Some(&b"hello"[..]));
        assert!(!slot.claim(), "a copied slot is never claimed again");
        let full = FileCopy::new(Some(Box::from(&b""[..])));
        assert_eq!(full.get(), Some(&b""[..]), "an empty file's copy is a copy");
    }

    #[test]
    fn a_reader_on_another_thread_sees_none_or_the_whole_copy() {
        let slot = FileCopy::new(None);
        let data: Vec<u8> = (0..=255).collect();
        std::thread::scope(|s| {
            let reader = s.spawn(|| loop {
                if let Some(b) = slot.get() {
                    assert_eq!(b, &data[..]);
                    break;
                }
                std::hint::spin_loop();
            });
            assert!(slot.claim());
            slot.publish(data.clone().into_boxed_slice());
            reader.join().unwrap();
        });
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two uses race to copy while a third reads: one copier, and the reader
    /// sees nothing or the whole copy.
    #[test]
    fn one_copier_and_readers_see_all_or_nothing() {
        loom::model(|| {
            let slot = loom::sync::Arc::new(FileCopy::new(None));
            let copiers: Vec<_> = (0..2u8)
                .map(|i| {
                    let slot = slot.clone();
                    loom::thread::spawn(move || {
                        if slot.claim() {
                            slot.publish(vec![i; 3].into_boxed_slice());
                            1
                        } else {
                            0
                        }
                    })
                })
                .collect();
            if let Some(b) = slot.get() {
                assert_eq!(b.len(), 3);
                assert!(b.iter().all(|&x| x == b[0]));
            }
            let won: u32 = copiers.into_iter().map(|t| t.join().unwrap()).sum();
            assert_eq!(won, 1);
            assert_eq!(slot.get().map(<[u8]>::len), Some(3));
        });
    }
}
