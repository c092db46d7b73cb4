//! Single-table behaviour through the public API.

mod common;

#[cfg(unix)]
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Barrier};

use common::{Ledger, Tracked};
use fdtable::{CloseError, Config, Error, Fd, FdTable, InsertError};

fn table(shards: usize, initial_slots: usize, max_slots: usize) -> FdTable<Tracked> {
    FdTable::new(Config {
        shards,
        initial_slots,
        max_slots,
    })
}

#[test]
fn allocates_lowest_free_slot_first() {
    let ledger = Ledger::new(1000);
    let table = table(1, 64, 1024);
    let fds: Vec<Fd> = (0..300)
        .map(|id| table.insert(ledger.value(id)).unwrap())
        .collect();
    for (expected, fd) in fds.iter().enumerate() {
        assert_eq!(fd.slot(), expected as u32);
        assert_eq!(fd.shard(), 0);
    }
    for k in [0usize, 63, 64, 65, 130, 299] {
        table.close(fds[k]).unwrap();
        let again = table.insert(ledger.value(300 + k as u64)).unwrap();
        assert_eq!(again.slot(), k as u32, "after freeing {k}");
    }
    // Free several: they come back lowest first.
    for k in [200usize, 5, 100] {
        table.close(fds[k]).unwrap();
    }
    let order: Vec<u32> = (0..3)
        .map(|i| table.insert(ledger.value(700 + i)).unwrap().slot())
        .collect();
    assert_eq!(order, vec![5, 100, 200]);
    assert_eq!(table.insert(ledger.value(710)).unwrap().slot(), 300);
    drop(table);
    assert_eq!(ledger.leaks(), 0);
    assert_eq!(ledger.total_released(), 300 + 6 + 4);
}

#[test]
fn fast_path_and_summary_counters_follow_word_boundaries() {
    let ledger = Ledger::new(200);
    let table = table(1, 64, 1024);
    let fds: Vec<Fd> = (0..64)
        .map(|id| table.insert(ledger.value(id)).unwrap())
        .collect();
    let stats = table.stats();
    // Slots 0..=63, including the last bit of word 0, come from the hint's word.
    assert_eq!(
        (stats.fast_path_hits, stats.slow_path_scans, stats.growths),
        (64, 0, 0)
    );
    // Slot 64 does not exist yet: summary scan, then growth.
    assert_eq!(table.insert(ledger.value(64)).unwrap().slot(), 64);
    let stats = table.stats();
    assert_eq!(
        (stats.fast_path_hits, stats.slow_path_scans, stats.growths),
        (64, 1, 1)
    );
    assert_eq!(table.insert(ledger.value(65)).unwrap().slot(), 65);
    assert_eq!(table.stats().fast_path_hits, 65);
    // Free 63 (word 0): found at the hint.
    table.close(fds[63]).unwrap();
    assert_eq!(table.insert(ledger.value(66)).unwrap().slot(), 63);
    assert_eq!(table.stats().fast_path_hits, 66);
    // The hint is now 64 (word 1, not full): fast again, slot 66.
    assert_eq!(table.insert(ledger.value(67)).unwrap().slot(), 66);
    assert_eq!(table.stats().slow_path_scans, 1);
}

#[test]
fn grows_by_doubling_up_to_max_then_returns_the_value() {
    let ledger = Ledger::new(20);
    let table = table(1, 4, 10);
    let fds: Vec<Fd> = (0..10)
        .map(|id| table.insert(ledger.value(id)).unwrap())
        .collect();
    assert_eq!(table.stats().growths, 2, "4 -> 8 -> 10");
    match table.insert(ledger.value(10)) {
        Err(InsertError::Full(value)) => {
            assert_eq!(value.id, 10);
            value.forget();
        }
        Ok(fd) => panic!("inserted past max: {fd:?}"),
    }
    // Room again after a close, at the freed slot.
    table.close(fds[7]).unwrap();
    assert_eq!(table.insert(ledger.value(11)).unwrap().slot(), 7);
    assert_eq!(table.stats().live, 10);
}

#[test]
fn stale_descriptor_is_rejected_after_reuse() {
    let ledger = Ledger::new(10);
    let table = table(1, 64, 64);
    let old = table.insert(ledger.value(0)).unwrap();
    table.close(old).unwrap();
    let new = table.insert(ledger.value(1)).unwrap();
    assert_eq!(new.slot(), old.slot());
    assert_ne!(new.generation(), old.generation());
    assert_eq!(table.get(old).err(), Some(Error::Stale));
    assert!(matches!(table.close(old), Err(CloseError::Stale)));
    assert_eq!(table.get(new).unwrap().id, 1);
    assert_eq!(table.stats().stale_rejections, 2);
    assert_eq!(ledger.releases(0), 1);
    assert_eq!(ledger.releases(1), 0);
}

