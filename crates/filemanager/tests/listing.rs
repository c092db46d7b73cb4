//! `FileManager::list_dir`: confinement and entry resolution under every
//! symlink policy, the entry limit, and errors.
// The symlink, FIFO and fadvise tests are Unix's; tests/windows.rs has
// Windows' own.
#![cfg_attr(windows, allow(dead_code, unused_imports))]

mod common;

use common::*;
use filemanager::{BackendKind, EntryKind, ListOptions, Listing, OpenError, SymlinkPolicy};

const POLICIES: [SymlinkPolicy; 3] = [
    SymlinkPolicy::Deny,
    SymlinkPolicy::WithinRoot,
    SymlinkPolicy::Follow,
];

fn names(l: &Listing) -> Vec<&str> {
    l.entries.iter().map(|e| e.name.as_str()).collect()
}

#[cfg(unix)]
#[test]
fn a_link_out_of_the_root_lists_nothing_outside_it() {
    let t = Tree::create();
    std::os::unix::fs::symlink("/", t.path("slash")).unwrap();
    std::os::unix::fs::symlink("..", t.path("up")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", t.path("rel_out")).unwrap();
    std::os::unix::fs::symlink("inside.txt", t.path("rel_in")).unwrap();
    std::os::unix::fs::symlink("sub", t.path("dir_in")).unwrap();
    let rt = current_thread();
    for policy in POLICIES {
        let fm = manager(&t.root, BackendKind::Blocking, policy);
        rt.block_on(async {
            let root = fm.list_dir("", ListOptions::default()).await.unwrap();
            let listed = names(&root);
            assert!(listed.contains(&"inside.txt"), "{policy:?}: {listed:?}");
            assert!(!listed.contains(&"rel_out"), "{policy:?}: {listed:?}");
            match policy {
                SymlinkPolicy::Deny => {
                    for link in ["slash", "up", "rel_in", "dir_in"] {
                        assert!(!listed.contains(&link), "deny lists {link}");
                    }
                }
                SymlinkPolicy::WithinRoot => {
                    assert!(!listed.contains(&"slash") && !listed.contains(&"up"));
                    assert!(listed.contains(&"rel_in") && listed.contains(&"dir_in"));
                }
                SymlinkPolicy::Follow => {
                    // Both resolve to the root itself, with the root as `/`.
                    for link in ["slash", "up", "rel_in", "dir_in"] {
                        assert!(listed.contains(&link), "follow: {link}: {listed:?}");
                    }
                }
            }
            for dir in ["slash", "up", "slash/etc", "up/up"] {
                match fm.list_dir(dir, ListOptions::default()).await {
                    Ok(l) => {
                        assert_eq!(policy, SymlinkPolicy::Follow, "{dir}");
                        for host in ["proc", "usr", "etc", "secret.txt"] {
                            assert!(!names(&l).contains(&host), "{dir}: {:?}", names(&l));
                        }
                    }
                    Err(e) => assert!(
                        matches!(e, OpenError::Forbidden | OpenError::NotFound),
                        "{policy:?} {dir}: {e}"
                    ),
                }
            }
        });
    }
}

#[cfg(unix)]
#[test]
fn entries_carry_the_target_kind_and_size() {
    let t = Tree::create();
    std::fs::write(t.path("big.bin"), vec![0u8; 5000]).unwrap();
    std::os::unix::fs::symlink("big.bin", t.path("link")).unwrap();
    std::os::unix::fs::symlink("nowhere", t.path("dangling")).unwrap();
    let fifo = std::ffi::CString::new(t.path("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    std::fs::write(t.path(".hidden"), b"h").unwrap();
    let fm = manager(&t.root, BackendKind::Blocking, SymlinkPolicy::WithinRoot);
    let rt = current_thread();
    rt.block_on(async {
        let l = fm.list_dir("", ListOptions::default()).await.unwrap();
        let get = |n: &str| l.entries.iter().find(|e| e.name == n);
        let link = get("link").unwrap();
        assert_eq!((link.kind, link.size), (EntryKind::File, 5000));
        assert_eq!(get("sub").unwrap().kind, EntryKind::Dir);
        assert!(get("dangling").is_none() && get("fifo").is_none() && get(".hidden").is_none());
        assert_eq!(l.entries[0].kind, EntryKind::Dir, "directories first");
        assert!(!l.truncated);
        let opts = ListOptions {
            hidden: true,
            ..ListOptions::default()
        };
        let l = fm.list_dir("", opts).await.unwrap();
        assert!(names(&l).contains(&".hidden"));
        let opts = ListOptions {
            max_entries: 2,
            hidden: false,
        };
        let l = fm.list_dir("", opts).await.unwrap();
        assert!(l.entries.len() <= 2 && l.truncated, "{l:?}");
        assert!(matches!(
            fm.list_dir("inside.txt", ListOptions::default()).await,
            Err(OpenError::NotFound)
        ));
        assert!(matches!(
            fm.list_dir("missing", ListOptions::default()).await,
            Err(OpenError::NotFound)
        ));
    });
}
