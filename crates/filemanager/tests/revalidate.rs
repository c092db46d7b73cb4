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
