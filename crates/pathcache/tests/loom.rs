//! Loom model of the entry reference protocol (per-shard counts, the
//! LIVE/DYING/FREED state, the borrow slots and the two memory owners), on
//! the real `Entry`, `EntryRef`, `EntryBorrow` and `MapRef` types. papaya is not modeled: a `loom::sync::Arc`
//! around the `MapRef` stands in for the map node, whose drop papaya defers
//! until no reader can see it.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p pathcache --test loom`
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use pathcache::MapRef;

/// The handle: counts its drops, and users check it was not dropped under them.
struct Handle(Arc<AtomicUsize>);
impl Drop for Handle {
    fn drop(&mut self) {
        assert_eq!(
            self.0.fetch_add(1, Ordering::SeqCst),
            0,
            "handle released twice"
        );
    }
}

fn assert_alive_entry(e: &pathcache::Entry<Handle>) {
    let h = e
        .handle()
        .expect("handle present while referenced or borrowed");
    assert_eq!(
        h.0.load(Ordering::SeqCst),
        0,
        "handle released while in use"
    );
}

fn assert_alive(e: &pathcache::EntryRef<Handle>) {
    assert_alive_entry(e);
}

/// A fresh map node, its first counted reference, and the handle's drop count.
fn new_node() -> (
    MapRef<Handle>,
    pathcache::EntryRef<Handle>,
    Arc<AtomicUsize>,
) {
    let drops = Arc::new(AtomicUsize::new(0));
    let (map_ref, first) = MapRef::<Handle>::new_for_test(Handle(drops.clone()));
    (map_ref, first, drops)
}

/// A map node whose only counted reference was dropped: what a lookup or a
/// borrow races a removal on. Returns the node and the handle's drop count.
fn unreferenced_node() -> (Arc<MapRef<Handle>>, Arc<AtomicUsize>) {
    let (map_ref, first, drops) = new_node();
    drop(first);
    (Arc::new(map_ref), drops)
}

/// A thread that checks `entry`'s handle is alive, then drops the reference.
fn spawn_holder(entry: pathcache::EntryRef<Handle>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        assert_alive(&entry);
        drop(entry);
    })
}

/// A lookup that races the removal from the map either gets a reference
/// that keeps the handle alive, or backs off; the handle is released once.
#[test]
fn lookup_races_removal() {
    loom::model(|| {
        let (node, drops) = unreferenced_node();
        let reader_node = node.clone();
        let reader = thread::spawn(move || {
            if let Some(e) = reader_node.try_acquire() {
                assert_alive(&e);
                let c = e.clone();
                drop(e);
                assert_alive(&c);
            }
            drop(reader_node);
        });
        node.kill();
        drop(node);
        reader.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// References on different threads (hence shards) drop while the entry is
/// removed: exactly one of the three releases the handle, after both users.
#[test]
fn users_on_two_shards_and_removal() {
    loom::model(|| {
        let (map_ref, first, drops) = new_node();
        let node = Arc::new(map_ref);
        let a = spawn_holder(first);
        let b_node = node.clone();
        let b = thread::spawn(move || {
            if let Some(e) = b_node.try_acquire() {
                assert_alive(&e);
            }
        });
        node.kill();
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(node);
    });
}

/// After removal, clones travel to another thread and all copies race to be
/// the last one.
#[test]
fn dying_entry_clones_race_to_release() {
    loom::model(|| {
        let (map_ref, first, drops) = new_node();
        map_ref.kill();
        drop(map_ref);
        let second = first.clone();
        let t = spawn_holder(second);
        assert_alive(&first);
        drop(first);
        t.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// A borrow (no count, a published slot) that races the removal: either it
/// sees the entry dying and backs off, or the remover sees the borrow and
/// leaves the release to the node's drop, which the model runs only after the
/// borrower let go of the node (as papaya's reclamation does after the
/// borrower's guard). The handle is released once, never under the borrower.
#[test]
fn borrow_races_removal() {
    loom::model(|| {
        let (node, drops) = unreferenced_node();
        let reader_node = node.clone();
        let reader = thread::spawn(move || {
            if let Some(b) = reader_node.try_borrow_for_test() {
                assert_alive_entry(&b);
                drop(b);
            }
            drop(reader_node);
        });
        node.kill();
        drop(node);
        reader.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// A borrower, the last counted reference and the removal race: whoever
/// releases does it once and after both users are done.
#[test]
fn borrow_and_last_reference_race_removal() {
    loom::model(|| {
        let (map_ref, first, drops) = new_node();
        let node = Arc::new(map_ref);
        let holder = spawn_holder(first);
        let reader_node = node.clone();
        let reader = thread::spawn(move || {
            if let Some(b) = reader_node.try_borrow_for_test() {
                assert_alive_entry(&b);
            }
            drop(reader_node);
        });
        node.kill();
        drop(node);
        holder.join().unwrap();
        reader.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}
