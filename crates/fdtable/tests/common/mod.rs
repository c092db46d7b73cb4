//! A value type that records how it ends: released (once) or leaked.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use fdtable::Release;

/// Per-id release counts and a leak counter shared by all `Tracked` values.
#[derive(Debug)]
pub(crate) struct Ledger {
    releases: Box<[AtomicU8]>,
    pub leaks: AtomicU64,
    pub failing: AtomicU64,
}

impl Ledger {
    pub(crate) fn new(ids: usize) -> Arc<Self> {
        Arc::new(Ledger {
            releases: (0..ids).map(|_| AtomicU8::new(0)).collect(),
            leaks: AtomicU64::new(0),
            failing: AtomicU64::new(u64::MAX),
        })
    }

    pub(crate) fn value(self: &Arc<Self>, id: u64) -> Tracked {
        Tracked {
            id,
            ledger: Arc::clone(self),
            armed: true,
        }
    }

    pub(crate) fn releases(&self, id: u64) -> u8 {
        self.releases[id as usize].load(Ordering::SeqCst)
    }

    pub(crate) fn total_released(&self) -> u64 {
        self.releases
            .iter()
            .map(|count| u64::from(count.load(Ordering::SeqCst)))
            .sum()
    }

    pub(crate) fn leaks(&self) -> u64 {
        self.leaks.load(Ordering::SeqCst)
    }
}

/// Must be given up through `Release`; dropping it otherwise counts a leak.
#[derive(Debug)]
pub(crate) struct Tracked {
    pub id: u64,
    ledger: Arc<Ledger>,
    armed: bool,
}

impl Tracked {
    /// Disarms without recording a release (for values handed back by `Full`).
    pub(crate) fn forget(mut self) {
        self.armed = false;
    }
}

impl Release for Tracked {
    type Error = u64;

    fn release(mut self) -> Result<(), u64> {
        self.armed = false;
        let previous = self.ledger.releases[self.id as usize].fetch_add(1, Ordering::SeqCst);
        assert_eq!(previous, 0, "value {} released twice", self.id);
        if self.ledger.failing.load(Ordering::SeqCst) == self.id {
            Err(self.id)
        } else {
            Ok(())
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if self.armed {
            self.ledger.leaks.fetch_add(1, Ordering::SeqCst);
        }
    }
}
