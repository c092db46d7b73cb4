//! The plain types of the public API, which hold no descriptor:
//! [`OpenError`] and a query's [`Sibling`]. Beneath every other module of
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
