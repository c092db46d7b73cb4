//! No change notification (every system but Linux, and Linux's portable
//! backend): `Watcher::new` says so, the manager runs without one, and
//! cached answers are revalidated every `cache.valid` (`watch.rs` has the
//! inotify watcher and what it adds).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// What an event means for the caches (never produced here).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change<'a> {
    /// The file at this path changed.
    Path(&'a str),
    /// This path and everything below it lead elsewhere now.
    Tree(&'a str),
    /// Names were added to or removed from this directory.
    Names(&'a str),
    /// A symlink on the root path itself changed.
    Root,
}

/// Counters of the watcher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Directories watched now.
    pub dirs: u64,
    /// Events read.
    pub events: u64,
    /// Times every watch was dropped.
    pub resets: u64,
    /// Events that dropped one path's entry.
    pub paths_dropped: u64,
    /// Events that dropped a whole tree of entries.
    pub trees_dropped: u64,
    /// Entries dropped right after their load because an event about them
    /// was handled while they loaded.
    pub races: u64,
}

/// A watcher that cannot be made.
pub(crate) enum Watcher {}

impl Watcher {
    pub(crate) fn new(
        _root: &OwnedFd,
        _root_links: &[(std::path::PathBuf, std::ffi::OsString)],
    ) -> io::Result<Arc<Watcher>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no change notification on this system",
        ))
    }
    pub(crate) fn epoch(&self) -> u64 {
        match *self {}
    }
    pub(crate) fn changed_since(&self, _path: &str, _epoch: u64) -> bool {
        match *self {}
    }
    pub(crate) fn prepare(&self, _path: &str) -> Option<u64> {
        match *self {}
    }
    pub(crate) fn holds(&self, _stamp: u64) -> bool {
        match *self {}
    }
    pub(crate) fn stats(&self) -> WatchStats {
        match *self {}
    }
    pub(crate) fn rebase(&self, _root: &OwnedFd) {
        match *self {}
    }
}

pub(crate) fn spawn(
    watcher: &Arc<Watcher>,
    _sink: impl Fn(Change<'_>) + Send + Sync + 'static,
) -> io::Result<()> {
    match **watcher {}
}
