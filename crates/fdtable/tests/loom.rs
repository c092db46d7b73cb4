//! Loom model checks of the table's concurrent paths (run by
//! `scripts/loom.sh`: `RUSTFLAGS="--cfg loom" cargo test --release -p fdwarden-fdtable --test loom`).
//!
//! Each test builds a tiny table inside the model so every atomic access of
//! the state words, deferred lists and claim flags is explored, and checks
//! after all threads joined that each value was released exactly once.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use fdtable::{Config, Error, FdTable, Release};

/// Counts its own release in a shared slot; dropping it unreleased counts a leak.
struct Counted {
    id: usize,
    releases: Arc<[AtomicUsize; 4]>,
    leaks: Arc<AtomicUsize>,
    armed: bool,
}

impl Release for Counted {
    type Error = ();

    fn release(mut self) -> Result<(), ()> {
        self.armed = false;
        self.releases[self.id].fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.armed {
            self.leaks.fetch_add(1, Ordering::SeqCst);
        }
    }
}

struct Fixture {
    releases: Arc<[AtomicUsize; 4]>,
    leaks: Arc<AtomicUsize>,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            releases: Arc::new(std::array::from_fn(|_| AtomicUsize::new(0))),
            leaks: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn value(&self, id: usize) -> Counted {
        Counted {
            id,
            releases: Arc::clone(&self.releases),
            leaks: Arc::clone(&self.leaks),
            armed: true,
        }
    }

    fn released(&self, id: usize) -> usize {
        self.releases[id].load(Ordering::SeqCst)
    }

    fn leaks(&self) -> usize {
        self.leaks.load(Ordering::SeqCst)
    }
}

fn small_table(shards: usize) -> Arc<FdTable<Counted>> {
    Arc::new(FdTable::new(Config {
        shards,
        initial_slots: 2,
        max_slots: 2,
    }))
}

