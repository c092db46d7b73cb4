//! Shared helpers for the integration tests (each test binary includes it).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use filemanager::{BackendKind, Config, FileManager, SymlinkPolicy};

/// A served root inside a temp dir, with a secret beside it (outside).
#[derive(Debug)]
pub(crate) struct Tree {
    pub base: tempfile::TempDir,
    pub root: PathBuf,
}

impl Tree {
    pub(crate) fn create() -> Tree {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(base.path().join("secret.txt"), b"SECRET-OUTSIDE").unwrap();
        std::fs::write(root.join("inside.txt"), b"inside").unwrap();
        std::fs::write(root.join("sub/secret.txt"), b"sub-inside").unwrap();
        Tree { base, root }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

/// The backends to test: blocking and portable (the confinement walk every
/// other system runs) always; uring when the kernel allows it (otherwise
/// prints why it is skipped).
pub(crate) fn backends(root: &Path) -> Vec<BackendKind> {
    let mut v = vec![BackendKind::Blocking, BackendKind::Portable];
    let mut cfg = Config::new(root);
    cfg.backend = BackendKind::Uring;
    match FileManager::new(cfg) {
        Ok(_) => v.push(BackendKind::Uring),
        Err(e) => eprintln!("SKIP uring backend: {e}"),
    }
    v
}

/// A manager on `backend`. Inline cached opens are turned off so every open
/// goes through the backend under test (`manager_inline` keeps them on).
pub(crate) fn manager(root: &Path, backend: BackendKind, symlinks: SymlinkPolicy) -> FileManager {
    manager_with(root, backend, symlinks, false)
}

/// A manager on `backend` that opens paths in the dentry cache inline.
pub(crate) fn manager_inline(
    root: &Path,
    backend: BackendKind,
    symlinks: SymlinkPolicy,
) -> FileManager {
    manager_with(root, backend, symlinks, true)
}

/// A manager on `backend`, with inline cached opens on or off.
pub(crate) fn manager_with(
    root: &Path,
    backend: BackendKind,
    symlinks: SymlinkPolicy,
    inline_cached_opens: bool,
) -> FileManager {
    let mut cfg = Config::new(root);
    cfg.backend = backend;
    cfg.symlinks = symlinks;
    cfg.inline_cached_opens = inline_cached_opens;
    cfg.shards = 4;
    let fm = FileManager::new(cfg).unwrap();
    eprintln!("backend ran: {:?} ({})", fm.backend().0, fm.backend().1);
    assert_eq!(fm.backend().0, backend);
    fm
}

pub(crate) fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) fn open_fds() -> usize {
    filemanager::limits::open_fd_count().unwrap()
}

/// Deterministic pseudo-random bytes.
pub(crate) fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
