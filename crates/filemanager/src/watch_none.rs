//! No change notification (every system but Linux, and Linux's portable
//! backend): `Watcher::new` says so, the manager runs without one, and
//! cached answers are revalidated every `cache.valid` (`watch.rs` has the
//! inotify watcher and what it adds).

use std::io;
use std::sync::Arc;

use crate::changes::{Change, WatchStats};
use crate::sys::OwnedFd;

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
