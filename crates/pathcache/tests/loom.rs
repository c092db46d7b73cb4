//! Loom models of the entry protocol (per-lane counts, the generation and
//! phase of the state word, type-stable reuse through the pool), on the real
//! `Entry`, `EntryRef` and pool through `pathcache::testing`. The index is
//! not modeled: a lookup here pins an address the way a lookup pins what it
//! read from a slot, which may be stale by then (removed, freed, reused).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release -p fdwarden-pathcache --test loom`
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use pathcache::testing::{Harness, Slot};
use pathcache::{Entry, EntryRef};

/// The handle: counts its drops, and users check it was not dropped under them.
struct Handle {
    name: &'static str,
    drops: Arc<AtomicUsize>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        assert_eq!(
            self.drops.fetch_add(1, Ordering::SeqCst),
            0,
            "handle {} released twice",
            self.name
        );
    }
}

fn handle(name: &'static str) -> (Handle, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    (
        Handle {
            name,
            drops: drops.clone(),
        },
        drops,
    )
}

/// A reference in use: its handle must be the one for `path`, not released.
fn assert_alive(e: &EntryRef<Handle>, path: &str) {
    assert_eq!(e.path(), path, "a reference to another path's entry");
    let h = e.handle().expect("handle present while referenced");
    assert_eq!(h.name, path, "the handle of another path");
    assert_eq!(
        h.drops.load(Ordering::SeqCst),
        0,
        "handle released while in use"
    );
}

/// A borrowed entry in use: its handle must be the one for `path`, not
/// released.
fn assert_borrowed(e: &Entry<Handle>, path: &str) {
    assert_eq!(e.path(), path, "a borrow of another path's entry");
    let h = e.handle().expect("handle present while borrowed");
    assert_eq!(h.name, path, "the handle of another path");
    assert_eq!(
        h.drops.load(Ordering::SeqCst),
        0,
        "handle released while borrowed"
    );
}

/// A thread that looks `path` up at the address `slot` (as a lookup that
/// read the slot earlier) and checks what it gets.
fn spawn_lookup(
    cache: &Arc<Harness<Handle>>,
    slot: Slot<Handle>,
    path: &'static str,
) -> thread::JoinHandle<()> {
    let cache = cache.clone();
    thread::spawn(move || {
        if let Some(e) = cache.lookup(slot, path) {
            assert_alive(&e, path);
        }
    })
}

/// A lookup that races the removal either gets a reference that keeps the
/// handle alive, or backs off; the handle is released exactly once.
#[test]
fn lookup_races_removal() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (h, drops) = handle("a");
        let (slot, first) = cache.insert("a", h);
        drop(first);
        let reader_cache = cache.clone();
        let reader = thread::spawn(move || {
            if let Some(e) = reader_cache.lookup(slot, "a") {
                assert_alive(&e, "a");
                let c = e.clone();
                drop(e);
                assert_alive(&c, "a");
            }
        });
        cache.kill(slot);
        reader.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// A user on another thread (another lane) drops its reference while the
/// entry is removed and a lookup pins it: exactly one releases the handle,
/// after every user.
#[test]
fn users_on_two_lanes_and_removal() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (h, drops) = handle("a");
        let (slot, first) = cache.insert("a", h);
        let holder = thread::spawn(move || {
            assert_alive(&first, "a");
            drop(first);
        });
        let reader = spawn_lookup(&cache, slot, "a");
        cache.kill(slot);
        holder.join().unwrap();
        reader.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// The writer removes "a", whose memory is freed and reused at once for
/// "b", while a lookup for "a" still holds the old address. The lookup gets
/// "a" alive or nothing, never "b"; its undone pin on the reused entry must
/// not free "b" (the generation in the state word; a claim CAS without it
/// frees "b" under its holder); each handle is released exactly once.
#[test]
fn stale_lookup_races_removal_and_reuse() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (ha, drops_a) = handle("a");
        let (slot, first) = cache.insert("a", ha);
        drop(first);
        let reader = spawn_lookup(&cache, slot, "a");
        cache.kill(slot);
        let (hb, drops_b) = handle("b");
        let (slot_b, user_b) = cache.insert("b", hb);
        assert_alive(&user_b, "b");
        if slot_b == slot {
            // "a" was released before the insert and its entry reused: the
            // old address now finds "b" only.
            assert!(cache.lookup(slot, "b").is_some());
            assert!(cache.lookup(slot, "a").is_none());
        }
        reader.join().unwrap();
        assert_alive(&user_b, "b");
        assert_eq!(drops_a.load(Ordering::SeqCst), 1);
        cache.kill(slot_b);
        assert_eq!(drops_b.load(Ordering::SeqCst), 0, "still held");
        drop(user_b);
        assert_eq!(drops_b.load(Ordering::SeqCst), 1);
    });
}

