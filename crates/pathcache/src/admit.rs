//! Admission while the cache is full: a path missed for the first time
//! is loaded for its caller and not inserted; a second miss soon after
//! inserts it. Owns the doorkeeper, the tags of recent first misses;
//! touches nothing else.
//!
//! Inserting into a full cache evicts an entry, and under a working set
//! larger than the cache most insertions are themselves evicted before
//! their second use: the eviction, the insertion, the single-flight
//! registration and the entry's upkeep buy nothing. A path that is asked
//! for twice while its tag is remembered has shown it is worth a place
//! (the doorkeeper of TinyLFU). A scan of one-off paths, a crawler, no
//! longer flushes what the cache holds.
//!
//! ```text
//!  tags: [u32; 2^k]   2^k >= max_entries when the cache first filled
//!  slot = hash & (2^k - 1)        tag = (hash >> 32) | 1  (never 0)
//!  first miss:   tags[slot] != tag  -> tags[slot] = tag, load uncached
//!  second miss:  tags[slot] == tag  -> tags[slot] = 0,   load and insert
//! ```
//!
//! Slots are overwritten by later first misses that map to them, so the
//! doorkeeper remembers about the last `2^k` of them. Lost updates between
//! threads (plain loads and stores) only admit or defer one path once more.

use std::sync::atomic::{AtomicU32, Ordering};

/// Smallest doorkeeper: 4 KiB of tags.
const MIN_SLOTS: usize = 1 << 10;
/// Largest doorkeeper: 4 MiB of tags.
const MAX_SLOTS: usize = 1 << 20;

/// The tags of recent first misses.
#[derive(Debug)]
pub(crate) struct Doorkeeper {
    tags: Box<[AtomicU32]>,
}

impl Doorkeeper {
    /// A doorkeeper for a cache of `max_entries`.
    pub(crate) fn new(max_entries: usize) -> Self {
        let slots = max_entries.clamp(MIN_SLOTS, MAX_SLOTS).next_power_of_two();
        Doorkeeper {
            tags: (0..slots).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Whether the path hashing to `hash` was missed recently (it is
    /// admitted, and forgotten here); if not, remembers it.
    pub(crate) fn admit(&self, hash: u64) -> bool {
        let slot = &self.tags[hash as usize & (self.tags.len() - 1)];
        let tag = (hash >> 32) as u32 | 1;
        if slot.load(Ordering::Relaxed) == tag {
            slot.store(0, Ordering::Relaxed);
            return true;
        }
        slot.store(tag, Ordering::Relaxed);
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn admits_a_path_on_its_second_miss_only() {
        let d = Doorkeeper::new(4);
        let h = 0x1234_5678_9abc_def0;
        assert!(!d.admit(h), "first miss");
        assert!(d.admit(h), "second miss");
        assert!(!d.admit(h), "admitted paths are forgotten");
    }

    #[test]
    fn a_later_first_miss_in_the_same_slot_replaces_the_tag() {
        let d = Doorkeeper::new(4);
        let (a, b) = (0x0000_0001_0000_0005, 0x0000_0002_0000_0005);
        assert!(!d.admit(a));
        assert!(!d.admit(b), "same slot, another tag");
        assert!(!d.admit(a), "a's tag was overwritten by b's");
        assert!(d.admit(a));
    }

    #[test]
    fn sizes_to_the_bound_within_limits() {
        assert_eq!(Doorkeeper::new(0).tags.len(), MIN_SLOTS);
        assert_eq!(Doorkeeper::new(2000).tags.len(), 2048);
        assert_eq!(Doorkeeper::new(usize::MAX).tags.len(), MAX_SLOTS);
    }
}
