//! Windows' confinement (src/sys/windows.rs): the names Windows would
//! rewrite, `..` past the root, links and junctions that lead out, and the
//! listing and real path that go with them. CI runs it under Wine.
#![cfg(windows)]

mod common;

use common::*;
use filemanager::{ForbiddenReason, ListOptions, OpenError, Opened, SymlinkPolicy};

const POLICIES: [SymlinkPolicy; 3] = [
    SymlinkPolicy::Deny,
    SymlinkPolicy::WithinRoot,
    SymlinkPolicy::Follow,
];

async fn body(fm: &filemanager::FileManager, path: &str) -> Result<Vec<u8>, &'static str> {
    match fm.open(path).await {
        Ok(Opened::File(f)) => Ok(fm.read_at(&f, 0, 100).await.unwrap().to_vec()),
        Ok(Opened::IsDir) => Err("directory"),
        Ok(Opened::NotFound) => Err("not found"),
        Ok(Opened::Forbidden) => Err("forbidden"),
        Err(OpenError::NotFound) => Err("not found"),
        Err(OpenError::Forbidden) => Err("forbidden"),
        Err(e) => panic!("{path}: {e:?}"),
    }
}

#[test]
fn names_windows_would_rewrite_name_nothing() {
    let t = Tree::create();
    for policy in POLICIES {
        let fm = manager(&t.root, pool_backend(), policy);
        current_thread().block_on(async {
            assert_eq!(body(&fm, "inside.txt").await.unwrap(), b"inside");
            assert_eq!(body(&fm, "sub/../inside.txt").await.unwrap(), b"inside");
            // NTFS compares names without case, as the site rules do.
            assert_eq!(body(&fm, "INSIDE.TXT").await.unwrap(), b"inside");
            for alias in [
                "inside.txt.",
                "inside.txt ",
                "inside.txt::$DATA",
                "inside.txt:stream",
                "sub\\secret.txt",
                "CON",
                "nul.txt",
                "COM1",
            ] {
                assert_eq!(
                    body(&fm, alias).await,
                    Err("not found"),
                    "{policy:?} {alias:?}"
                );
            }
        });
    }
}

#[test]
fn dot_dot_never_leaves_the_root() {
    let t = Tree::create();
    for policy in [SymlinkPolicy::Deny, SymlinkPolicy::WithinRoot] {
        let fm = manager(&t.root, pool_backend(), policy);
        current_thread().block_on(async {
            for path in [
                "../secret.txt",
                "sub/../../secret.txt",
                "../root/inside.txt",
            ] {
                assert_eq!(body(&fm, path).await, Err("forbidden"), "{policy:?} {path}");
            }
        });
    }
    // Follow clamps `..` at the root, as RESOLVE_IN_ROOT does.
    let fm = manager(&t.root, pool_backend(), SymlinkPolicy::Follow);
    current_thread().block_on(async {
        assert_eq!(body(&fm, "../inside.txt").await.unwrap(), b"inside");
        assert_eq!(body(&fm, "../secret.txt").await, Err("not found"));
    });
}

/// A tree with links: Tree's files, and `out_file` (to the secret beside
/// the root), `out_dir` (to the directory holding the root), `in_file`
/// and `in_dir` (to a file and a directory inside). Made here with
/// Windows links where the process may create them (developer mode or the
/// privilege); under Wine, whose CreateSymbolicLinkW makes nothing, taken
/// from `FILEMANAGER_LINK_TREE`, the same tree made with `ln -s` by
/// scripts/windows-tests.sh (Wine resolves Unix links as Windows does
/// reparse points, final paths included).
fn link_tree() -> Option<(Option<Tree>, std::path::PathBuf)> {
    use std::os::windows::fs::{symlink_dir, symlink_file};
    let t = Tree::create();
    let secret = t.base.path().join("secret.txt");
    let made = symlink_file(&secret, t.path("out_file"))
        .and_then(|()| symlink_dir(t.base.path(), t.path("out_dir")))
        .and_then(|()| symlink_file(t.path("inside.txt"), t.path("in_file")))
        .and_then(|()| symlink_dir(t.path("sub"), t.path("in_dir")));
    if made.is_ok() && std::fs::read(t.path("in_file")).is_ok() {
        let root = t.root.clone();
        return Some((Some(t), root));
    }
    match std::env::var_os("FILEMANAGER_LINK_TREE") {
        Some(base) => Some((None, std::path::Path::new(&base).join("root"))),
        None => {
            eprintln!("SKIP: cannot create links here ({made:?}) and no FILEMANAGER_LINK_TREE");
            None
        }
    }
}