#[test]
fn double_close_is_an_error_and_releases_once() {
    let ledger = Ledger::new(1);
    let table = table(1, 64, 64);
    let fd = table.insert(ledger.value(0)).unwrap();
    table.close(fd).unwrap();
    assert!(matches!(table.close(fd), Err(CloseError::Stale)));
    assert_eq!(ledger.releases(0), 1);
    assert_eq!(table.stats().sync_releases, 1);
}

#[test]
fn descriptor_from_another_table_is_rejected() {
    let ledger = Ledger::new(2);
    let a = table(1, 64, 64);
    let b = table(1, 64, 64);
    let fd_a = a.insert(ledger.value(0)).unwrap();
    let fd_b = b.insert(ledger.value(1)).unwrap();
    // Same shard, slot and generation: only the table tag differs.
    assert_eq!((fd_a.shard(), fd_a.slot()), (fd_b.shard(), fd_b.slot()));
    assert_eq!(b.get(fd_a).err(), Some(Error::WrongTable));
    assert!(matches!(b.close(fd_a), Err(CloseError::WrongTable)));
    assert_eq!(b.get(fd_b).unwrap().id, 1);
    assert_eq!(a.get(fd_a).unwrap().id, 0);
}

#[test]
fn forged_descriptors_are_rejected_not_resolved() {
    let ledger = Ledger::new(1);
    let table = table(1, 64, 128);
    let fd = table.insert(ledger.value(0)).unwrap();
    let raw = fd.to_raw();
    assert_eq!(Fd::from_raw(raw), fd);
    let other_slot = Fd::from_raw(raw + 1); // slot 1: never allocated
    let far_slot = Fd::from_raw(raw | 0xF_FFFF); // beyond max_slots
    let far_shard = Fd::from_raw(raw | 0xFF << 20); // no such shard
    let other_generation = Fd::from_raw(raw + (1 << 40));
    for forged in [other_slot, far_slot, far_shard, other_generation] {
        assert_eq!(table.get(forged).err(), Some(Error::Stale), "{forged:?}");
        assert!(matches!(table.close(forged), Err(CloseError::Stale)));
    }
    assert_eq!(table.get(fd).unwrap().id, 0);
}

#[test]
fn close_releases_in_caller_and_returns_the_error_once() {
    let ledger = Ledger::new(2);
    ledger.failing.store(1, std::sync::atomic::Ordering::SeqCst);
    let table = table(1, 64, 64);
    let fine = table.insert(ledger.value(0)).unwrap();
    let failing = table.insert(ledger.value(1)).unwrap();
    assert!(table.close(fine).is_ok());
    assert!(matches!(table.close(failing), Err(CloseError::Release(1))));
    // The entry is gone even though its release failed; no retry.
    assert!(matches!(table.close(failing), Err(CloseError::Stale)));
    let stats = table.stats();
    assert_eq!(
        (stats.sync_releases, stats.release_errors, stats.live),
        (2, 1, 0)
    );
    assert_eq!(ledger.releases(1), 1);
}

#[test]
fn close_with_guard_outstanding_defers_to_the_last_guard() {
    let ledger = Ledger::new(3);
    let table = table(1, 64, 64);
    let fd = table.insert(ledger.value(0)).unwrap();
    let guard = table.get(fd).unwrap();
    let second = table.get(fd).unwrap();
    table.close(fd).unwrap();
    // Closed now: new lookups fail, existing guards still read the value.
    assert_eq!(table.get(fd).err(), Some(Error::Stale));
    assert_eq!(guard.id, 0);
    assert_eq!(ledger.releases(0), 0);
    drop(guard);
    assert_eq!(table.stats().deferred_queue_depth, 0);
    drop(second);
    assert_eq!(ledger.releases(0), 0, "a guard drop never releases inline");
    let stats = table.stats();
    assert_eq!((stats.deferred_queue_depth, stats.live), (1, 1));
    // The owner's next operation drains the deferred list, then reuses the slot.
    let next = table.insert(ledger.value(1)).unwrap();
    assert_eq!(ledger.releases(0), 1);
    assert_eq!(next.slot(), fd.slot());
    let stats = table.stats();
    assert_eq!(
        (
            stats.sync_releases,
            stats.deferred_releases,
            stats.deferred_queue_depth
        ),
        (0, 1, 0)
    );
}

