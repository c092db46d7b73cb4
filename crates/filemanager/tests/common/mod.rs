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
/// prints why it is skipped). Elsewhere: portable, the only one there is.
#[cfg(not(target_os = "linux"))]
pub(crate) fn backends(_root: &Path) -> Vec<BackendKind> {
    vec![BackendKind::Portable]
}

/// The backend that reads on tokio's blocking pool: `Blocking` on Linux,
/// `Portable` (the same reads, the portable confinement) elsewhere.
pub(crate) fn pool_backend() -> BackendKind {
    if cfg!(target_os = "linux") {
        BackendKind::Blocking
    } else {
        BackendKind::Portable
    }
}

#[cfg(target_os = "linux")]
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

/// True, with the reason printed, when this Windows test runs under Wine
/// (CI runs the Windows build there) and needs what Wine does not have.
pub(crate) fn skip_on_wine(needs: &str) -> bool {
    #[cfg(windows)]
    {
        use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
        // SAFETY: NUL-terminated names; ntdll is loaded in every process.
        let wine = unsafe {
            let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
            !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
        };
        if wine {
            eprintln!("SKIP under Wine: needs {needs}");
            return true;
        }
    }
    let _ = needs;
    false
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
