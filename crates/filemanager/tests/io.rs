//! Reads, opens and escapes on both backends, on current-thread and
//! multi-thread runtimes.
// The symlink, FIFO and fadvise tests are Unix's; tests/windows.rs has
// Windows' own.
#![cfg_attr(windows, allow(dead_code, unused_imports))]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use filemanager::{BackendKind, OpenError, Opened, SymlinkPolicy};

fn check_reads(fm: &filemanager::FileManager, rt: &tokio::runtime::Runtime, data: &[u8]) {
    rt.block_on(async {
        let Opened::File(f) = fm.open("data.bin").await.unwrap() else {
            panic!("not a file")
        };
        assert_eq!(f.meta().size, data.len() as u64);
        for (off, len) in [
            (0u64, 4096usize),
            (1, 10),
            (4095, 2),
            (100_000, 65_536),
            (data.len() as u64 - 5, 5),
        ] {
            let b = fm.read_at(&f, off, len).await.unwrap();
            assert_eq!(
                &b[..],
                &data[off as usize..off as usize + len],
                "offset {off} len {len}"
            );
        }
        // Across EOF: short; at and past EOF: empty.
        let b = fm.read_at(&f, data.len() as u64 - 3, 100).await.unwrap();
        assert_eq!(&b[..], &data[data.len() - 3..]);
        assert!(fm
            .read_at(&f, data.len() as u64, 10)
            .await
            .unwrap()
            .is_empty());
        assert!(fm
            .read_at(&f, data.len() as u64 + 1000, 10)
            .await
            .unwrap()
            .is_empty());
        // read_into with a caller buffer.
        let mut buf = vec![0u8; 777];
        let n = fm.read_into(&f, 12_345, &mut buf).await.unwrap();
        assert_eq!(n, 777);
        assert_eq!(&buf[..], &data[12_345..12_345 + 777]);
        // Uncached handle.
        let h = fm.open_uncached("/data.bin").await.unwrap();
        let b = fm.read_at(&h, 7, 1000).await.unwrap();
        assert_eq!(&b[..], &data[7..1007]);
        h.close().await.unwrap();
        // Second cached open is a hit.
        let before = fm.stats().cache.hits;
        let Opened::File(_g) = fm.open("data.bin").await.unwrap() else {
            panic!()
        };
        assert!(fm.stats().cache.hits > before);
    });
}

#[test]
fn read_at_offsets_and_eof_on_every_backend_and_runtime() {
    let t = Tree::create();
    let data = pattern(300_000);
    std::fs::write(t.path("data.bin"), &data).unwrap();
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        check_reads(&fm, &current_thread(), &data);
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        check_reads(&fm, &multi_thread(), &data);
        assert!(fm.stats().io.read_bytes > 0);
    }
}

#[test]
fn many_current_thread_runtimes_share_one_manager() {
    let t = Tree::create();
    let data = pattern(1 << 20);
    std::fs::write(t.path("data.bin"), &data).unwrap();
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        let data = Arc::new(data.clone());
        let threads: Vec<_> = (0..3)
            .map(|w| {
                let fm = fm.clone();
                let data = Arc::clone(&data);
                std::thread::spawn(move || {
                    current_thread().block_on(async {
                        for i in 0..500u64 {
                            let Opened::File(f) = fm.open("data.bin").await.unwrap() else {
                                panic!()
                            };
                            let off = (i * 7919 + w * 104_729) % (data.len() as u64 - 4096);
                            let b = fm.read_at(&f, off, 4096).await.unwrap();
                            assert_eq!(&b[..], &data[off as usize..off as usize + 4096]);
                        }
                    })
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}

/// Writes `len` pattern bytes to `name` and syncs them, so the pages are
/// clean and `POSIX_FADV_DONTNEED` can drop them (reads then go async).
fn write_synced(t: &Tree, name: &str, len: usize) -> Vec<u8> {
    let data = pattern(len);
    std::fs::write(t.path(name), &data).unwrap();
    std::fs::File::open(t.path(name))
        .unwrap()
        .sync_all()
        .unwrap();
    data
}

#[cfg(unix)]
#[test]
fn uncached_and_async_reads_survive_dropped_futures() {
    // A read of data that is not in the page cache goes asynchronous; its
    // future is dropped after one poll, and the ring must keep the buffer
    // until the completion arrives, then keep working.
    let t = Tree::create();
    let data = write_synced(&t, "big.bin", 8 << 20);
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        current_thread().block_on(async {
            for round in 0..20 {
                let h = fm.open_uncached("big.bin").await.unwrap();
                // SAFETY: fadvise takes no pointers; the fd is open for the call.
                unsafe {
                    libc::posix_fadvise(
                        std::os::fd::AsRawFd::as_raw_fd(&h),
                        0,
                        0,
                        libc::POSIX_FADV_DONTNEED,
                    )
                };
                {
                    let fut = fm.read_at(&h, 0, 8 << 20);
                    let mut fut = std::pin::pin!(fut);
                    let _ =
                        std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx)))
                            .await;
                    // dropped here, possibly mid-flight
                }
                if round % 2 == 0 {
                    drop(h);
                } else {
                    h.close().await.unwrap();
                }
                let h = fm.open_uncached("big.bin").await.unwrap();
                let b = fm.read_at(&h, 4_000_000, 65_536).await.unwrap();
                assert_eq!(&b[..], &data[4_000_000..4_065_536]);
                // SAFETY: as above.
                unsafe {
                    libc::posix_fadvise(
                        std::os::fd::AsRawFd::as_raw_fd(&h),
                        0,
                        0,
                        libc::POSIX_FADV_DONTNEED,
                    )
                };
                // Cold read awaited to completion: the async path.
                let b = fm.read_at(&h, 1_000_000, 1 << 20).await.unwrap();
                assert_eq!(&b[..], &data[1_000_000..1_000_000 + (1 << 20)]);
                // Cached at its start only (by the read above): read inline
                // up to where the page cache ends, the rest asynchronously,
                // into one buffer.
                let b = fm.read_at(&h, 1_500_000, 2 << 20).await.unwrap();
                assert_eq!(&b[..], &data[1_500_000..1_500_000 + (2 << 20)]);
            }
        });
        let io = fm.stats().io;
        eprintln!("{backend:?}: {io:?}");
        assert!(io.ops[3] > 0, "no read took the asynchronous path: {io:?}");
    }
}

