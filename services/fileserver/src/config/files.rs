//! The served directory and how files are opened beneath it: `root`,
//! `symlinks`, `io_backend`, `fd_budget`, `fd_headroom`, `inline_opens`
//! (top-level keys; the file manager's configuration is built in
//! `crate::files` from these and `[cache]`).

use super::restart::Restart;
use super::{err, ConfigError};
pub use filemanager::{BackendKind, SymlinkPolicy};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The file keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default)]
pub struct FilesConfig {
    /// Directory served.
    pub root: PathBuf,
    /// `deny`, `within_root` or `follow`.
    pub symlinks: String,
    /// `auto`, `uring` or `blocking`.
    pub io_backend: String,
    /// Kernel descriptors the file manager may hold; 0 = derive from RLIMIT_NOFILE.
    pub fd_budget: u64,
    /// Descriptors kept free for sockets.
    pub fd_headroom: u64,
    /// Open paths found in the dentry cache inline on the worker
    /// (`openat2` with `RESOLVE_CACHED`) before handing the open to the I/O
    /// backend; off for roots whose `open` may block (NFS, FUSE).
    pub inline_opens: bool,
}

impl Default for FilesConfig {
    fn default() -> Self {
        FilesConfig {
            root: PathBuf::from("."),
            symlinks: "within_root".into(),
            io_backend: "auto".into(),
            fd_budget: 0,
            fd_headroom: 256,
            inline_opens: true,
        }
    }
}

/// Each root's file manager, its backend and its descriptor table are
/// made once.
pub(super) const RESTART: &[Restart] = &[
    Restart::key("root"),
    Restart::key("symlinks"),
    Restart::key("io_backend"),
    Restart::key("fd_budget"),
    Restart::key("fd_headroom"),
    Restart::key("inline_opens"),
];

impl FilesConfig {
    /// `root`.
    pub(super) fn root(&self, e: &mut Vec<ConfigError>) -> PathBuf {
        if self.root.as_os_str().is_empty() {
            e.push(err("root", "must not be empty"));
        }
        self.root.clone()
    }

    /// `io_backend`.
    pub(super) fn io_backend(&self, e: &mut Vec<ConfigError>) -> BackendKind {
        self.io_backend.parse().unwrap_or_else(|_| {
            e.push(err(
                "io_backend",
                format!(
                    "`{}` is not one of auto, uring, blocking, portable",
                    self.io_backend
                ),
            ));
            BackendKind::Auto
        })
    }

    /// `symlinks`.
    pub(super) fn symlinks(&self, e: &mut Vec<ConfigError>) -> SymlinkPolicy {
        self.symlinks.parse().unwrap_or_else(|_| {
            e.push(err(
                "symlinks",
                format!(
                    "`{}` is not one of deny, within_root, follow",
                    self.symlinks
                ),
            ));
            SymlinkPolicy::WithinRoot
        })
    }

    /// `fd_budget`: `None` derives it from RLIMIT_NOFILE.
    pub(super) fn fd_budget(&self) -> Option<usize> {
        (self.fd_budget > 0).then_some(self.fd_budget as usize)
    }
}