#[test]
fn owned_handle_drop_defers_and_close_releases_now() {
    let ledger = Ledger::new(4);
    ledger.failing.store(1, std::sync::atomic::Ordering::SeqCst);
    let table = Arc::new(table(1, 64, 64));
    let dropped = table.insert_owned(ledger.value(0)).unwrap();
    let closed = table.insert_owned(ledger.value(1)).unwrap();
    assert_eq!(dropped.id, 0);
    assert_eq!(table.get(closed.fd()).unwrap().id, 1);
    drop(dropped);
    assert_eq!(ledger.releases(0), 0);
    assert_eq!(table.stats().deferred_queue_depth, 1);
    assert!(matches!(closed.close(), Err(CloseError::Release(1))));
    assert_eq!(ledger.releases(1), 1);
    assert_eq!(table.reap(), 1);
    assert_eq!(ledger.releases(0), 1);
    let stats = table.stats();
    assert_eq!(
        (stats.sync_releases, stats.deferred_releases, stats.live),
        (1, 1, 0)
    );
}

#[test]
fn owned_entry_closed_through_the_table_stays_valid_for_the_handle() {
    let ledger = Ledger::new(2);
    let table = Arc::new(table(1, 64, 64));
    let owned = table.insert_owned(ledger.value(0)).unwrap();
    table.close(owned.fd()).unwrap();
    assert_eq!(table.get(owned.fd()).err(), Some(Error::Stale));
    assert_eq!(owned.id, 0, "the handle's reference keeps the value");
    assert_eq!(ledger.releases(0), 0);
    owned.close().unwrap();
    assert_eq!(ledger.releases(0), 1);
    assert_eq!(table.stats().live, 0);
}

#[test]
fn guard_dropped_on_another_thread_is_reaped_by_any_thread() {
    let ledger = Ledger::new(2);
    let table = Arc::new(table(2, 64, 64));
    let fd = table.insert(ledger.value(0)).unwrap();
    let worker = {
        let table = Arc::clone(&table);
        std::thread::spawn(move || {
            let guard = table.get(fd).unwrap();
            table.close(fd).unwrap();
            drop(guard);
        })
    };
    worker.join().unwrap();
    assert_eq!(ledger.releases(0), 0);
    assert_eq!(table.stats().deferred_queue_depth, 1);
    assert_eq!(table.reap(), 1);
    assert_eq!(ledger.releases(0), 1);
    assert_eq!(table.stats().live, 0);
}

#[test]
fn foreign_close_frees_the_slot_for_the_owner() {
    let ledger = Ledger::new(3);
    let table = Arc::new(table(2, 64, 64));
    let first = table.insert(ledger.value(0)).unwrap();
    let _second = table.insert(ledger.value(1)).unwrap();
    {
        let table = Arc::clone(&table);
        std::thread::spawn(move || table.close(first).unwrap())
            .join()
            .unwrap();
    }
    assert_eq!(ledger.releases(0), 1, "close releases in its caller");
    assert_eq!(table.insert(ledger.value(2)).unwrap().slot(), first.slot());
}

/// A thread that reaps, closes or releases but never inserts (a daemon's
/// reaper) must not take an owner shard: with one owner shard per worker,
/// the worker left without one inserted through the shared shard's lock
/// and the claim lookup on every open.
#[test]
fn threads_that_never_insert_claim_no_shard() {
    let ledger = Ledger::new(10);
    let table = Arc::new(table(1, 64, 64));
    // Inserted by a thread that exits, so its claim is free again.
    let (fd, owned) = {
        let (table, ledger) = (Arc::clone(&table), Arc::clone(&ledger));
        std::thread::spawn(move || {
            let fd = table.insert(ledger.value(0)).unwrap();
            (fd, table.insert_owned(ledger.value(1)).unwrap())
        })
        .join()
        .unwrap()
    };
    let barrier = Arc::new(Barrier::new(2));
    let reaper = {
        let (table, barrier) = (Arc::clone(&table), Arc::clone(&barrier));
        std::thread::spawn(move || {
            table.reap();
            table.close(fd).unwrap();
            drop(owned);
            assert_eq!(table.reap(), 1, "the dropped handle's value");
            barrier.wait(); // alive while the inserter claims
            barrier.wait();
        })
    };
    barrier.wait();
    let inserted = {
        let (table, ledger) = (Arc::clone(&table), Arc::clone(&ledger));
        std::thread::spawn(move || table.insert(ledger.value(2)).unwrap())
            .join()
            .unwrap()
    };
    barrier.wait();
    reaper.join().unwrap();
    assert_eq!(
        inserted.shard(),
        0,
        "the inserter owns the only owner shard"
    );
    assert_eq!(ledger.releases(0) + ledger.releases(1), 2);
}

