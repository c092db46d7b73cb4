//! Variants: other forms of an entry's file (compressed ones, for
//! `filemanager`) that its user made once and the cache keeps beside the
//! entry, under one byte budget for all of them.
//!
//! ```text
//! Entry (cold fields) ── variants: Mutex<[Option<Arc<Variant>>; VARIANT_SLOTS]>
//!                                              │
//!                        Variant { bytes, source: FileMeta, used (CLOCK bit), budget }
//! ```
//!
//! * A variant lives in its entry: it leaves with the entry (eviction,
//!   replacement by a changed file, invalidation), so a new version of a
//!   file, which is always a new entry, never sees an old variant; and it
//!   records the version it was made from (`source`) for the one place two
//!   versions meet, a single-flight wait.
//! * The budget is exact: bytes are reserved before a variant is kept, and
//!   given back when its last reference drops (a response still sending an
//!   evicted variant keeps its bytes counted). A variant that does not fit
//!   after evicting others is handed to its requests and not kept.
//! * Eviction of variants alone (their entries stay) is a CLOCK scan over
//!   the index under the writer lock; a variant used since the last scan
//!   gets a second chance.
//! * The slots sit with the entry's cold fields, off the lines a hit reads:
//!   a request that does not ask for a variant never touches them. Reading
//!   a slot takes its mutex (uncontended: one CAS on that line) and clones
//!   an `Arc`; that is the cost of a variant hit, not of an identity one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::FileMeta;

/// Variant slots per entry (a user numbers its forms: `filemanager` one
/// per content coding).
pub const VARIANT_SLOTS: usize = 3;

/// One kept form of a file.
#[derive(Debug)]
pub struct Variant {
    bytes: Option<Box<[u8]>>,
    source: FileMeta,
    used: AtomicBool,
    /// The budget's counter while these bytes are counted in it.
    budget: Option<Arc<AtomicU64>>,
}

impl Drop for Variant {
    fn drop(&mut self) {
        if let (Some(budget), Some(b)) = (&self.budget, &self.bytes) {
            budget.fetch_sub(b.len() as u64, Ordering::Relaxed);
        }
    }
}

/// A shared reference to a [`Variant`]; cheap to clone, `Send + Sync`,
/// and usable as the owner of a zero-copy buffer (`AsRef<[u8]>`).
#[derive(Clone, Debug)]
pub struct VariantRef(Arc<Variant>);

impl VariantRef {
    /// The variant's bytes; `None` when its maker found it not worth
    /// keeping (a compressed form no smaller than the file), which the
    /// cache remembers so the work is not repeated.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.0.bytes.as_deref()
    }

    /// The version of the file it was made from.
    pub fn source(&self) -> &FileMeta {
        &self.0.source
    }

    /// Whether it is kept in the budget (else it lives only as long as the
    /// responses that hold it).
    pub fn is_kept(&self) -> bool {
        self.0.budget.is_some() || self.0.bytes.is_none()
    }
}

impl AsRef<[u8]> for VariantRef {
    fn as_ref(&self) -> &[u8] {
        self.bytes().unwrap_or_default()
    }
}

/// An entry's variant slots.
#[derive(Debug, Default)]
pub(crate) struct Slots(Mutex<[Option<Arc<Variant>>; VARIANT_SLOTS]>);

impl Slots {
    fn lock(&self) -> MutexGuard<'_, [Option<Arc<Variant>>; VARIANT_SLOTS]> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The variant in `slot`, marked used.
    pub(crate) fn get(&self, slot: usize) -> Option<VariantRef> {
        let v = self.lock().get(slot)?.clone()?;
        if !v.used.load(Ordering::Relaxed) {
            v.used.store(true, Ordering::Relaxed);
        }
        Some(VariantRef(v))
    }

    pub(crate) fn set(&self, slot: usize, v: &VariantRef) {
        if let Some(s) = self.lock().get_mut(slot) {
            *s = Some(v.0.clone());
        }
    }

    /// Drops variants not used since the last scan (on `second_chance`
    /// laps; every one with bytes otherwise) until `need` bytes are freed;
    /// returns (bytes, variants) taken.
    pub(crate) fn evict(&self, need: u64, second_chance: bool) -> (u64, u64) {
        let (mut freed, mut taken) = (0, 0);
        for s in self.lock().iter_mut() {
            if freed >= need {
                break;
            }
            let Some(v) = s else { continue };
            let Some(len) = v.bytes.as_ref().map(|b| b.len() as u64) else {
                continue;
            };
            if second_chance && v.used.swap(false, Ordering::Relaxed) {
                continue;
            }
            *s = None;
            freed += len;
            taken += 1;
        }
        (freed, taken)
    }
}

/// Makes a variant of `source` from `bytes`, counted in `budget` when given.
pub(crate) fn new_variant(
    bytes: Option<Vec<u8>>,
    source: FileMeta,
    budget: Option<Arc<AtomicU64>>,
) -> VariantRef {
    VariantRef(Arc::new(Variant {
        bytes: bytes.map(Vec::into_boxed_slice),
        source,
        used: AtomicBool::new(true),
        budget,
    }))
}
