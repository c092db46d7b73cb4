//! The handles of the public API: [`Opened`] (the outcome of a cached
//! open), [`CachedFile`] (a path-cache entry with its descriptor),
//! [`FileHandle`] (an uncached descriptor) and [`ReadTarget`]. Wraps the
//! cache's entries and the descriptor table's handles; does no I/O but
//! the one `statx` of [`CachedFile::is_current`] and the `close` of
//! [`FileHandle::close`].

use std::fmt;
use std::io;
#[cfg(unix)]
use std::os::fd::{AsFd as AsOsHandle, AsRawFd, RawFd};
#[cfg(windows)]
use std::os::windows::io::{AsHandle as AsOsHandle, AsRawHandle, RawHandle};

use fdtable::Owned;
use pathcache::FileMeta;

use crate::file::FileValue;
use crate::sys::stat_fd;
#[cfg(windows)]
use crate::sys::AsFd;
use crate::sys::{BorrowedFd, OwnedFd};

/// The outcome of a cached open.
#[derive(Debug)]
pub enum Opened {
    /// A regular file.
    File(CachedFile),
    /// Nothing at that path.
    NotFound,
    /// Refused (escape, symlink policy, permission, not a regular file).
    Forbidden,
    /// A directory (the server may redirect or serve an index).
    IsDir,
}

type Entry = pathcache::EntryRef<Owned<FileValue>>;

/// A cached file's bytes, owned by the cache entry it pins.
struct EntryBytes(Entry);

impl AsRef<[u8]> for EntryBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes().unwrap_or_default()
    }
}

/// A file from the path cache. Holding it keeps the entry (and its
/// descriptor) alive; dropping it is one refcount decrement.
pub struct CachedFile {
    pub(crate) entry: Entry,
    /// Set when the cache entry holds metadata only (`min_uses`): the
    /// descriptor was opened for this request.
    pub(crate) own: Option<FileHandle>,
    /// The descriptor was checked against the metadata during this lookup
    /// (loaded, revalidated, or opened for it): no second `statx` is needed.
    pub(crate) checked: bool,
}

impl fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedFile")
            .field("path", &self.entry.path())
            .field("fd", &self.value().as_fd())
            .finish()
    }
}

impl CachedFile {
    /// Size, times and identity of the file.
    pub fn meta(&self) -> &FileMeta {
        self.entry.meta()
    }
    /// The media type guessed from the name (once, when it was loaded).
    pub fn mime(&self) -> &'static str {
        self.entry.label()
    }
    /// The whole file when it is small enough to be cached in memory.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.entry.bytes()
    }
    /// [`bytes`](Self::bytes) as a `Bytes` that shares them: no copy; it
    /// keeps the cache entry (not the descriptor it may own) alive while
    /// it is sent.
    pub fn shared_bytes(&self) -> Option<bytes::Bytes> {
        self.entry.bytes()?;
        Some(bytes::Bytes::from_owner(EntryBytes(self.entry.clone())))
    }
    /// The path relative to the root (the cache key).
    pub fn path(&self) -> &str {
        self.entry.path()
    }
    /// Whether the file behind the descriptor still is the version the
    /// metadata describes (one `statx`; [`FileMeta::is_same_version`]). A
    /// file rewritten in place within the cache's `valid` window would
    /// otherwise be sent as new bytes under the old length and validators.
    /// An error reads as "unchanged": the send itself will report it.
    pub fn is_current(&self) -> bool {
        stat_fd(self.as_fd()).map_or(true, |s| s.meta.is_same_version(self.meta()))
    }
    /// Whether the bytes behind the descriptor are still those the metadata
    /// describes (one `statx`; [`FileMeta::has_same_contents`]): what a
    /// server checks before the last bytes of a body it reads from the
    /// descriptor, so a file rewritten in place mid-send ends the body
    /// short instead of completing it with a mix of versions. A file
    /// replaced by a rename keeps its old bytes under this descriptor and
    /// passes. An error reads as "unchanged": the send itself reports it.
    pub fn contents_unchanged(&self) -> bool {
        stat_fd(self.as_fd()).map_or(true, |s| s.meta.has_same_contents(self.meta()))
    }
    pub(crate) fn value(&self) -> &FileValue {
        match &self.own {
            Some(h) => h.value(),
            None => self
                .entry
                .handle()
                .expect("CachedFile without a handle always owns one"),
        }
    }
}

#[cfg(unix)]
impl AsOsHandle for CachedFile {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.value().as_fd()
    }
}

#[cfg(unix)]
impl AsRawFd for CachedFile {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

#[cfg(windows)]
impl AsOsHandle for CachedFile {
    fn as_handle(&self) -> BorrowedFd<'_> {
        self.value().as_handle()
    }
}

#[cfg(windows)]
impl AsRawHandle for CachedFile {
    fn as_raw_handle(&self) -> RawHandle {
        self.as_handle().as_raw_handle()
    }
}

/// An uncached open file. `close().await` releases it now and returns the
/// OS error; dropping it defers the release to the reaper.
pub struct FileHandle {
    pub(crate) owned: Owned<FileValue>,
}

impl fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileHandle")
            .field("fd", &self.value().as_fd())
            .finish()
    }
}

impl FileHandle {
    fn value(&self) -> &FileValue {
        &self.owned
    }

    /// Size of the file when it was opened.
    pub fn size(&self) -> u64 {
        self.owned.size()
    }

    /// Closes now and returns the `close(2)` error, if any. If another
    /// reference is still reading, the release happens when it finishes.
    pub async fn close(self) -> io::Result<()> {
        match self.owned.close() {
            Ok(()) => Ok(()),
            Err(fdtable::CloseError::Release(e)) => Err(e),
            Err(e) => Err(io::Error::other(format!("descriptor table: {e:?}"))),
        }
    }
}

#[cfg(unix)]
impl AsOsHandle for FileHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.owned.as_fd()
    }
}

#[cfg(unix)]
impl AsRawFd for FileHandle {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

#[cfg(windows)]
impl AsOsHandle for FileHandle {
    fn as_handle(&self) -> BorrowedFd<'_> {
        self.owned.as_handle()
    }
}

#[cfg(windows)]
impl AsRawHandle for FileHandle {
    fn as_raw_handle(&self) -> RawHandle {
        self.as_handle().as_raw_handle()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// What [`FileManager::read_at`](crate::FileManager::read_at) can read: [`CachedFile`] and [`FileHandle`]
/// (which use io_uring fixed-file slots), or any plain descriptor (a
/// handle on Windows).
pub trait ReadTarget: AsOsHandle + sealed::Sealed {
    #[doc(hidden)]
    fn file_value(&self) -> Option<&FileValue>;
}

impl sealed::Sealed for CachedFile {}
impl ReadTarget for CachedFile {
    fn file_value(&self) -> Option<&FileValue> {
        Some(self.value())
    }
}
impl sealed::Sealed for FileHandle {}
impl ReadTarget for FileHandle {
    fn file_value(&self) -> Option<&FileValue> {
        Some(self.value())
    }
}
impl sealed::Sealed for std::fs::File {}
impl ReadTarget for std::fs::File {
    fn file_value(&self) -> Option<&FileValue> {
        None
    }
}
// The platform's owned and borrowed descriptor (handles on Windows).
impl sealed::Sealed for OwnedFd {}
impl ReadTarget for OwnedFd {
    fn file_value(&self) -> Option<&FileValue> {
        None
    }
}
impl sealed::Sealed for BorrowedFd<'_> {}
impl ReadTarget for BorrowedFd<'_> {
    fn file_value(&self) -> Option<&FileValue> {
        None
    }
}