#[test]
fn threads_beyond_the_shard_count_use_the_shared_shard() {
    let ledger = Ledger::new(10);
    let table = Arc::new(table(1, 64, 64));
    let barrier = Arc::new(Barrier::new(2));
    let owner = {
        let (table, ledger, barrier) = (
            Arc::clone(&table),
            Arc::clone(&ledger),
            Arc::clone(&barrier),
        );
        std::thread::spawn(move || {
            let fd = table.insert(ledger.value(0)).unwrap();
            assert_eq!(table.local_shard(), 0);
            barrier.wait(); // hold the claim while the other thread runs
            barrier.wait();
            fd
        })
    };
    barrier.wait();
    let shared = {
        let (table, ledger) = (Arc::clone(&table), Arc::clone(&ledger));
        std::thread::spawn(move || {
            assert_eq!(table.local_shard(), 1);
            table.insert(ledger.value(1)).unwrap()
        })
        .join()
        .unwrap()
    };
    assert_eq!((shared.shard(), shared.slot()), (1, 0));
    barrier.wait();
    let owned_fd = owner.join().unwrap();
    assert_eq!(owned_fd.shard(), 0);
    // The owner exited, so its shard is free to claim again.
    let next = {
        let (table, ledger) = (Arc::clone(&table), Arc::clone(&ledger));
        std::thread::spawn(move || table.insert(ledger.value(2)).unwrap())
            .join()
            .unwrap()
    };
    assert_eq!((next.shard(), next.slot()), (0, 1));
    assert_eq!(table.get(shared).unwrap().id, 1);
    assert!(table.stats().contention_events <= 1);
}

#[cfg(unix)]
#[test]
fn os_files_are_closed_by_close() {
    let table: FdTable<OwnedFd> = FdTable::new(Config::default());
    let (read, write) = pipe();
    let raw = read.as_raw_fd();
    let fd = table.insert(read).unwrap();
    let write_fd = table.insert(write).unwrap();
    assert!(fd_is_open(raw));
    table.close(fd).unwrap();
    assert!(!fd_is_open(raw), "close(2) ran in the caller");
    let file: FdTable<std::fs::File> = FdTable::new(Config::default());
    let opened = std::fs::File::open("Cargo.toml").unwrap();
    let raw_file = opened.as_raw_fd();
    let file_fd = file.insert(opened).unwrap();
    file.close(file_fd).unwrap();
    assert!(!fd_is_open(raw_file));
    table.close(write_fd).unwrap();
}