/// A lookup on another thread races with close: the value is released
/// exactly once, either by close (no guard at that moment) or deferred from
/// the guard's drop and then reaped.
#[test]
fn lookup_races_with_close() {
    loom::model(|| {
        let fixture = Fixture::new();
        let table = small_table(2);
        let fd = table.insert(fixture.value(0)).unwrap();
        let reader = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || match table.get(fd) {
                Ok(guard) => assert_eq!(guard.id, 0),
                Err(error) => assert_eq!(error, Error::Stale),
            })
        };
        table.close(fd).unwrap();
        reader.join().unwrap();
        table.reap();
        assert_eq!(fixture.released(0), 1);
        assert_eq!(table.stats().live, 0);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// Inserts and closes value 0, then starts a thread that looks the closed
/// descriptor up (it must fail), racing whatever the caller does next.
fn closed_slot_with_stale_reader(
    fixture: &Fixture,
    table: &Arc<FdTable<Counted>>,
) -> (fdtable::Fd, loom::thread::JoinHandle<()>) {
    let old = table.insert(fixture.value(0)).unwrap();
    table.close(old).unwrap();
    let reader = {
        let table = Arc::clone(table);
        loom::thread::spawn(move || {
            assert_eq!(table.get(old).err(), Some(Error::Stale));
        })
    };
    (old, reader)
}

/// A stale lookup races with the owner reusing the slot (plain-store
/// publish): the lookup never resolves to the new value, and its undo never
/// takes a reference from it, so the new entry's close releases at once.
#[test]
fn stale_lookup_races_with_slot_reuse() {
    loom::model(|| {
        let fixture = Fixture::new();
        let table = small_table(2);
        let (old, reader) = closed_slot_with_stale_reader(&fixture, &table);
        let new = table.insert(fixture.value(1)).unwrap();
        assert_eq!(new.slot(), old.slot());
        reader.join().unwrap();
        let found = table.get(new).map(|guard| guard.id);
        assert_eq!(
            found,
            Ok(1),
            "old {old:?} new {new:?} stats {:?}",
            table.stats()
        );
        table.close(new).unwrap();
        assert_eq!(fixture.released(1), 1, "close released in the caller");
        assert_eq!(fixture.released(0), 1);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// Stale lookups leave junk references on a free slot; the next insert's
/// plain store overwrites them. Here the stale lookup races with the reuse
/// while the new entry is looked up, closed under a live guard and ended
/// by the guard's drop: the junk never counts as a reference of the new
/// entry, so the guard's drop is the last and queues exactly one release.
#[test]
fn stale_lookup_junk_never_keeps_the_next_entry_alive() {
    loom::model(|| {
        let fixture = Fixture::new();
        let table = small_table(2);
        let (_old, reader) = closed_slot_with_stale_reader(&fixture, &table);
        let new = table.insert(fixture.value(1)).unwrap();
        let guard = table.get(new).expect("the new entry is open");
        table.close(new).unwrap();
        assert_eq!(fixture.released(1), 0, "the guard keeps the value");
        drop(guard);
        reader.join().unwrap();
        table.reap();
        assert_eq!(fixture.released(1), 1, "released once, after the guard");
        assert_eq!(table.stats().live, 0);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// An owning handle dropped on a foreign thread (deferred list push) while
/// the owner keeps allocating (deferred list drain): one release each.
#[test]
fn foreign_drop_races_with_owner_insert() {
    loom::model(|| {
        let fixture = Fixture::new();
        let table = small_table(2);
        let owned = table.insert_owned(fixture.value(0)).unwrap();
        let dropper = loom::thread::spawn(move || drop(owned));
        let second = table.insert(fixture.value(1)).unwrap();
        dropper.join().unwrap();
        table.reap();
        table.close(second).unwrap();
        assert_eq!(fixture.released(0), 1);
        assert_eq!(fixture.released(1), 1);
        assert_eq!(table.stats().live, 0);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// A foreign close releases in its caller and hands the slot back through
/// the freed list while the owner allocates; the slot is reused afterwards.
#[test]
fn foreign_close_races_with_owner_insert() {
    loom::model(|| {
        let fixture = Fixture::new();
        let table = small_table(2);
        let first = table.insert(fixture.value(0)).unwrap();
        let closer = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || table.close(first).unwrap())
        };
        let second = table.insert(fixture.value(1));
        closer.join().unwrap();
        assert_eq!(fixture.released(0), 1);
        if let Ok(second) = second {
            table.close(second).unwrap();
        } else {
            // Only two slots: the close had not handed slot 0 back yet.
            second.unwrap_err().into_inner().release().unwrap();
        }
        let third = table.insert(fixture.value(2)).unwrap();
        assert_eq!(third.slot(), 0);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// Two threads without a shard of their own (the only owner shard is held
/// by the main thread) insert through the shared shard's lock: distinct
/// slots, nothing lost.
#[test]
fn threads_without_a_shard_share_the_locked_shard() {
    loom::model(|| {
        let fixture = Arc::new(Fixture::new());
        let table = small_table(1);
        let _mine = table.insert(fixture.value(0)).unwrap();
        let workers: Vec<_> = (1..=2)
            .map(|id| {
                let (table, fixture) = (Arc::clone(&table), Arc::clone(&fixture));
                loom::thread::spawn(move || table.insert(fixture.value(id)).unwrap())
            })
            .collect();
        let fds: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert!(fds.iter().all(|fd| fd.shard() == 1));
        assert_ne!(fds[0].slot(), fds[1].slot());
        for fd in fds {
            table.close(fd).unwrap();
        }
        drop(table);
        assert_eq!(fixture.released(1) + fixture.released(2), 2);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// Growth publishes the next slots (their count, Release) while another
/// thread looks up a descriptor of the first new slot (forged, so the
/// lookup can run before, during or after the growth): the lookup either
/// fails as stale or finds exactly the new entry, fully written; it never
/// reads a value before its publication.
#[test]
fn lookup_races_with_growth() {
    loom::model(|| {
        let fixture = Fixture::new();
        // The shard starts with slot 0; the second insert grows it to slot 1.
        let table = Arc::new(FdTable::new(Config {
            shards: 1,
            initial_slots: 1,
            max_slots: 2,
        }));
        let first = table.insert(fixture.value(0)).unwrap();
        assert_eq!(first.slot(), 0);
        // Same table and shard, slot 1, generation 0: what the next insert
        // will hand out.
        let forged = fdtable::Fd::from_raw(first.to_raw() | 1);
        let reader = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || match table.get(forged) {
                Ok(guard) => assert_eq!(guard.id, 1),
                Err(error) => assert_eq!(error, Error::Stale),
            })
        };
        let second = table.insert(fixture.value(1)).unwrap();
        assert_eq!(second, forged);
        reader.join().unwrap();
        table.close(second).unwrap();
        table.close(first).unwrap();
        assert_eq!(fixture.released(0), 1);
        assert_eq!(fixture.released(1), 1);
        assert_eq!(table.stats().growths, 1);
        assert_eq!(table.stats().live, 0);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// A `get_with` (an announcement, no reference) races with close: the
/// value is never released while the borrow runs, and exactly once after
/// (by close, or by the reap that drains the covered slot).
#[test]
fn get_with_races_with_close() {
    loom::model(|| {
        let fixture = Arc::new(Fixture::new());
        let table = small_table(2);
        let fd = table.insert(fixture.value(0)).unwrap();
        let reader = {
            let (table, fixture) = (Arc::clone(&table), Arc::clone(&fixture));
            loom::thread::spawn(move || {
                let seen = table.get_with(fd, |v| {
                    assert_eq!(fixture.released(0), 0, "released under a borrow");
                    loom::thread::yield_now();
                    assert_eq!(fixture.released(0), 0, "released under a borrow");
                    v.id
                });
                assert!(matches!(seen, Ok(0) | Err(Error::Stale)));
            })
        };
        table.close(fd).unwrap();
        reader.join().unwrap();
        table.reap();
        assert_eq!(fixture.released(0), 1);
        assert_eq!(table.stats().live, 0);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}

/// A close defers the value of a slot a `get_with` on another thread may
/// still read, and the owner reaps at once: a covered slot goes back on the
/// deferred list, and the value is released exactly once, never under the
/// borrow.
#[test]
fn get_with_races_with_close_and_reap() {
    loom::model(|| {
        let fixture = Arc::new(Fixture::new());
        let table = small_table(2);
        let fd = table.insert(fixture.value(0)).unwrap();
        let reader = {
            let (table, fixture) = (Arc::clone(&table), Arc::clone(&fixture));
            loom::thread::spawn(move || {
                let _ = table.get_with(fd, |v| {
                    assert_eq!(fixture.released(0), 0, "released under a borrow");
                    v.id
                });
            })
        };
        table.close(fd).unwrap();
        table.reap();
        reader.join().unwrap();
        table.reap();
        assert_eq!(fixture.released(0), 1);
        drop(table);
        assert_eq!(fixture.leaks(), 0);
    });
}