use std::future::Future;

fn expect_denied(fm: &filemanager::FileManager, path: &str) {
    let rt = current_thread();
    rt.block_on(async {
        match fm.open(path).await {
            Ok(Opened::Forbidden) | Ok(Opened::NotFound) => {}
            Ok(Opened::File(f)) => {
                let b = fm.read_at(&f, 0, 100).await.unwrap();
                panic!("{path} opened, content {:?}", String::from_utf8_lossy(&b));
            }
            other => panic!("{path}: unexpected {other:?}"),
        }
        match fm.open_uncached(path).await {
            Err(OpenError::Forbidden) | Err(OpenError::NotFound) => {}
            other => panic!("{path} uncached: unexpected {other:?}"),
        }
    });
}

#[cfg(unix)]
#[test]
fn opens_stay_beneath_the_root_under_every_policy() {
    let t = Tree::create();
    let secret = t.base.path().join("secret.txt");
    std::os::unix::fs::symlink(&secret, t.path("abs_link")).unwrap();
    std::os::unix::fs::symlink("..", t.path("up")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", t.path("rel_out")).unwrap();
    std::os::unix::fs::symlink("inside.txt", t.path("rel_in")).unwrap();
    std::os::unix::fs::symlink("/proc/self/root/etc/passwd", t.path("magic")).unwrap();
    for backend in backends(&t.root) {
        for policy in [
            SymlinkPolicy::Deny,
            SymlinkPolicy::WithinRoot,
            SymlinkPolicy::Follow,
        ] {
            for inline in [false, true] {
                let fm = manager_with(&t.root, backend, policy, inline);
                for p in [
                    "../secret.txt",
                    "sub/../../secret.txt",
                    "/../secret.txt",
                    "abs_link",
                    "up/secret.txt",
                    "up/root/../secret.txt",
                    "rel_out",
                    "magic",
                    "sub/\0x",
                ] {
                    expect_denied(&fm, p);
                }
                let rt = current_thread();
                rt.block_on(async {
                    let r = fm.open("rel_in").await.unwrap();
                    match policy {
                        SymlinkPolicy::Deny => assert!(matches!(r, Opened::Forbidden), "{r:?}"),
                        _ => {
                            let Opened::File(f) = r else {
                                panic!("{policy:?}: {r:?}")
                            };
                            assert_eq!(&fm.read_at(&f, 0, 100).await.unwrap()[..], b"inside");
                        }
                    }
                    // Follow: `up/sub/secret.txt` is clamped to <root>/sub/secret.txt.
                    if policy == SymlinkPolicy::Follow {
                        let Opened::File(f) = fm.open("up/sub/secret.txt").await.unwrap() else {
                            panic!()
                        };
                        assert_eq!(&fm.read_at(&f, 0, 100).await.unwrap()[..], b"sub-inside");
                    }
                    assert!(matches!(fm.open("sub").await.unwrap(), Opened::IsDir));
                    assert!(matches!(fm.open("").await.unwrap(), Opened::IsDir));
                    assert!(matches!(
                        fm.open("nope.txt").await.unwrap(),
                        Opened::NotFound
                    ));
                    assert!(matches!(
                        fm.stat("nope.txt").await,
                        Err(OpenError::NotFound)
                    ));
                    assert_eq!(fm.stat("inside.txt").await.unwrap().size, 6);
                });
            }
        }
    }
}

#[cfg(unix)]
#[test]
fn fifo_in_the_tree_is_refused_without_blocking() {
    let t = Tree::create();
    let c = std::ffi::CString::new(t.path("pipe").to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    for backend in backends(&t.root) {
        for inline in [false, true] {
            let fm = manager_with(&t.root, backend, SymlinkPolicy::WithinRoot, inline);
            current_thread().block_on(async {
                assert!(matches!(fm.open("pipe").await.unwrap(), Opened::Forbidden));
            });
        }
    }
}

#[cfg(unix)]
#[test]
fn symlink_swapped_during_open_never_yields_outside_bytes() {
    let t = Tree::create();
    for backend in backends(&t.root) {
        for policy in [
            SymlinkPolicy::WithinRoot,
            SymlinkPolicy::Follow,
            SymlinkPolicy::Deny,
        ] {
            for inline in [false, true] {
                let fm = manager_with(&t.root, backend, policy, inline);
                let stop = Arc::new(AtomicBool::new(false));
                let root = t.root.clone();
                let swapper = {
                    let stop = Arc::clone(&stop);
                    std::thread::spawn(move || {
                        let mut i = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            // File link and directory link, each flipping between
                            // an inside and an outside target, replaced atomically.
                            let (f, d) = if i % 2 == 0 {
                                ("inside.txt", "sub")
                            } else {
                                ("../secret.txt", "..")
                            };
                            let _ = std::fs::remove_file(root.join("tmp_f"));
                            let _ = std::fs::remove_file(root.join("tmp_d"));
                            std::os::unix::fs::symlink(f, root.join("tmp_f")).unwrap();
                            std::os::unix::fs::symlink(d, root.join("tmp_d")).unwrap();
                            std::fs::rename(root.join("tmp_f"), root.join("link")).unwrap();
                            std::fs::rename(root.join("tmp_d"), root.join("dlink")).unwrap();
                            i += 1;
                        }
                    })
                };
                let rt = current_thread();
                let mut inside_hits = 0;
                rt.block_on(async {
                    // At least 1500 rounds; more (up to 10 s) while no open has
                    // hit the inside target yet: with io_uring and `follow`,
                    // a swap storm can fail every `..` step with EAGAIN for a
                    // while on a loaded 2-core machine.
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    let mut round = 0;
                    while round < 1500
                        || (inside_hits == 0
                            && policy != SymlinkPolicy::Deny
                            && std::time::Instant::now() < deadline)
                    {
                        round += 1;
                        for p in ["link", "dlink/secret.txt"] {
                            if let Ok(h) = fm.open_uncached(p).await {
                                let b = fm.read_at(&h, 0, 64).await.unwrap();
                                assert!(
                                !b.starts_with(b"SECRET"),
                                "{backend:?}/{policy:?}/inline {inline}: read outside bytes via {p}"
                            );
                                inside_hits += 1;
                                h.close().await.unwrap();
                            }
                        }
                    }
                });
                stop.store(true, Ordering::Relaxed);
                swapper.join().unwrap();
                eprintln!(
                "{backend:?}/{policy:?}/inline {inline}: {inside_hits} inside opens during swaps"
            );
                if policy != SymlinkPolicy::Deny {
                    assert!(inside_hits > 0, "the race never hit the inside target");
                }
            }
        }
    }
}

#[test]
fn parse_kinds() {
    assert_eq!("auto".parse::<BackendKind>().unwrap(), BackendKind::Auto);
    assert_eq!("uring".parse::<BackendKind>().unwrap(), BackendKind::Uring);
    assert_eq!(
        "blocking".parse::<BackendKind>().unwrap(),
        BackendKind::Blocking
    );
    assert!("x".parse::<BackendKind>().is_err());
    assert_eq!(
        "deny".parse::<SymlinkPolicy>().unwrap(),
        SymlinkPolicy::Deny
    );
    assert_eq!(
        "within_root".parse::<SymlinkPolicy>().unwrap(),
        SymlinkPolicy::WithinRoot
    );
    assert_eq!(
        "follow".parse::<SymlinkPolicy>().unwrap(),
        SymlinkPolicy::Follow
    );
    assert!("yes".parse::<SymlinkPolicy>().is_err());
}

#[test]
fn auto_picks_a_backend_and_says_why() {
    let t = Tree::create();
    let mut cfg = filemanager::Config::new(&t.root);
    cfg.backend = BackendKind::Auto;
    let fm = filemanager::FileManager::new(cfg).unwrap();
    let (kind, why) = fm.backend();
    eprintln!("auto chose {kind:?}: {why}");
    if cfg!(target_os = "linux") {
        assert!(matches!(kind, BackendKind::Uring | BackendKind::Blocking));
    } else {
        assert_eq!(kind, BackendKind::Portable);
    }
    assert!(!why.is_empty());
    assert!(fm.fd_budget() > 0 && (fm.fd_budget() as u64) < fm.fd_limit());
}

#[test]
fn a_miss_costs_one_open_and_a_hit_costs_no_io() {
    let t = Tree::create();
    std::fs::write(t.path("big.bin"), pattern(100_000)).unwrap();
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        current_thread().block_on(async {
            let Opened::File(f) = fm.open("big.bin").await.unwrap() else {
                panic!()
            };
            drop(f);
            let after_miss = fm.stats().io;
            eprintln!("{backend:?} after one miss: {after_miss:?}");
            assert_eq!(after_miss.ops[0], 1, "opens");
            for _ in 0..100 {
                let Opened::File(f) = fm.open("big.bin").await.unwrap() else {
                    panic!()
                };
                drop(f);
            }
            assert_eq!(fm.stats().io, after_miss, "cache hits must not do I/O");
        });
    }
}