#[cfg(unix)]
fn pipe() -> (OwnedFd, OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

#[cfg(unix)]
fn fd_is_open(raw: i32) -> bool {
    // SAFETY: F_GETFD only queries the descriptor number.
    unsafe { libc::fcntl(raw, libc::F_GETFD) != -1 }
}

#[cfg(windows)]
#[test]
fn os_files_are_closed_by_close() {
    use std::os::windows::io::{AsRawHandle, OwnedHandle, RawHandle};
    use windows_sys::Win32::Storage::FileSystem::{
        GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
    };
    /// The file a handle value names now (volume, index), if it is open: a
    /// closed value may be reused at once by another test's open, but not
    /// for this file.
    fn names(raw: RawHandle) -> Option<(u32, u32, u32)> {
        let mut info = BY_HANDLE_FILE_INFORMATION::default();
        // SAFETY: only queries the handle value, into a live out-struct.
        let ok = unsafe { GetFileInformationByHandle(raw, &mut info) } != 0;
        ok.then_some((
            info.dwVolumeSerialNumber,
            info.nFileIndexHigh,
            info.nFileIndexLow,
        ))
    }
    let table: FdTable<OwnedHandle> = FdTable::new(Config::default());
    let opened = OwnedHandle::from(std::fs::File::open("Cargo.toml").unwrap());
    let raw = opened.as_raw_handle();
    let file_id = names(raw).expect("open");
    let fd = table.insert(opened).unwrap();
    table.close(fd).unwrap();
    assert_ne!(names(raw), Some(file_id), "CloseHandle ran in the caller");
    let file: FdTable<std::fs::File> = FdTable::new(Config::default());
    let opened = std::fs::File::open("Cargo.toml").unwrap();
    let raw_file = opened.as_raw_handle();
    let file_fd = file.insert(opened).unwrap();
    assert_eq!(names(raw_file), Some(file_id));
    file.close(file_fd).unwrap();
    assert_ne!(names(raw_file), Some(file_id));
}

#[test]
fn stats_count_every_path() {
    let ledger = Ledger::new(4);
    let table = table(1, 64, 64);
    let a = table.insert(ledger.value(0)).unwrap();
    let b = table.insert(ledger.value(1)).unwrap();
    table.close(a).unwrap();
    let guard = table.get(b).unwrap();
    table.close(b).unwrap();
    drop(guard);
    let _ = table.get(a);
    let stats = table.stats();
    assert_eq!(stats.allocations, 2);
    assert_eq!(stats.sync_releases, 1);
    assert_eq!(stats.deferred_queue_depth, 1);
    assert_eq!(stats.stale_rejections, 1);
    assert_eq!(stats.live, 1);
    assert_eq!(table.reap(), 1);
    assert_eq!(table.stats().deferred_releases, 1);
    assert_eq!(table.stats().live, 0);
}

#[test]
fn local_token_allocates_lowest_in_own_shard_and_closes_any_shard() {
    let ledger = Ledger::new(5);
    let table = Arc::new(table(2, 64, 64));
    let local = table.local().expect("a fresh table has a free shard");
    assert_eq!(local.shard(), table.local_shard());
    let a = local.insert(ledger.value(0)).unwrap();
    let b = local.insert(ledger.value(1)).unwrap();
    assert_eq!((a.shard(), a.slot(), b.slot()), (local.shard(), 0, 1));
    // Mixes with the thread-local path on the same shard.
    let c = table.insert(ledger.value(2)).unwrap();
    assert_eq!((c.shard(), c.slot()), (local.shard(), 2));
    assert_eq!(local.get(b).unwrap().fd(), b);
    local.close(a).unwrap();
    assert_eq!(ledger.releases(0), 1, "local close releases in its caller");
    assert!(matches!(local.close(a), Err(CloseError::Stale)));
    assert_eq!(local.get(a).err(), Some(Error::Stale));
    // An entry of another thread's shard: closed here, its slot goes back to
    // that owner through the freed list.
    let foreign = {
        let table = Arc::clone(&table);
        let ledger = Arc::clone(&ledger);
        std::thread::spawn(move || {
            let other = table.local().expect("second shard is free");
            other.insert(ledger.value(3)).unwrap()
        })
        .join()
        .unwrap()
    };
    assert_ne!(foreign.shard(), local.shard());
    local.close(foreign).unwrap();
    assert_eq!(ledger.releases(3), 1);
    // The freed slot 0 of this shard is reused first.
    assert_eq!(local.insert(ledger.value(4)).unwrap().slot(), 0);
    assert_eq!(table.stats().allocations, 5);
}

#[test]
fn local_token_is_none_without_a_shard_and_claim_ends_with_its_thread() {
    let table = Arc::new(table(1, 64, 64));
    let owner_done = Arc::new(Barrier::new(2));
    let exit = Arc::new(Barrier::new(2));
    let owner = {
        let (table, owner_done, exit) = (
            Arc::clone(&table),
            Arc::clone(&owner_done),
            Arc::clone(&exit),
        );
        std::thread::spawn(move || {
            let local = table.local().expect("only shard is free");
            drop(local);
            owner_done.wait();
            exit.wait();
        })
    };
    owner_done.wait();
    // The single owner shard is held by the other (live) thread.
    assert!(table.local().is_none());
    exit.wait();
    owner.join().unwrap();
    // Its claim ended with it (the token was dropped first): ours now.
    assert_eq!(table.local().expect("shard freed").shard(), 0);
}

/// `get_with` lends the value without a guard; a close (here by the reader
/// itself) during the borrow does not release under it: close returns
/// `Ok(())`, the value waits on the deferred list and the owner's next
/// insert releases it once; a nested `get_with` takes a guard; stale and
/// foreign descriptors fail as with `get`.
#[test]
fn get_with_defers_a_release_that_its_borrow_covers() {
    let ledger = Ledger::new(10);
    let table = table(1, 64, 1024);
    let other = self::table(1, 64, 1024);
    let fd = table.insert(ledger.value(0)).unwrap();
    assert_eq!(table.get_with(fd, |v| v.id), Ok(0));
    let nested = table.get_with(fd, |outer| table.get_with(fd, |inner| outer.id + inner.id));
    assert_eq!(nested, Ok(Ok(0)));
    let id = table
        .get_with(fd, |v| {
            table.close(fd).expect("close under a borrow is Ok");
            assert_eq!(ledger.releases(0), 0, "not released under the borrow");
            assert_eq!(table.get(fd).err(), Some(Error::Stale));
            v.id
        })
        .unwrap();
    assert_eq!(id, 0);
    assert_eq!(ledger.releases(0), 0, "deferred to the owner");
    assert_eq!(table.get_with(fd, |v| v.id), Err(Error::Stale));
    let next = table.insert(ledger.value(1)).unwrap();
    assert_eq!(ledger.releases(0), 1, "the owner's insert released it");
    assert_eq!(next.slot(), fd.slot());
    assert_eq!(other.get_with(next, |v| v.id), Err(Error::WrongTable));
    // Without a borrow, close releases at once.
    table.close(next).unwrap();
    assert_eq!(ledger.releases(1), 1);
    // From another thread: the borrow holds while the owner closes.
    let fd = table.insert(ledger.value(2)).unwrap();
    let (inside, closed) = (Barrier::new(2), Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            table
                .get_with(fd, |v| {
                    inside.wait();
                    closed.wait();
                    assert_eq!(ledger.releases(2), 0);
                    assert_eq!(v.id, 2);
                })
                .unwrap();
        });
        inside.wait();
        table.close(fd).unwrap();
        closed.wait();
    });
    assert_eq!(table.reap(), 1);
    assert_eq!(ledger.releases(2), 1);
    assert_eq!(table.stats().live, 0);
    drop(table);
    assert_eq!(ledger.leaks(), 0);
}