/// Links: one out of the root is refused under every policy, one inside is
/// refused under `deny` only, the real path names where the file really is,
/// and a listing leaves out what leads outside.
#[test]
fn links_out_of_the_root_are_refused() {
    let Some((_tree, root)) = link_tree() else {
        return;
    };
    for policy in POLICIES {
        let fm = manager(&root, pool_backend(), policy);
        current_thread().block_on(async {
            for path in ["out_file", "out_dir/secret.txt"] {
                let got = body(&fm, path).await;
                assert_eq!(got, Err("forbidden"), "{policy:?} {path}");
                assert_eq!(
                    fm.why_forbidden(path).await,
                    ForbiddenReason::LeavesRoot,
                    "{policy:?} {path}"
                );
            }
            // A link is judged by where it leads: out and back in is inside
            // (Linux's within_root refuses an absolute link's spelling).
            let inside = [
                ("in_file", &b"inside"[..]),
                ("in_dir/secret.txt", b"sub-inside"),
                ("out_dir/root/inside.txt", b"inside"),
            ];
            for (path, want) in inside {
                let got = body(&fm, path).await;
                if policy == SymlinkPolicy::Deny {
                    assert_eq!(got, Err("forbidden"), "{path}");
                    assert_eq!(fm.why_forbidden(path).await, ForbiddenReason::Symlink);
                } else {
                    assert_eq!(got.as_deref(), Ok(want), "{policy:?} {path}");
                }
            }
            if policy != SymlinkPolicy::Deny {
                let Ok(Opened::File(f)) = fm.open("in_dir/secret.txt").await else {
                    panic!("in_dir/secret.txt")
                };
                assert_eq!(fm.real_path(&f), Some("sub/secret.txt"));
            }
            let listing = fm.list_dir("", ListOptions::default()).await.unwrap();
            let names: Vec<&str> = listing.entries.iter().map(|e| e.name.as_str()).collect();
            assert!(names.contains(&"inside.txt"), "{names:?}");
            assert!(
                !names.contains(&"out_file") && !names.contains(&"out_dir"),
                "{names:?}"
            );
            assert_eq!(
                names.contains(&"in_file"),
                policy != SymlinkPolicy::Deny,
                "{names:?}"
            );
        });
    }
}

#[test]
fn a_listing_names_what_the_directory_holds() {
    let t = Tree::create();
    std::fs::write(t.path("big.bin"), vec![0u8; 5000]).unwrap();
    std::fs::write(t.path(".hidden"), b"h").unwrap();
    let fm = manager(&t.root, pool_backend(), SymlinkPolicy::WithinRoot);
    current_thread().block_on(async {
        let listing = fm.list_dir("", ListOptions::default()).await.unwrap();
        let entries: Vec<(&str, u64)> = listing
            .entries
            .iter()
            .map(|e| (e.name.as_str(), e.size))
            .collect();
        assert_eq!(entries[0].0, "sub", "directories first: {entries:?}");
        assert!(entries.contains(&("big.bin", 5000)), "{entries:?}");
        assert!(entries.contains(&("inside.txt", 6)), "{entries:?}");
        assert!(!entries.iter().any(|(n, _)| *n == ".hidden"), "{entries:?}");
        let sub = fm.list_dir("sub", ListOptions::default()).await.unwrap();
        assert_eq!(sub.entries.len(), 1);
        assert_eq!(sub.entries[0].name, "secret.txt");
        assert!(fm.list_dir("../", ListOptions::default()).await.is_err());
    });
}
