//! The entry protocol without the index, for the loom models in
//! `tests/loom.rs` (which cannot run the index's real threads and tables):
//! entries from a pool, pinned by address as a lookup pins what it found
//! in a slot, killed as the writer kills what it removed.

use std::ptr::NonNull;
use std::sync::Arc;

use crate::entry::{NewEntry, Shared, Upgrade};
use crate::loader::NO_META;
use crate::{clock, Entry, EntryRef, Padded};

/// A pool and the state its entries share.
#[allow(missing_debug_implementations)]
pub struct Harness<V: Send + Sync + 'static> {
    shared: Arc<Shared<V, Padded>>,
}

/// An entry's address, as an index slot holds it.
#[allow(missing_debug_implementations)]
pub struct Slot<V>(NonNull<Entry<V>>);

impl<V> Clone for Slot<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Slot<V> {}
impl<V> PartialEq for Slot<V> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
// SAFETY: an address only; every access goes through the protocol.
unsafe impl<V> Send for Slot<V> {}

impl<V: Send + Sync + 'static> Default for Harness<V> {
    fn default() -> Self {
        Harness {
            shared: Arc::new(Shared::default()),
        }
    }
}

impl<V: Send + Sync + 'static> Harness<V> {
    /// Takes an entry from the pool (the last one freed, if any) and
    /// makes it live for `path` with `handle`: its address and the
    /// loader's reference.
    pub fn insert(&self, path: &str, handle: V) -> (Slot<V>, EntryRef<V>) {
        let slot = self.shared.pool.take();
        let new = NewEntry {
            path,
            hash: 1,
            negative: None,
            meta: NO_META,
            label: "application/octet-stream",
            handle: Some(handle),
            bytes: None,
            validated_ms: 0,
            upgrade: Upgrade::No,
            counted: false,
        };
        // SAFETY: from our pool's free list, which `shared` owns.
        let first = unsafe { Entry::occupy(slot, new, self.shared.clone(), true) };
        (Slot(slot), first)
    }

    /// What a lookup does with a slot it read: pin, then check the key.
    pub fn lookup(&self, slot: Slot<V>, path: &str) -> Option<EntryRef<V>> {
        let entry = Entry::pin(slot.0, clock::ref_shard())?;
        entry.key_is(path).then_some(entry)
    }

    /// What the writer does after removing the slot from the index
    /// (once per insert, as the writer does under its lock).
    pub fn kill(&self, slot: Slot<V>) {
        Entry::kill(slot.0);
    }

    /// What `get_with` does with a slot it read: announce, check, run
    /// `f` on the entry if it is the live one for `path`, clear. False
    /// when `f` did not run. Panics if the thread has no free word.
    pub fn borrow(&self, slot: Slot<V>, path: &str, f: impl FnOnce(&Entry<V>)) -> bool {
        let word = announce::mine().expect("a free announcement word");
        // SAFETY: entries are type-stable while the pool lives.
        let entry = unsafe { slot.0.as_ref() };
        let live = Entry::announce_live(slot.0, &word) && entry.key_is(path);
        if live {
            f(entry);
        }
        drop(word);
        live
    }

    /// [`PathCache::reclaim`](crate::PathCache::reclaim): releases the payloads whose borrows ended.
    pub fn reclaim(&self) -> usize {
        self.shared.reclaim(false)
    }
}
