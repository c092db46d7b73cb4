//! The served root: its descriptor and the rules that confine every path
//! beneath it, following a root path whose symlink was re-pointed, and
//! applying the changes the watcher reports to the caches. Replaces the
//! root's descriptor and invalidates cache entries; opens nothing else.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::shared::Shared;
use crate::sys::{self, OwnedFd};
use crate::{changes, resolve};

impl Shared {
    /// How paths are confined.
    pub(crate) fn rules(&self) -> resolve::Rules {
        resolve::Rules {
            policy: self.policy,
            walk: self.walk,
        }
    }

    /// The root directory now (one uncontended read lock: misses only).
    pub(crate) fn root(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.root.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Opens the root path again and, when it now leads to another
    /// directory (a release switch: `current -> releases/N` re-pointed),
    /// serves from that one: new lookups resolve beneath it and every
    /// cached answer is dropped, while responses already started finish
    /// from the descriptors they hold. True when the root changed.
    pub(crate) fn follow_root(&self) -> bool {
        let new = match sys::open_dir(&self.root_path) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!(root = %self.root_path.display(), "root path not reachable ({e}); still serving the directory it led to");
                return false;
            }
        };
        let same =
            |a: &sys::Stat, b: &sys::Stat| (a.meta.dev, a.meta.ino) == (b.meta.dev, b.meta.ino);
        match (sys::stat_fd(&new), sys::stat_fd(&*self.root())) {
            (Ok(a), Ok(b)) if !same(&a, &b) => {}
            _ => return false,
        }
        if let Err(e) = resolve::probe_openat2(&new, self.rules()) {
            tracing::warn!(root = %self.root_path.display(), "new root refused: {e}");
            return false;
        }
        let new = Arc::new(new);
        *self.root.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&new);
        if let Some(w) = &self.watcher {
            w.rebase(&new);
        }
        self.cache.invalidate_under("");
        self.census.invalidate_under("");
        self.root_switches.fetch_add(1, Ordering::Relaxed);
        let target = std::fs::canonicalize(&self.root_path).unwrap_or_default();
        tracing::info!(root = %self.root_path.display(), now = %target.display(), "root re-pointed: serving the new target");
        true
    }

    /// Drops what a change the watcher saw makes out of date: the path's
    /// entry (a negative one too, and the variants kept in it), a tree of
    /// entries, or a directory's sibling census.
    pub(crate) fn apply(&self, change: changes::Change<'_>) {
        match change {
            changes::Change::Path(path) => {
                self.cache.invalidate(path);
            }
            changes::Change::Tree(path) => {
                self.cache.invalidate_under(path);
                self.census.invalidate_under(path);
            }
            changes::Change::Root => {
                self.follow_root();
            }
            changes::Change::Names(dir) => {
                self.census
                    .invalidate(if dir.is_empty() { "." } else { dir });
            }
        }
    }
}

/// The symlinks an absolute form of `root` passes through, as (directory
/// holding the link, link name): the places whose change re-points it.
pub(crate) fn links_on_the_way(root: &Path) -> Vec<(PathBuf, std::ffi::OsString)> {
    let Ok(abs) = std::path::absolute(root) else {
        return Vec::new();
    };
    let mut links = Vec::new();
    let mut at = PathBuf::new();
    for part in abs.components() {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            if let (Some(dir), Some(name)) = (at.parent(), at.file_name()) {
                links.push((dir.to_path_buf(), name.to_owned()));
            }
        }
    }
    links
}
