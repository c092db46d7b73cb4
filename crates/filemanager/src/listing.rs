//! Directory listings read beneath the root, with the resolution rules of
//! every file open.
//!
//! The directory is opened with [`open_beneath`] and the policy's flags from
//! [`resolve_flags`](crate::resolve), and each name is resolved again from
//! the root as `dir/name` the same way, so an entry shows what a request for
//! it would get: the target's type and size for a symlink the policy
//! follows, nothing for a name the policy refuses, a dangling link, a file
//! the server may not read, or an object that is neither a regular file
//! nor a directory. A name can never
//! lead outside the root, because nothing here resolves a path any other
//! way.
//!
//! ```text
//! list_dir("docs")  ── spawn_blocking ──▶ openat2(root, "docs", O_DIRECTORY, policy)
//!                                          for name in getdents (at most max_entries):
//!                                            openat2(root, "docs/name", O_PATH, policy)
//!                                            statx -> Regular (readable) | Dir -> listed; else skipped
//! ```
//!
//! It runs on tokio's blocking pool: a large directory or a cold inode table
//! never stalls the worker thread that asked.

use std::ffi::CString;
use std::io;
use std::sync::Arc;

use crate::resolve::{self, c_path, is_exhausted, map_open_error, open_beneath, Rules};
use crate::sys::{self, AsFd, Kind, OFlags, OwnedFd};
use crate::types::OpenError;

/// What to list.
#[derive(Clone, Copy, Debug)]
pub struct ListOptions {
    /// Entries listed at most; further names set [`Listing::truncated`].
    pub max_entries: usize,
    /// Whether names starting with `.` are listed.
    pub hidden: bool,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            max_entries: 10_000,
            hidden: false,
        }
    }
}

/// What a listed name resolves to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// One listed name, as a request for it would resolve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The name inside the directory (UTF-8; other names cannot be
    /// requested and are not listed).
    pub name: String,
    /// What the name resolves to under the symlink policy.
    pub kind: EntryKind,
    /// Size in bytes of what it resolves to.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
}

impl DirEntry {
    /// Whether the name resolves to a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == EntryKind::Dir
    }

    /// Modification time, Unix seconds (rounded down).
    pub fn mtime_secs(&self) -> i64 {
        self.mtime_ns.div_euclid(1_000_000_000)
    }
}

/// A directory's listable entries, sorted: directories first, then by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The entries (at most [`ListOptions::max_entries`]).
    pub entries: Vec<DirEntry>,
    /// More names were there than `max_entries`; the ones listed are the
    /// first the directory returned, not the first by name.
    pub truncated: bool,
}

/// Reads `rel` (root-relative; `""` is the root) beneath `root` under
/// `policy`, synchronously.
pub(crate) fn read_dir(
    root: &Arc<OwnedFd>,
    rel: &str,
    rules: Rules,
    opts: ListOptions,
) -> Result<Listing, OpenError> {
    let dir_path = c_path(rel)?;
    let dir_oflags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let dir = open_beneath(root.as_fd(), &dir_path, dir_oflags, rules).map_err(open_error)?;
    let prefix = rel.trim_matches('/');
    let mut listing = Listing::default();
    let mut failed = None;
    sys::read_dir(&dir, |name| {
        if name == "." || name == ".." || (!opts.hidden && name.starts_with('.')) {
            return true;
        }
        if listing.entries.len() >= opts.max_entries {
            listing.truncated = true;
            return false;
        }
        match resolve_entry(root, prefix, name, rules) {
            Ok(Some(entry)) => listing.entries.push(entry),
            Ok(None) => {}
            Err(e) => failed = Some(e),
        }
        failed.is_none()
    })
    .map_err(open_error)?;
    if let Some(e) = failed {
        return Err(e);
    }
    listing.entries.sort_by(|a, b| {
        (b.kind == EntryKind::Dir)
            .cmp(&(a.kind == EntryKind::Dir))
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(listing)
}

/// Resolves `prefix/name` from the root as a request would; `None` when
/// the policy refuses it, it dangles, or it is not a file or directory.
fn resolve_entry(
    root: &Arc<OwnedFd>,
    prefix: &str,
    name: &str,
    rules: Rules,
) -> Result<Option<DirEntry>, OpenError> {
    let full = if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    };
    let Ok(path) = CString::new(full) else {
        return Ok(None);
    };
    let fd = match open_beneath(root.as_fd(), &path, resolve::path_oflags(), rules) {
        Ok(fd) => fd,
        Err(e) if is_exhausted(&e) => return Err(OpenError::Exhausted),
        Err(_) => return Ok(None),
    };
    let stat = match sys::stat_fd(&fd) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    let kind = match stat.kind {
        Kind::Regular if !readable(&fd) => return Ok(None),
        Kind::Regular => EntryKind::File,
        Kind::Dir => EntryKind::Dir,
        Kind::Other => return Ok(None),
    };
    Ok(Some(DirEntry {
        name: name.to_owned(),
        kind,
        size: stat.meta.size,
        mtime_ns: stat.meta.mtime_ns,
    }))
}

/// Whether the server may read the file `fd` (an `O_PATH` descriptor)
/// names: a file it may not read would be listed and then answered 403.
/// `faccessat2` with `AT_EACCESS` checks the effective ids and ACLs as the
/// open would, through the descriptor's `/proc/self/fd` link (it refuses
/// `AT_EMPTY_PATH`). Any other failure (no `/proc`, a kernel before 5.8)
/// lists the file, as before.
#[cfg(target_os = "linux")]
fn readable(fd: &OwnedFd) -> bool {
    use rustix::fs::{Access, AtFlags};
    use std::os::fd::AsRawFd;
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    match rustix::fs::accessat(
        rustix::fs::CWD,
        link.as_str(),
        Access::READ_OK,
        AtFlags::EACCESS,
    ) {
        Ok(()) => true,
        Err(e) => !matches!(e, rustix::io::Errno::ACCESS | rustix::io::Errno::PERM),
    }
}

/// Off Linux the entry was resolved with a read-only open, which a file
/// the server may not read already refused.
#[cfg(not(target_os = "linux"))]
fn readable(_fd: &OwnedFd) -> bool {
    true
}

/// `map_open_error`, plus out-of-descriptors as `Exhausted` (a listing does
/// no EMFILE recovery of its own). A path that names a file is ENOTDIR,
/// which `map_open_error` already reads as NotFound.
fn open_error(e: io::Error) -> OpenError {
    if is_exhausted(&e) {
        OpenError::Exhausted
    } else {
        map_open_error(e)
    }
}
