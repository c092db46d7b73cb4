//! The plain types of the public API, which hold no descriptor:
//! [`OpenError`], [`ForbiddenReason`] and a query's [`Sibling`]. Beneath every other module of
//! the crate: it uses none.

use std::fmt;
use std::io;

/// Why an open failed.
#[derive(Debug)]
pub enum OpenError {
    /// No such file (or a path component is not a directory).
    NotFound,
    /// Escape attempt, symlink policy, permissions, or not a regular file.
    Forbidden,
    /// The path is a directory.
    IsDir,
    /// Out of descriptors even after evicting and reaping: map to 503.
    Exhausted,
    /// Any other OS error.
    Io(io::Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::NotFound => f.write_str("not found"),
            OpenError::Forbidden => f.write_str("forbidden"),
            OpenError::IsDir => f.write_str("is a directory"),
            OpenError::Exhausted => f.write_str("out of file descriptors"),
            OpenError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A precompressed form a server looks for beside a file (`name.br` for
/// `name`), and whether this request accepts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sibling<'a> {
    /// Appended to the file's name: `.br`, `.zst`, `.gz`.
    pub suffix: &'a str,
    /// The request accepts this coding.
    pub accepted: bool,
}

/// Why a path was refused ([`FileManager::why_forbidden`](crate::FileManager::why_forbidden)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForbiddenReason {
    /// A symlink on the path leads outside the root (`within_root` refuses
    /// absolute and escaping links).
    LeavesRoot,
    /// A symlink on the path, and the policy is `deny`.
    Symlink,
    /// Symlinks that loop, or too many of them.
    SymlinkLoop,
    /// File or directory permissions (the server's user may not read it).
    Permission,
    /// Neither a regular file nor a directory (a device, socket or FIFO).
    NotRegular,
    /// Another refusal, or the path is no longer refused.
    Other,
}

impl ForbiddenReason {
    /// One sentence for a 403 body or a log line; it names no path.
    pub fn describe(self) -> &'static str {
        match self {
            ForbiddenReason::LeavesRoot => {
                "a symlink on this path leads outside the served directory (symlinks = within_root)"
            }
            ForbiddenReason::Symlink => "a symlink on this path is not followed (symlinks = deny)",
            ForbiddenReason::SymlinkLoop => "the symlinks on this path loop",
            ForbiddenReason::Permission => "the server may not read this file",
            ForbiddenReason::NotRegular => "not a regular file",
            ForbiddenReason::Other => "",
        }
    }
}