/// A small file's miss also reads its bytes into the cache; checking that
/// the copy is of one version must not walk the path again: one open, two
/// stats (before and after the read, both of the open descriptor).
#[test]
fn a_small_file_costs_one_open_and_is_copied_on_its_second_use() {
    let t = Tree::create();
    for backend in backends(&t.root) {
        for inline in [false, true] {
            let fm = manager_with(&t.root, backend, SymlinkPolicy::WithinRoot, inline);
            current_thread().block_on(async {
                let Opened::File(f) = fm.open("inside.txt").await.unwrap() else {
                    panic!()
                };
                assert_eq!(f.bytes(), None, "not copied at the first use");
                drop(f);
                let io = fm.stats().io;
                eprintln!("{backend:?}/inline {inline} after one small miss: {io:?}");
                assert_eq!(io.ops[0], 1, "opens");
                assert_eq!(io.ops[1], 1, "stats: the opened descriptor's");
                assert_eq!(io.ops[2] + io.ops[3], 0, "reads");
                let Opened::File(f) = fm.open("inside.txt").await.unwrap() else {
                    panic!()
                };
                assert_eq!(f.bytes().map(|b| b.to_vec()), Some(b"inside".to_vec()));
                let io = fm.stats().io;
                assert_eq!(io.ops[0], 1, "the copy reads through the cached descriptor");
                assert_eq!(io.ops[1], 2, "and checks it with one fstat");
                assert_eq!(io.ops[2] + io.ops[3], 1, "one read");
            });
        }
    }
}

