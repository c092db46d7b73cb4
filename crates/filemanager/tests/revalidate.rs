//! Revalidation of cached descriptors: an entry older than `valid` is
//! checked with one `statx` of its path and no open, and any answer other
//! than "the same file" goes through the confined lookup again, so a path
//! that now leads outside the root is never served.

mod common;

use std::time::Duration;

use common::{backends, current_thread, Tree};
use filemanager::{BackendKind, Config, FileManager, Opened, SymlinkPolicy};

const VALID: Duration = Duration::from_millis(30);

/// Descriptors only (no bytes in memory), entries trusted for `VALID`.
fn manager(t: &Tree, backend: BackendKind, policy: SymlinkPolicy) -> FileManager {
    let mut cfg = Config::new(&t.root);
    cfg.backend = backend;
    cfg.symlinks = policy;
    cfg.inline_cached_opens = false;
    cfg.shards = 2;
    cfg.cache.valid = VALID;
    cfg.cache.small_file_max = 0;
    FileManager::new(cfg).unwrap()
}

fn opens(fm: &FileManager) -> u64 {
    fm.stats().io.ops[0]
}

async fn contents(fm: &FileManager, path: &str) -> Option<Vec<u8>> {
    match fm.open(path).await.unwrap() {
        Opened::File(f) => Some(fm.read_at(&f, 0, 100).await.unwrap().to_vec()),
        _ => None,
    }
}

#[test]
fn revalidating_a_cached_descriptor_opens_nothing() {
    assert_eq!(filemanager::BackendStats::ops_labels()[0], "open");
    let t = Tree::create();
    for backend in backends(&t.root) {
        let fm = manager(&t, backend, SymlinkPolicy::WithinRoot);
        current_thread().block_on(async {
            assert_eq!(contents(&fm, "inside.txt").await.unwrap(), b"inside");
            let (opens_before, revalidations) = (opens(&fm), fm.stats().cache.revalidations);
            for _ in 0..3 {
                tokio::time::sleep(VALID * 2).await;
                assert_eq!(contents(&fm, "inside.txt").await.unwrap(), b"inside");
            }
            let st = fm.stats();
            assert_eq!(st.cache.revalidations, revalidations + 3, "{backend:?}");
            assert_eq!(
                opens(&fm),
                opens_before,
                "{backend:?}: a revalidation opened"
            );
            assert_eq!(st.cache.misses, 1, "{backend:?}");
        });
    }
}

/// Under `Deny` no walk may follow a link, so each revalidation is the
/// confined `O_PATH` lookup.
#[test]
fn under_deny_every_revalidation_is_confined() {
    let t = Tree::create();
    for backend in backends(&t.root) {
        let fm = manager(&t, backend, SymlinkPolicy::Deny);
        current_thread().block_on(async {
            assert_eq!(contents(&fm, "inside.txt").await.unwrap(), b"inside");
            let opens_before = opens(&fm);
            for _ in 0..3 {
                tokio::time::sleep(VALID * 2).await;
                assert_eq!(contents(&fm, "inside.txt").await.unwrap(), b"inside");
            }
            assert_eq!(opens(&fm), opens_before + 3, "{backend:?}");
        });
    }
}

#[test]
fn a_file_renamed_over_its_path_is_reloaded() {
    if common::skip_on_wine("a rename over an open file (POSIX semantics, Windows 10+)") {
        return;
    }
    let t = Tree::create();
    for backend in backends(&t.root) {
        let fm = manager(&t, backend, SymlinkPolicy::WithinRoot);
        current_thread().block_on(async {
            std::fs::write(t.path("page.txt"), b"old").unwrap();
            assert_eq!(contents(&fm, "page.txt").await.unwrap(), b"old");
            std::fs::write(t.path("page.new"), b"new").unwrap();
            std::fs::rename(t.path("page.new"), t.path("page.txt")).unwrap();
            tokio::time::sleep(VALID * 2).await;
            assert_eq!(
                contents(&fm, "page.txt").await.unwrap(),
                b"new",
                "{backend:?}"
            );
        });
    }
}

/// A directory of a cached path swapped for a symlink to the outside: the
/// unconfined `statx` of the revalidation walks out and finds another file,
/// and the confined lookup that follows refuses the path.
#[cfg(unix)]
#[test]
fn a_directory_swapped_for_a_link_outside_is_not_followed() {
    let t = Tree::create();
    for backend in backends(&t.root) {
        for policy in [
            SymlinkPolicy::Deny,
            SymlinkPolicy::WithinRoot,
            SymlinkPolicy::Follow,
        ] {
            let fm = manager(&t, backend, policy);
            current_thread().block_on(async {
                std::fs::create_dir(t.path("d")).unwrap();
                std::fs::write(t.path("d/secret.txt"), b"d-inside").unwrap();
                assert_eq!(contents(&fm, "d/secret.txt").await.unwrap(), b"d-inside");
                std::fs::rename(t.path("d"), t.path("d.old")).unwrap();
                std::os::unix::fs::symlink(t.base.path(), t.path("d")).unwrap();
                tokio::time::sleep(VALID * 2).await;
                let got = contents(&fm, "d/secret.txt").await;
                assert_eq!(got, None, "{backend:?} {policy:?}: served {got:?}");
                std::fs::remove_file(t.path("d")).unwrap();
                std::fs::remove_dir_all(t.path("d.old")).unwrap();
            });
        }
    }
}

fn stats_ops(fm: &FileManager) -> u64 {
    assert_eq!(filemanager::BackendStats::ops_labels()[1], "stat");
    fm.stats().io.ops[1]
}

fn watching(t: &Tree, watch: bool) -> FileManager {
    let mut cfg = Config::new(&t.root);
    cfg.backend = common::pool_backend();
    cfg.cache.small_file_max = 0;
    cfg.watch_changes = watch;
    FileManager::new(cfg).unwrap()
}