/// The last reference drops on one thread while a stale lookup pins the same
/// address on another and the writer removes it: no double release, no
/// release under a user.
#[test]
fn last_reference_and_stale_pin_race_removal() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (h, drops) = handle("a");
        let (slot, first) = cache.insert("a", h);
        let holder = thread::spawn(move || {
            let c = first.clone();
            drop(first);
            assert_alive(&c, "a");
        });
        let reader_cache = cache.clone();
        let reader = thread::spawn(move || {
            if let Some(e) = reader_cache.lookup(slot, "b") {
                panic!("found {} for b", e.path());
            }
        });
        cache.kill(slot);
        holder.join().unwrap();
        reader.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// A stale lookup's undone pin makes its thread a claimer of the entry's
/// first life, while another user frees that life and the writer reuses the
/// entry for "b" and removes it again with a user holding it. The stale
/// claim must fail (its CAS expects the first life's DYING state): without
/// the generation in the state word it succeeds and releases "b" under its
/// user (checked by mutation).
#[test]
fn stale_claim_cannot_free_the_next_life() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (ha, drops_a) = handle("a");
        let (slot, first) = cache.insert("a", ha);
        let holder = thread::spawn(move || drop(first));
        let reader = spawn_lookup(&cache, slot, "a");
        cache.kill(slot);
        let (hb, drops_b) = handle("b");
        let (slot_b, user_b) = cache.insert("b", hb);
        cache.kill(slot_b);
        assert_alive(&user_b, "b");
        holder.join().unwrap();
        reader.join().unwrap();
        assert_alive(&user_b, "b");
        drop(user_b);
        assert_eq!(drops_a.load(Ordering::SeqCst), 1);
        assert_eq!(drops_b.load(Ordering::SeqCst), 1);
    });
}

/// A scoped borrow (`get_with`: an announcement, no count) that races the
/// removal either sees the handle alive for the whole borrow or backs off;
/// the killer defers the release while the announcement covers the entry,
/// and the check after the borrow releases it, exactly once.
#[test]
fn borrow_races_removal() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (h, drops) = handle("a");
        let (slot, first) = cache.insert("a", h);
        drop(first);
        let reader_cache = cache.clone();
        let reader = thread::spawn(move || {
            reader_cache.borrow(slot, "a", |e| {
                assert_borrowed(e, "a");
                thread::yield_now();
                assert_borrowed(e, "a");
            });
        });
        cache.kill(slot);
        reader.join().unwrap();
        cache.reclaim();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// The last counted reference drops on one thread (after the removal) while
/// a borrow announces the entry on another: the claimer that makes the
/// count zero defers to the announcement or the borrow backs off; never a
/// release under the borrow, never two.
#[test]
fn borrow_races_last_reference_after_removal() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (h, drops) = handle("a");
        let (slot, first) = cache.insert("a", h);
        let reader_cache = cache.clone();
        let reader = thread::spawn(move || {
            reader_cache.borrow(slot, "a", |e| assert_borrowed(e, "a"));
        });
        let holder = thread::spawn(move || {
            assert_alive(&first, "a");
            drop(first);
        });
        cache.kill(slot);
        reader.join().unwrap();
        holder.join().unwrap();
        cache.reclaim();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// A borrow for "a" holds the old address while "a" is removed and its
/// entry may be reused for "b": the borrow sees "a" alive or nothing, never
/// "b"; a deferred "a" keeps its entry out of the pool until released.
#[test]
fn stale_borrow_races_removal_and_reuse() {
    loom::model(|| {
        let cache = Arc::new(Harness::default());
        let (ha, drops_a) = handle("a");
        let (slot, first) = cache.insert("a", ha);
        drop(first);
        let reader_cache = cache.clone();
        let reader = thread::spawn(move || {
            reader_cache.borrow(slot, "a", |e| assert_borrowed(e, "a"));
        });
        cache.kill(slot);
        let (hb, drops_b) = handle("b");
        let (slot_b, user_b) = cache.insert("b", hb);
        assert_alive(&user_b, "b");
        reader.join().unwrap();
        cache.reclaim();
        assert_eq!(drops_a.load(Ordering::SeqCst), 1);
        assert_alive(&user_b, "b");
        cache.kill(slot_b);
        drop(user_b);
        assert_eq!(drops_b.load(Ordering::SeqCst), 1);
    });
}
