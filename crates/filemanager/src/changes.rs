//! What a change watcher reports to the manager and what it counts: the
//! same on every platform, whether `watch.rs` (inotify) runs or the
//! stub that has none.

/// What an event means for the caches, handed to the manager's sink.
// Only inotify produces them: elsewhere the manager's handler is never called.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change<'a> {
    /// The file at this path changed (its bytes, attributes, or which
    /// inode the name holds).
    Path(&'a str),
    /// This path and everything below it lead elsewhere now (`""`: all).
    Tree(&'a str),
    /// Names were added to or removed from this directory (`""`: the
    /// root): its sibling census is out of date.
    Names(&'a str),
    /// A symlink on the root path itself changed: the root may lead to
    /// another directory now.
    Root,
}

/// Counters of the watcher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Directories watched now.
    pub dirs: u64,
    /// Events read.
    pub events: u64,
    /// Times every watch was dropped (the event queue overflowed, or the
    /// root was deleted or unmounted).
    pub resets: u64,
    /// Events that dropped one path's entry (a file written, replaced,
    /// created, deleted, its attributes changed).
    pub paths_dropped: u64,
    /// Events that dropped a whole tree of entries (a directory or a link
    /// to one moved, deleted, created or re-pointed; an overflow).
    pub trees_dropped: u64,
    /// Entries dropped right after their load because an event about them
    /// was handled while they loaded.
    pub races: u64,
}