#[test]
fn stress_multi_thread_runtime_with_cancellations() {
    // Many tasks on a multi-thread runtime open, read, drop and cancel
    // concurrently; tasks migrate between workers, so completions are reaped
    // by whichever thread polls. Every completed read must be correct.
    let t = Tree::create();
    let data = Arc::new(pattern(4 << 20));
    std::fs::write(t.path("data.bin"), &*data).unwrap();
    for i in 0..16 {
        std::fs::write(t.path(&format!("f{i}")), format!("file {i}")).unwrap();
    }
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        let rt = multi_thread();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for w in 0..8u64 {
                let fm = fm.clone();
                let data = Arc::clone(&data);
                tasks.push(tokio::spawn(async move {
                    let mut x = w + 1;
                    for _ in 0..300 {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let name = format!("f{}", (x >> 33) % 16);
                        match (x >> 40) % 4 {
                            0 => {
                                let Opened::File(f) = fm.open(&name).await.unwrap() else {
                                    panic!()
                                };
                                let b = fm.read_at(&f, 0, 64).await.unwrap();
                                assert_eq!(&b[..], format!("file {}", (x >> 33) % 16).as_bytes());
                            }
                            1 => {
                                let h = fm.open_uncached("data.bin").await.unwrap();
                                let off = (x >> 20) % (data.len() as u64 - 8192);
                                let b = fm.read_at(&h, off, 8192).await.unwrap();
                                assert_eq!(&b[..], &data[off as usize..off as usize + 8192]);
                                if x & 1 == 0 {
                                    h.close().await.unwrap();
                                }
                            }
                            2 => {
                                // Cancelled mid-flight (or not even started).
                                let h = fm.open_uncached("data.bin").await.unwrap();
                                let _ = tokio::time::timeout(
                                    std::time::Duration::from_micros(1),
                                    fm.read_at(&h, 0, 1 << 20),
                                )
                                .await;
                                let _ = tokio::time::timeout(
                                    std::time::Duration::from_micros(1),
                                    fm.open_uncached(&name),
                                )
                                .await;
                            }
                            _ => {
                                fm.invalidate(&name);
                                tokio::task::yield_now().await;
                            }
                        }
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        });
        drop(rt);
        fm.reap();
        let st = fm.stats();
        eprintln!("{backend:?}: {st:?}");
    }
}

#[test]
fn metadata_only_entries_still_serve_a_descriptor() {
    let t = Tree::create();
    let mut cfg = filemanager::Config::new(&t.root);
    cfg.cache.min_uses = 3;
    for backend in backends(&t.root) {
        cfg.backend = backend;
        let fm = filemanager::FileManager::new(cfg.clone()).unwrap();
        current_thread().block_on(async {
            for _ in 0..5 {
                let Opened::File(f) = fm.open("inside.txt").await.unwrap() else {
                    panic!()
                };
                assert_eq!(f.meta().size, 6);
                assert_eq!(&fm.read_at(&f, 0, 100).await.unwrap()[..], b"inside");
            }
        });
        assert_eq!(fm.stats().cache.open_handles, 1);
    }
}

#[cfg(unix)]
#[test]
fn a_thread_switching_runtimes_still_gets_completions() {
    // Runtime A stays alive but idle while the same thread drives runtime B:
    // B's asynchronous completions must not depend on A's driver.
    let t = Tree::create();
    let data = write_synced(&t, "big.bin", 4 << 20);
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        let a = current_thread();
        a.block_on(async {
            let h = fm.open_uncached("big.bin").await.unwrap();
            assert_eq!(fm.read_at(&h, 0, 10).await.unwrap().len(), 10);
        });
        let b = current_thread();
        b.block_on(async {
            let h = fm.open_uncached("big.bin").await.unwrap();
            // SAFETY: fadvise takes no pointers; the fd is open for the call.
            unsafe {
                libc::posix_fadvise(
                    std::os::fd::AsRawFd::as_raw_fd(&h),
                    0,
                    0,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            let r = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                fm.read_at(&h, 0, 2 << 20),
            )
            .await;
            let bytes = r.expect("cold read hung on a runtime switch").unwrap();
            assert_eq!(&bytes[..], &data[..2 << 20]);
        });
        drop(a);
    }
}

#[test]
fn reused_descriptor_slots_never_read_the_previous_file() {
    // The io_uring fixed-file slot of a descriptor is reused by the next
    // file that gets the same table slot; every read must see its own file,
    // whether the previous one was closed, dropped (deferred), or evicted.
    let t = Tree::create();
    for i in 0..4 {
        std::fs::write(t.path(&format!("v{i}")), format!("version-{i}").repeat(100)).unwrap();
    }
    for backend in backends(&t.root) {
        let fm = manager(&t.root, backend, SymlinkPolicy::WithinRoot);
        current_thread().block_on(async {
            for round in 0..2000usize {
                let i = round % 4;
                let want = format!("version-{i}");
                let h = fm.open_uncached(&format!("v{i}")).await.unwrap();
                let b = fm.read_at(&h, 0, want.len()).await.unwrap();
                assert_eq!(&b[..], want.as_bytes(), "round {round}");
                match round % 3 {
                    0 => h.close().await.unwrap(),
                    1 => drop(h),
                    _ => {
                        drop(h);
                        fm.reap();
                    }
                }
                if round % 7 == 0 {
                    let Opened::File(f) = fm.open(&format!("v{}", (i + 1) % 4)).await.unwrap()
                    else {
                        panic!()
                    };
                    let want = format!("version-{}", (i + 1) % 4);
                    assert_eq!(
                        &fm.read_at(&f, 90, want.len()).await.unwrap()[..],
                        want.as_bytes()
                    );
                    fm.invalidate(&format!("v{}", (i + 1) % 4));
                }
            }
        });
        let st = fm.stats();
        eprintln!("{backend:?}: {:?}", st.io);
    }
}