/// The owner's close compares a descriptor with its own shard and slot
/// count before it touches the state word: a forged descriptor of the
/// owner's own shard, past the published slots (where the shard's memory
/// is still reserved address space with no access), is stale, not a
/// fault, for every operation.
#[test]
fn forged_descriptor_past_the_published_slots_of_the_owners_shard_is_stale() {
    let ledger = Ledger::new(4);
    let table = table(1, 64, 1 << 20);
    let local = table.local().expect("this thread owns shard 0");
    let fd = local.insert(ledger.value(0)).unwrap();
    for slot in [64u64, 65, 4096, (1 << 20) - 1] {
        let forged = Fd::from_raw(fd.to_raw() | slot);
        assert_eq!(forged.shard(), fd.shard());
        assert!(
            matches!(table.close(forged), Err(CloseError::Stale)),
            "slot {slot}"
        );
        assert!(
            matches!(local.close(forged), Err(CloseError::Stale)),
            "slot {slot}"
        );
        assert_eq!(table.get(forged).err(), Some(Error::Stale), "slot {slot}");
        assert_eq!(table.get_with(forged, |_| ()), Err(Error::Stale));
    }
    assert_eq!(table.stats().live, 1);
    local.close(fd).unwrap();
    drop(local);
    drop(table);
    assert_eq!(ledger.leaks(), 0);
}

/// A shard's slots are reserved address space until it grows into them:
/// a table that may hold 2^20 entries in each of nine shards commits
/// memory only for the slots it uses (measured in this process's RSS).
#[test]
#[cfg_attr(
    miri,
    ignore = "Miri has no mprotect: it allocates the whole reservation"
)]
fn reserved_slots_cost_no_memory_until_used() {
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
    let ledger = Ledger::new(1000);
    let before = rss_kib();
    // 9 shards x 2^20 slots x (12 B + the value): over 300 MiB if committed.
    let table = table(8, 64, 1 << 20);
    let fds: Vec<Fd> = (0..1000)
        .map(|id| table.insert(ledger.value(id)).unwrap())
        .collect();
    // Committed eagerly it would be over 300 MiB; a bound of 32 MiB leaves
    // room for tests running beside this one under `cargo test`.
    let grown = rss_kib().saturating_sub(before);
    assert!(
        grown < 32 * 1024,
        "RSS grew by {grown} KiB for 1000 entries"
    );
    for fd in fds {
        table.close(fd).unwrap();
    }
    drop(table);
    assert_eq!(ledger.leaks(), 0);
}
