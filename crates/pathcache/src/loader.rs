//! What the cache asks of its caller: the [`Loader`] trait (the caller's
//! I/O) and what it returns ([`Loaded`], [`FileMeta`], [`Negative`]). Plain
//! types and a trait; touches nothing of the cache.

use std::future::Future;

/// What the cache needs to know about a file's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileMeta {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
    /// Device of the inode.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

impl FileMeta {
    /// Whether `other` describes the same version of the same file: the one
    /// identity rule of the stack (revalidation here, `filemanager`'s check of
    /// a freshly opened descriptor, its check of a cached one before a send).
    /// Every field counts: the inode catches a replacement by rename, size
    /// and mtime a rewrite, ctime a rewrite whose mtime was set back and a
    /// permission change.
    pub fn is_same_version(&self, other: &FileMeta) -> bool {
        self == other
    }

    /// Whether `other` describes the same bytes of the same inode: the rule
    /// for a file being sent from a descriptor already open, whose inode
    /// cannot be replaced, only rewritten. Size and mtime count; ctime does
    /// not, because a rename over the path (the atomic deploy) or a
    /// `chmod` moves it on the old inode while its bytes stay as they were,
    /// and cutting that response short would fail a correct answer.
    pub fn has_same_contents(&self, other: &FileMeta) -> bool {
        (self.dev, self.ino, self.size, self.mtime_ns)
            == (other.dev, other.ino, other.size, other.mtime_ns)
    }
}

/// The metadata of an entry that has none (a negative answer).
pub(crate) const NO_META: FileMeta = FileMeta {
    size: 0,
    mtime_ns: 0,
    ctime_ns: 0,
    dev: 0,
    ino: 0,
};

/// Why a path has no file to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Negative {
    /// The path does not exist.
    NotFound,
    /// The path exists but may not be served.
    Forbidden,
}

/// The result of a [`Loader::load`].
#[derive(Debug)]
pub enum Loaded<V> {
    /// A servable file.
    File {
        /// Metadata taken BEFORE reading `bytes` (e.g. `fstat` on the opened
        /// handle); the cache stats again after the read to detect a torn copy.
        meta: FileMeta,
        /// A static string the loader attaches to the file and the cache
        /// hands back with it (`filemanager`: the media type guessed from
        /// the name, so it is derived once per load).
        label: &'static str,
        /// The open handle, when `open` was true (or `None` if the loader
        /// could not or would not open it).
        handle: Option<V>,
        /// The whole file when `read_small` allowed it and the file fit.
        bytes: Option<Vec<u8>>,
    },
    /// Not servable; cached for `negative_ttl`.
    Negative(Negative),
}

/// The caller's I/O: how to load a path and how to stat it again.
///
/// `open == false` means metadata only (the `min_uses` phase, or the
/// open-handle budget is full): the loader must not return a handle then (one
/// returned anyway is dropped). `read_small == Some(max)`: return the file's
/// bytes if its size is at most `max`.
pub trait Loader<V> {
    /// The loader's error, passed through to the caller (never cached).
    type Error;
    /// Opens (if `open`) and stats `path`, optionally reading a small file.
    fn load(
        &self,
        path: &str,
        open: bool,
        read_small: Option<u64>,
    ) -> impl Future<Output = Result<Loaded<V>, Self::Error>>;
    /// Stats `path` again; `Ok(None)` when it no longer exists.
    fn stat(&self, path: &str) -> impl Future<Output = Result<Option<FileMeta>, Self::Error>>;
    /// Whether `path` still is the version `cached` describes: the
    /// revalidation of an entry older than `valid`. `handle` is the entry's,
    /// if it has one.
    ///
    /// The default stats `path` again ([`stat`](Self::stat)) and compares.
    /// A loader whose handle pins the file can answer with a cheaper check
    /// of the same path, as long as a "no" only costs a reload.
    fn is_unchanged(
        &self,
        path: &str,
        cached: &FileMeta,
        handle: Option<&V>,
    ) -> impl Future<Output = Result<bool, Self::Error>> {
        let _ = handle;
        async move {
            Ok(self
                .stat(path)
                .await?
                .is_some_and(|m| m.is_same_version(cached)))
        }
    }
    /// Reads the metadata again right after `load` returned a file's bytes,
    /// so the cache can tell whether the copy is one version of the file
    /// (the same metadata before and after the read). `handle` is what
    /// `load` returned with the bytes, if anything.
    ///
    /// The default stats `path` again. A loader that returned a handle can
    /// answer from it instead (an `fstat`: no path walk, no extra open): an
    /// in-place write changes the handle's metadata all the same, and a
    /// rename over the path leaves the copy a consistent old version, which
    /// revalidation replaces like any other outdated entry.
    fn recheck(
        &self,
        path: &str,
        handle: Option<&V>,
    ) -> impl Future<Output = Result<Option<FileMeta>, Self::Error>> {
        let _ = handle;
        self.stat(path)
    }
    /// Reads the whole of a small file that is cached with `handle`, for
    /// the copy its second use takes (a file is not copied at its first
    /// load: see [`Config::small_file_max`](crate::Config::small_file_max)). `len` is the entry's size; the
    /// cache checks the length and [`recheck`](Self::recheck)s afterwards,
    /// as after a load's copy.
    ///
    /// The default loads `path` again with `read_small` and keeps only the
    /// bytes. A loader whose handle can be read (a descriptor) should read
    /// through it instead: no second open.
    fn read(
        &self,
        path: &str,
        handle: &V,
        len: u64,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, Self::Error>> {
        let _ = handle;
        async move {
            Ok(match self.load(path, true, Some(len)).await? {
                Loaded::File { bytes, .. } => bytes,
                Loaded::Negative(_) => None,
            })
        }
    }
}