/// `path` as a request resolves it (with the per-request check).
async fn resolved(fm: &FileManager, path: &str) -> filemanager::ResolvedFile {
    let q = filemanager::Query {
        path,
        dir_only: false,
        siblings: &[],
        index: &[],
        listing: None,
        check_files_over: 0,
    };
    match fm.resolve(&q).await.unwrap() {
        filemanager::Resolved::File(r) => r,
        other => panic!("{path}: {other:?}"),
    }
}

/// With the watcher on and nothing changing, a descriptor is not stat'ed
/// per request; without it, every request stats it.
#[test]
fn an_unchanged_tree_is_not_stated_per_request() {
    let t = Tree::create();
    for watch in [true, false] {
        let fm = watching(&t, watch);
        current_thread().block_on(async {
            resolved(&fm, "inside.txt").await;
            let before = stats_ops(&fm);
            for _ in 0..10 {
                let r = resolved(&fm, "inside.txt").await;
                assert_eq!(&fm.read_at(&r.file, 0, 100).await.unwrap()[..], b"inside");
            }
            // Only Linux has the watcher; elsewhere every request stats.
            let watched = watch && cfg!(target_os = "linux");
            let per_request = if watched { 0 } else { 1 };
            assert_eq!(stats_ops(&fm) - before, 10 * per_request, "watch={watch}");
            assert_eq!(fm.stats().watch.is_some(), watched);
        });
    }
}

/// A request answered with a precompressed sibling checks the sibling it
/// sends, not the path's own file, which nothing sends: without the
/// watcher that is one stat a request, not two. The file is still checked
/// when it is what goes.
#[test]
fn a_sibling_sent_instead_leaves_the_file_itself_unchecked() {
    let t = Tree::create();
    std::fs::write(t.path("app.js"), b"plain text").unwrap();
    std::fs::write(t.path("app.js.br"), b"br bytes").unwrap();
    let fm = watching(&t, false);
    current_thread().block_on(async {
        for (accepted, sent) in [(true, &b"br bytes"[..]), (false, &b"plain text"[..])] {
            let siblings = [filemanager::Sibling {
                suffix: ".br",
                accepted,
            }];
            let q = filemanager::Query {
                path: "app.js",
                dir_only: false,
                siblings: &siblings,
                index: &[],
                listing: None,
                check_files_over: 0,
            };
            let before = stats_ops(&fm);
            for _ in 0..10 {
                let filemanager::Resolved::File(r) = fm.resolve(&q).await.unwrap() else {
                    panic!("app.js: not a file");
                };
                assert_eq!(r.sibling, accepted.then_some(0));
                assert_eq!(&fm.read_at(&r.file, 0, 100).await.unwrap()[..], sent);
            }
            // The first request loads the files (a stat each) and checks
            // neither; each one after it checks the one it sends.
            let stats = stats_ops(&fm) - before;
            assert!(
                (10..=11).contains(&stats),
                "accepted={accepted}: {stats} stats"
            );
        }
    });
}

/// The request that opens a file took its metadata from that descriptor
/// just now: it is not stat'ed a second time, with or without the watcher.
#[test]
fn the_request_that_loads_a_file_stats_it_once() {
    let t = Tree::create();
    for watch in [true, false] {
        let fm = watching(&t, watch);
        current_thread().block_on(async {
            let before = stats_ops(&fm);
            let r = resolved(&fm, "inside.txt").await;
            assert_eq!(&fm.read_at(&r.file, 0, 100).await.unwrap()[..], b"inside");
            assert_eq!(stats_ops(&fm) - before, 1, "watch={watch}");
        });
    }
}

/// A file rewritten in place (same size, so only the times tell) while its
/// descriptor is trusted: the event voids the trust, the next request
/// stats the descriptor, sees the new version and reloads it.
#[cfg(target_os = "linux")]
#[test]
fn an_in_place_rewrite_is_seen_at_once_with_the_watcher() {
    let t = Tree::create();
    std::fs::write(t.path("page.txt"), b"version-1").unwrap();
    let fm = watching(&t, true);
    current_thread().block_on(async {
        let Opened::File(f) = fm.open("page.txt").await.unwrap() else {
            panic!()
        };
        let old = *f.meta();
        drop(f);
        let events = fm.stats().watch.unwrap().events;
        // A later mtime, whatever the filesystem's timestamp granularity.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::OpenOptions::new()
            .write(true)
            .open(t.path("page.txt"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"version-2"))
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while fm.stats().watch.unwrap().events == events {
            assert!(std::time::Instant::now() < deadline, "no event");
            std::thread::sleep(Duration::from_millis(5));
        }
        let r = resolved(&fm, "page.txt").await;
        assert_ne!(
            r.file.meta().mtime_ns,
            old.mtime_ns,
            "served the old version"
        );
        assert_eq!(
            &fm.read_at(&r.file, 0, 100).await.unwrap()[..],
            b"version-2"
        );
    });
}

/// A second hard link can change the file from a directory nobody watches:
/// such a file keeps its per-request check.
#[test]
fn a_hard_linked_file_is_stated_per_request() {
    let t = Tree::create();
    std::fs::write(t.path("linked.txt"), b"linked").unwrap();
    std::fs::hard_link(t.path("linked.txt"), t.base.path().join("elsewhere.txt")).unwrap();
    let fm = watching(&t, true);
    current_thread().block_on(async {
        resolved(&fm, "linked.txt").await;
        let before = stats_ops(&fm);
        for _ in 0..5 {
            resolved(&fm, "linked.txt").await;
        }
        assert_eq!(stats_ops(&fm) - before, 5);
    });
}
